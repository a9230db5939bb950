#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
# test/bench/bench-all.sh - the benchmarks of the blocking path, side by side, in ONE VM boot (make bench):
#
#   cost     instructions per fi_cq_read (callgrind, vwait_bench_cq_read counted alone): on an
#            empty CQ, and per completion read in a 64 B ping-pong whose client reads its CQ
#            once the answer's bytes arrived (-D; the few empty reads of that run taken out at
#            the empty-CQ rate), and per fi_send and fi_recv of that client (vwait_bench_send,
#            vwait_bench_recv); vwait beside upstream verbs; then the same through ofi_rxm
#            (fi_vwait_bench -e rdm, vwait;ofi_rxm beside verbs;ofi_rxm: no -D there, the
#            empty reads are taken out at the rate of an idle endpoint's)
#   spin     ping-pong 64 B and 4 KiB, both sides spinning: vwait, upstream verbs, raw
#            ibv_rc_pingpong; and 64 B on RDM endpoints, vwait;ofi_rxm beside verbs;ofi_rxm
#   turns    the same spinning ping-pongs, vwait and upstream verbs taking turns burst by burst
#            (interleaved-pingpong.sh: 60 bursts of 500 rounds per arm, in one run; a second
#            verbs pair as an arm shows the method's own spread; MSG has a raw verbs arm too,
#            raw_pingpong), BENCH_TURN_REPEATS runs (default 8) with fresh processes and the
#            turn order rotated: per run the median of the per-burst ratios
#   waitturns think time 0 taken apart: a spinning client, 64 B, and servers that spin or wait,
#            taking turns burst by burst like the turns section (BENCH_TURN_REPEATS runs,
#            the order rotated): the server spins on fi_cq_read, waits in fi_cq_sread,
#            fi_wait on a wait set (each under the adaptive and the block policy) or
#            fi_cntr_wait, or spins on fi_cntr_read; beside upstream verbs' fi_cq_sread. Per
#            run the median of the per-burst ratios to the spinning server (counters: their
#            quotient against the spinning counter reader)
#   sread    ping-pong 64 B, both sides in fi_cq_sread on FI_WAIT_UNSPEC CQs: vwait (default
#            policy), upstream verbs; against vwait's spinning latency of the same boot
#   think    a spinning client that sends after a think time of 0, 50 us, 500 us, 5 ms to a
#            server that waits in fi_cq_sread (cq), fi_cntr_wait (cntr) or fi_wait on a wait
#            set (waitset) under each wait policy (FI_VWAIT_WAIT_POLICY adaptive, block), or
#            spins on fi_cq_read, beside upstream verbs waiting the same way: one-way latency
#            and the server's CPU time per message (process CPU time, user + system)
#   idle     test/integration/sread_idle: a waiter idle for 2 s, CPU time, per policy
#   policy   the adaptive policy against its goals: the think-time sweep of the think section
#            at BENCH_POLICY_THINKS (0,20,50,100,200,500,5000 us; BENCH_POLICY_ITERS rounds at
#            think 0, default 5000, BENCH_POLICY_BUDGET_US of think per phase, default 1 s):
#            adaptive, block, spinning server, upstream verbs; latency, server CPU per message
#            and the wake-up cost W the adaptive server had measured by each phase's end; then
#            each goal checked per think time (below W: latency <= 1.1x spin; every think:
#            latency <= spin + 1.1 W and CPU <= 2x block)
#   thinkturns the policy table's think times below W (BENCH_THINKTURN_THINKS, default 0 20
#            50 100 us), servers taking turns burst by burst (BENCH_THINKTURN_REPEATS runs, default
#            4): spinning, adaptive fi_cq_sread, fi_cq_sread spinning with no learner (fixed),
#            and fi_cq_read on a FI_WAIT_UNSPEC CQ (spinu); per run the median of the per-burst
#            ratios to the spinning server (not in the default sections: SECTIONS=goals)
#   longturns think times at or above W (BENCH_LONGTURN_THINKS, default 200 500 5000 us), taking
#            turns the same way (BENCH_LONGTURN_REPEATS runs, default 4; max(8, 40000/think)
#            rounds a burst): spinning, adaptive fi_cq_sread, the block policy, upstream verbs'
#            fi_cq_sread; then the goal per think: adaptive - spin <= 1.1 x (block - spin), what
#            a sleep costs in the same bursts (SECTIONS=goals)
#   pairturns one pair, both sides waiting, taking turns at think 0 and 50 us
#            (BENCH_PAIRTURN_THINKS, BENCH_PAIRTURN_REPEATS runs, default 4): both spinning,
#            both adaptive fi_cq_sread, both fixed, both fi_cq_read on FI_WAIT_UNSPEC CQs; goal
#            adaptive <= 1.2x spinning (SECTIONS=goals). BENCH_BURSTS sets the bursts per run
#            of thinkturns, longturns and pairturns (a quick check)
#   oversub  K = 1 and 3 ping-pong pairs at once, both sides in fi_cq_sread (FI_WAIT_UNSPEC),
#            think 0 and 50 us (BENCH_OVERSUB_ITERS rounds at think 0, default 3000; with
#            BENCH_OVERSUB_BASE=BUILDDIR also "base", adaptive from another build): vwait
#            adaptive, vwait block, upstream verbs, and (K = 1) both sides spinning; latency
#            the mean of the pairs' (the group goals, make bench-policy, is policy,
#            thinkturns, longturns, pairturns and oversub)
#   netpipe  NetPIPE small-message latency over vwait;ofi_rxm and verbs;ofi_rxm, both with
#            FI_UNIVERSE_SIZE=32
#
# Every figure is measured BENCH_REPEATS times (default 9; BENCH_PP_REPEATS, default 15, in the
# spin, sread and netpipe sections), providers and modes alternating, their
# order reversed every other repeat (in_turn: none always runs first or last);
# the tables give the median and [min-max] and the ratios of medians. Only ratios mean
# something (the VM's CPU is emulated). Writes BENCH_OUT (default BUILDDIR/bench-results):
# results.md (the tables), think.dat and think.png (gnuplot: latency and CPU per message
# against think time), log.txt (every run's output), records.txt (every measurement),
# callgrind.* (callgrind_annotate shows where the instructions of a read go).
# VM_PIN_VCPUS=1 (run-in-vm.sh) pins the vCPU threads, one to each host CPU. On a 2-core host it
# cuts a server's CPU per message at 5 ms think to about a third (block policy), but makes the
# spinning ping-pongs slower and their runs far noisier, so the default stays unpinned.
#
#   make bench SECTIONS="cost spin"    (test/bench/bench.sh, the front door: boots the VM, runs
#                                      this script in it with those sections, and writes the
#                                      report; `make bench` alone prints the menu, with each
#                                      section's minutes; SECTIONS=default is the whole of this
#                                      script's default, about an hour on a quiet 2-core host)
#   test/bench/bench-all.sh [BUILDDIR] (from the host: the same, BENCH_SECTIONS or default)
set -u -o pipefail
export LC_ALL=C
here=$(cd "$(dirname "$0")" && pwd -P)

# on the host: the front door, which boots the VM and runs this script in it
[ -n "${RXE_ADDR:-}" ] || SECTIONS=${BENCH_SECTIONS:-default} exec "$here/bench.sh" "${1:-${VWAIT_BUILDDIR:-$PWD}}"

builddir=${1:-${VWAIT_BUILDDIR:-$PWD}}
export FI_PROVIDER_PATH=$builddir/.libs
bench=$builddir/util/fi_vwait_bench
dev=${RXE_DEV:-rxe0}
repeats=${BENCH_REPEATS:-9}
# the ping-pong tables (spin, sread, NetPIPE): runs are short, and their goals are the narrowest
# (<= 1.00 against verbs, which costs the same): 15 runs there (with 9, one of these cells can
# miss its goal by the spread alone)
pp_repeats=${BENCH_PP_REPEATS:-15}
sections=${BENCH_SECTIONS:-cost spin turns waitturns sread think cntr waitset idle policy oversub netpipe}
turn_repeats=${BENCH_TURN_REPEATS:-8} # MSG has 4 arms: each takes each place in the order twice
out=${BENCH_OUT:-$builddir/bench-results}
thinks=${BENCH_THINKS:-0,50,500,5000}
# Rounds per run: a run is one mean, and the emulated CPU stalls for whole milliseconds now and
# then, so a short run is one stall away from an outlier: 10000 rounds (350 ms at think 0) spread
# the runs of one cell about half as much as 2000 (70 ms) do.
spin_iters=10000 # a spinning ping-pong run, both sizes (4 KiB: ~2.4 s)
sread_iters=10000
think_iters=${BENCH_THINK_ITERS:-10000} # at think 0; fewer at longer thinks (the budget)
budget=${BENCH_THINK_BUDGET_US:-2000000} # think time per phase, at most (fi_vwait_bench -B):
# 2 s is 400 messages at 5 ms; with 100 (0.5 s) the CPU per message of one run spread 3x
mkdir -p "$out"
tmp=$(mktemp -d)
rec=$out/records.txt # TABLE|ROW|COLUMN|VALUE, one measurement a line
log=$out/log.txt
: >"$rec"
: >"$log"
port=7800
t_start=$(date +%s)

gidx=
for g in /sys/class/infiniband/"$dev"/ports/1/gids/*; do
	case $(cat "$g" 2>/dev/null) in 0000:0000:0000:0000:0000:ffff:*) gidx=${g##*/}; break ;; esac
done

note() { echo "$*" | tee -a "$log"; }
record() { echo "$1|$2|$3|$4" >>"$rec"; }

# pair NAME 'SERVER' 'CLIENT': both under timeout; outputs in $tmp/NAME.srv, $tmp/NAME.cli
pair() {
	local name=$1 spid rc i
	timeout 120 bash -c "$2" >"$tmp/$name.srv" 2>&1 &
	spid=$!
	sleep 0.7
	for i in 1 2 3 4 5 6; do # a server slow to listen refuses the first tries
		timeout 120 bash -c "$3" >"$tmp/$name.cli" 2>&1
		rc=$?
		[ $rc != 0 ] && grep -q 'Connection refused' "$tmp/$name.cli" && kill -0 $spid 2>/dev/null || break
		sleep 0.5
	done
	for i in $(seq 100); do kill -0 $spid 2>/dev/null || break; sleep 0.1; done
	kill $spid 2>/dev/null
	wait $spid 2>/dev/null
	{ echo "== $name (client exit $rc)"; cat "$tmp/$name.cli" "$tmp/$name.srv"; } >>"$log"
	return $rc
}

# fi PROV SERVER_MODE CLIENT_MODE SIZE ITERS [SERVER_ENV] [EXTRA]: a fi_vwait_bench pair
fi_pair() {
	local prov=$1 sm=$2 cm=$3 size=$4 iters=$5 senv=${6:-} extra=${7:-} rc=0
	port=$((port + 1))
	pair "$prov-$sm-$cm-$port" \
		"env FI_PROVIDER=$prov $senv $bench -p $prov -m $sm -S $size -I $iters -P $port $extra" \
		"env FI_PROVIDER=$prov $bench -p $prov -m $cm -S $size -I $iters -P $port $extra $RXE_ADDR" ||
		rc=$?
	last="$tmp/$prov-$sm-$cm-$port"
	return $rc
}

lat_of() { sed -nE 's/^RESULT .*lat_us=([0-9.]+).*/\1/p' "$1.cli"; }
threads_of() { sed -nE 's/^RESULT .*threads=([0-9]+).*/\1/p' "$1.cli"; }

raw_lat() { # SIZE ITERS -> one-way usec, on port $port (a subshell: the caller advances it)
	pair "raw-$port" "ibv_rc_pingpong -d $dev -g $gidx -p $port -s $1 -n $2" \
		"ibv_rc_pingpong -d $dev -g $gidx -p $port -s $1 -n $2 $RXE_ADDR" &&
		sed -nE 's/.* ([0-9.]+) usec\/iter.*/\1/p' "$tmp/raw-$port.cli" |
		awk '{printf "%.2f\n", $1 / 2}'
}

# ---------------------------------------------------------------- cost (callgrind)
cg() { # OUTFILE CMD...: Ir counted inside vwait_bench_cq_read
	local f=$1
	shift
	valgrind -q --tool=callgrind --toggle-collect=vwait_bench_cq_read \
		--callgrind-out-file="$f" "$@"
}
ir_of() { sed -nE 's/^(summary|totals): *([0-9]+).*/\2/p' "$1" | head -n 1; }
# incl_of FILE FUNCTION: the Ir counted inside FUNCTION, callees included
incl_of() {
	callgrind_annotate --inclusive=yes "$1" 2>/dev/null |
		sed -nE "s/^ *([0-9,]+) .*:$2 \[.*/\1/p" | head -n 1 | tr -d ,
}
per() { awk -v i="$1" -v n="$2" 'BEGIN { if (i > 0 && n > 0) printf "%.1f", i / n }'; }

# cost_of COLUMN PROVIDER ROW_SUFFIX [-e rdm]: one provider's rows of the cost table
cost_of() {
	local col=$1 prov=$2 sfx=$3 ep=${4:-} n=20000 iters=300 ir e empty full rd sd rv dfirst=-D
	local f=$out/callgrind.$col${ep:+.rdm} name=cost-$col${ep:+-rdm}
	[ -n "$ep" ] && dfirst= # ofi_rxm copies the answer into the buffer inside fi_cq_read
	FI_PROVIDER=$col cg "$f.empty" "$bench" $ep -p "$prov" -m empty-read -I $n >"$tmp/$name" 2>&1
	cat "$tmp/$name" >>"$log"
	ir=$(ir_of "$f.empty")
	e=$(per "${ir:-0}" $n)
	[ -n "$e" ] && record cost "Ir per fi_cq_read, empty CQ$sfx" "$col" "$e"
	# the client of a spinning ping-pong, counted inside its CQ reads, sends and receives
	port=$((port + 1))
	pair "$name-$port" "env FI_PROVIDER=$col $bench $ep -p '$prov' -m spin -I $iters -P $port" \
		"env FI_PROVIDER=$col valgrind -q --tool=callgrind --toggle-collect=vwait_bench_cq_read \
			--toggle-collect=vwait_bench_send --toggle-collect=vwait_bench_recv \
			--callgrind-out-file=$f.pingpong $bench $ep -p '$prov' -m spin $dfirst -I $iters -P $port $RXE_ADDR" ||
		return
	empty=$(sed -nE 's/^RESULT .*reads_empty=([0-9]+).*/\1/p' "$tmp/$name-$port.cli")
	full=$(sed -nE 's/^RESULT .*reads_full=([0-9]+).*/\1/p' "$tmp/$name-$port.cli")
	rd=$(incl_of "$f.pingpong" vwait_bench_cq_read)
	sd=$(incl_of "$f.pingpong" vwait_bench_send)
	rv=$(incl_of "$f.pingpong" vwait_bench_recv)
	[ -n "$rd" ] && [ -n "$e" ] && [ "${full:-0}" -gt 0 ] &&
		record cost "Ir per fi_cq_read that returns a completion (ping-pong)$sfx" "$col" \
			"$(awk -v i="$rd" -v e="$e" -v E="$empty" -v F="$full" \
				'BEGIN { printf "%.1f", (i - e * E) / F }')"
	# one send per round and warmup round; one receive more, posted before the first
	[ -n "$sd" ] && record cost "Ir per fi_send (ping-pong, 64 B)$sfx" "$col" "$(per "$sd" $((iters + 20)))"
	[ -n "$rv" ] && record cost "Ir per fi_recv (ping-pong)$sfx" "$col" "$(per "$rv" $((iters + 21)))"
}

section_cost() {
	local p line
	# what a second thread costs each system call (vwait's EQ has one, verbs has none)
	if [ -x "$builddir/test/bench/thread_tax" ]; then
		"$builddir/test/bench/thread_tax" -r "$repeats" >"$tmp/tax" 2>&1
		cat "$tmp/tax" >>"$log"
		while read -r line; do
			for p in single exited live; do
				record tax "ns per write(2) to /dev/null" "$p" \
					"$(echo "$line" | sed -nE "s/.* ${p}_ns=([0-9.]+).*/\1/p")"
			done
		done < <(grep '^THREAD_TAX' "$tmp/tax")
	fi
	for p in vwait verbs; do
		cost_of $p $p ""
	done
	# the same calls through ofi_rxm (RDM endpoints, as MPI uses them; the address exchange and
	# ofi_rxm's connection before the ping-pong are not counted). FI_UNIVERSE_SIZE: netpipe.
	for p in vwait verbs; do
		FI_UNIVERSE_SIZE=32 cost_of $p "$p;ofi_rxm" " over ofi_rxm" "-e rdm"
	done
}

# in_turn R ITEM...: the items in order on odd repeats, reversed on even ones, so that no
# contender always runs first (after a boot, after the previous section) or last
in_turn() {
	local r=$1 i
	shift
	if [ $((r % 2)) = 1 ]; then
		printf '%s\n' "$@"
	else
		for ((i = $#; i >= 1; i--)); do printf '%s\n' "${!i}"; done
	fi
}

# ---------------------------------------------------------------- spinning ping-pong
# rxm_pair PROV SIZE ITERS: a spinning fi_vwait_bench pair on RDM endpoints over PROV;ofi_rxm
rxm_pair() {
	local run="env FI_PROVIDER=$1 FI_UNIVERSE_SIZE=32 $bench -e rdm -p '$1;ofi_rxm' -m spin -S $2 -I $3"
	port=$((port + 1))
	last="$tmp/$1-rxm-$port"
	pair "$1-rxm-$port" "$run -P $port" "$run -P $port $RXE_ADDR"
}

section_spin() {
	local r s it v who
	for r in $(seq "$pp_repeats"); do
		for s in 64 4096; do
			it=$spin_iters
			for who in $(in_turn "$r" vwait verbs raw); do
				case $who in
				raw)
					port=$((port + 1))
					v=$(raw_lat $s $it) && [ -n "$v" ] && record spin "$s B" raw "$v"
					;;
				*) fi_pair $who spin spin $s $it && v=$(lat_of "$last") &&
					record spin "$s B" $who "$v" &&
					record threads "$s B" $who "$(threads_of "$last")" ;;
				esac
			done
		done
		# the provider under ofi_rxm, as MPI uses it (NetPIPE's path without Open MPI)
		for who in $(in_turn "$r" vwait verbs); do
			rxm_pair $who 64 $spin_iters && v=$(lat_of "$last") &&
				record spin "64 B over ofi_rxm" $who "$v"
		done
	done
}

# ---------------------------------------------------------------- spinning, taking turns
# turns_run TABLE ROW REF NUM/DEN SECONDS [VAR=VALUE...] -- ARM...: one run of
# interleaved-pingpong.sh on port $port, the arms in that turn order; records each arm's latency
# and its ratio to REF, and NUM/DEN, the quotient of those two arms' ratios (the same bursts)
turns_run() {
	local table=$1 row=$2 ref=$3 q=$4 limit=$5 envs=()
	shift 5
	while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
	shift
	env "${envs[@]}" BENCH_PORT=$port BENCH_REF="$ref" BENCH_ARMS="$*" \
		timeout "$limit" "$here/interleaved-pingpong.sh" >"$tmp/$table" 2>&1
	{ echo "== $table $row, arms $*"; cat "$tmp/$table"; } >>"$log"
	sed -nE 's/^TURNS arm=([a-z0-9]+) lat_us=([0-9.]+) ratio=([0-9.]+).*/\1 \2 \3/p' "$tmp/$table" |
		while read -r arm lat ratio; do
			record "$table" "$row" "$arm" "$lat"
			[ "$arm" = "$ref" ] || record "$table" "$row" "$arm/$ref" "$ratio"
		done
	awk -v n="${q%/*}" -v d="${q#*/}" '$1 == "TURNS" { split($2, a, "="); split($4, x, "="); r[a[2]] = x[2] }
		END { if (r[d] > 0 && r[n] > 0) printf "%.4f\n", r[n] / r[d] }' "$tmp/$table" |
		while read -r v; do record "$table" "$row" "$q" "$v"; done
}

# turns_rotated REPEATS TABLE ROW REF NUM/DEN SECONDS [VAR=VALUE...] -- ARM...: REPEATS runs of
# turns_run, each on fresh ports, the turn order rotated by one arm per run (an arm in the middle
# never runs two bursts in a row: each takes the ends in turn). With BENCH_OVERSUB_BASE=BUILDDIR
# an arm named base runs with that build's provider.
turns_rotated() {
	local n=$1 r k head=()
	shift
	while [ $# -gt 0 ] && [ "$1" != -- ]; do head+=("$1"); shift; done
	shift
	local all=("$@")
	for r in $(seq "$n"); do
		port=$((port + 10))
		k=$(((r - 1) % ${#all[@]}))
		turns_run "${head[@]}" ${BENCH_OVERSUB_BASE:+BENCH_ENV_base=FI_PROVIDER_PATH=$BENCH_OVERSUB_BASE/.libs} \
			-- "${all[@]:k}" "${all[@]:0:k}"
	done
}

# Separate runs of one cell spread 10-40 % (the emulated CPU's speed drifts); two providers that
# cost the same then differ by a few per cent either way between boots. Here the pairs run
# side by side and take turns every burst (20-130 ms here), so the drift falls on all alike.
section_turns() {
	local r cfg size ep row
	for r in $(seq "$turn_repeats"); do
		for cfg in 64:msg 4096:msg 64:rdm; do
			size=${cfg%%:*} ep=${cfg#*:}
			row="$size B"
			[ "$ep" = rdm ] && row="$size B over ofi_rxm"
			port=$((port + 10))
			# the turn order rotates from run to run (an arm in the middle never runs twice
			# in a row; see interleaved-pingpong.sh)
			local arms=("verbs=verbs@$ep" "vwait=vwait@$ep" "verbs2=verbs@$ep")
			[ "$ep" = msg ] && arms+=("raw=raw")
			local k=$(((r - 1) % ${#arms[@]}))
			arms=("${arms[@]:k}" "${arms[@]:0:k}")
			turns_run turns "$row" verbs vwait/raw 600 BENCH_SIZE=$size -- "${arms[@]}"
		done
	done
}

# ---------------------------------------------------------------- think time 0, taking turns
# The think tables' cells at think 0 compare separate runs, which spread 10-40 % in this VM; the
# goal there (within 1.2x of spinning) is narrower than that. Here the servers take turns.
section_waitturns() {
	turns_rotated "$turn_repeats" waitturns "64 B, think 0" spin cntr/cntrspin 900 BENCH_SIZE=64 \
		BENCH_ENV_sreadblock=FI_VWAIT_WAIT_POLICY=block BENCH_ENV_wsblock=FI_VWAIT_WAIT_POLICY=block \
		-- "spin=vwait" "sread=vwait/sread-unspec" "sreadblock=vwait/sread-unspec" \
		"waitset=vwait/waitset" "wsblock=vwait/waitset" "cntr=vwait/cntr-wait-unspec" \
		"cntrspin=vwait/cntr-spin" "verbs=verbs/sread-unspec"
}

# ---------------------------------------------------------------- think below W, taking turns
# The policy table's think times below W compare separate runs that spread far more than the
# goal there (adaptive within 1.1x of spinning). Here the servers take turns at each think
# time, and two more arms take the spinning fi_cq_sread apart: fixed (spinning up to 1 ms, no
# learner) and spinu (fi_cq_read on a FI_WAIT_UNSPEC CQ); with BENCH_OVERSUB_BASE=BUILDDIR,
# base: adaptive with that build's provider.
thinkturn_thinks=${BENCH_THINKTURN_THINKS:-0 20 50 100}
thinkturn_repeats=${BENCH_THINKTURN_REPEATS:-4}
fixed_env="FI_VWAIT_WAIT_POLICY=fixed FI_VWAIT_SPIN_US=1000" # fi_cq_sread spinning 1 ms, no learner
section_thinkturns() {
	local t
	for t in $thinkturn_thinks; do
		turns_rotated "$thinkturn_repeats" thinkturns "64 B, think $t" spin sread/fixed 900 BENCH_SIZE=64 \
			BENCH_THINK="$t" BENCH_BURSTS="${BENCH_BURSTS:-30}" BENCH_ITERS=300 BENCH_ENV_fixed="$fixed_env" \
			-- "spin=vwait" "sread=vwait/sread-unspec" "fixed=vwait/sread-unspec" \
			"spinu=vwait/spin-unspec" ${BENCH_OVERSUB_BASE:+"base=vwait/sread-unspec"}
	done
}

# ---------------------------------------------------------------- think at or above W, taking turns
# The policy table's think times above W compare separate runs too. Here the servers take turns
# at each think time: spinning (spin), adaptive fi_cq_sread (sread), the block policy (block:
# what a sleep costs at that think, in the same bursts) and upstream verbs' fi_cq_sread (verbs);
# base with BENCH_OVERSUB_BASE. A burst thinks about 40 ms in all: max(8, 40000 / think) rounds
# (and as many warmup rounds, 20 at most), 30 bursts (40 from think 2000 on, the noisiest).
longturn_thinks=${BENCH_LONGTURN_THINKS:-200 500 5000}
longturn_repeats=${BENCH_LONGTURN_REPEATS:-4}
section_longturns() {
	local t iters bursts
	for t in $longturn_thinks; do
		iters=$((40000 / t))
		[ "$iters" -lt 8 ] && iters=8
		bursts=30
		[ "$t" -ge 2000 ] && bursts=40
		turns_rotated "$longturn_repeats" longturns "64 B, think $t" spin sread/block 900 BENCH_SIZE=64 \
			BENCH_THINK="$t" BENCH_BURSTS="${BENCH_BURSTS:-$bursts}" BENCH_ITERS=$iters \
			BENCH_WARMUP=$((iters < 20 ? iters : 20)) BENCH_ENV_block=FI_VWAIT_WAIT_POLICY=block \
			-- "spin=vwait" "sread=vwait/sread-unspec" "block=vwait/sread-unspec" \
			"verbs=verbs/sread-unspec" ${BENCH_OVERSUB_BASE:+"base=vwait/sread-unspec"}
	done
}

# ---------------------------------------------------------------- one pair, both sides waiting, taking turns
# The oversub table's K = 1 cells compare separate runs. Here one pair at a time, both sides in
# the same mode, takes turns: both spinning (spin), both in adaptive fi_cq_sread (sread), both in
# fi_cq_sread spinning up to 1 ms with no learner (fixed), both in fi_cq_read on FI_WAIT_UNSPEC CQs
# (spinu); base with BENCH_OVERSUB_BASE. 30 bursts of 500 rounds at think 0, 300 else.
pairturn_thinks=${BENCH_PAIRTURN_THINKS:-0 50}
pairturn_repeats=${BENCH_PAIRTURN_REPEATS:-4}
section_pairturns() {
	local t
	for t in $pairturn_thinks; do
		turns_rotated "$pairturn_repeats" pairturns "64 B, think $t" spin sread/fixed 900 BENCH_SIZE=64 \
			BENCH_THINK="$t" BENCH_BURSTS="${BENCH_BURSTS:-30}" BENCH_ITERS=$((t == 0 ? 500 : 300)) \
			BENCH_ENV_fixed="$fixed_env" \
			-- "spin=vwait" "sread=vwait/sread-unspec/sread-unspec" "fixed=vwait/sread-unspec/sread-unspec" \
			"spinu=vwait/spin-unspec/spin-unspec" ${BENCH_OVERSUB_BASE:+"base=vwait/sread-unspec/sread-unspec"}
	done
}

# ---------------------------------------------------------------- both sides in fi_cq_sread
section_sread() {
	local r v
	local who
	for r in $(seq "$pp_repeats"); do
		for who in $(in_turn "$r" sread spin verbs); do
			case $who in
			sread) fi_pair vwait sread-unspec sread-unspec 64 $sread_iters && v=$(lat_of "$last") &&
				record sread "64 B" "vwait sread" "$v" ;;
			spin) fi_pair vwait spin spin 64 $sread_iters && v=$(lat_of "$last") &&
				record sread "64 B" "vwait spin" "$v" ;;
			verbs) fi_pair verbs sread-unspec sread-unspec 64 $sread_iters && v=$(lat_of "$last") &&
				record sread "64 B" "verbs sread" "$v" ;;
			esac
		done
	done
}

# ---------------------------------------------------------------- think time
# think_one TABLE SERIES PROV SERVER_MODE [SERVER_ENV]: one run, every think time
think_one() {
	local table=$1 series=$2 prov=$3 sm=$4 senv=${5:-}
	[ -e "$tmp/unsupported.$table.$series" ] && return
	fi_pair "$prov" "$sm" spin 64 "$think_iters" "$senv" "-T $thinks -B $budget" || {
		# a provider without the feature says so once: a note under the table, no retries
		if grep -qh '^UNSUPPORTED' "$last.srv" "$last.cli" 2>/dev/null; then
			grep -hE '(open|_open)\(.*\): ' "$last.srv" | head -n 1 >"$tmp/unsupported.$table.$series"
			[ -s "$tmp/unsupported.$table.$series" ] || echo "unsupported" >"$tmp/unsupported.$table.$series"
		fi
		return
	}
	awk -v t="$table" -v s="$series" '/^PHASE side=client/ {
		for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		printf "%s|lat %s|%s|%s\n", t, v["think_us"], s, v["lat_us"] }' "$last.cli" >>"$rec"
	awk -v t="$table" -v s="$series" '/^PHASE side=server/ {
		for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		printf "%s|cpu %s|%s|%s\n", t, v["think_us"], s, v["cpu_us_per_msg"] }' "$last.srv" >>"$rec"
}

section_think() { # TABLE VWAIT_MODE SPIN_MODE VERBS_MODE
	local table=$1 vm=$2 sm=$3 bm=$4 r
	local who
	for r in $(seq "$repeats"); do
		for who in $(in_turn "$r" adaptive block spin verbs); do
			case $who in
			adaptive | block) think_one "$table" $who vwait "$vm" FI_VWAIT_WAIT_POLICY=$who ;;
			spin) think_one "$table" spin vwait "$sm" ;;
			verbs) think_one "$table" verbs verbs "$bm" ;;
			esac
		done
	done
}

# ---------------------------------------------------------------- idle waiter
section_idle() {
	local pol
	for pol in adaptive block; do
		FI_VWAIT_WAIT_POLICY=$pol "$builddir/test/integration/sread_idle" >"$tmp/idle.$pol" 2>&1
		cat "$tmp/idle.$pol" >>"$log"
		sed -nE 's/^(ok  |over) (FI_WAIT_[A-Z_]+) .*thread CPU ([0-9.]+) ms/\2 \3/p' \
			"$tmp/idle.$pol" | while read -r obj ms; do
			record idle "$obj" "$pol" "$ms"
		done
	done
}

# ---------------------------------------------------------------- the adaptive policy
policy_thinks=${BENCH_POLICY_THINKS:-0,20,50,100,200,500,5000}
policy_iters=${BENCH_POLICY_ITERS:-5000}
policy_budget=${BENCH_POLICY_BUDGET_US:-1000000}
# BENCH_POLICY_ARMS adds arms that take the spinning path apart: spinu, fi_cq_read
# on a FI_WAIT_UNSPEC CQ (what a waitable CQ costs a spinning reader); fixed, fi_cq_sread
# spinning up to 1 ms with no learner; base, adaptive with BENCH_OVERSUB_BASE's provider
policy_arms=${BENCH_POLICY_ARMS:-adaptive block spin verbs}
section_policy() {
	local r who srv senv
	for r in $(seq "$repeats"); do
		for who in $(in_turn "$r" $policy_arms); do
			srv="vwait sread-unspec" senv="FI_VWAIT_WAIT_POLICY=$who"
			case $who in
			spin) srv="vwait spin" senv= ;;
			spinu) srv="vwait spin-unspec" senv= ;;
			fixed) senv=$fixed_env ;;
			base) senv="FI_VWAIT_WAIT_POLICY=adaptive FI_PROVIDER_PATH=${BENCH_OVERSUB_BASE:?base needs BENCH_OVERSUB_BASE}/.libs" ;;
			verbs) srv="verbs sread-unspec" senv= ;;
			esac
			fi_pair ${srv% *} ${srv#* } spin 64 "$policy_iters" "$senv" \
				"-T $policy_thinks -B $policy_budget" || continue
			awk -v s="$who" '/^PHASE side=client/ {
				for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
				printf "policy|lat %s|%s|%s\n", v["think_us"], s, v["lat_us"] }' "$last.cli" >>"$rec"
			awk -v s="$who" '/^PHASE side=server/ {
				for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
				printf "policy|cpu %s|%s|%s\n", v["think_us"], s, v["cpu_us_per_msg"]
				if (s == "adaptive" && v["wake_us"] > 0)
					printf "policy|W %s|adaptive|%s\n", v["think_us"], v["wake_us"] }' \
				"$last.srv" >>"$rec"
		done
	done
}

# kpairs K NAME PROV MODE ENV ITERS THINKS: K fi_vwait_bench pairs at once, both sides in MODE
# under ENV; records oversub|K=K lat THINK|NAME|mean of the pairs' latencies
kpairs() {
	local k=$1 name=$2 prov=$3 mode=$4 senv=$5 iters=$6 thinks=$7 j p0 pids=() ok=1
	p0=$((port + 1))
	port=$((port + k))
	for ((j = 0; j < k; j++)); do
		timeout 300 env FI_PROVIDER=$prov $senv $bench -p $prov -m $mode -S 64 -I $iters \
			-P $((p0 + j)) -T $thinks -B 1000000 >"$tmp/kp.$j.srv" 2>&1 &
		pids+=($!)
	done
	sleep $((1 + k))
	for ((j = 0; j < k; j++)); do
		timeout 300 env FI_PROVIDER=$prov $senv $bench -p $prov -m $mode -S 64 -I $iters \
			-P $((p0 + j)) -T $thinks -B 1000000 $RXE_ADDR >"$tmp/kp.$j.cli" 2>&1 &
		pids+=($!)
	done
	for j in "${pids[@]}"; do wait "$j" || ok=0; done
	for ((j = 0; j < k; j++)); do
		{ echo "== oversub K=$k $name pair $j"; cat "$tmp/kp.$j.cli" "$tmp/kp.$j.srv"; } >>"$log"
	done
	[ $ok = 1 ] || { note "oversub K=$k $name: a side failed (log.txt)"; return 1; }
	cat "$tmp"/kp.*.cli | awk -v k="$k" -v s="$name" '/^PHASE side=client/ {
		for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		sum[v["think_us"]] += v["lat_us"]; n[v["think_us"]]++ }
		END { for (t in sum) printf "oversub|K=%d lat %s|%s|%.2f\n", k, t, s, sum[t] / n[t] }' >>"$rec"
	rm -f "$tmp"/kp.*
}

# BENCH_OVERSUB_BASE=BUILDDIR adds an arm "base": adaptive with that build's provider (another
# commit's, built in a second build dir), so that a change is measured against its parent in
# the same boot
oversub_arms="adaptive block verbs spin${BENCH_OVERSUB_BASE:+ base}"
section_oversub() {
	local r who k iters=${BENCH_OVERSUB_ITERS:-3000}
	for r in $(seq "$repeats"); do
		for k in 1 3; do
			for who in $(in_turn "$r" $oversub_arms); do
				case $who in
				adaptive | block) kpairs $k $who vwait sread-unspec FI_VWAIT_WAIT_POLICY=$who "$iters" 0,50 ;;
				base) kpairs $k base vwait sread-unspec \
					"FI_VWAIT_WAIT_POLICY=adaptive FI_PROVIDER_PATH=$BENCH_OVERSUB_BASE/.libs" "$iters" 0,50 ;;
				verbs) kpairs $k verbs verbs sread-unspec "" "$iters" 0,50 ;;
				spin) [ $k = 1 ] && kpairs $k spin vwait spin "" "$iters" 0,50 ;;
				esac
			done
		done
	done
}

# goals of the adaptive policy, per think time of the policy table (medians; W the adaptive
# server's at the phase's end)
policy_goals() {
	stats policy >"$tmp/stp"
	[ -s "$tmp/stp" ] || return 0
	echo
	echo "### The adaptive policy's goals (medians of the table above, separate runs; W: the adaptive server's measured wake-up cost; W*: none measured at that think time, the run's smallest; as run: the think the client made, the spinning server's CPU per message less a round trip, which from 200 us on is a nanosleep that overshoots in the VM, and which the goal of think < W is judged by. Where thinkturns and longturns ran, their ratios, taken in turns, are the figures to judge by)"
	echo
	echo "| think (us) | as run (us) | W (us) | adaptive/spin (goal <= 1.1 when think as run < W) | adaptive - spin (us) (goal <= 1.1 W) | adaptive CPU / block CPU (goal <= 2) | met |"
	echo "|---|---|---|---|---|---|---|"
	# a phase whose waits never slept measured no W (it spun through them all): its goals are
	# checked against the smallest W measured at another think time of the run, marked *
	awk -F'|' '{ v[$1, $2] = $3
			if ($1 ~ /^W / && $2 == "adaptive" && (wmin == "" || $3 + 0 < wmin + 0)) wmin = $3 }
		END { n = split("'"${policy_thinks//,/ }"'", t, " ")
		for (i = 1; i <= n; i++) { g = t[i]
			la = v["lat " g, "adaptive"]; ls = v["lat " g, "spin"]
			ca = v["cpu " g, "adaptive"]; cb = v["cpu " g, "block"]; w = v["W " g, "adaptive"]
			cs = v["cpu " g, "spin"]
			if (la == "" || ls == "" || ca == "" || cb == "") continue
			# the think as run: the spinning server waits it and a round trip
			tr = (cs != "" ? cs - 2 * ls : g)
			ws = w
			if (w == "" && wmin != "") { w = wmin; ws = wmin "*" }
			ok = 1; r1 = la / ls
			if (w != "" && tr + 0 < w + 0 && r1 > 1.1) ok = 0
			if (w != "" && la - ls > 1.1 * w) ok = 0
			if (cb > 0 && ca / cb > 2) ok = 0
			printf "| %s | %.0f | %s | %.2f | %.1f | %.2f | %s |\n", g, tr, (w == "" ? "-" : ws), r1, la - ls,
				(cb > 0 ? ca / cb : 0), (w == "" ? "no W" : (ok ? "yes" : "NO")) } }' "$tmp/stp"
}

# the goal for think >= W, per think time of the longturns table (medians of the per-run ratios):
# what the adaptive server pays over spinning against what a sleep pays (block), the same bursts
longturn_goals() {
	stats longturns >"$tmp/stl"
	[ -s "$tmp/stl" ] || return 0
	echo
	echo "### Think >= W taking turns, the adaptive policy's goal (Wext = (block/spin - 1) x spin: what a sleep costs at that think; goal: adaptive - spin <= 1.1 Wext, judged per run: (sread/spin - 1) / (block/spin - 1) of the same run, median [min-max] of the runs, as the turns ratios are; beside it the same of the medians of the table above, which pairs ratios of different runs)"
	echo
	echo "| think (us) | spin (us) | Wext (us) | adaptive - spin (us) | (adaptive - spin) / Wext, of the medians | per run | met |"
	echo "|---|---|---|---|---|---|---|"
	# the per-run quotients: the k-th sread/spin of a row with its k-th block/spin
	awk -F'|' '$1 == "longturns" && $3 == "sread/spin" { s[$2, ++ns[$2]] = $4 }
		$1 == "longturns" && $3 == "block/spin" { b[$2, ++nb[$2]] = $4 }
		END { for (k in ns) for (i = 1; i <= ns[k] && i <= nb[k]; i++) if (b[k, i] > 1)
			printf "%s|%.4f\n", k, (s[k, i] - 1) / (b[k, i] - 1) }' "$rec" >"$tmp/stq"
	awk -F'|' 'FNR == NR { q[$1, ++nq[$1]] = $2; next } { v[$1, $2] = $3 }
		END { n = split("'"$longturn_thinks"'", t, " ")
		for (i = 1; i <= n; i++) { row = "64 B, think " t[i]
			ls = v[row, "spin"]; rs = v[row, "sread/spin"]; rb = v[row, "block/spin"]
			if (ls == "" || rs == "" || rb == "") continue
			w = (rb - 1) * ls; d = (rs - 1) * ls
			m = nq[row]; cell = "-"; met = "-"
			for (a = 1; a <= m; a++) x[a] = q[row, a]
			for (a = 1; a <= m; a++) for (c = a + 1; c <= m; c++) if (x[c] < x[a]) { y = x[a]; x[a] = x[c]; x[c] = y }
			if (m) { med = (m % 2) ? x[(m + 1) / 2] : (x[m / 2] + x[m / 2 + 1]) / 2
				cell = sprintf("%.2f [%.2f-%.2f]", med, x[1], x[m]); met = med <= 1.1 ? "yes" : "NO" }
			printf "| %s | %.2f | %.2f | %.2f | %s | %s | %s |\n", t[i], ls, w, d,
				(w > 0 ? sprintf("%.2f", d / w) : "-"), cell, met } }' "$tmp/stq" "$tmp/stl"
}

# ---------------------------------------------------------------- NetPIPE over rxm
np_run() ( # PROVIDER OUT [VAR=VALUE...]
	local prov=$1 o=$2 v pass=()
	shift 2
	export FI_PROVIDER="$prov" "$@"
	for v in FI_PROVIDER FI_PROVIDER_PATH FI_UNIVERSE_SIZE; do
		[ -n "${!v:-}" ] && pass+=(-x "$v")
	done
	cd "$tmp" && timeout -k 5 180 mpirun --allow-run-as-root --oversubscribe -np 2 \
		--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include "$prov" \
		--mca btl ^openib,ofi "${pass[@]}" NPopenmpi -u 64 -n 1000 -p 0 -o "$o"
)
section_netpipe() {
	local r p bytes
	command -v NPopenmpi >/dev/null && command -v mpirun >/dev/null || {
		note "netpipe: no NPopenmpi/mpirun, skipped"
		return
	}
	for r in $(seq "$pp_repeats"); do
		for p in $(in_turn "$r" vwait verbs); do
			rm -f "$tmp/np.$p"
			# the same settings for both: verbs;ofi_rxm needs FI_UNIVERSE_SIZE=32 (rxm sizes
			# its core CQs as (tx + rx size) x universe, past rxe's 32767 entries otherwise),
			# so vwait;ofi_rxm gets it too (without it vwait clamps the CQs to 32767)
			np_run $p "$tmp/np.$p" FI_UNIVERSE_SIZE=32 >>"$log" 2>&1
			[ -s "$tmp/np.$p" ] || continue
			for bytes in 1 8 64; do
				awk -v b=$bytes -v p="$p;ofi_rxm" '$1 == b { printf "netpipe|%d B|%s|%.2f\n", b, p, $3 * 1e6 }' \
					"$tmp/np.$p" >>"$rec"
			done
		done
	done
}

# ---------------------------------------------------------------- run
note "bench-all: $(date -u +%FT%TZ), kernel $(uname -r), $(nproc) vCPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), repeats $repeats ($pp_repeats in the ping-pong tables and NetPIPE)"
note "host: ${BENCH_HOST:-unknown}"
for s in $sections; do
	t0=$(date +%s)
	case $s in
	cost) section_cost ;;
	spin) section_spin ;;
	turns) section_turns ;;
	waitturns) section_waitturns ;;
	sread) section_sread ;;
	think) section_think cq sread-unspec spin sread-unspec ;;
	cntr) section_think cntr cntr-wait-unspec cntr-spin cntr-wait-unspec ;;
	waitset) section_think waitset waitset spin waitset ;;
	idle) section_idle ;;
	policy) section_policy ;;
	thinkturns) section_thinkturns ;;
	longturns) section_longturns ;;
	pairturns) section_pairturns ;;
	oversub) section_oversub ;;
	netpipe) section_netpipe ;;
	*) note "unknown section $s" ;;
	esac
	note "section $s: $(($(date +%s) - t0)) s"
done

# ---------------------------------------------------------------- tables
# stats TABLE: "ROW|COLUMN|median|min|max|n" for every row and column, in order of appearance
stats() {
	awk -F'|' -v t="$1" '$1 == t && $4 != "" {
		k = $2 "|" $3
		if (!(k in n)) order[++nk] = k
		v[k, ++n[k]] = $4 + 0 }
	END { for (i = 1; i <= nk; i++) { k = order[i]; m = n[k]
		for (a = 1; a <= m; a++) x[a] = v[k, a]
		for (a = 1; a <= m; a++) for (b = a + 1; b <= m; b++) if (x[b] < x[a]) { y = x[a]; x[a] = x[b]; x[b] = y }
		med = (m % 2) ? x[(m + 1) / 2] : (x[m / 2] + x[m / 2 + 1]) / 2
		printf "%s|%.2f|%.2f|%.2f|%d\n", k, med, x[1], x[m], m } }' "$rec"
}
# notes TABLE: what a series of TABLE could not measure, and why (a line under the table)
notes() {
	local f
	for f in "$tmp"/unsupported."$1".*; do
		[ -e "$f" ] || continue
		echo
		echo "${f##*.}: not measured, the provider lacks it ($(head -c 200 "$f"))."
	done
}
# table TABLE TITLE COLUMN... -- RATIO_NUM/RATIO_DEN...: markdown, a cell "median [min-max]"
table() {
	local t=$1 title=$2
	shift 2
	local cols=() ratios=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do cols+=("$1"); shift; done
	[ $# -gt 0 ] && shift
	ratios=("$@")
	stats "$t" >"$tmp/st"
	[ -s "$tmp/st" ] || return 0
	echo
	echo "### $title"
	echo
	local rs=
	[ ${#ratios[@]} -gt 0 ] && rs=$(printf '%s\t' "${ratios[@]}")
	awk -F'|' -v cols="$(printf '%s\t' "${cols[@]}")" -v ratios="$rs" '
	{ if (!($1 in seen)) { seen[$1] = 1; rows[++nr] = $1 }
	  med[$1, $2] = $3; cell[$1, $2] = sprintf("%s [%s-%s]", $3, $4, $5); cnt[$1, $2] = $6 }
	END {
		nc = split(cols, c, "\t") - 1; nr2 = ratios == "" ? 0 : split(ratios, r, "\t") - 1
		h = "| |"; s = "|---|"
		for (i = 1; i <= nc; i++) { h = h " " c[i] " |"; s = s "---|" }
		for (i = 1; i <= nr2; i++) { h = h " " r[i] " |"; s = s "---|" }
		print h; print s
		for (j = 1; j <= nr; j++) { line = "| " rows[j] " |"
			for (i = 1; i <= nc; i++) line = line " " (((rows[j], c[i]) in cell) ? cell[rows[j], c[i]] : "-") " |"
			for (i = 1; i <= nr2; i++) { split(r[i], nd, "/")
				a = med[rows[j], nd[1]]; b = med[rows[j], nd[2]]
				line = line " " ((a != "" && b + 0 > 0) ? sprintf("%.2f", a / b) : "-") " |" }
			print line } }' "$tmp/st"
}

{
	echo "## vwait benchmarks ($(date -u +%F), ${BENCH_HOST:-unknown host}, soft-RoCE VM, $(nproc) vCPUs)"
	echo
	echo "Cells: median [min-max] of $pp_repeats runs (ping-pong tables, NetPIPE) or $repeats (the others) in one VM boot; ratios are of medians."
	echo "Latency is one-way, in microseconds; CPU is the server's, in microseconds per message."
	echo "A run: $spin_iters round trips (spin), $sread_iters (sread), $think_iters at think 0 and up to $((budget / 1000)) ms of think per phase (think tables)."
	echo "Command: \`make bench SECTIONS=\"$sections\"\` (test/bench/bench-all.sh)."
	table cost "Instructions per call (callgrind)" vwait verbs -- vwait/verbs
	table tax "What a second thread costs a system call (thread_tax: none ever, one that exited, one alive)" \
		single exited live -- exited/single live/single
	table spin "Ping-pong, both sides spinning (us)" vwait verbs raw -- vwait/verbs vwait/raw
	table threads "Threads of the spinning client at the end of its runs" vwait verbs
	table turns "Ping-pong, both sides spinning, vwait, verbs and raw verbs taking turns burst by burst (us; ratios to verbs: per run, the median of the per-burst ratios; vwait/raw: their quotient; cells over $turn_repeats runs)" \
		vwait verbs verbs2 raw vwait/verbs verbs2/verbs vwait/raw
	table waitturns "Think time 0 taking turns: a spinning client, the server spinning or waiting (adaptive policy; block: the block policy; verbs: upstream verbs' fi_cq_sread), burst by burst (us; ratios: per run, the median of the per-burst ratios to the spinning server; cntr/cntrspin: their quotient; cells over $turn_repeats runs)" \
		spin sread sreadblock waitset wsblock cntr cntrspin verbs sread/spin sreadblock/spin waitset/spin wsblock/spin cntr/cntrspin verbs/spin
	table thinkturns "Think below W taking turns: a spinning client thinking before each round, the server spinning (spin; spinu: on a FI_WAIT_UNSPEC CQ) or in fi_cq_sread (sread: adaptive; fixed: spinning up to 1 ms, no learner${BENCH_OVERSUB_BASE:+; base: adaptive, another build}), burst by burst (us; ratios: per run, the median of the per-burst ratios to the spinning server; sread/fixed: their quotient; cells over $thinkturn_repeats runs)" \
		spin sread fixed spinu${BENCH_OVERSUB_BASE:+ base} sread/spin fixed/spin spinu/spin${BENCH_OVERSUB_BASE:+ base/spin} sread/fixed
	table longturns "Think at or above W taking turns: a spinning client sleeping before each round, the server spinning (spin) or in fi_cq_sread (sread: adaptive; block: the block policy; verbs: upstream verbs${BENCH_OVERSUB_BASE:+; base: adaptive, another build}), burst by burst (us; ratios: per run, the median of the per-burst ratios to the spinning server; sread/block: their quotient; cells over $longturn_repeats runs)" \
		spin sread block verbs${BENCH_OVERSUB_BASE:+ base} sread/spin block/spin verbs/spin${BENCH_OVERSUB_BASE:+ base/spin} sread/block
	longturn_goals
	table pairturns "One pair, both sides waiting, taking turns (goal: sread/spin <= 1.2): both sides spinning (spin; spinu: on FI_WAIT_UNSPEC CQs) or in fi_cq_sread (sread: adaptive; fixed: spinning up to 1 ms, no learner${BENCH_OVERSUB_BASE:+; base: adaptive, another build}), burst by burst (us; ratios: per run, the median of the per-burst ratios to spin; sread/fixed: their quotient; cells over $pairturn_repeats runs)" \
		spin sread fixed spinu${BENCH_OVERSUB_BASE:+ base} sread/spin fixed/spin spinu/spin${BENCH_OVERSUB_BASE:+ base/spin} sread/fixed
	table sread "Ping-pong 64 B, both sides in fi_cq_sread, FI_WAIT_UNSPEC (us)" \
		"vwait sread" "vwait spin" "verbs sread" -- "vwait sread/vwait spin" "verbs sread/vwait spin"
	table cq "Server in fi_cq_sread (spinning client, 64 B): latency (us) and server CPU per message (us) by think time (us)" \
		adaptive block spin verbs -- adaptive/spin adaptive/block block/spin verbs/adaptive
	notes cq
	table cntr "Server in fi_cntr_wait (spin: polling fi_cntr_read): latency and CPU per message by think time" \
		adaptive block spin verbs -- adaptive/spin adaptive/block block/spin verbs/adaptive
	notes cntr
	table waitset "Server in fi_wait on a wait set (spin: polling fi_cq_read): latency and CPU per message by think time" \
		adaptive block spin verbs -- adaptive/spin adaptive/block block/spin verbs/adaptive
	notes waitset
	table idle "A waiter idle for 2 s (fi_cq_sread, ms of thread CPU)" adaptive block
	table policy "The adaptive policy: server in fi_cq_sread (spinning client, 64 B) by think time (us): latency (us), server CPU per message (us), and W, the wake-up cost the adaptive server measured (us)" \
		$policy_arms -- adaptive/spin adaptive/block verbs/adaptive$(for a in spinu fixed base; do
			case " $policy_arms " in *" $a "*) printf ' %s/spin' $a ;; esac
		done)
	policy_goals
	table oversub "K ping-pong pairs at once on $(nproc) vCPUs, both sides in fi_cq_sread (spin: both spinning), 64 B, by think time (us): one-way latency (us), the mean of the pairs" \
		$oversub_arms -- adaptive/block adaptive/spin verbs/adaptive${BENCH_OVERSUB_BASE:+ adaptive/base base/block base/spin}
	table netpipe "NetPIPE (Open MPI, OFI MTL) one-way latency (us)" "vwait;ofi_rxm" "verbs;ofi_rxm" -- "vwait;ofi_rxm/verbs;ofi_rxm"
	echo
	echo "Total: $(($(date +%s) - t_start)) s."
} >"$out/results.md"

# ---------------------------------------------------------------- plot
# THINK, then the latency and CPU medians of adaptive, block, spin and verbs in $tmp/st at THINK
medians_line() {
	local t=$1 line=$1 k s v
	for k in lat cpu; do
		for s in adaptive block spin verbs; do
			v=$(awk -F'|' -v r="$k $t" -v s="$s" '$1 == r && $2 == s { print $3 }' "$tmp/st")
			line="$line ${v:--}"
		done
	done
	echo "$line"
}
# think.dat: think, then latency and CPU medians per series (cq table), "-" for none
stats cq >"$tmp/st"
if [ -s "$tmp/st" ]; then
	{
		echo "# think_us lat_adaptive lat_block lat_spin lat_verbs cpu_adaptive cpu_block cpu_spin cpu_verbs"
		for t in ${thinks//,/ }; do
			medians_line "$t"
		done
	} >"$out/think.dat"
	if command -v gnuplot >/dev/null; then
		gnuplot <<EOF 2>>"$log" || note "gnuplot failed"
set terminal pngcairo size 1000,420 font ",10" noenhanced
set output "$out/think.png"
set datafile missing "-"
set multiplot layout 1,2 title "vwait: server waiting in fi_cq_sread, spinning client, 64 B ($(date -u +%F), ${BENCH_HOST:-unknown host}, soft-RoCE VM)"
set xlabel "client think time (us)"
set logscale y
set grid
set key top left
set xtics ("0" 0, "50" 1, "500" 2, "5000" 3)
set ylabel "one-way latency (us)"
plot "$out/think.dat" using 0:2 with linespoints title "vwait adaptive", \
     "" using 0:3 with linespoints title "vwait block", \
     "" using 0:4 with linespoints title "vwait spinning (fi_cq_read)", \
     "" using 0:5 with linespoints title "upstream verbs fi_cq_sread"
set ylabel "server CPU per message (us)"
plot "$out/think.dat" using 0:6 with linespoints title "vwait adaptive", \
     "" using 0:7 with linespoints title "vwait block", \
     "" using 0:8 with linespoints title "vwait spinning (fi_cq_read)", \
     "" using 0:9 with linespoints title "upstream verbs fi_cq_sread"
unset multiplot
EOF
	fi
fi
# policy.dat / policy.png: the policy table's latency and CPU medians by think time, and W
stats policy >"$tmp/st"
if [ -s "$tmp/st" ]; then
	{
		echo "# think_us lat_adaptive lat_block lat_spin lat_verbs cpu_adaptive cpu_block cpu_spin cpu_verbs W"
		for t in ${policy_thinks//,/ }; do
			line=$(medians_line "$t")
			v=$(awk -F'|' -v r="W $t" '$1 == r && $2 == "adaptive" { print $3 }' "$tmp/st")
			echo "$line ${v:--}"
		done
	} >"$out/policy.dat"
	if command -v gnuplot >/dev/null; then
		xt=$(awk -v l="$policy_thinks" 'BEGIN { n = split(l, t, ","); for (i = 1; i <= n; i++) printf "%s\"%s\" %d", (i > 1 ? ", " : ""), t[i], i - 1 }')
		gnuplot <<EOF 2>>"$log" || note "gnuplot failed"
set terminal pngcairo size 1000,420 font ",10" noenhanced
set output "$out/policy.png"
set datafile missing "-"
set multiplot layout 1,2 title "vwait adaptive policy: server in fi_cq_sread, spinning client, 64 B ($(date -u +%F), soft-RoCE VM)"
set xlabel "client think time (us)"
set logscale y
set grid
set key top left
set xtics ($xt)
set ylabel "one-way latency (us)"
plot "$out/policy.dat" using 0:2 with linespoints title "vwait adaptive", \
     "" using 0:3 with linespoints title "vwait block", \
     "" using 0:4 with linespoints title "vwait spinning", \
     "" using 0:5 with linespoints title "upstream verbs fi_cq_sread", \
     "" using 0:(\$4 + \$10) with lines dashtype 2 title "spinning + W (measured wake-up cost)"
set ylabel "server CPU per message (us)"
plot "$out/policy.dat" using 0:6 with linespoints title "vwait adaptive", \
     "" using 0:7 with linespoints title "vwait block", \
     "" using 0:8 with linespoints title "vwait spinning", \
     "" using 0:9 with linespoints title "upstream verbs fi_cq_sread", \
     "" using 0:10 with linespoints title "W (us)"
unset multiplot
EOF
	fi
fi
cat "$out/results.md"
echo "(written: $out/results.md, $out/think.dat, $out/think.png, $out/policy.dat, $out/policy.png, $out/log.txt)"
rm -rf "$tmp"
