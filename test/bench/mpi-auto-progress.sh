#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
# test/bench/mpi-auto-progress.sh - Open MPI (ofi MTL) with and without rxm's progress thread
# (FI_OFI_RXM_DATA_AUTO_PROGRESS=1), over vwait;ofi_rxm and over verbs;ofi_rxm (which needs
# FI_UNIVERSE_SIZE=32 on rxe), in one VM boot (make bench SECTIONS=mpi-auto-progress):
#   - NetPIPE 1 B one-way latency, BENCH_REPEATS rounds (default 5) of the four arms, the
#     order rotated each round; median and min-max per arm;
#   - the CPU of each thread of each rank while both ranks sleep MPI_SLEEP seconds (default 10)
#     outside MPI after a ping-pong (connections open), from /proc/PID/task/*/schedstat over
#     MPI_SLEEP - 3 seconds from 1 s after both ranks fell asleep, MPI_CPU_REPEATS rounds
#     (default 2).
# Writes BENCH_OUT (default $VWAIT_BUILDDIR/bench-mpi-auto)/results.txt.
set -u -o pipefail
B=${VWAIT_BUILDDIR:-$PWD}
export FI_PROVIDER_PATH=$B/.libs
reps=${BENCH_REPEATS:-5}
cpu_reps=${MPI_CPU_REPEATS:-2}
sleep_s=${MPI_SLEEP:-10}
out=${BENCH_OUT:-$B/bench-mpi-auto}
prog=$B/test/integration/mpi_pingpong
[ -n "${RXE_ADDR:-}" ] || {
	echo "SKIP: RXE_ADDR not set: run inside contrib/vm/run-in-vm.sh"
	exit 77
}
mkdir -p "$out" && cd "$out" || exit 1
arms=(vwait-off vwait-on verbs-off verbs-on)

mpi() ( # ARM CMD...: mpirun of 2 ranks over the arm's provider, its settings exported
	local arm=$1 prov=${1%-*} v pass=()
	shift
	export FI_PROVIDER=$prov
	unset FI_UNIVERSE_SIZE FI_OFI_RXM_DATA_AUTO_PROGRESS
	[ "$prov" = verbs ] && export FI_UNIVERSE_SIZE=32
	[ "${arm#*-}" = on ] && export FI_OFI_RXM_DATA_AUTO_PROGRESS=1
	for v in FI_PROVIDER FI_PROVIDER_PATH FI_UNIVERSE_SIZE FI_OFI_RXM_DATA_AUTO_PROGRESS \
		MPI_PINGPONG_PID_DIR; do
		[ -n "${!v:-}" ] && pass+=(-x "$v")
	done
	timeout -k 5 300 mpirun --allow-run-as-root --oversubscribe -np 2 --mca pml cm --mca mtl ofi \
		--mca mtl_ofi_provider_include "$prov" --mca btl ^openib,ofi "${pass[@]}" "$@"
)

stats() { # VALUES...: median min-max
	printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END {
		if (NR == 0) { print "- (no run)"; exit }
		m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		printf "%.2f (%.2f-%.2f, n=%d)", m, v[1], v[NR], NR }'
}

echo "== NetPIPE 1 B, $reps rounds"
declare -A lat
for r in $(seq "$reps"); do
	for k in 0 1 2 3; do
		arm=${arms[$(((r + k) % 4))]}
		if mpi "$arm" NPopenmpi -l 1 -u 1 -n 5000 -p 0 -o "np.$arm.$r" >"np.$arm.$r.log" 2>&1; then
			u=$(awk '$1 == 1 { printf "%.2f", $3 * 1e6; exit }' "np.$arm.$r")
			[ -n "$u" ] && lat[$arm]="${lat[$arm]:-} $u"
			echo "round $r $arm: ${u:-?} us"
		else
			echo "round $r $arm: FAILED"
			tail -n 5 "np.$arm.$r.log"
		fi
	done
done

echo "== thread CPU while both ranks sleep ${sleep_s} s outside MPI, $cpu_reps rounds"
snap() { # PID...: "pid tid ns" per thread; one awk a process (a fork costs ~0.1 s in the guest)
	local p
	for p in "$@"; do
		awk -v p="$p" '{ n = split(FILENAME, a, "/"); print p, a[n - 1], $1 }' \
			/proc/"$p"/task/*/schedstat 2>/dev/null
	done
}
declare -A maxthr proc
for r in $(seq "$cpu_reps"); do
	for k in 0 1 2 3; do
		arm=${arms[$(((r + k) % 4))]}
		log=cpu.$arm.$r.log
		# the ranks write their pids there when they start sleeping (mpirun forwards
		# their output too late to time the sleep by it)
		piddir=$out/pids.$arm.$r
		rm -rf "$piddir" && mkdir -p "$piddir"
		MPI_PINGPONG_PID_DIR=$piddir mpi "$arm" "$prog" 4096 10 "$sleep_s" >"$log" 2>&1 &
		mp=$!
		for _ in $(seq 600); do
			[ -s "$piddir/rank0.pid" ] && [ -s "$piddir/rank1.pid" ] && break
			kill -0 "$mp" 2>/dev/null || break
			sleep 0.1
		done
		pids=$(cat "$piddir"/rank*.pid 2>/dev/null | tr '\n' ' ')
		if [ -z "$pids" ]; then
			echo "round $r $arm: no sleeping ranks"
			tail -n 5 "$log"
			wait "$mp"
			continue
		fi
		sleep 1
		t0=$(date +%s.%N)
		# shellcheck disable=SC2086
		snap $pids >"snap0.$arm.$r"
		sleep $((sleep_s - 3))
		# shellcheck disable=SC2086
		snap $pids >"snap1.$arm.$r"
		t1=$(date +%s.%N)
		wait "$mp" || echo "round $r $arm: mpirun exited $?"
		# per thread: percent of a core over the window; per arm: the busiest thread, the busiest rank
		awk -v dt="$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" '
			NR == FNR { a[$1 " " $2] = $3; next }
			($1 " " $2) in a { p = ($3 - a[$1 " " $2]) / (dt * 1e7); printf "%s %s - %.3f\n", $1, $2, p }' \
			"snap0.$arm.$r" "snap1.$arm.$r" >"thr.$arm.$r"
		mt=$(sort -k4 -g "thr.$arm.$r" | tail -n 1)
		pr=$(awk '{ s[$1] += $4 } END { m = 0; for (p in s) if (s[p] > m) m = s[p]; printf "%.3f", m }' "thr.$arm.$r")
		maxthr[$arm]="${maxthr[$arm]:-} ${mt##* }"
		proc[$arm]="${proc[$arm]:-} $pr"
		echo "round $r $arm: busiest thread $mt %; busiest rank $pr %; threads per rank: $(cut -d' ' -f1 "thr.$arm.$r" | uniq -c | awk '{ printf "%s ", $1 }')"
	done
done

{
	echo "Open MPI ofi MTL, 2 ranks in one guest; FI_OFI_RXM_DATA_AUTO_PROGRESS=1 = on"
	printf '%-10s %-34s %-34s %s\n' arm "NetPIPE 1 B us (median, min-max)" "busiest thread % (sleep)" "busiest rank %"
	for arm in "${arms[@]}"; do
		# shellcheck disable=SC2086
		printf '%-10s %-34s %-34s %s\n' "$arm" "$(stats ${lat[$arm]:-})" "$(stats ${maxthr[$arm]:-})" "$(stats ${proc[$arm]:-})"
	done
} | tee results.txt
