#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
# scale-plot.sh DAT PNG: the plot of make bench SECTIONS=scale (its .dat, written beside scale.md):
# left, the server's cost per round trip against the number of members N (system calls from
# strace, CPU from getrusage; wait set and poll set); right, the descriptors a process holds
# to wait on N CQs: one FI_WAIT_FD wait set (vwait) against N FI_WAIT_FD CQs (vwait and
# upstream verbs, fds per CQ as measured, up to where ulimit -n 1024 stops them). Needs
# gnuplot (gnuplot-nox, in contrib/deps.sh).
set -eu
dat=${1:?usage: scale-plot.sh DAT PNG}
png=${2:?usage: scale-plot.sh DAT PNG}
command -v gnuplot >/dev/null || { echo "scale-plot.sh: no gnuplot" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for m in waitset pollset; do
	awk -v m="$m" '$2==m && $1+0>0 {print $1, $3, $4, $5}' "$dat" >"$tmp/$m"
done
# descriptors: "desc -p P -w W -N N fds_per_cq set_fds rss opened"
ns="16 64 256 1024 4096 16384"
for p in verbs vwait; do
	fpc=$(awk -v p="$p" '$1=="desc" && $3==p && $5=="fd" {print $8; exit}' "$dat")
	opened=$(awk -v p="$p" '$1=="desc" && $3==p && $5=="fd" {print $11; exit}' "$dat")
	for n in $ns; do
		[ -n "$fpc" ] && [ "$n" -lt "${opened:-0}" ] && awk -v n="$n" -v f="$fpc" 'BEGIN{print n, n*f}'
	done >"$tmp/fd-$p"
	# the last that opened
	[ -n "$fpc" ] && awk -v n="${opened:-0}" -v f="$fpc" 'BEGIN{if(n>0) print n, n*f}' >>"$tmp/fd-$p"
done
setfds=$(awk '$1=="desc" && $3=="vwait" && $5=="set" {print $9; exit}' "$dat")
setmax=$(awk '$1=="desc" && $3=="vwait" && $5=="set" && $11>m {m=$11} END{print m+0}' "$dat")
for n in $ns; do
	[ -n "$setfds" ] && [ "$n" -le "$setmax" ] && echo "$n $setfds"
done >"$tmp/set"
gnuplot <<GP
set terminal pngcairo size 1200,480 font ",10" noenhanced
set output "$png"
set multiplot layout 1,2
set logscale x 2
set xlabel "N (CQs)"
set key top left
set grid
set title "server cost per round trip vs members (rxe, one active)"
set ylabel "system calls per round / CPU us per message"
plot "$tmp/waitset" using 1:4 with linespoints title "wait set: system calls per round", \
     "$tmp/pollset" using 1:4 with linespoints title "poll set: system calls per round", \
     "$tmp/waitset" using 1:3 with linespoints dashtype 2 title "wait set: CPU us per message", \
     "$tmp/pollset" using 1:3 with linespoints dashtype 2 title "poll set: CPU us per message"
set title "descriptors to wait on N CQs (ulimit -n 1024)"
set ylabel "descriptors"
set logscale y 2
set yrange [1:*]
set key bottom right
set arrow from 16,1024 to 16384,1024 nohead dashtype 3
plot "$tmp/fd-verbs" using 1:2 with linespoints linewidth 5 title "verbs: N FI_WAIT_FD CQs", \
     "$tmp/fd-vwait" using 1:2 with linespoints pointsize 2 title "vwait: N FI_WAIT_FD CQs (the last point: the most that opened)", \
     "$tmp/set" using 1:2 with linespoints title "vwait: one wait set of N CQs"
unset multiplot
GP
echo "scale-plot.sh: wrote $png"
