#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
# test/two-node/bench.sh - latency and bandwidth across the two-node link: fi_pingpong (MSG,
# data not checked) over vwait beside upstream verbs, in the same boot, REPEATS runs each
# (default 5, the providers alternating, which goes first swapping every run, after one
# uncounted warm-up run of each: the first connection after boot is much slower); prints
# median and min-max per provider, and each run's figures in results. Latency:
# usec/xfer at 64 bytes (-I 300); bandwidth: MB/sec at 1 MiB (-I 20). The guests' CPUs are
# emulated (TCG): only the ratio between providers in one boot means anything.
#   cd _build/<you> && make bench-two-node      (or: ../../contrib/vm/two-node.sh run
#                                                ../../test/two-node/bench.sh)
set -u -o pipefail
VWAIT_SRCDIR=${VWAIT_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd -P)}
VWAIT_BUILDDIR=${VWAIT_BUILDDIR:-$PWD}
export VWAIT_SRCDIR VWAIT_BUILDDIR FI_PROVIDER_PATH=$VWAIT_BUILDDIR/.libs
scratch=$VWAIT_BUILDDIR/test/two-node/bench
rm -rf "$scratch" && mkdir -p "$scratch" && cd "$scratch" || exit 1
# shellcheck source=common.sh
. "$VWAIT_SRCDIR/test/two-node/common.sh"
need_two_node
REPEATS=${REPEATS:-5}
port=47900
: >results
# run PROV KIND R: one fi_pingpong pair; its figure goes to results unless R is 0 (warm-up)
run() {
	local prov=$1 kind=$2 r=$3 args
	port=$((port + 1))
	if [ "$kind" = lat ]; then args="-S 64 -I 300"; else args="-S 1048576 -I 20"; fi
	tn_pair "$prov-$kind-$r" "fi_pingpong -p $prov -e msg -B $port $args" \
		"fi_pingpong -p $prov -e msg -P $port $args $ADDR_B" "$port" >/dev/null 2>&1 ||
		{ echo "run $r $prov $kind failed:"; cat "$prov-$kind-$r.client.log"; return; }
	[ "$r" = 0 ] && return
	# bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec
	awk -v p="$prov" -v k="$kind" -v r="$r" '$2 ~ /^[0-9]+$/ && $3 ~ /^=/ {
		print p, k, (k == "lat" ? $7 : $6), r }' "$prov-$kind-$r.client.log" >>results
}
run vwait lat 0
run verbs lat 0
for r in $(seq "$REPEATS"); do
	order="vwait verbs"
	[ $((r % 2)) = 0 ] && order="verbs vwait"
	for kind in lat bw; do
		for prov in $order; do
			run "$prov" "$kind" "$r"
		done
	done
done
echo "two-node link, fi_pingpong -e msg, $REPEATS runs each, same boot (median [min-max]):"
for kind in lat bw; do
	for prov in vwait verbs; do
		awk -v p=$prov -v k=$kind '$1 == p && $2 == k { print $3 }' results | sort -g |
			awk -v p=$prov -v k=$kind '{ v[NR] = $1 } END {
				if (!NR) { printf "  %-5s %-3s no result\n", p, k; exit }
				m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
				printf "  %-5s %s %10.2f [%.2f-%.2f] %s (n=%d)\n", p,
					(k == "lat" ? "64 B latency  " : "1 MiB bandwidth"), m, v[1], v[NR],
					(k == "lat" ? "usec/xfer" : "MB/s"), NR }'
	done
done
