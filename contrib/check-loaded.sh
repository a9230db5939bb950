#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
# contrib/check-loaded.sh - the host unit tier, again and again, on a loaded machine: a test
# that passes only on a quiet or a fast host fails here.
#
#   contrib/check-loaded.sh [RUNS] [KIND...]
#
# RUNS (default 20) runs of `make check` per build kind, beside LOAD_LOOPS (default 2) busy
# loops, the kinds in parallel; KIND is one or more of normal asan tsan (default all three),
# in the build dirs that `contrib/setup.sh test` uses (_build/ci, _build/ci-asan, _build/ci-tsan:
# configured and built here when missing, with setup.sh's flags). The sanitized kinds run the
# test programs that setup.sh's asan and tsan stages run. Prints a line per run (kind, run,
# result, seconds) and a summary; keeps each failed run's test-suite.log as
# _build/loaded-logs/KIND-RUN.log. Exits non-zero when any run failed.
set -u -o pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P) || exit 1
runs=${1:-20}
shift $(($# > 0 ? 1 : 0))
kinds=("$@")
[ ${#kinds[@]} -gt 0 ] || kinds=(normal asan tsan)
jobs=${SETUP_JOBS:-2}
logs=$top/_build/loaded-logs
mkdir -p "$logs"

dir_of() { case $1 in normal) echo "$top/_build/ci" ;; *) echo "$top/_build/ci-$1" ;; esac; }
flags_of() {
	case $1 in
	normal) ;;
	asan) echo --enable-asan --enable-ubsan --enable-lock-check ;;
	tsan) echo --enable-tsan --enable-lock-check ;;
	esac
}
tests_of() { # the TESTS= of the sanitized stages (contrib/setup.sh sanitized_unit)
	local glob
	case $1 in asan) glob='test_*' ;; tsan) glob='test_util_*' ;; *) return ;; esac
	(cd "$top" && ls test/unit/$glob.cpp | sed 's/\.cpp$//' | tr '\n' ' ')
}
prepare() { # KIND: configured and built
	local d
	d=$(dir_of "$1")
	[ -x "$top/configure" ] || (cd "$top" && ./autogen.sh) || return 1
	if [ ! -f "$d/Makefile" ]; then
		# shellcheck disable=SC2046 # a list of flags
		mkdir -p "$d" && (cd "$d" && "$top/configure" $(flags_of "$1")) || return 1
	fi
	make -C "$d" -j"$jobs" >/dev/null || return 1
	local t
	t=$(tests_of "$1")
	make -C "$d" -j"$jobs" check TESTS="${t:-}" >/dev/null 2>&1 || true # builds the programs
}
campaign() { # KIND: RUNS runs, one line each
	local k=$1 d t i t0 rc
	d=$(dir_of "$k")
	t=$(tests_of "$k")
	for i in $(seq "$runs"); do
		t0=$(date +%s)
		if [ -n "$t" ]; then
			ASAN_OPTIONS=verify_asan_link_order=0 make -C "$d" -j"$jobs" check TESTS="$t" >"$logs/$k-run.out" 2>&1
		else
			make -C "$d" -j"$jobs" check >"$logs/$k-run.out" 2>&1
		fi
		rc=$?
		if [ $rc = 0 ]; then
			echo "$k $i PASS $(($(date +%s) - t0))"
		else
			echo "$k $i FAIL $(($(date +%s) - t0))"
			cp "$d/test-suite.log" "$logs/$k-$i.log" 2>/dev/null
		fi
	done
}

for k in "${kinds[@]}"; do
	prepare "$k" || {
		echo "check-loaded: cannot build $k in $(dir_of "$k")" >&2
		exit 1
	}
done
loops=()
for _ in $(seq "${LOAD_LOOPS:-2}"); do
	yes >/dev/null &
	loops+=($!)
done
trap 'kill "${loops[@]}" 2>/dev/null' EXIT
echo "check-loaded: $runs runs of make check per kind (${kinds[*]}), ${#loops[@]} busy loops, $(nproc) CPUs, $(date -u '+%F %T UTC')"
t_start=$(date +%s)
pids=()
for k in "${kinds[@]}"; do
	campaign "$k" >"$logs/$k.results" &
	pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
failed=0
for k in "${kinds[@]}"; do
	cat "$logs/$k.results"
	p=$(grep -c ' PASS ' "$logs/$k.results")
	f=$(grep -c ' FAIL ' "$logs/$k.results")
	failed=$((failed + f))
	echo "check-loaded: $k: $p of $runs passed ($(awk '{ s += $4 } END { if (NR) printf "%.0f", s / NR }' "$logs/$k.results") s a run)"
done
echo "check-loaded: $(($(date +%s) - t_start)) s in all"
echo "$(( ${#kinds[@]} * runs - failed )) passed, $failed failed"
[ "$failed" = 0 ]
