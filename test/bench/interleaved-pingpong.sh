#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
# Ping-pong, several providers (or wait modes) taking turns burst by burst in one VM boot.
#
# Each arm is one fi_vwait_bench pair (server and client) started once; the client runs
# BENCH_BURSTS bursts of BENCH_ITERS timed rounds (after BENCH_WARMUP untimed ones), each
# burst when this driver hands the pair the turn (-R, -G: a pair waiting for it sleeps in
# read(2) on a fifo, both sides). The arms go in turn, in one order for even
# bursts and the reverse for odd ones, so that the emulated CPU's drift over the run (the noise
# that makes separate runs differ by 10-40 %) falls on every arm alike, and each burst of an
# arm has a neighbour of the yardstick's a few tens of milliseconds away. Prints, per arm, the
# median [min-max] one-way latency of its bursts, and per burst the ratio to the yardstick's
# burst of the same turn: median [min-max] and how many bursts were at or below 1; then one
# line per arm, "TURNS arm=NAME lat_us=MEDIAN ratio=MEDIAN" (bench-all.sh's turns section).
# A second pair of the yardstick's provider as an arm (e.g. verbs2=verbs) shows how far two
# pairs of one provider differ in such a run: how far a ratio may sit from 1 for nothing.
#
#   make bench SECTIONS=turns         (boots the VM; the section runs this BENCH_TURN_REPEATS
#                                     times per size, 8 by default)
#   test/bench/interleaved-pingpong.sh   (inside the VM, from the build dir)
# BENCH_ARMS: space-separated NAME=PROVIDER[@EP][/SERVER_MODE[/CLIENT_MODE]] (EP msg or rdm;
#             default msg; modes: fi_vwait_bench -m, default spin, the client's default spin),
#             in turn order; PROVIDER raw: test/bench/raw_pingpong, the same ping-pong on raw
#             verbs (MSG, spinning). E.g. "spin=vwait sread=vwait/sread-unspec" puts a server
#             in fi_cq_sread beside a spinning one, both answering a spinning client.
#             Default: "verbs=verbs vwait=vwait".
# BENCH_REF:  the yardstick's NAME (default: the first arm). An arm in the middle of the order
#             never runs two bursts in a row, the first and the last do at each reversal: a
#             caller that repeats the run rotates the order (bench-all.sh does).
# BENCH_PRELOAD_<NAME>: an LD_PRELOAD for that arm (e.g. a library that starts a thread)
# BENCH_ENV_<NAME>: more VAR=VALUE words for that arm's two processes (e.g. another build's
#             FI_PROVIDER_PATH, or FI_VWAIT_* parameters)
# BENCH_THINK: us the client thinks before each round, outside the timed rounds (default 0)
# BENCH_SIZE (64), BENCH_BURSTS (60), BENCH_ITERS (500), BENCH_WARMUP (20), BENCH_TURN_TIMEOUT
# (120 s for a side to finish a burst, its connection included; then it counts as dead)
set -u -o pipefail
: "${VWAIT_BUILDDIR:=$PWD}"
export FI_PROVIDER_PATH="$VWAIT_BUILDDIR/.libs" FI_UNIVERSE_SIZE=${FI_UNIVERSE_SIZE:-32}
bench="$VWAIT_BUILDDIR/util/fi_vwait_bench"
addr=${RXE_ADDR:?run it in the VM (make bench SECTIONS=turns)}
arms=(${BENCH_ARMS:-verbs=verbs vwait=vwait})
size=${BENCH_SIZE:-64}
bursts=${BENCH_BURSTS:-60}
iters=${BENCH_ITERS:-500}
warmup=${BENCH_WARMUP:-20}
think=${BENCH_THINK:-0} # us the client thinks before each round (not timed)
port=${BENCH_PORT:-7650}
turn_timeout=${BENCH_TURN_TIMEOUT:-120} # seconds a side may take for its burst (connecting too)
tmp=$(mktemp -d)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

all=()
for a in "${arms[@]}"; do all+=("${a%%=*}"); done
ref=${BENCH_REF:-${all[0]}}
[[ " ${all[*]} " == *" $ref "* ]] || {
	echo "BENCH_REF=$ref is none of the arms (${all[*]})"
	exit 2
}

names=() gofd=() donefd=() clipid=()
for a in "${arms[@]}"; do
	name=${a%%=*} spec=${a#*=} smode=spin cmode=spin
	if [[ $spec == */* ]]; then
		modes=${spec#*/} spec=${spec%%/*}
		smode=${modes%%/*}
		[[ $modes == */* ]] && cmode=${modes#*/}
	fi
	prov=${spec%@*} ep=msg
	[[ $spec == *@* ]] && ep=${spec#*@}
	[ "$ep" = rdm ] && prov="$prov;ofi_rxm"
	var=BENCH_PRELOAD_$name
	pre=${!var:-}
	var=BENCH_ENV_$name
	read -r -a extra_env <<<"${!var:-}"
	port=$((port + 1))
	f=$tmp/$name
	mkfifo "$f.sgo" "$f.sdone" "$f.cgo" "$f.cdone"
	scmd=("$bench" -e "$ep" -p "$prov" -m "$smode") ccmd=("$bench" -e "$ep" -p "$prov" -m "$cmode")
	[ "$prov" = raw ] && scmd=("$VWAIT_BUILDDIR/test/bench/raw_pingpong") ccmd=("${scmd[@]}")
	common=(-S "$size" -I "$iters" -W "$warmup" -R "$bursts" -P "$port")
	[ "$think" != 0 ] && common+=(-T "$think")
	env ${pre:+LD_PRELOAD=$pre} FI_PROVIDER="${prov%%;*}" "${extra_env[@]}" "${scmd[@]}" "${common[@]}" \
		-G "$f.sgo,$f.sdone" >"$f.srv" 2>&1 &
	pids+=($!)
	for _ in $(seq 300); do # until it listens, or is gone
		grep -q LISTENING "$f.srv" && break
		kill -0 "${pids[-1]}" 2>/dev/null || break
		sleep 0.1
	done
	env ${pre:+LD_PRELOAD=$pre} FI_PROVIDER="${prov%%;*}" "${extra_env[@]}" "${ccmd[@]}" "${common[@]}" \
		-G "$f.cgo,$f.cdone" "$addr" >"$f.cli" 2>&1 &
	pids+=($!) clipid+=($!)
	# read-write: neither this open nor the benchmark's (once its side is connected) waits for
	# the other end, so a side that died before opening its fifos cannot hang the driver
	exec {cg}<>"$f.cgo" {cd}<>"$f.cdone" {sg}<>"$f.sgo" {sd}<>"$f.sdone"
	names+=("$name") gofd+=("$cg $sg") donefd+=("$cd $sd")
done

n=${#names[@]}
echo "interleaved ping-pong: $size B, think $think us, $n arms (${arms[*]}), $bursts bursts of $iters rounds each, $(date -u +%FT%TZ)"
for ((b = 0; b < bursts; b++)); do
	for ((k = 0; k < n; k++)); do
		j=$k
		((b % 2)) && j=$((n - 1 - k))
		for fd in ${gofd[j]}; do printf x >&"$fd"; done
		for fd in ${donefd[j]}; do
			if ! read -r -n1 -t "$turn_timeout" -u "$fd" _; then
				echo "arm ${names[j]}: stopped at burst $b (or no answer in $turn_timeout s):"
				tail -n 5 "$tmp/${names[j]}.cli" "$tmp/${names[j]}.srv"
				exit 1
			fi
		done
	done
done
rc=0
for p in "${clipid[@]}"; do wait "$p" || rc=1; done
for ((k = 0; k < n; k++)); do grep -h '^RESULT' "$tmp/${names[k]}.cli" || { echo "arm ${names[k]}: no result"; tail -n 5 "$tmp/${names[k]}.cli"; rc=1; }; done
[ $rc = 0 ] || exit 1

# name burst lat, then the table
for ((k = 0; k < n; k++)); do
	sed -nE "s/^BURST .* burst=([0-9]+) .* lat_us=([0-9.]+).*/${names[k]} \1 \2/p" "$tmp/${names[k]}.cli"
done | awk -v ref="$ref" -v order="${names[*]}" '
function sort(a, m,   i, j, t) { for (i = 2; i <= m; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t } }
function med(a, m) { return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2 }
{ lat[$1, $2] = $3; if ($2 + 1 > nb) nb = $2 + 1 }
END {
	na = split(order, arm0, " ")
	arm[1] = ref; na2 = 1
	for (k = 1; k <= na; k++) if (arm0[k] != ref) arm[++na2] = arm0[k]
	printf "\n| arm | one-way latency (us), median [min-max] of %d bursts | burst ratio to %s, median [min-max] | bursts at or below %s |\n|---|---|---|---|\n", nb, ref, ref, ref
	for (k = 1; k <= na; k++) {
		m = 0; r = 0; le = 0
		for (b = 0; b < nb; b++) {
			v[++m] = lat[arm[k], b]
			q[++r] = lat[arm[k], b] / lat[ref, b]
			if (q[r] <= 1) le++
		}
		sort(v, m); sort(q, r)
		if (arm[k] == ref)
			printf "| %s | %.2f [%.2f-%.2f] | (yardstick) | |\n", arm[k], med(v, m), v[1], v[m]
		else
			printf "| %s | %.2f [%.2f-%.2f] | %.3f [%.3f-%.3f] | %d of %d |\n", arm[k], med(v, m), v[1], v[m], med(q, r), q[1], q[r], le, r
		line[k] = sprintf("TURNS arm=%s lat_us=%.3f ratio=%.4f", arm[k], med(v, m), med(q, r))
	}
	print ""
	for (k = 1; k <= na; k++) print line[k]
}'
