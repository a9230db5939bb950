#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
# test/bench/sos-bench.sh - Sandia OpenSHMEM over vwait;ofi_rxm beside verbs;ofi_rxm, 2 PEs
# under mpirun, in one VM boot (make bench SECTIONS=sos):
#
#   sos-bench.sh build BUILDDIR   (the host) SOS (contrib/sos/sos.sh build), its latency
#                                 programs, and into BUILDDIR/test/bench sos_wait (SOS's oshcc)
#                                 and cntr_count.so
#   sos-bench.sh                  (in the VM) the tables below
#
# - wait: sos_wait (sos_wait.c): PE 0's blocking operations on PE 1, each waited for in
#   fi_cntr_wait: fetch-and-increments (executed by PE 1's rxm progress thread, which sleeps
#   in poll() between them), and gets of 8 B to 16 MiB (RDMA reads: PE 0 waits for the
#   transfer with nothing to do; on a software device the transfer is kernel work in PE 0's
#   process, counted in its CPU), and idle fetches (PE 1 stopped for 500 ms meanwhile: PE 0
#   waits with nothing moving). SOS_CELLS, "MODE:ARG:ROUNDS ..."; per cell and provider,
#   the median and min-max over the runs of: the median operation, PE 0's CPU share of the
#   loop's wall time, its voluntary context switches (sleeps) per operation.
# - counts: one run per cell and provider under cntr_count.so: PE 0's fi_cntr_wait calls and
#   the unmet ones (threshold not yet reached on entry) per operation.
# - latency: SOS's shmem_latency_get_perf and shmem_latency_put_perf (SOS_LAT_PROGS; -s 1 -e SOS_LAT_MAX,
#   default 4096): shmem_long_g and shmem_long_p round trips, then a get or a put + quiet per
#   size; per size the median and min-max over the runs, and vwait / verbs.
# BENCH_REPEATS runs a cell (default 5), the providers' order alternating run by run.
# Writes BENCH_OUT (default $VWAIT_BUILDDIR/bench-sos): records.txt (table|cell|provider|
# value, one line per run), results.txt (the tables), one log per run.
set -u -o pipefail
export LC_ALL=C
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
srcdir=$(cd "$here/../.." && pwd -P)
sos=$srcdir/contrib/sos/sos.sh
perf_dir() { echo "$(bash "$sos" prefix)/src/modules/tests-sos/test/performance/shmem_perf_suite"; }
lat_progs=${SOS_LAT_PROGS-shmem_latency_get_perf shmem_latency_put_perf}

if [ "${1:-}" = build ]; then
	b=$(cd "${2:?build dir}" && pwd -P) || exit 2
	export SOS_SRC=${SOS_SRC:-$srcdir/../shared/third_party}
	SOS_BUILD_TESTS=${SOS_BUILD_TESTS:-hello} bash "$sos" build || exit $?
	pfx=$(bash "$sos" prefix)
	# shellcheck disable=SC2086 # a list of names
	make -s -C "$(perf_dir)" $lat_progs >/dev/null || exit 1
	mkdir -p "$b/test/bench" &&
		"$pfx/bin/oshcc" -O2 -Wall -pthread -o "$b/test/bench/sos_wait" "$here/sos_wait.c" &&
		${CC:-cc} -O2 -Wall -shared -fPIC -o "$b/test/bench/cntr_count.so" "$here/cntr_count.c" \
			-ldl -lpthread || exit 1
	echo "sos-bench: SOS in $pfx, sos_wait and cntr_count.so in $b/test/bench"
	exit 0
fi

B=${VWAIT_BUILDDIR:-$PWD}
export FI_PROVIDER_PATH=$B/.libs
[ -n "${RXE_ADDR:-}" ] || {
	echo "SKIP: RXE_ADDR not set: run inside contrib/vm/run-in-vm.sh"
	exit 77
}
for f in "$B/test/bench/sos_wait" "$B/test/bench/cntr_count.so"; do
	[ -e "$f" ] || {
		echo "SKIP: no $f (sos-bench.sh build $B)"
		exit 77
	}
done
reps=${BENCH_REPEATS:-5}
cells=${SOS_CELLS:-fetch:0:300 idle:500000:6 get:8:300 get:65536:100 get:1048576:30 get:16777216:6}
lat_max=${SOS_LAT_MAX:-4096}
out=${BENCH_OUT:-$B/bench-sos}
provs=("vwait;ofi_rxm" "verbs;ofi_rxm")
mkdir -p "$out" && cd "$out" || exit 1
: >records.txt

# stdin from /dev/null: mpirun reads it, and would take the provider list of the loop around
pes() { # PROV LOG CMD...: CMD on 2 PEs over PROV (SOS's settings as contrib/sos/sos.sh's)
	local prov=$1 log=$2 xs=()
	shift 2
	local v
	for v in FI_PROVIDER_PATH LD_PRELOAD CNTR_COUNT_OUT; do
		[ -z "${!v:-}" ] || xs+=(-x "$v")
	done
	SHMEM_OFI_PROVIDER=$prov FI_UNIVERSE_SIZE=32 SHMEM_TEAMS_MAX=32 \
		timeout -k 5 300 mpirun --allow-run-as-root --oversubscribe -np 2 -x SHMEM_OFI_PROVIDER \
		-x FI_UNIVERSE_SIZE -x SHMEM_TEAMS_MAX "${xs[@]}" "$@" </dev/null >"$log" 2>&1
}
order() { # RUN: the providers, reversed on odd runs
	if [ $(($1 % 2)) = 0 ]; then printf '%s\n' "${provs[@]}"; else printf '%s\n' "${provs[1]}" "${provs[0]}"; fi
}
name() { echo "${1%%;*}"; }
fail=0

# a cell MODE:BYTES:ROUNDS as its name in the tables: "fetch", "get 8", "get 1048576"
cell_name() { IFS=: read -r m b _ <<<"$1" && if [ "$m" = fetch ]; then echo fetch; else echo "$m $b"; fi; }
# sos_wait's line: us MED, cpu_share, vcsw_per_op, bad
wait_run() { # CELL RUN PROV
	local m b n prov=$3 log l c
	IFS=: read -r m b n <<<"$1"
	c=$(cell_name "$1")
	log=$out/wait.$m.$b.$(name "$prov").$2.log
	if ! pes "$prov" "$log" "$B/test/bench/sos_wait" "$m" "$b" "$n" ||
		! l=$(grep '^sos_wait ' "$log") || ! grep -q ' bad 0$' <<<"$l"; then
		echo "sos-bench: sos_wait $m $b $n over $prov failed (log: $log)"
		fail=1
		return
	fi
	awk -v c="$c" -v p="$(name "$prov")" '{
		for (i = 1; i < NF; i++) v[$i] = $(i + 1)
		print "wait|" c "|" p "|us=" v["us"] " cpu_share=" v["cpu_share"] " vcsw=" v["vcsw_per_op"] }' \
		<<<"$l" >>records.txt
}

lat_run() { # RUN PROV PROG
	local p=$3 log
	log=$out/lat.$p.$(name "$2").$1.log
	if ! pes "$2" "$log" "$(perf_dir)/$p" -s 1 -e "$lat_max"; then
		echo "sos-bench: $p over $2 failed (log: $log)"
		fail=1
		return
	fi
	# the first two tables are the round trips of one long and one int, the third the sizes
	awk -v p="${p#shmem_latency_}" -v a="$(name "$2")" '
		/^Message Size/ { n++ }
		/^ +[0-9]+ +[0-9.]+$/ && n {
			c = n == 1 ? "long_" : n == 2 ? "int_" : ""
			print "lat|" substr(p, 1, 3) " " c $1 "|" a "|us=" $2 }' "$log" >>records.txt
}

echo "sos-bench: $reps runs a cell; cells (mode:bytes:rounds) $cells"
for ((r = 0; r < reps; r++)); do
	for cell in $cells; do
		while read -r prov; do wait_run "$cell" "$r" "$prov"; done < <(order "$r")
	done
	for p in $lat_progs; do
		while read -r prov; do lat_run "$r" "$prov" "$p"; done < <(order "$r")
	done
done
# the counts: one run per cell and provider under cntr_count.so, PE 0's line
for cell in $cells; do
	IFS=: read -r m b n <<<"$cell"
	for prov in "${provs[@]}"; do
		rm -f counts.tmp
		if LD_PRELOAD=$B/test/bench/cntr_count.so CNTR_COUNT_OUT=$out/counts.tmp \
			pes "$prov" "$out/count.$m.$b.$(name "$prov").log" "$B/test/bench/sos_wait" "$m" "$b" "$n"; then
			# PE 0 made ROUNDS operations: the process whose unmet calls are the most
			sort -k7,7n counts.tmp | tail -n 1 | awk -v c="$(cell_name "$cell")" -v p="$(name "$prov")" -v n="$n" \
				'{ printf "count|%s|%s|calls=%.3f unmet=%.3f\n", c, p, $5 / n, $7 / n }' >>records.txt
		else
			fail=1
		fi
	done
done
rm -f counts.tmp

# ------------------------------------------------------------------ the tables
# stat TABLE CELL PROV KEY: "median [min-max]" over the runs
stat() {
	awk -F'|' -v t="$1" -v c="$2" -v p="$3" -v k="$4" '$1 == t && $2 == c && $3 == p {
		n = split($4, f, " ")
		for (i = 1; i <= n; i++) { split(f[i], kv, "="); if (kv[1] == k) v[m++] = kv[2] + 0 } }
		END {
			if (!m) { print "-"; exit }
			for (i = 0; i < m; i++) for (j = i + 1; j < m; j++) if (v[j] < v[i]) { x = v[i]; v[i] = v[j]; v[j] = x }
			med = m % 2 ? v[int(m / 2)] : (v[m / 2 - 1] + v[m / 2]) / 2
			printf "%.4g [%.4g-%.4g]", med, v[0], v[m - 1] }' records.txt
}
med() { stat "$@" | cut -d' ' -f1; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "-" }'; }
{
	echo "SOS over vwait;ofi_rxm and verbs;ofi_rxm, 2 PEs; $reps runs a cell, median [min-max]"
	echo
	echo "PE 0 waiting in fi_cntr_wait for each blocking operation on PE 1 (which sleeps): a fetch-and-increment"
	echo "(PE 1's rxm thread executes it), the same while PE 1 is stopped for ARG us (idle), or a get of ARG bytes (an RDMA read)"
	printf '%-16s %-6s %-26s %-26s %-24s %s\n' operation prov "us / operation" "PE 0 CPU / wall" "sleeps / operation" "cntr_wait calls, unmet / op"
	for cell in $cells; do
		c=$(cell_name "$cell")
		for prov in "${provs[@]}"; do
			a=$(name "$prov")
			printf '%-16s %-6s %-26s %-26s %-24s %s\n' "$c" "$a" "$(stat wait "$c" "$a" us)" \
				"$(stat wait "$c" "$a" cpu_share)" "$(stat wait "$c" "$a" vcsw)" \
				"$(stat count "$c" "$a" calls) $(stat count "$c" "$a" unmet)"
		done
		printf '%-23s %-26s %-26s\n' "  vwait/verbs" \
			"$(ratio "$(med wait "$c" vwait us)" "$(med wait "$c" verbs us)")" \
			"$(ratio "$(med wait "$c" vwait cpu_share)" "$(med wait "$c" verbs cpu_share)")"
	done
	echo
	echo "SOS's latency programs (us): shmem_long_g / shmem_long_p round trips, then a get, or a put + shmem_quiet, per size"
	printf '%-14s %-26s %-26s %s\n' cell vwait verbs vwait/verbs
	awk -F'|' '$1 == "lat" && !s[$2]++ { print $2 }' records.txt | while read -r c; do
		printf '%-14s %-26s %-26s %s\n' "$c" "$(stat lat "$c" vwait us)" "$(stat lat "$c" verbs us)" \
			"$(ratio "$(med lat "$c" vwait us)" "$(med lat "$c" verbs us)")"
	done
	echo
	echo "(the counts from one run under cntr_count.so; unmet: calls that did not find their threshold met)"
} | tee results.txt
exit $fail
