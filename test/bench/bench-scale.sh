#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
# make bench SECTIONS=scale: what a wake and an idle CQ cost as the number of CQs grows, in one
# VM boot (the front door, test/bench/bench.sh, runs it in the guest; by hand inside the guest:
# VWAIT_BUILDDIR=... test/bench/bench-scale.sh).
#
# Members: a ping-pong (util/fi_vwait_bench, 64 B) whose CQ is one of N members of a wait set
#   (fi_wait, then fi_cq_read) or of a poll set (fi_poll), the other N-1 idle, both sides; N
#   alternated within each repeat. Per round trip: latency (client), CPU of the server process
#   (user + system, from getrusage: includes the server's sends), and, in one further run per N,
#   the server's system calls counted by strace -f -c (divided by the rounds run: setup
#   included, so the N-dependent setup shows as a difference in the total, see the raw table).
# Descriptors and memory: test/bench/cq_fds opens N CQs of one wait object, vwait beside
#   upstream verbs, and counts /proc/self/fd and the resident set before and after (from
#   smaps_rollup, exact: anon, the process's own memory; file, file mappings, where the
#   device's queues mapped from the uverbs device count; the bytes malloc holds; RssFile of
#   /proc/self/status, which lags before Linux 6.2, in the raw lines), also for CQs of the
#   default size; with ulimit -n 1024
#   it shows where a provider runs out of descriptors, and that a vwait wait set of 4096 or
#   16384 CQs opens there.
# Streaming: fi_vwait_bench -X 32, a one-way stream of 64 B messages at gap 0 whose receiver
#   reads with fi_cq_read and, when that finds nothing (a transition to idle, counted), with
#   fi_cq_sread. System calls per message: strace -f -c of the receiver, the difference
#   between a run of SCALE_STREAM messages and one of a tenth of them (setup cancels out;
#   strace slows every system call, so the receiver falls behind more often than without it).
#   Arms: vwait's count per CQ (the FI_INFO line "CQ .. closed: A arms, E channel events", a
#   run without strace), and the CQ's waiter's line ("waiter .. closed: S sleeps, ..."): why
#   each blocking call armed (no spin, or the whole budget spun)
#   and how long the calls that slept lasted. vwait adaptive and block beside upstream verbs.
# Connections: util/fi_vwait_echo (the event-loop example: one epoll set over the EQ's and
#   every connection's CQ descriptor, fi_trywait) with C connections from one client process
#   (SCALE_CONNS, default "1 256 1000"; ulimit -n 65536 for both): the client's setup time, a
#   round-robin phase (one message in flight, each connection in turn), the server's CPU over
#   5 s with everything connected and idle (/proc/PID/task/*/schedstat), its descriptors and
#   RSS per connection (against the listening server; the example's own buffers, 4 x 4 KiB
#   per connection, included; anon and file apart, from smaps_rollup; /proc/PID/status's
#   figures in the raw section). vwait beside upstream verbs.
# Not measured here (yet): A = 16 active members, an application epoll over N FD CQs, the
# thread section (host: scale_util); the util layer alone is measured on the host by
# test/bench/scale_util (callgrind, see its header).
#
# SCALE_NS (default "16 256 1024 4096"), SCALE_REPEATS (3), SCALE_ITERS (200), SCALE_STREAM
# (20000), SCALE_CONNS, SCALE_SECTIONS (default "members descriptors streaming connections"),
# SCALE_OUT (default $VWAIT_BUILDDIR/bench-results/scale.md; the plot's data beside it, .dat).
set -u
builddir=${VWAIT_BUILDDIR:?VWAIT_BUILDDIR must name the build directory}
srcdir=$(cd "$(dirname "$0")/../.." && pwd)
export VWAIT_SRCDIR=$srcdir
. "$srcdir/test/integration/common.sh"
need_rxe
bench=$builddir/util/fi_vwait_bench
cqfds=$builddir/test/bench/cq_fds
echo_bin=$builddir/util/fi_vwait_echo
sections=${SCALE_SECTIONS:-members descriptors streaming connections}
stream_n=${SCALE_STREAM:-20000}
conns_list=${SCALE_CONNS:-1 256 1000}
export FI_PROVIDER_PATH=${FI_PROVIDER_PATH:-$builddir/.libs}
ns=${SCALE_NS:-16 256 1024 4096}
repeats=${SCALE_REPEATS:-3}
iters=${SCALE_ITERS:-200}
out=${SCALE_OUT:-$builddir/bench-results/scale.md}
dat=${out%.md}.dat
mkdir -p "$(dirname "$out")"
work=$(mktemp -d)
cd "$work" || exit 1
raw=$work/raw.txt
port=7700

# strace_total FILE: the calls column of strace -c's total row (its 4th field: the 5th is the
# errors column when there are errors, and the first run of this script read that one)
strace_total() { awk '$NF=="total"{print $4}' "$1" 2>/dev/null; }
# strace_calls FILE NAME: the calls of one system call in strace -c's table (0: none)
strace_calls() { awk -v n="$2" '$NF==n{c=$4} END{print c+0}' "$1" 2>/dev/null; }

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
	echo "# make bench SECTIONS=scale, $(date -u +%FT%TZ)"
	echo
	echo "One VM boot (TCG, soft-RoCE), vwait $(git -C "$srcdir" describe --always --dirty 2>/dev/null);"
	echo "$iters round trips of 64 B per run, $repeats repeats, N alternated within each repeat."
	echo "Only ratios within this file mean anything."
	echo
} >"$out"
echo "# N mode lat_us_median cpu_us_median syscalls_per_round" >"$dat"
has() { [[ " $sections " == *" $1 "* ]]; }

has members && for mode in waitset pollset; do
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
		total=$(strace_total "$work/strace-$mode-$n.txt")
		sc[$n]=$(awk -v t="${total:-0}" -v r=$((iters + 20)) 'BEGIN{printf "%.1f", t/r}')
		{
			echo "== strace -f -c, server, $mode N=$n"
			cat "$work/strace-$mode-$n.txt"
		} >>"$raw"
	done
	{
		echo "## Members: $mode, A = 1 (vwait)"
		echo
		echo "| N | round trip us, median (min-max) | server CPU us per message | server system calls per round (strace, setup included) |"
		echo "|---:|---|---|---:|"
		for n in $ns; do
			echo "| $n | $(tr ' ' '\n' <<<"${lat[$n]}" | grep . | stats) | $(tr ' ' '\n' <<<"${cpu[$n]}" | grep . | stats) | ${sc[$n]} |"
			echo "$n $mode $(tr ' ' '\n' <<<"${lat[$n]}" | grep . | stats | cut -d' ' -f1) $(tr ' ' '\n' <<<"${cpu[$n]}" | grep . | stats | cut -d' ' -f1) ${sc[$n]}" >>"$dat"
		done
		echo
	} >>"$out"
	unset lat cpu sc
done

field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" | head -1; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{if(a==""||b==""||b==0){print "-";exit} printf "%.4f", a/b}'; }

# cqrun LABEL ARGS...: one cq_fds run, its RESULT line kept in $raw, "fds kb opened anon file
# heap error" out (the error last: it has spaces)
cqrun() {
	local label=$1 line
	shift
	line=$("$cqfds" "$@" 2>&1 | grep '^RESULT')
	echo "$label: $line" >>"$raw"
	local e
	e=$(sed 's/.* first_error=//; s/ fds_left=.*//' <<<"$line")
	echo "desc ${*:1:6} $(field fds_per_cq <<<"$line") $(field set_fds <<<"$line") $(field rss_kb_per_cq <<<"$line") $(field opened <<<"$line")" >>"$dat"
	local f k o
	f=$(field fds_per_cq <<<"$line")
	k=$(field rss_kb_per_cq <<<"$line")
	o=$(field opened <<<"$line")
	local a fl h
	a=$(field anon_kb_per_cq <<<"$line")
	fl=$(field file_kb_per_cq <<<"$line")
	h=$(field heap_b_per_cq <<<"$line")
	echo "${f:--} ${k:--} ${o:-0} ${a:--} ${fl:--} ${h:--} ${e:--}"
}

has descriptors && {
	echo "## Descriptors and memory per idle CQ (test/bench/cq_fds, 16-entry CQs unless said, verbs beside vwait)"
	echo
	echo "| CQs asked, wait object, limit | verbs: opened, fds per CQ, RSS KiB per CQ (anon, file; heap bytes) | vwait: opened, fds per CQ, RSS KiB per CQ (anon, file; heap bytes) |"
	echo "|---|---|---|"
	for row in "4096 fd 16" "4096 none 16" "4096 set 16" "16384 set 16" "256 fd 0" "256 none 0"; do
		read -r n w sz <<<"$row"
		cells=""
		for p in verbs vwait; do
			read -r f k o a fl h e < <(ulimit -n 1024 && cqrun "$p $w $n $sz" -p "$p" -w "$w" -N "$n" -s "$sz")
			if [ "${o:-0}" = 0 ]; then
				cells+=" | none: $e"
			elif [ "$e" = none ]; then
				cells+=" | $o, $f, $k ($a, $fl; $h)"
			else
				cells+=" | $o, $f, $k ($a, $fl; $h), then $e"
			fi
		done
		what="$sz-entry"
		[ "$sz" = 0 ] && what="default-size (size 0)"
		echo "| $n $what, FI_WAIT_$(tr a-z A-Z <<<"$w"), ulimit -n 1024$cells |"
	done
	echo
	echo "(FI_WAIT_SET: CQs bound to one FI_WAIT_FD wait set; upstream verbs has no wait set.)"
	echo
} >>"$out" 2>&1

# one stream run: stream NAME PROV MODE COUNT [WRAP] [ENV]: prints the server's STREAM line and
# the arms line of its CQ
stream() {
	local name=$1 p=$2 mode=$3 count=$4 wrap=${5:-} envs=${6:-}
	port=$((port + 1))
	PAIR_READY=LISTENING PAIR_TIMEOUT=900 run_pair "$name" \
		"$envs $wrap $bench -p $p -m $mode -S 64 -X 32 -I $count -W 200 -P $port" \
		"$bench -p $p -m spin -S 64 -X 32 -I $count -W 200 -P $port $RXE_ADDR" >/dev/null 2>&1
	grep -h '^STREAM\|closed: .* arms\|waiter .* closed: ' "$name.server.log" | tee -a "$raw"
	grep -q '^STREAM' "$name.server.log" || { echo "== $name failed" >>"$raw"; cat "$name.server.log" "$name.client.log" >>"$raw"; }
}

# perf_syscalls: "perf stat -e raw_syscalls:sys_enter" works here (tracefs mounted): a count
# of system calls that does not stop the process at each one, as strace does
perf_syscalls() {
	mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null
	mountpoint -q /sys/kernel/debug || mount -t debugfs nodev /sys/kernel/debug 2>/dev/null
	perf stat -e raw_syscalls:sys_enter -x, -o "$work/perf-probe.txt" -- true >/dev/null 2>&1 &&
		grep -q '^[0-9]*,.*raw_syscalls:sys_enter' "$work/perf-probe.txt"
}

has streaming && {
	small=$((stream_n / 10))
	use_perf=0
	perf_syscalls && use_perf=1
	echo "## Streaming: 64 B at gap 0, receiver in fi_cq_sread (fi_vwait_bench -X 32, $stream_n messages)"
	echo
	echo "| receiver | messages/s | CPU us per message | completions | transitions to idle | arms | arms per completion | arms per transition to idle | system calls per message (strace, $stream_n - $small) | of which the receiver's own sends | the rest, per message | the rest by call | the rest per message, perf stat (no strace) |"
	echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|"
	waiters=""
	for arm in "vwait sread-fd adaptive" "vwait sread-fd block" "verbs sread-fd -"; do
		read -r p mode pol <<<"$arm"
		envs=""
		[ "$pol" != - ] && envs="FI_VWAIT_WAIT_POLICY=$pol FI_LOG_LEVEL=info"
		out1=$(stream "stream-$p-$pol" "$p" "$mode" "$stream_n" "" "$envs")
		line=$(grep '^STREAM' <<<"$out1")
		arms=$(sed -n 's/.*closed: \([0-9]*\) arms.*/\1/p' <<<"$out1" | head -1)
		comp=$(field completions <<<"$line")
		idle=$(field idle <<<"$line")
		declare -A sends=()
		for k in "$small" "$stream_n"; do
			l=$(stream "strace-$p-$pol-$k" "$p" "$mode" "$k" "strace -f -c -o $work/stream-$p-$pol-$k.txt" \
				"${envs/FI_LOG_LEVEL=info/}" | grep '^STREAM')
			# the receiver's sends (grants, the last message): completions - received
			sends[$k]=$(awk -v c="$(field completions <<<"$l")" -v r="$(field received <<<"$l")" 'BEGIN{print c-r}')
			echo "== strace -f -c, receiver, $p $pol, $k messages" >>"$raw"
			cat "$work/stream-$p-$pol-$k.txt" >>"$raw" 2>/dev/null
		done
		# the same count from perf (no stops), when it works in this guest
		declare -A pc=() psends=()
		for k in "$small" "$stream_n"; do
			[ $use_perf = 1 ] || continue
			l=$(stream "perf-$p-$pol-$k" "$p" "$mode" "$k" \
				"perf stat -e raw_syscalls:sys_enter -x, -o $work/perf-$p-$pol-$k.txt --" \
				"${envs/FI_LOG_LEVEL=info/}" | grep '^STREAM')
			psends[$k]=$(awk -v c="$(field completions <<<"$l")" -v r="$(field received <<<"$l")" 'BEGIN{print c-r}')
			pc[$k]=$(awk -F, '/raw_syscalls:sys_enter/{print $1}' "$work/perf-$p-$pol-$k.txt" 2>/dev/null)
			echo "== perf stat, receiver, $p $pol, $k messages: ${pc[$k]:-?} system calls; $l" >>"$raw"
		done
		f1=$work/stream-$p-$pol-$small.txt f2=$work/stream-$p-$pol-$stream_n.txt
		per() { awk -v a="$1" -v b="$2" -v n=$((stream_n - small)) 'BEGIN{if(a==""||b==""){print "-";exit} printf "%.4f", (b-a)/n}'; }
		s1=$(strace_total "$f1")
		s2=$(strace_total "$f2")
		sc=$(per "$s1" "$s2")
		sd=$(per "${sends[$small]}" "${sends[$stream_n]}")
		rest=$(awk -v a="$sc" -v b="$sd" 'BEGIN{if(a=="-"||b=="-"){print "-";exit} printf "%.4f", a-b}')
		prest="-"
		if [ $use_perf = 1 ]; then
			psc=$(per "${pc[$small]:-}" "${pc[$stream_n]:-}")
			psd=$(per "${psends[$small]:-}" "${psends[$stream_n]:-}")
			prest=$(awk -v a="$psc" -v b="$psd" 'BEGIN{if(a=="-"||b=="-"){print "-";exit} printf "%.4f (all: %.4f)", a-b, a}')
		fi
		bycall=""
		for call in read write poll ppoll epoll_wait epoll_pwait ioctl timerfd_settime openat futex sched_yield; do
			d=$(per "$(strace_calls "$f1" "$call")" "$(strace_calls "$f2" "$call")")
			awk -v d="$d" 'BEGIN{exit !(d+0 >= 0.001 || d+0 <= -0.001)}' && bycall+="$call $d, "
		done
		label=$p
		[ "$pol" != - ] && label="$p $pol"
		# the receiver's waiter (the one that slept most: the CQ's), its sleeps by cause
		wl=$(grep 'waiter .* closed: ' <<<"$out1" | awk '{n=$0; sub(/.*closed: /,"",n); split(n,a," "); if (a[1]+0 > m) {m=a[1]+0; l=$0}} END{print l}')
		[ -n "$wl" ] && waiters+="| $label | ${wl#*closed: } |"$'\n'
		echo "| $label | $(field msgs_per_s <<<"$line") | $(field cpu_us_per_msg <<<"$line") | ${comp:--} | ${idle:--} | ${arms:--} | $(ratio "$arms" "$comp") | $(ratio "$arms" "$idle") | $sc | $sd | $rest | ${bycall%, } | $prest |"
	done
	echo
	if [ -n "$waiters" ]; then
		echo "| receiver | its CQ's waiter over the run (the first columns' run, FI_LOG_LEVEL=info): sleeps, and why each blocking call armed, and how long the calls that slept lasted |"
		echo "|---|---|"
		printf '%s' "$waiters"
		echo
	fi
	echo "(completions: the receiver's, its grants' send completions included; a transition to idle: fi_cq_read found the CQ empty and fi_cq_sread followed; arms: vwait's ibv_req_notify_cq calls for the CQ, -: upstream verbs does not say. System calls: the strace runs' difference per message; on rxe each fi_send is one write(2) (its doorbell), so the receiver's own grants (one per 16 messages) are counted apart; the rest is what receiving and waiting cost. strace slows every system call, so the receiver sleeps less often under it than in the first columns' run.)"
	echo
} >>"$out" 2>&1

# cpu_ns PID: CPU time of every thread of PID so far, nanoseconds
cpu_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { printf "%.0f\n", s }'; }
fds_of() { ls /proc/"$1"/fd 2>/dev/null | wc -l; }
rss_of() { awk '/^VmRSS/{print $2}' /proc/"$1"/status 2>/dev/null; }
# "rss anon file" of a process in KiB (anon: its own memory; file: the rest, file mappings, the
# device's queues among them), from smaps_rollup: exact, where /proc/PID/status lags on Linux
# before 6.2 by the pages each thread mapped since its last 64 page faults (test/bench/proc_self.h)
rss3_of() { awk '/^Rss:/{r=$2} /^Anonymous:/{a=$2} END{print r, a, r - a}' /proc/"$1"/smaps_rollup 2>/dev/null; }
# the same three from /proc/PID/status (VmRSS, RssAnon, RssFile), for the raw section
rss3_status_of() { awk '/^VmRSS/{r=$2} /^RssAnon/{a=$2} /^RssFile/{f=$2} END{print r, a, f}' /proc/"$1"/status 2>/dev/null; }

# the mappings of a process's verbs device files (the queues a verbs provider maps: rxe's CQs,
# send and receive queues), as "KiB x count" by size, the largest first
uverbs_maps_of() {
	local range path k
	declare -A n=()
	while read -r range _ _ _ _ path; do
		[[ $path == /dev/infiniband/uverbs* ]] || continue
		k=$(((16#${range#*-} - 16#${range%-*}) / 1024))
		n[$k]=$((${n[$k]:-0} + 1))
	done </proc/"$1"/maps
	for k in "${!n[@]}"; do echo "$k KiB x ${n[$k]}"; done | sort -rn | paste -sd, -
}

# conn_run PROV C: one server, C connections; prints a table row
conn_run() {
	local p=$1 c=$2 name="conn-$1-$2" spid="" tpid cpid
	port=$((port + 1))
	(ulimit -n 65536 && exec timeout -k 5 900 "$echo_bin" -p "$p" -s "$RXE_ADDR" -P "$port" -T 0 -q) \
		>"$name.server.log" 2>&1 </dev/null &
	tpid=$!
	for _ in $(seq 600); do
		spid=$(sed -n 's/^echo: listening on .* pid \([0-9]*\)$/\1/p' "$name.server.log")
		[ -n "$spid" ] && break
		kill -0 "$tpid" 2>/dev/null || break
		sleep 0.1
	done
	if [ -z "$spid" ]; then
		echo "| $p | $c | server did not start: $(tail -1 "$name.server.log") |"
		return
	fi
	local f0 r0 f1 r1 a b
	f0=$(fds_of "$spid")
	read -r r0 an0 fi0 < <(rss3_of "$spid")
	local st0 st1 maps1=""
	st0=$(rss3_status_of "$spid")
	(ulimit -n 65536 && exec timeout -k 5 900 "$echo_bin" -p "$p" -P "$port" -c "$c" -m 2 -R 3 -H 9 "$RXE_ADDR") \
		>"$name.client.log" 2>&1 </dev/null &
	cpid=$!
	for _ in $(seq 6000); do
		grep -q '^client: holding' "$name.client.log" && break
		kill -0 "$cpid" 2>/dev/null || break
		sleep 0.1
	done
	if grep -q '^client: holding' "$name.client.log"; then
		sleep 1
		f1=$(fds_of "$spid")
		read -r r1 an1 fi1 < <(rss3_of "$spid")
		st1=$(rss3_status_of "$spid")
		maps1=$(uverbs_maps_of "$spid")
		a=$(cpu_ns "$spid")
		sleep 5
		b=$(cpu_ns "$spid")
	fi
	wait "$cpid"
	local crc=$?
	kill -TERM "$spid" 2>/dev/null
	wait "$tpid"
	{
		echo "== $name server KiB (rss anon file) before/after: smaps_rollup $r0 $an0 $fi0 / ${r1:-} ${an1:-} ${fi1:-}; status $st0 / ${st1:-}"
		echo "== $name server's uverbs mappings, all connected: $maps1"
		echo "== $name client (exit $crc)"
		cat "$name.client.log"
		echo "== $name server"
		tail -3 "$name.server.log"
	} >>"$raw"
	if [ $crc != 0 ] || [ -z "${a:-}" ]; then
		echo "| $p | $c | failed (client exit $crc: $(grep -v '^client' "$name.client.log" | tail -1)) | | | | | |"
		return
	fi
	local up rate rr
	up=$(sed -n 's/^client: .* up in \([^ ]*\) s (\([^ ]*\) per s)/\1 \2/p' "$name.client.log")
	rr=$(sed -n 's/^client: round-robin .*, \([^ ]*\) us per round trip/\1/p' "$name.client.log")
	echo "| $p | $c | ${up% *} s (${up#* }/s) | $rr | $(awk -v a="$a" -v b="$b" 'BEGIN{printf "%.3f", (b-a)/5e7}') | $(awk -v x="$f0" -v y="$f1" -v c="$c" 'BEGIN{printf "%.2f", (y-x)/c}') | $(awk -v x="$r0" -v y="$r1" -v c="$c" 'BEGIN{printf "%.1f", (y-x)/c}') | $(awk -v x="$an0" -v y="$an1" -v u="$fi0" -v v="$fi1" -v c="$c" 'BEGIN{printf "%.1f, %.1f", (y-x)/c, (v-u)/c}') |"
}

has connections && {
	echo "## Connections: one server (util/fi_vwait_echo, epoll over per-connection FD CQs), C clients' connections from one process"
	echo
	echo "| provider | C | setup (rate) | round-robin round trip us | server CPU % of a core, idle 5 s | server fds per connection | server RSS KiB per connection | of which anon, file (KiB) |"
	echo "|---|---:|---|---:|---:|---:|---:|---|"
	for c in $conns_list; do
		for p in vwait verbs; do
			conn_run "$p" "$c"
		done
	done
	echo
} >>"$out" 2>&1

{
	echo "## Raw"
	echo
	echo '```'
	cat "$raw"
	echo '```'
} >>"$out" 2>&1

cat "$out"
rm -rf "$work"
