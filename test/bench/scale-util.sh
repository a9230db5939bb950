#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
# make bench-scale-util: the util layer's cost per wake against the number of members, on the
# host, no device (test/bench/scale_util: members fed by eventfd channels as verbs CQs are).
# Counted, not timed: instructions per wake by callgrind (--toggle-collect=scale_round, the
# measured rounds only), system calls per wake by strace -f (the calls between the two
# close(-37) marks that bracket the rounds), arms per wake by the harness. Modes:
#   waitset -s  waits that find their entry in fi_wait's poll phase (a spinning waiter)
#   waitset     fi_trywait on the set between rounds: every wake comes through the channel
#   pollset     fi_poll until it names the member
#   epoll       N FI_WAIT_FD objects in an application epoll, fi_trywait on the one read
# SCALE_NS (default "16 256 1024 4096 16384"), SCALE_ACTIVE ("1 16"), SCALE_ROUNDS (200).
set -u
bin=${1:?usage: scale-util.sh BUILDDIR}/test/bench/scale_util
ns=${SCALE_NS:-16 256 1024 4096 16384}
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
