#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
# make bench SECTIONS=scale-util: the util layer's cost per wake against the number of members, on the
# host, no device (test/bench/scale_util: members fed by eventfd channels as verbs CQs are).
# Counted, not timed: instructions per wake by callgrind (--toggle-collect=scale_round, the
# measured rounds only), system calls per wake by strace -f (the calls between the two
# close(-37) marks that bracket the rounds), arms per wake by the harness. Modes:
#   waitset -s  waits that find their entry in fi_wait's poll phase (a spinning waiter)
#   waitset     fi_trywait on the set between rounds: every wake comes through the channel
#   pollset     fi_poll until it names the member
#   epoll       N FI_WAIT_FD objects in an application epoll, fi_trywait on the one read
# SCALE_NS (default "16 256 1024 4096 16384"), SCALE_ACTIVE ("1 16": A active members, one of
# them fired per round, round robin), SCALE_ROUNDS (200). Then the bursts beside libfabric's
# tcp util objects (SCALE_BURST_NS, below).
# Then the threads table: the work-queue pattern (scale_util -m threads / threads-set), T
# consumers in fi_cq_sread on one CQ or each on its own CQ of one wait set, one producer writing
# one completion at a time: completions per second (the median of 3 runs: timed, so noisy on a
# shared host), and per completion the waiter's wakeups (counted: waiter::counts()), the empty
# ones among them, the consumers' voluntary context switches and the process's system calls
# (strace -f; the producer's sched_yield while it waits left out); with the default wait policy
# (adaptive: a consumer may find the next completion while it spins, and not sleep) and with
# -P block (every wait sleeps: the wake path alone). SCALE_THREADS ("1 2 4 8"), SCALE_COMPLETIONS (2000); SCALE_NS="" skips the
# members tables.
set -u
bin=${1:?usage: scale-util.sh BUILDDIR}/test/bench/scale_util
ns=${SCALE_NS-16 256 1024 4096 16384}
actives=${SCALE_ACTIVE:-1 16}
rounds=${SCALE_ROUNDS:-200}
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
echo "# util layer per wake, $(date -u +%FT%TZ), $rounds rounds"
echo
echo "| mode | A | N | instructions | system calls | arms | descriptors | RSS kB |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
for spec in "waitset -s" waitset pollset epoll; do
	mode=${spec%% *} extra=${spec#"$mode"}
	for a in $actives; do
		for n in $ns; do
			[ "$a" -le "$n" ] || continue
			args="$extra -m $mode -N $n -A $a -I $rounds"
			res=$("$bin" $args 2>/dev/null) || {
				echo "| $spec | $a | $n | (failed: $("$bin" $args 2>&1 | tail -1)) | | | | |"
				continue
			}
			ir=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null \
				--toggle-collect=scale_round "$bin" $args 2>&1 | sed -n 's/.*Collected : //p')
			strace -f -o "$tmp" "$bin" $args >/dev/null 2>&1
			sc=$(awk '/close\(-37\)/{on=!on; next} on{c++} END{print c+0}' "$tmp")
			arms=$(sed -n 's/.*arms_per_round=\([^ ]*\).*/\1/p' <<<"$res")
			fds=$(sed -n 's/.* fds=\([^ ]*\).*/\1/p' <<<"$res")
			rss=$(sed -n 's/.* rss_kb=\([^ ]*\).*/\1/p' <<<"$res")
			awk -v s="$spec" -v a="$a" -v n="$n" -v ir="${ir:-0}" -v sc="$sc" -v r="$rounds" \
				-v arms="$arms" -v fds="$fds" -v rss="$rss" \
				'BEGIN{printf "| %s | %d | %d | %.0f | %.2f | %s | %s | %s |\n", s, a, n, ir/r, sc/r, arms, fds, rss}'
		done
	done
done

# Bursts and the anchor: A members signalled per round (-B: the waiter reads all of them) beside
# A = 1, vwait's util layer beside libfabric's own util objects (tcp-*: the tcp provider's CQs
# woken by fi_cq_signal; scale_util's header says how each form is driven), per wake (a return
# of fi_wait, fi_poll or epoll_wait) and per completion (per round / A). tcp-waitset's rounds
# wait in a thread of their own: its system calls are the ones of the threads other than the
# main one (which signals). N = 16 and the largest N that opens: SCALE_BURST_NS ("16 16384
# 4096": an N is skipped once a larger one ran; "" skips the table), SCALE_BURST_ROUNDS (20).
burst_rounds=${SCALE_BURST_ROUNDS:-20}
burst_ns=${SCALE_BURST_NS-16 16384 4096}
if [ -n "$burst_ns" ]; then
	echo
	echo "| form | util layer | A | N | wakes/round | instructions/wake | instructions/completion | system calls/wake | system calls/completion | descriptors | RSS kB |"
	echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
fi
for mode in waitset pollset epoll; do
	for impl in vwait tcp; do
		for a in 1 16; do
			ran=0
			for n in $burst_ns; do
				[ "$n" -gt 16 ] && [ "$ran" -gt "$n" ] && continue
				m=$mode burst=""
				[ "$impl" = tcp ] && m=tcp-$mode
				[ "$a" -gt 1 ] && burst=-B
				args="-m $m -N $n -A $a $burst -I $burst_rounds"
				res=$("$bin" $args 2>/dev/null) || {
					echo "| $mode | $impl | $a | $n | (failed: $("$bin" $args 2>&1 | head -1)) | | | | | | |"
					continue
				}
				ran=$n
				ir=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null \
					--toggle-collect=scale_round "$bin" $args 2>&1 | sed -n 's/.*Collected : //p')
				strace -f -o "$tmp" "$bin" $args >/dev/null 2>&1
				# strace -f splits a call another thread interrupts: count it once; the
				# waiting thread's start and exit are not a wake's
				sc=$(awk -v all=$([ "$m" = tcp-waitset ] && echo 0 || echo 1) '
					/close\(-37\)/{on=!on; main=$1; next}
					/ (rseq|set_robust_list|rt_sigprocmask|madvise|exit)\(/{next}
					on && !/resumed>/ && (all || $1 != main){c++} END{print c+0}' "$tmp")
				get() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$res"; }
				awk -v f="$mode" -v i="$impl" -v a="$a" -v n="$n" -v ir="${ir:-0}" -v sc="$sc" \
					-v r="$burst_rounds" -v w="$(get wakes_per_round)" \
					-v c="$(get completions_per_round)" -v fds="$(get fds)" -v rss="$(get rss_kb)" \
					'BEGIN{printf "| %s | %s | %d | %d | %.2f | %.0f | %.0f | %.2f | %.2f | %s | %s |\n",
						f, i, a, n, w, ir/r/w, ir/r/c, sc/r/w, sc/r/c, fds, rss}'
			done
		done
	done
done

echo
echo "| threads mode | T | completions/s | wakeups | empty | voluntary switches | system calls |"
echo "|---|---:|---:|---:|---:|---:|---:|"
completions=${SCALE_COMPLETIONS:-2000}
for spec in threads threads-set "threads -P block" "threads-set -P block"; do
	mode=${spec%% *} extra=${spec#"$mode"}
	for t in ${SCALE_THREADS-1 2 4 8}; do
		args="-m $mode$extra -T $t -I $completions"
		runs=()
		for _ in 1 2 3; do
			runs+=("$("$bin" $args 2>&1)") || true
		done
		res=$(printf '%s\n' "${runs[@]}" | grep '^RESULT' | sort -t= -k5 -n | sed -n 2p)
		[ -n "$res" ] || {
			echo "| $spec | $t | (failed: $(printf '%s\n' "${runs[@]}" | tail -1)) | | | | |"
			continue
		}
		strace -f -o "$tmp" "$bin" $args >/dev/null 2>&1
		# the producer's sched_yield while it waits for the read is left out
		sc=$(awk '/close\(-37\)/{on=!on; next} on && !/sched_yield/{c++} END{print c+0}' "$tmp")
		get() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$res"; }
		awk -v m="$spec" -v t="$t" -v ps="$(get per_s)" -v w="$(get wakeups)" \
			-v e="$(get empty)" -v v="$(get nvcsw)" -v sc="$sc" -v n="$completions" \
			'BEGIN{printf "| %s | %d | %.0f | %.3f | %.3f | %.3f | %.2f |\n", m, t, ps, w, e, v, sc/n}'
	done
done
