#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
# contrib/fabtests/fabtests.sh - upstream fabtests against vwait, with upstream verbs beside it as
# the yardstick. The project never copies fabtests into its tree: it builds them from
# FABTESTS_SRC, and skips (exit 77, "SKIP: why") when none is given.
#
#   contrib/fabtests/fabtests.sh build          build + install the fabtests that match the
#                                               libfabric here (1.17.x: fabtests-1.17.1, 2.1.x:
#                                               fabtests-2.1.0), unless already installed
#   contrib/fabtests/fabtests.sh run [PROV...]  (in the soft-RoCE VM: RXE_ADDR set) runfabtests.sh
#                                               for each PROV (default: vwait "vwait;ofi_rxm"
#                                               verbs "verbs;ofi_rxm"), then one table; a PROV
#                                               written PROV@SETS runs those sets instead of
#                                               FABTESTS_SETS ("vwait;ofi_rxm@unit,functional")
#   contrib/fabtests/fabtests.sh ubertest [CFG...]  (in the VM) fi_ubertest, server and client
#                                               on RXE_ADDR, for each config file CFG ("ci",
#                                               the default: ubertest-vwait-ci.test here; "all":
#                                               every contrib/fabtests/ubertest-*.test but the
#                                               CI one). With FABTESTS_UBERTEST="ARGS", run
#                                               does the same after runfabtests.sh.
#                                               A config passes when each of its tests passed or
#                                               fi_ubertest itself set it aside (invalid
#                                               combination, fi_getinfo -FI_ENODATA) and at
#                                               least one passed; ENOSYS, EIO, ERROR or a
#                                               timeout (UBERTEST_TIMEOUT, default 600 s) fail
#   contrib/fabtests/fabtests.sh prefix         print the install prefix
#
# FABTESTS_SRC: a fabtests source tree, a fabtests-<ver>.tar.xz, or a folder holding such
#   tarballs (this machine: ../shared/third_party, see its README).
# FABTESTS_PREFIX: where to install (default /var/cache/vwait/fabtests-<ver>; inside the Debian 13
#   root of contrib/debian13 that is the root's own /var/cache).
# FABTESTS_SETS: runfabtests.sh -t sets (default "unit,functional,short" = quick).
# FABTESTS_TIMEOUT: runfabtests.sh -T per test, seconds (default 120).
# FABTESTS_EXCLUDE: more tests to leave out, for every provider (runfabtests.sh -e: regexes,
#   comma-separated), e.g. a known failure CI must not trip on; the caller says why.
# Memory: without -S, a fabtest allocates and registers 2 x 64 x 8 MiB = 1 GiB per process (its
#   largest message size times its window), server and client in one guest: the functional
#   set needs a guest of about 6 GiB (VM_MEM=6G). In the default 2 GiB guest the kernel kills
#   fi_msg_inject, fi_recv_cancel, fi_bw, fi_rdm and fi_multi_ep -e rdm (out of memory), for
#   verbs as for vwait; run() warns.
# Excludes: vwait gets contrib/fabtests/vwait.exclude, "vwait;ofi_rxm" gets upstream's
# ofi_rxm.exclude plus contrib/fabtests/vwait-rxm.exclude, and both get iwarp.exclude on an
# iWARP device (RXE_DEV siw0: VM_RDMA=siw) (every line with its reason); verbs and
# "verbs;ofi_rxm" get upstream's own (runfabtests.sh's auto exclude), as upstream runs them.
# Output: FABTESTS_OUT (default ./fabtests-out): one log per provider and summary.txt.
set -u -o pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
skip() {
	echo "SKIP: $*"
	exit 77
}
die() {
	echo "fabtests: $*" >&2
	exit 1
}

lib_version() { # the libfabric this fabtests build is for: 1.17 / 2.1
	local v
	v=$(pkg-config --modversion libfabric 2>/dev/null) || v=$(fi_info --version 2>/dev/null | sed -n 's/^libfabric: //p')
	[ -n "$v" ] || return 1
	echo "$v" | cut -d. -f1,2
}
fabtests_ver() {
	case $1 in
	1.17) echo 1.17.1 ;;
	2.1) echo 2.1.0 ;;
	*) return 1 ;;
	esac
}

libver=$(lib_version) || skip "no libfabric found (pkg-config libfabric / fi_info)"
ver=$(fabtests_ver "$libver") || skip "no fabtests version known for libfabric $libver (1.17 and 2.1 are)"
PREFIX=${FABTESTS_PREFIX:-/var/cache/vwait/fabtests-$ver}

# shellcheck source=contrib/third_party.sh
. "$here/../third_party.sh"
find_src() { third_party_src "${FABTESTS_SRC:-}" "fabtests-$ver"; }

build() {
	local src stamp t
	src=$(find_src) || skip "FABTESTS_SRC not given or holds no fabtests-$ver (a tree, a tarball or a folder of fabtests-<ver>.tar.xz)"
	stamp="$ver $(if [ -f "$src" ]; then md5sum <"$src" | cut -c1-12; else echo "$src"; fi)"
	if [ -x "$PREFIX/bin/runfabtests.sh" ] && [ "$(cat "$PREFIX/.vwait-stamp" 2>/dev/null)" = "$stamp" ]; then
		echo "fabtests $ver already installed in $PREFIX"
		return 0
	fi
	t=$(mktemp -d) || die "mktemp"
	if [ -f "$src" ]; then
		tar -xJf "$src" -C "$t" || die "cannot unpack $src"
		src=$(echo "$t"/fabtests-*)
	else
		cp -a "$src" "$t/src" && src=$t/src
	fi
	echo "building fabtests $ver (libfabric $libver) into $PREFIX"
	(cd "$src" && ./autogen.sh && ./configure -q --with-libfabric=/usr --prefix="$PREFIX" &&
		make -j"${SETUP_JOBS:-2}" -s && rm -rf "$PREFIX" && make -s install) >"$t/build.log" 2>&1 ||
		{
			tail -n 40 "$t/build.log"
			die "fabtests build failed"
		}
	echo "$stamp" >"$PREFIX/.vwait-stamp"
	rm -rf "$t"
	echo "fabtests $ver installed in $PREFIX"
}

# the VM's device (RXE_DEV) is iWARP: node type RNIC (siw, cxgb4, irdma in iWARP mode)
is_iwarp() {
	case $(cat "/sys/class/infiniband/${RXE_DEV:-}/node_type" 2>/dev/null) in *RNIC*) return 0 ;; esac
	return 1
}

run() {
	[ -n "${RXE_ADDR:-}" ] || skip "RXE_ADDR not set: run inside contrib/vm/run-in-vm.sh"
	[ -x "$PREFIX/bin/runfabtests.sh" ] || skip "fabtests $ver not built in $PREFIX (fabtests.sh build)"
	local out=${FABTESTS_OUT:-$PWD/fabtests-out} all_sets=${FABTESTS_SETS:-unit,functional,short}
	mkdir -p "$out" || die "cannot create $out"
	local mem_kb
	mem_kb=$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)
	[ $# -gt 0 ] || set -- vwait "vwait;ofi_rxm" verbs "verbs;ofi_rxm"
	local spec prov sets name rc=0 args provs=()
	: >"$out/summary.txt"
	for spec in "$@"; do
		prov=${spec%%@*} sets=$all_sets
		[ "$prov" = "$spec" ] || sets=${spec#*@}
		provs+=("$prov")
		name=${prov//;/+}
		case ,$sets, in *,functional,* | *,quick,* | *,all,*)
			[ "${mem_kb:-0}" -ge 5000000 ] ||
				echo "fabtests: warning: $((mem_kb / 1024)) MiB here; the functional set needs about 6 GiB (VM_MEM=6G), or tests are killed out of memory" >&2
			;;
		esac
		args=(-p "$PREFIX/bin" -t "$sets" -T "${FABTESTS_TIMEOUT:-120}" -s "$RXE_ADDR" -c "$RXE_ADDR" -v)
		[ -z "${FABTESTS_EXCLUDE:-}" ] || args+=(-e "$FABTESTS_EXCLUDE")
		case $prov in
		vwait) args+=(-f "$here/vwait.exclude") ;;
		"vwait;ofi_rxm") args+=(-f "$PREFIX/share/fabtests/test_configs/ofi_rxm/ofi_rxm.exclude"
			-f "$here/vwait-rxm.exclude") ;;
		esac
		# an iWARP device (siw): what iWARP cannot do, with the reasons (iwarp.exclude)
		case $prov in vwait*) ! is_iwarp || args+=(-f "$here/iwarp.exclude") ;; esac
		echo "== runfabtests.sh ${args[*]} \"$prov\""
		# rxe's max_cqe is 32767: rxm sizes its core CQs by FI_UNIVERSE_SIZE
		(cd "$PREFIX/share/fabtests" && FI_UNIVERSE_SIZE=32 "$PREFIX/bin/runfabtests.sh" "${args[@]}" "$prov") \
			>"$out/$name.log" 2>&1
		local r=$?
		# the verbs runs are the yardstick: only vwait's own failures fail the run
		case $prov in vwait*) [ $r = 0 ] || rc=1 ;; esac
		echo "$prov [$sets] (exit $r): $(grep -E '^# Total' "$out/$name.log" | tr -s ' ' | tr '\n' ' ')" |
			tee -a "$out/summary.txt"
		# no totals: runfabtests.sh stopped before any test (a missing tool, a bad option): say why
		grep -qE '^# Total' "$out/$name.log" || tail -n 20 "$out/$name.log" | sed 's/^/   | /'
	done
	table "$out" "${provs[@]}" | tee "$out/table.txt"
	for spec in "${provs[@]}"; do
		case $spec in vwait*) failed "$out" "$spec" ;; esac
	done
	# FABTESTS_UBERTEST: fi_ubertest in the same boot, with these arguments of "ubertest"
	if [ -n "${FABTESTS_UBERTEST:-}" ]; then
		# shellcheck disable=SC2086 # a list of configs
		(ubertest $FABTESTS_UBERTEST) || rc=1
	fi
	return $rc
}

ubertest() {
	[ -n "${RXE_ADDR:-}" ] || skip "RXE_ADDR not set: run inside contrib/vm/run-in-vm.sh"
	local bin=$PREFIX/bin/fi_ubertest
	[ -x "$bin" ] || skip "fabtests $ver not built in $PREFIX (fabtests.sh build)"
	[ $# -gt 0 ] || set -- ci
	if [ "$*" = ci ]; then
		set -- "$here/ubertest-vwait-ci.test"
	elif [ "$*" = all ]; then
		set -- $(ls "$here"/ubertest-*.test | grep -v -- '-ci\.test$')
	fi
	local out=${FABTESTS_OUT:-$PWD/fabtests-out} tmo=${UBERTEST_TIMEOUT:-600}
	local port=${UBERTEST_PORT:-2710} cfg name spid s c t0 counts rc=0
	mkdir -p "$out" || die "cannot create $out"
	for cfg in "$@"; do
		[ -f "$cfg" ] || die "no config $cfg"
		name=$(basename "$cfg" .test)
		t0=$(date +%s)
		# stdbuf: a side that dies (SIGPIPE when its peer quits) still leaves its lines
		timeout -k 5 "$tmo" stdbuf -oL "$bin" -x -q "$port" -s "$RXE_ADDR" >"$out/$name.server.log" 2>&1 &
		spid=$!
		sleep 1 # runfabtests.sh's wait for the server's socket
		timeout -k 5 "$tmo" stdbuf -oL "$bin" -q "$port" -u "$cfg" -s "$RXE_ADDR" "$RXE_ADDR" \
			>"$out/$name.client.log" 2>&1
		c=$?
		[ $c = 0 ] || [ $c = 61 ] || kill "$spid" 2>/dev/null
		wait "$spid"
		s=$?
		# "Success: N", "Skipped: N", "ENODATA: N", "ENOSYS : N", "EIO    : N", "ERROR  : N"
		counts=$(awk -F: '/^(Success|Skipped|ENODATA|ENOSYS|EIO|ERROR) *:/ {
			gsub(/ /, "", $1); gsub(/ /, "", $2); v[$1] = $2 }
			END { printf "%d %d %d %d %d %d", v["Success"], v["Skipped"], v["ENODATA"],
				v["ENOSYS"], v["EIO"], v["ERROR"] }' "$out/$name.client.log")
		set -- $counts
		echo "$name: $1 passed, $2 invalid, $3 not offered (ENODATA), $4 ENOSYS, $5 EIO, $6 errors; client exit $c, server exit $s, $(($(date +%s) - t0)) s" |
			tee -a "$out/summary.txt"
		if [ "$c" = 124 ] || [ "$c" = 137 ] || ! grep -q '^Success:' "$out/$name.client.log" ||
			[ $(($4 + $5 + $6)) != 0 ] || [ "$1" = 0 ]; then
			rc=1
			echo "--- $name failed; the tests that did not pass, and the client's last lines:"
			grep -E 'result:' "$out/$name.client.log" |
				grep -vE 'result: (Success|No data available)' | head -n 40
			tail -n "${FABTESTS_FAIL_LINES:-20}" "$out/$name.client.log" | sed 's/^/   | /'
			tail -n 10 "$out/$name.server.log" | sed 's/^/   s| /'
		fi
		port=$((port + 1))
	done
	return $rc
}

# What a failed test of PROV printed (its commands, the last lines of each side's output): a
# CI log keeps only its last lines, and the cause must be in them.
failed() {
	local log="$1/${2//;/+}.log"
	awk -v keep="${FABTESTS_FAIL_LINES:-20}" '
		function section() {
			if (n > keep) print "    [" n - keep " lines left out]"
			for (i = (n > keep ? n - keep + 1 : 1); i <= n; i++) print buf[i]
			n = 0
		}
		/^- name:/ { if (fail) section(); name = $0; sub(/^- name:[ \t]*/, "", name); fail = 0; n = 0; next }
		/^  result: Fail/ { fail = 1; print "--- failed: " name; next }
		!fail { next }
		/^  (server|client)_cmd:/ { section(); print; next }
		/^  (server|client)_stdout:/ { section(); print; next }
		/^    / { buf[++n] = $0 }
		END { if (fail) section() }' "$log"
}

# one row per test name, one column per provider: pass / fail / notrun / excluded
table() {
	local out=$1
	shift
	local p
	printf '%-44s' test
	for p in "$@"; do printf ' %-14s' "$p"; done
	echo
	for p in "$@"; do
		sed -n 's/^- name:\s*\(.*\S\)\s*$/N|\1/p; s/^  result:\s*\(\S*\)$/R|\1/p' "$out/${p//;/+}.log" |
			awk -F'|' -v p="$p" -v a="$RXE_ADDR" '$1=="N"{n=$2; sub(/ -p "[^"]*"/, "", n)
				gsub("-[sg] " a, "", n); gsub(" " a, "", n); gsub(/  +/, " ", n); sub(/ +$/, "", n); next}
				$1=="R"{print n "\t" p "\t" $2}'
	done | awk -F'\t' -v provs="$*" '
		BEGIN { np = split(provs, P, " ") }
		{ key = $1; if (!(key in seen)) { seen[key] = 1; order[++n] = key } r[key, $2] = $3 }
		END { for (i = 1; i <= n; i++) { printf "%-44s", order[i]; for (j = 1; j <= np; j++) printf " %-14s", ((order[i], P[j]) in r ? r[order[i], P[j]] : "-"); printf "\n" } }'
}

case ${1:-} in
build) build ;;
table) # OUTDIR PROV...: the table again, from the logs of a run
	shift
	table "$@"
	;;
run)
	shift
	run "$@"
	;;
ubertest)
	shift
	ubertest "$@"
	;;
prefix) echo "$PREFIX" ;;
*)
	sed -n '2,44p' "$0"
	exit 2
	;;
esac
