#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
# test/integration/dgram-bench.sh - FI_EP_DGRAM ping-pong latency, vwait beside upstream verbs, in
# ONE VM boot: fi_pingpong -e dgram -p vwait and -p verbs, alternated, REPEATS runs each;
# median and min-max of the one-way latency (fi_pingpong's usec/xfer).
#
#   test/integration/dgram-bench.sh [BUILDDIR]   (on the host: make bench SECTIONS=dgram)
#   BENCH_SIZES="64 512" BENCH_REPEATS=5 BENCH_ITERS=1000 to change what is measured.
# Cost: about 1 minute per size at the defaults. The guest CPU is emulated (TCG): compare the
# ratio, not absolute figures.
set -u -o pipefail
export LC_ALL=C
here=$(cd "$(dirname "$0")" && pwd -P)
srcdir=$(cd "$here/../.." && pwd -P)

# on the host: make bench's front door, which boots the VM and runs this script in it
[ -n "${RXE_ADDR:-}" ] || SECTIONS=dgram exec "$srcdir/test/bench/bench.sh" "${1:-${VWAIT_BUILDDIR:-$PWD}}"

builddir=${1:-${VWAIT_BUILDDIR:-$PWD}}
export FI_PROVIDER_PATH=$builddir/.libs
. "$srcdir/test/integration/common.sh"
sizes=${BENCH_SIZES:-64 512}
repeats=${BENCH_REPEATS:-5}
iters=${BENCH_ITERS:-1000}
tmp=$(mktemp -d)
port=47900

wait_port() { # port pid
	local n=200
	until tcp_listening "$1"; do
		kill -0 "$2" 2>/dev/null || return 1
		n=$((n - 1))
		[ "$n" -gt 0 ] || return 1
		sleep 0.05
	done
}

# fi_pingpong -e dgram PROV SIZE -> one-way usec on stdout (or "-")
run_fi() {
	local prov=$1 size=$2 spid line
	port=$((port + 1))
	timeout 120 fi_pingpong -p "$prov" -e dgram -B "$port" -S "$size" -I "$iters" >"$tmp/srv" 2>&1 &
	spid=$!
	wait_port "$port" "$spid"
	line=$(timeout 120 fi_pingpong -p "$prov" -e dgram -P "$port" -S "$size" -I "$iters" \
		"$RXE_ADDR" 2>"$tmp/cli.err" | awk '$3 ~ /^=/ && $7 ~ /^[0-9.]+$/ { print $7 }' | tail -n 1)
	wait "$spid" 2>/dev/null
	if [ -z "$line" ]; then
		echo "dgram-bench: fi_pingpong -p $prov -e dgram -S $size failed:" >&2
		cat "$tmp/cli.err" "$tmp/srv" >&2
	fi
	echo "${line:--}"
}

stats() { # file -> "median min max n"
	grep -v '^-$' "$1" | sort -g | awk '{ v[NR] = $1 } END {
		if (NR == 0) { print "- - - 0"; exit }
		m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		printf "%.2f %.2f %.2f %d\n", m, v[1], v[NR], NR }'
}

echo "dgram-bench: ${RXE_DEV:-rxe0} ($RXE_ADDR), sizes: $sizes, $repeats runs of $iters, kernel $(uname -r)"
for size in $sizes; do
	: >"$tmp/vwait.$size" && : >"$tmp/verbs.$size"
	for _ in $(seq "$repeats"); do
		run_fi vwait "$size" >>"$tmp/vwait.$size"
		run_fi verbs "$size" >>"$tmp/verbs.$size"
	done
done

printf '\n%-6s | %-24s | %-24s | %s\n' size "vwait us median [min-max]" "verbs us median [min-max]" "vw/vb"
for size in $sizes; do
	read -r vm vlo vhi vn < <(stats "$tmp/vwait.$size")
	read -r bm blo bhi bn < <(stats "$tmp/verbs.$size")
	awk -v s="$size" -v vm="$vm" -v vlo="$vlo" -v vhi="$vhi" -v vn="$vn" -v bm="$bm" -v blo="$blo" \
		-v bhi="$bhi" -v bn="$bn" 'BEGIN {
		r = (vm != "-" && bm != "-" && bm > 0) ? sprintf("%.2f", vm / bm) : "-"
		printf "%-6s | %8s [%s-%s] n=%s | %8s [%s-%s] n=%s | %s\n", s, vm, vlo, vhi, vn, bm, blo, bhi, bn, r }'
done
echo "(one-way latency in microseconds, lower is better; vw/vb = vwait / upstream verbs medians)"
rm -rf "$tmp"
