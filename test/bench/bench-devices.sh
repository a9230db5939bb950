#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
# test/bench/bench-devices.sh - the blocking path on both software devices in ONE VM boot
# (run-in-vm.sh VM_RDMA=both: soft-RoCE rxe0 on RXE_ADDR, soft-iWARP siw0 on SIW_ADDR; a pair
# picks its device by the address its server listens on, fi_vwait_bench -A):
#
#   latency  64 B ping-pong, both sides the same: vwait spinning, upstream verbs spinning, vwait
#            blocking in fi_cq_sread (FI_WAIT_UNSPEC) under the block policy (every wait sleeps)
#            and under the default adaptive policy, upstream verbs in fi_cq_sread. BENCH_REPEATS
#            runs (default 5) of BENCH_ITERS round trips (default 2000); devices and arms
#            alternate, their order reversed every other repeat.
#   syscalls the server under strace -f -c, in the blocking arms, at BENCH_SC_ITERS round trips
#            (default 400) and at five times as many, the client spinning and thinking
#            BENCH_SC_THINK_US (default 2000) before each send so that the server sleeps every
#            time: the difference of the two counts over the difference of round trips is the
#            system calls per blocking completion (one wait for the request, one send), setup
#            and teardown cancelled out. Counted, so the loaded host's noise does not touch them.
#
# Cells: median [min-max]; ratios of medians. Only ratios mean something (the VM's CPU is
# emulated). Writes BENCH_OUT (default BUILDDIR/bench-devices): results.md, records.txt (every
# measurement, TABLE|ROW|COLUMN|VALUE), log.txt (every run's output).
#
#   make bench SECTIONS=devices           (boots the VM with both devices, about 10 minutes)
#   test/bench/bench-devices.sh [BUILDDIR] (the same, from the host)
set -u -o pipefail
export LC_ALL=C
here=$(cd "$(dirname "$0")" && pwd -P)

# on the host: the front door, which boots the VM with both devices and runs this script in it
[ -n "${RXE_ADDR:-}" ] || SECTIONS=devices exec "$here/bench.sh" "${1:-${VWAIT_BUILDDIR:-$PWD}}"
[ -n "${SIW_ADDR:-}" ] || {
	echo "bench-devices: no siw0 in this guest (make bench SECTIONS=devices boots with both)"
	exit 77
}

builddir=${1:-${VWAIT_BUILDDIR:-$PWD}}
export FI_PROVIDER_PATH=$builddir/.libs
bench=$builddir/util/fi_vwait_bench
repeats=${BENCH_REPEATS:-5}
iters=${BENCH_ITERS:-2000}
sc_iters=${BENCH_SC_ITERS:-400}
out=${BENCH_OUT:-$builddir/bench-devices}
mkdir -p "$out"
rec=$out/records.txt
log=$out/log.txt
: >"$rec"
: >"$log"
tmp=$(mktemp -d)
port=8100
t_start=$(date +%s)
declare -A addr=([rxe]=$RXE_ADDR [siw]=$SIW_ADDR)

# ARM: provider, mode, policy (the blocking arms' FI_VWAIT_WAIT_POLICY)
arm_args() {
	case $1 in
	vwait-spin) echo "vwait spin -" ;;
	verbs-spin) echo "verbs spin -" ;;
	vwait-block) echo "vwait sread-unspec block" ;;
	vwait-adaptive) echo "vwait sread-unspec adaptive" ;;
	verbs-sread) echo "verbs sread-unspec -" ;;
	esac
}

# run DEV ARM ITERS [WRAP...]: one pair (the server under WRAP); the client's RESULT in $tmp/res
run() {
	local dev=$1 arm=$2 n=$3 prov mode pol spid rc=1 i
	shift 3
	read -r prov mode pol <<<"$(arm_args "$arm")"
	local envs=(FI_PROVIDER="$prov")
	[ "$pol" = - ] || envs+=(FI_VWAIT_WAIT_POLICY="$pol")
	port=$((port + 1))
	: >"$tmp/srv"
	env "${envs[@]}" timeout 300 "$@" "$bench" -p "$prov" -m "$mode" -S 64 -I "$n" -P $port \
		"${think[@]}" -A "${addr[$dev]}" >"$tmp/srv" 2>&1 &
	spid=$!
	for i in $(seq 600); do # the server prints LISTENING once it listens (slow under strace)
		grep -q '^LISTENING' "$tmp/srv" && break
		kill -0 $spid 2>/dev/null || break
		sleep 0.1
	done
	[ ${#think[@]} = 0 ] || mode=spin # a think-time run: the client spins, sends after its think
	env "${envs[@]}" timeout 300 "$bench" -p "$prov" -m "$mode" -S 64 -I "$n" -P $port \
		"${think[@]}" "${addr[$dev]}" >"$tmp/cli" 2>&1 && rc=0
	wait $spid || rc=1
	{ echo "== $dev $arm $n ${*:-} (rc $rc)"; cat "$tmp/cli" "$tmp/srv"; } >>"$log"
	grep '^RESULT' "$tmp/cli" >"$tmp/res"
	return $rc
}

lat_of() { sed -nE 's/^RESULT .*lat_us=([0-9.]+).*/\1/p' "$tmp/res"; }

# in_turn R ITEM...: in order on odd repeats, reversed on even ones
in_turn() {
	local r=$1 i
	shift
	if [ $((r % 2)) = 1 ]; then printf '%s\n' "$@"; else for ((i = $#; i >= 1; i--)); do printf '%s\n' "${!i}"; done; fi
}

arms="vwait-spin verbs-spin vwait-block vwait-adaptive verbs-sread"
think=() # the latency runs: think 0, both sides in the arm's mode
echo "bench-devices: $(date -u +%FT%TZ), kernel $(uname -r), $(nproc) vCPUs, rxe0 on $RXE_ADDR, siw0 on $SIW_ADDR, $repeats repeats of $iters round trips" | tee -a "$log"
for r in $(seq "$repeats"); do
	for dev in $(in_turn "$r" rxe siw); do
		# shellcheck disable=SC2086 # a list of arms
		for arm in $(in_turn "$r" $arms); do
			run "$dev" "$arm" "$iters" && echo "lat|$arm|$dev|$(lat_of)" >>"$rec"
		done
	done
	echo "repeat $r: $(($(date +%s) - t_start)) s" | tee -a "$log"
done

# system calls of the server per round trip, counted by strace -f -c at two lengths. The client
# spins and thinks BENCH_SC_THINK_US (default 2000) before each send, so that the server is
# asleep when each message comes: every round trip is one blocking completion (at think 0, under
# strace's slowdown the message is mostly there before the server would sleep: a vwait
# server on siw can make no poll(2) at all in 2000 round trips).
sc_think=${BENCH_SC_THINK_US:-2000}
think=(-T "$sc_think" -B $((sc_iters * 5 * sc_think)))
calls_of() { awk '$NF == "total" { print $4 }' "$1"; }
if command -v strace >/dev/null; then
	for dev in rxe siw; do
		for arm in vwait-block vwait-adaptive verbs-sread; do
			c=()
			for n in "$sc_iters" $((sc_iters * 5)); do
				think[3]=$((n * sc_think)) # -B: n rounds at that think
				run "$dev" "$arm" "$n" strace -f -c -o "$tmp/sc.$n" && c+=("$(calls_of "$tmp/sc.$n")")
				{ echo "-- strace -c, $n round trips"; cat "$tmp/sc.$n"; } >>"$log" 2>/dev/null
				cp "$tmp/sc.$n" "$out/strace.$dev.$arm.$n" 2>/dev/null
			done
			[ ${#c[@]} = 2 ] && echo "sc|$arm|$dev|$(awk -v a="${c[0]}" -v b="${c[1]}" -v n="$sc_iters" \
				'BEGIN { printf "%.2f", (b - a) / (4 * n) }')" >>"$rec"
		done
	done
else
	echo "no strace: system calls not counted" | tee -a "$log"
fi

# stats: "TABLE|ROW|COLUMN|median|min|max|n"
stats() {
	awk -F'|' '$4 != "" { k = $1 "|" $2 "|" $3; if (!(k in n)) order[++nk] = k; v[k, ++n[k]] = $4 + 0 }
	END { for (i = 1; i <= nk; i++) { k = order[i]; m = n[k]
		for (a = 1; a <= m; a++) x[a] = v[k, a]
		for (a = 1; a <= m; a++) for (b = a + 1; b <= m; b++) if (x[b] < x[a]) { y = x[a]; x[a] = x[b]; x[b] = y }
		med = (m % 2) ? x[(m + 1) / 2] : (x[m / 2] + x[m / 2 + 1]) / 2
		printf "%s|%.2f|%.2f|%.2f|%d\n", k, med, x[1], x[m], m } }' "$rec"
}
stats >"$tmp/st"
cell() { awk -F'|' -v t="$1" -v r="$2" -v c="$3" '$1 == t && $2 == r && $3 == c {
	printf "%s [%s-%s]", $4, $5, $6; f = 1 } END { if (!f) printf "-" }' "$tmp/st"; }
med() { awk -F'|' -v t="$1" -v r="$2" -v c="$3" '$1 == t && $2 == r && $3 == c { print $4 }' "$tmp/st"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "" && b + 0 > 0) printf "%.2f", a / b; else printf "-" }'; }
{
	echo "## Both devices in one boot ($(date -u +%F), ${BENCH_HOST:-unknown host}, $(nproc) vCPUs)"
	echo
	echo "64 B ping-pong, both sides the same, one-way latency (us), median [min-max] of $repeats runs of $iters round trips; ratios of medians. Command: \`make bench-devices\` (test/bench/bench-devices.sh)."
	echo
	echo "| | rxe (RoCE v2) | siw (iWARP) |"
	echo "|---|---|---|"
	for a in $arms; do echo "| $a | $(cell lat "$a" rxe) | $(cell lat "$a" siw) |"; done
	rat() { echo "| $1 | $(ratio "$(med lat "$2" rxe)" "$(med lat "$3" rxe)") | $(ratio "$(med lat "$2" siw)" "$(med lat "$3" siw)") |"; }
	rat "vwait spin ÷ verbs spin" vwait-spin verbs-spin
	rat "vwait block ÷ vwait spin" vwait-block vwait-spin
	rat "vwait adaptive ÷ vwait spin" vwait-adaptive vwait-spin
	rat "verbs sread ÷ verbs spin" verbs-sread verbs-spin
	rat "vwait block ÷ verbs sread" vwait-block verbs-sread
	if grep -q '^sc|' "$rec"; then
		echo
		echo "System calls of the server per round trip, each a blocking completion (strace -f -c, $((sc_iters * 5)) minus $sc_iters round trips; a spinning client that thinks $sc_think us before each send):"
		echo
		echo "| | rxe | siw |"
		echo "|---|---|---|"
		for a in vwait-block vwait-adaptive verbs-sread; do
			echo "| $a | $(med sc "$a" rxe) | $(med sc "$a" siw) |"
		done
		echo
		echo "Per call, $((sc_iters * 5)) round trips (calls: rxe / siw):"
		echo
		for a in vwait-block verbs-sread; do
			for dev in rxe siw; do
				f=$out/strace.$dev.$a.$((sc_iters * 5))
				[ -f "$f" ] && echo "- $a on $dev: $(awk '$NF != "total" && $NF != "syscall" && $4 ~ /^[0-9]+$/ && $4 >= '"$sc_iters"' { printf "%s %s, ", $NF, $4 }' "$f" | sed 's/, $//')"
			done
		done
	fi
	echo
	echo "Total: $(($(date +%s) - t_start)) s."
} >"$out/results.md"
cat "$out/results.md"
rm -rf "$tmp"
