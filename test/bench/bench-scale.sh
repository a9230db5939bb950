#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
# make bench-scale: what a wake and an idle CQ cost as the number of CQs grows, in one VM boot
# (run by `make bench-scale` through contrib/vm/run-in-vm.sh; by hand inside the guest:
# VWAIT_BUILDDIR=... test/bench/bench-scale.sh).
#
# Members: a ping-pong (util/fi_vwait_bench, 64 B) whose CQ is one of N members of a wait set
#   (fi_wait, then fi_cq_read) or of a poll set (fi_poll), the other N-1 idle, both sides; N
#   alternated within each repeat. Per round trip: latency (client), CPU of the server process
#   (user + system, from getrusage: includes the server's sends), and, in one further run per N,
#   the server's system calls counted by strace -f -c (divided by the rounds run: setup
#   included, so the N-dependent setup shows as a difference in the total, see the raw table).
# Descriptors and memory: test/bench/cq_fds opens N CQs of one wait object, vwait beside
#   upstream verbs, and counts /proc/self/fd and VmRSS before and after; with ulimit -n 1024
#   it shows where a provider runs out of descriptors, and that a vwait wait set of 4096 or
#   16384 CQs opens there.
# Not measured here (yet): A = 16 active members, an application epoll over N FD CQs, the
# streaming and thread sections, 1,000 connections; the util layer alone is measured on the
# host by test/bench/scale_util (callgrind, see its header).
#
# SCALE_NS (default "16 256 1024 4096"), SCALE_REPEATS (3), SCALE_ITERS (200),
# SCALE_OUT (default $VWAIT_BUILDDIR/bench-results/scale.md).
set -u
builddir=${VWAIT_BUILDDIR:?VWAIT_BUILDDIR must name the build directory}
srcdir=$(cd "$(dirname "$0")/../.." && pwd)
export VWAIT_SRCDIR=$srcdir
. "$srcdir/test/integration/common.sh"
need_rxe
bench=$builddir/util/fi_vwait_bench
cqfds=$builddir/test/bench/cq_fds
export FI_PROVIDER_PATH=${FI_PROVIDER_PATH:-$builddir/.libs}
ns=${SCALE_NS:-16 256 1024 4096}
repeats=${SCALE_REPEATS:-3}
iters=${SCALE_ITERS:-200}
out=${SCALE_OUT:-$builddir/bench-results/scale.md}
mkdir -p "$(dirname "$out")"
work=$(mktemp -d)
cd "$work" || exit 1
raw=$work/raw.txt
port=7700

# pingpong NAME MODE N [WRAP]: one run; prints "lat cpu" (client latency us, server CPU us)
pingpong() {
	local name=$1 mode=$2 n=$3 wrap=${4:-}
	port=$((port + 1))
	PAIR_READY=LISTENING PAIR_TIMEOUT=600 run_pair "$name" \
		"$wrap $bench -p vwait -m $mode -N $n -S 64 -I $iters -W 20 -P $port" \
		"$bench -p vwait -m $mode -N $n -S 64 -I $iters -W 20 -P $port $RXE_ADDR" >/dev/null 2>&1
	local lat cpu
	lat=$(sed -n 's/^RESULT.* lat_us=\([^ ]*\).*/\1/p' "$name.client.log" | head -1)
	cpu=$(sed -n 's/^SERVER.* cpu_us_per_msg=\([^ ]*\).*/\1/p' "$name.server.log" | head -1)
	echo "$name mode=$mode N=$n lat_us=${lat:-FAIL} server_cpu_us=${cpu:-FAIL}" >>"$raw"
	echo "${lat:-nan} ${cpu:-nan}"
}

# median and min-max of the numbers on stdin
stats() { sort -g | awk '{v[NR]=$1} END{if(NR==0){print "-";exit} m=(NR%2)?v[(NR+1)/2]:(v[NR/2]+v[NR/2+1])/2; printf "%.0f (%.0f-%.0f)", m, v[1], v[NR]}'; }

{
	echo "# make bench-scale, $(date -u +%FT%TZ)"
	echo
	echo "One VM boot (TCG, soft-RoCE), vwait $(git -C "$srcdir" describe --always --dirty 2>/dev/null);"
	echo "$iters round trips of 64 B per run, $repeats repeats, N alternated within each repeat."
	echo "Only ratios within this file mean anything."
	echo
} >"$out"

for mode in waitset pollset; do
	declare -A lat=() cpu=()
	for r in $(seq "$repeats"); do
		for n in $ns; do
			read -r l c < <(pingpong "$mode-$n-$r" "$mode" "$n")
			lat[$n]+="$l "
			cpu[$n]+="$c "
		done
	done
	declare -A sc=()
	for n in $ns; do
		pingpong "strace-$mode-$n" "$mode" "$n" "strace -f -c -o $work/strace-$mode-$n.txt" >/dev/null
		total=$(awk '$NF=="total"{print $(NF-1)}' "$work/strace-$mode-$n.txt" 2>/dev/null)
		sc[$n]=$(awk -v t="${total:-0}" -v r=$((iters + 20)) 'BEGIN{printf "%.1f", t/r}')
		{
			echo "== strace -f -c, server, $mode N=$n"
			head -15 "$work/strace-$mode-$n.txt"
		} >>"$raw"
	done
	{
		echo "## Members: $mode, A = 1 (vwait)"
		echo
		echo "| N | round trip us, median (min-max) | server CPU us per message | server system calls per round (strace, setup included) |"
		echo "|---:|---|---|---:|"
		for n in $ns; do
			echo "| $n | $(tr ' ' '\n' <<<"${lat[$n]}" | grep . | stats) | $(tr ' ' '\n' <<<"${cpu[$n]}" | grep . | stats) | ${sc[$n]} |"
		done
		echo
	} >>"$out"
	unset lat cpu sc
done

{
	echo "## Descriptors and memory per idle CQ (test/bench/cq_fds, 16-entry CQs)"
	echo
	echo '```'
	for p in verbs vwait; do
		(ulimit -n 1024 && echo "ulimit -n 1024, $p, FI_WAIT_FD, 400 CQs:" && "$cqfds" -p "$p" -w fd -N 400)
	done
	for w in fd none; do
		for p in verbs vwait; do
			echo "$p, wait $w, 2000 CQs:"
			"$cqfds" -p "$p" -w "$w" -N 2000
		done
	done
	for n in 4096 16384; do
		(ulimit -n 1024 && echo "ulimit -n 1024, vwait, one FI_WAIT_FD wait set, $n CQs:" && "$cqfds" -p vwait -w set -N "$n")
	done
	(ulimit -n 1024 && echo "ulimit -n 1024, verbs, FI_WAIT_SET:" && "$cqfds" -p verbs -w set -N 16)
	echo '```'
	echo
	echo "## Raw"
	echo
	echo '```'
	cat "$raw"
	echo '```'
} >>"$out" 2>&1

cat "$out"
rm -rf "$work"
