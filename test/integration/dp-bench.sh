#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
# test/integration/dp-bench.sh - ping-pong latency and bandwidth, side by side, in ONE VM boot:
# fi_pingpong over vwait (-p vwait -e msg), over upstream verbs (-p verbs -e msg), and raw
# ibv_rc_pingpong, for a few sizes; best of REPEATS runs, interleaved; ratios against verbs.
#
#   test/integration/dp-bench.sh [BUILDDIR]      (on the host: make bench SECTIONS=pingpong)
#   BENCH_SIZES="64 4096 65536 1048576" BENCH_REPEATS=3 to change what is measured.
#
# Latency is one-way: fi_pingpong's usec/xfer, ibv_rc_pingpong's usec/iter / 2 (one
# iteration is a round trip). Bandwidth is fi_pingpong's MB/sec and ibv_rc_pingpong's
# Mbit/sec / 8. The guest CPU is emulated (TCG): compare ratios, not absolute figures.
set -u -o pipefail
export LC_ALL=C
here=$(cd "$(dirname "$0")" && pwd -P)
srcdir=$(cd "$here/../.." && pwd -P)

# on the host: make bench's front door, which boots the VM and runs this script in it
[ -n "${RXE_ADDR:-}" ] || SECTIONS=pingpong exec "$srcdir/test/bench/bench.sh" "${1:-${VWAIT_BUILDDIR:-$PWD}}"

builddir=${1:-${VWAIT_BUILDDIR:-$PWD}}
export FI_PROVIDER_PATH=$builddir/.libs
. "$srcdir/test/integration/common.sh"
dev=${RXE_DEV:-rxe0}
sizes=${BENCH_SIZES:-64 4096 65536 1048576}
repeats=${BENCH_REPEATS:-3}
tmp=$(mktemp -d)
port=47700

gidx=${RXE_GIDX:-$(rxe_gidx "$dev")}

iters_for() { # size
	if [ "$1" -le 4096 ]; then echo 1000; elif [ "$1" -le 65536 ]; then echo 50; else echo 10; fi
}

wait_port() { # port pid
	local n=200
	until tcp_listening "$1"; do
		kill -0 "$2" 2>/dev/null || return 1
		n=$((n - 1))
		[ "$n" -gt 0 ] || return 1
		sleep 0.05
	done
}

# fi_pingpong PROV SIZE -> "usec MBps" on stdout (or "- -")
run_fi() {
	local prov=$1 size=$2 it spid line
	it=$(iters_for "$size")
	port=$((port + 1))
	timeout 120 fi_pingpong -p "$prov" -e msg -B "$port" -S "$size" -I "$it" >"$tmp/srv" 2>&1 &
	spid=$!
	wait_port "$port" "$spid"
	line=$(timeout 120 fi_pingpong -p "$prov" -e msg -P "$port" -S "$size" -I "$it" "$RXE_ADDR" 2>"$tmp/cli.err" |
		awk '$3 ~ /^=/ && $7 ~ /^[0-9.]+$/ { print $7, $6 }' | tail -n 1)
	wait "$spid" 2>/dev/null
	echo "${line:-- -}"
}

# ibv_rc_pingpong SIZE -> "usec MBps"
run_raw() {
	local size=$1 it spid out
	it=$(iters_for "$size")
	port=$((port + 1))
	timeout 120 ibv_rc_pingpong -d "$dev" -g "$gidx" -p "$port" -s "$size" -n "$it" >"$tmp/srv" 2>&1 &
	spid=$!
	wait_port "$port" "$spid"
	out=$(timeout 120 ibv_rc_pingpong -d "$dev" -g "$gidx" -p "$port" -s "$size" -n "$it" "$RXE_ADDR" 2>&1)
	wait "$spid" 2>/dev/null
	echo "$out" | awk '/Mbit\/sec/ { bw = $(NF - 1) / 8 } /usec\/iter/ { lat = $(NF - 1) / 2 }
		END { if (lat == "") print "- -"; else printf "%.2f %.2f\n", lat, bw }'
}

best() { # file -> "min_lat max_bw"
	awk '$1 != "-" { if (l == "" || $1 < l) l = $1; if ($2 > b) b = $2 }
		END { if (l == "") print "- -"; else print l, b }' "$1"
}

echo "dp-bench: $dev ($RXE_ADDR), gid index $gidx, sizes: $sizes, best of $repeats, kernel $(uname -r)"
for size in $sizes; do
	: >"$tmp/vwait.$size" && : >"$tmp/verbs.$size" && : >"$tmp/raw.$size"
	for _ in $(seq "$repeats"); do
		run_fi vwait "$size" >>"$tmp/vwait.$size"
		run_fi verbs "$size" >>"$tmp/verbs.$size"
		run_raw "$size" >>"$tmp/raw.$size"
	done
done

printf '\n%-8s | %12s %12s %12s %8s | %10s %10s %10s %8s\n' size "vwait us" "verbs us" "raw us" \
	"vw/vb" "vwait MB/s" "verbs MB/s" "raw MB/s" "vw/vb"
for size in $sizes; do
	read -r vl vb < <(best "$tmp/vwait.$size")
	read -r bl bb < <(best "$tmp/verbs.$size")
	read -r rl rb < <(best "$tmp/raw.$size")
	awk -v s="$size" -v vl="$vl" -v bl="$bl" -v rl="$rl" -v vb="$vb" -v bb="$bb" -v rb="$rb" 'BEGIN {
		lr = (vl != "-" && bl != "-" && bl > 0) ? sprintf("%.2f", vl / bl) : "-"
		br = (vb != "-" && bb != "-" && bb > 0) ? sprintf("%.2f", vb / bb) : "-"
		printf "%-8s | %12s %12s %12s %8s | %10s %10s %10s %8s\n", s, vl, bl, rl, lr, vb, bb, rb, br }'
done
echo "(latency one-way in microseconds, lower is better; bandwidth higher is better;"
echo " vw/vb = vwait / upstream verbs)"
rm -rf "$tmp"
