#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
# The demo's comparison of vwait with upstream verbs, fair within one VM boot: every pair of
# processes runs in bursts that take turns with the others (interleaved-pingpong.sh: one order
# for even bursts, the reverse for odd ones), so that the emulated CPU's drift falls on all of
# them alike; each figure is the median [min-max] of the bursts, each ratio the median [min-max]
# of the per-burst ratios. A ratio whose range holds 1 is said to be inside the spread.
#   polling               both sides in an fi_cq_read loop, vwait against verbs;
#   fi_cq_sread, think T  the server blocks in fi_cq_sread on an FI_WAIT_FD CQ, the client
#                         spins and thinks T us before each send: vwait against verbs, and
#                         vwait's server spinning as the floor of what blocking can cost;
#   system calls          of the blocking server per round trip (strace -f -c, at two lengths,
#                         the difference: start-up cancels out), at think 2000 us, where every
#                         round trip is one sleep for both providers.
#
#   test/bench/fair-demo.sh    (inside the VM, from the build dir: setup.sh demo runs it)
# DEMO_BURSTS (10), DEMO_ITERS (2000 timed round trips a burst), DEMO_THINKS ("0 50"),
# DEMO_SC_ITERS (200; 0: no system-call row)
set -u -o pipefail
: "${VWAIT_BUILDDIR:=$PWD}"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bursts=${DEMO_BURSTS:-10}
iters=${DEMO_ITERS:-2000}
thinks=${DEMO_THINKS:-0 50}
sc_iters=${DEMO_SC_ITERS:-200}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rc=0

# turns OUT THINK ARMS...: one interleaved run; OUT.md gets its table
turns() {
	local out=$1 think=$2
	shift 2
	BENCH_ARMS="$*" BENCH_THINK=$think BENCH_BURSTS=$bursts BENCH_ITERS=$iters BENCH_PORT=$((7700 + RANDOM % 200)) \
		bash "$here/interleaved-pingpong.sh" >"$tmp/$out.log" 2>&1 || {
		echo "   ($out: the run failed)"
		tail -n 5 "$tmp/$out.log" | sed 's/^/     /'
		rc=1
		return 1
	}
}
# cell RUN ARM: "median [min-max]" latency of ARM in RUN; ratio RUN ARM: its ratio to the first
# arm, with "inside the spread" when the range of the per-burst ratios holds 1
cell() { awk -F'|' -v a=" $2 " '$2 == a { gsub(/^ +| +$/, "", $3); print $3 }' "$tmp/$1.log"; }
ratio() {
	awk -F'|' -v a=" $2 " '$2 == a {
		r = $4; gsub(/^ +| +$/, "", r)
		if (split(r, p, /[][ -]+/) >= 3 && p[2] + 0 <= 1 && p[3] + 0 >= 1) r = r " inside the spread"
		print r }' "$tmp/$1.log"
}
row() { printf '   %-32s %-26s %-26s %s\n' "$@"; }

echo "   64 B ping-pong, one-way latency in us: the pairs take turns burst by burst ($bursts bursts"
echo "   of $iters round trips each, in alternating order), median [min-max] of the bursts;"
echo "   vwait / verbs is the median [min-max] of the per-burst ratios. Emulated CPU: compare"
echo "   the rows, not the absolute figures."
echo
row "" "upstream verbs" "vwait" "vwait / verbs"
if turns poll 0 verbs=verbs vwait=vwait; then
	row "polling (fi_cq_read loop)" "$(cell poll verbs)" "$(cell poll vwait)" "$(ratio poll vwait)"
fi
for t in $thinks; do
	if turns "sread$t" "$t" verbs=verbs/sread-fd vwait=vwait/sread-fd spin=vwait; then
		row "server in fi_cq_sread, think $t" "$(cell "sread$t" verbs)" "$(cell "sread$t" vwait)" \
			"$(ratio "sread$t" vwait)"
		row "  (vwait server spinning)" "" "$(cell "sread$t" spin)" ""
	fi
done

# system calls of the blocking server per round trip
sc_run() { # PROV N: the server's system calls over N round trips (strace -c's total)
	local p=$1 n=$2 port=$((7900 + RANDOM % 90)) spid think=2000
	local args=(-m sread-fd -S 64 -I "$n" -T "$think" -B $((n * think)) -P "$port")
	FI_PROVIDER=$p strace -f -c -o "$tmp/sc" "$VWAIT_BUILDDIR/util/fi_vwait_bench" -p "$p" "${args[@]}" \
		>"$tmp/sc.srv" 2>&1 &
	spid=$!
	for _ in $(seq 600); do grep -q LISTENING "$tmp/sc.srv" && break; sleep 0.1; done
	FI_PROVIDER=$p timeout 120 "$VWAIT_BUILDDIR/util/fi_vwait_bench" -p "$p" -m spin -S 64 -I "$n" \
		-T "$think" -B $((n * think)) -P "$port" "$RXE_ADDR" >"$tmp/sc.cli" 2>&1 || {
		kill "$spid" 2>/dev/null
		return 1
	}
	wait "$spid" || return 1
	awk '$NF == "total" { print $4 }' "$tmp/sc"
}
if [ "$sc_iters" -gt 0 ] && command -v strace >/dev/null; then
	sc=()
	for p in verbs vwait; do
		a=$(sc_run "$p" "$sc_iters") && b=$(sc_run "$p" $((sc_iters * 5))) &&
			sc+=("$(awk -v a="$a" -v b="$b" -v n="$sc_iters" 'BEGIN { printf "%.1f", (b - a) / (4 * n) }')") ||
			sc+=("failed")
	done
	row "server system calls per" "${sc[0]}" "${sc[1]}" "(strace -f -c; think 2000 us:"
	row "  round trip, fi_cq_sread" "" "" " every round trip one sleep)"
fi
exit $rc
