#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
# test/bench/bench.sh - the one front door to vwait's benchmarks (make bench):
#
#   bench.sh BUILDDIR                          SECTIONS unset: print the menu
#   SECTIONS="spin turns devices" bench.sh BUILDDIR
#
# runs the sections named: the host's on the host first, then every VM section in ONE boot of
# the soft-RoCE guest (contrib/vm/run-in-vm.sh; with VM_RDMA=both when "devices" is among
# them, so that rxe0 and siw0 are both there), then two-node (two guests of its own). Writes
# BENCH_OUT (default BUILDDIR/bench-results): report.md, one markdown report that names the
# commit, the machine and the command, with every section's tables and plots and how long each
# section took; beside it what each section's script writes (its raw records and logs).
#
# The sections are the scripts' (each script's header says how it measures): bench-all.sh's
# (cost ... netpipe), bench-devices.sh, bench-scale.sh, scale-util.sh, mpi-auto-progress.sh,
# blocking-pingpong.sh, fair-demo.sh, test/integration/dp-bench.sh and dgram-bench.sh,
# test/bench/bench_util, test/two-node/bench.sh. The table below is the menu: name, where it
# runs, minutes on a quiet 2-core host (the VM's time limit: 1.5 times their sum, and 15 min), and
# what it measures. The knobs are the menu's; each script's finer parameters (its header) pass
# through the environment to it.
set -u -o pipefail
export LC_ALL=C
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
srcdir=$(cd "$here/../.." && pwd -P)

# name|where|minutes|what it measures
menu_table() {
	cat <<'EOF'
cost|vm|4|instructions per fi_cq_read, fi_send, fi_recv (callgrind); a thread's tax per call
spin|vm|6|ping-pong 64 B, 4 KiB, both sides spinning: vwait, verbs, raw verbs; and over ofi_rxm
turns|vm|8|the same, taking turns burst by burst (the narrow goal: vwait / verbs <= 1.00)
waitturns|vm|7|think 0, in turns: a server per wait mode against a spinning one
sread|vm|3|ping-pong 64 B, both sides in fi_cq_sread: vwait, verbs, against spinning
think|vm|6|a server in fi_cq_sread per policy, the client thinking 0-5000 us (think.png)
cntr|vm|5|the same, the server in fi_cntr_wait
waitset|vm|6|the same, the server in fi_wait on a wait set
idle|vm|1|a waiter idle for 2 s: its CPU per wait object and policy
policy|vm|12|the adaptive policy, think 0-5000 us: W measured, each goal checked (policy.png)
thinkturns|vm|6|think below W, in turns: spinning, adaptive, its loop without the learner
longturns|vm|8|think at or above W, in turns: adaptive - spin against what a sleep costs
pairturns|vm|4|one pair, both sides waiting, in turns, think 0 and 50 us
oversub|vm|6|K = 1 and 3 pairs at once on 2 vCPUs, both sides in fi_cq_sread
netpipe|vm|5|NetPIPE (Open MPI, ofi MTL) over vwait;ofi_rxm and verbs;ofi_rxm
devices|vm|10|rxe and siw in one boot: spinning, blocking, system calls per completion
scale|vm|30|sets of N CQs, memory per idle CQ, a busy stream, 1-1000 connections (scale.png)
mpi-auto-progress|vm|15|Open MPI with and without rxm's progress thread: latency, idle CPU
blocking|vm|3|blocking ping-pong in every wait mode beside verbs and ibv_rc_pingpong -e
demo|vm|2|setup.sh demo's table: polling, fi_cq_sread at think 0 and 50 us, in turns
pingpong|vm|4|fi_pingpong MSG latency and bandwidth, 64 B to 1 MiB, beside raw verbs
dgram|vm|3|fi_pingpong FI_EP_DGRAM latency, vwait beside verbs
sos|vm|15|OpenSHMEM (SOS): a PE in fi_cntr_wait for fetches and gets of 8 B-16 MiB, SOS's latency programs, beside verbs
scale-util|host|5|the util layer per wake against N, beside tcp's util objects (counted)
util|host|1|wake-up latency, fi_trywait and fi_poll, beside tcp's util objects
two-node|2 VMs|6|fi_pingpong across the two-node link, 64 B and 1 MiB (its own two guests)
EOF
}
# the sections of bench-all.sh, and the groups a SECTIONS word may name
all_sections="cost spin turns waitturns sread think cntr waitset idle policy thinkturns longturns pairturns oversub netpipe"
group_default="cost spin turns waitturns sread think cntr waitset idle policy oversub netpipe"
group_goals="policy thinkturns longturns pairturns oversub"

menu() {
	echo "make bench SECTIONS=\"...\": vwait's benchmarks, the sections named, in ONE VM boot"
	echo "(host sections on the host first; two-node boots two guests of its own, after)."
	echo
	printf '  %-17s %-5s %3s  %s\n' section where min "what it measures"
	menu_table | while IFS='|' read -r n w m what; do
		printf '  %-17s %-5s %3s  %s\n' "$n" "$w" "$m" "$what"
	done
	echo
	echo "  groups: default = $group_default (~$(minutes_of "$group_default") min)"
	echo "          goals   = $group_goals (~$(minutes_of "$group_goals") min; make bench-policy)"
	echo "          vm      = every VM section (~$(minutes_of "$(where_is vm)") min)"
	echo
	echo "knobs (make variables or the environment):"
	echo "  SECTIONS            the sections and groups to run (BENCH_SECTIONS, the old name, too)"
	echo "  BENCH_REPEATS       runs per cell (bench-all.sh 9; devices, mpi-auto-progress 5)"
	echo "  BENCH_PP_REPEATS    runs per cell of the ping-pong tables: spin, sread, netpipe (15)"
	echo "  BENCH_TURN_REPEATS  runs of the turns and waitturns sections (8)"
	echo "  BENCH_OVERSUB_BASE  another build dir: its policy as an arm (base) of the policy sections"
	echo "  SCALE_SECTIONS      parts of scale (members descriptors streaming connections)"
	echo "  BENCH_OUT           where the report goes (BUILDDIR/bench-results: report.md)"
	echo "  BENCH_HOST          the machine the report names (default: hostname, cores, CPU)"
	echo "  VM_TIMEOUT          the boot's limit in s (default: 1.5 x the sections' minutes, + 15 min)"
	echo "  VM_RDMA=siw         run the VM sections on soft-iWARP instead of soft-RoCE"
	echo
	echo "e.g. make bench SECTIONS=\"spin turns\" BENCH_PP_REPEATS=5; the method and the current"
	echo "figures: doc/benchmarks.md."
}

field() { menu_table | awk -F'|' -v n="$1" -v f="$2" '$1 == n { print $f }'; }
where_is() { menu_table | awk -F'|' -v w="$1" '$2 == w { printf "%s ", $1 }'; }
minutes_of() { # SECTIONS: their minutes, summed
	local s t=0
	for s in $1; do t=$((t + $(field "$s" 3))); done
	echo $t
}

# expand WORDS: groups replaced by their sections, each section once, in the order named
expand() {
	local w s seen=" " picked=()
	for w in $1; do
		case $w in
		default) w=$group_default ;;
		goals) w=$group_goals ;;
		vm) w=$(where_is vm) ;;
		esac
		for s in $w; do
			[ -n "$(field "$s" 1)" ] || {
				echo "bench: no section '$s' (make bench prints the menu)" >&2
				return 2
			}
			case $seen in *" $s "*) continue ;; esac
			seen="$seen$s "
			picked+=("$s")
		done
	done
	echo "${picked[*]}"
}

in_list() { case " $2 " in *" $1 "*) return 0 ;; esac; return 1; }
intersect() { # A B: the words of A that are in B
	local w r=()
	for w in $1; do in_list "$w" "$2" && r+=("$w"); done
	echo "${r[*]}"
}

# run_part NAME CMD...: one section's script, its output in $out/NAME.txt; its time recorded
run_part() {
	local name=$1 t0 rc
	shift
	t0=$(date +%s)
	echo "== bench: $name"
	"$@" 2>&1 | tee "$out/$name.txt"
	rc=$?
	if [ "$name" = main ] && grep -q '^section [a-z]*: [0-9]* s$' "$out/main.txt"; then
		# bench-all.sh times each of its sections
		sed -n "s/^section \([a-z]*\): \([0-9]*\) s\$/\1 \2 $rc/p" "$out/main.txt" >>"$out/sections.txt"
	else
		echo "$name $(($(date +%s) - t0)) $rc" >>"$out/sections.txt"
	fi
	return $rc
}

# ------------------------------------------------------------------ in the guest
guest() { # BUILDDIR: the VM sections of $BENCH_VM_SECTIONS
	local builddir=$1 s mains=() rc=0
	out=${BENCH_OUT:?}
	export VWAIT_BUILDDIR=$builddir VWAIT_SRCDIR=$srcdir
	echo "guest $(uname -r), $(nproc) vCPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), ${RDMA_DEV:-${RXE_DEV:-rxe0}}" \
		>"$out/guest.txt"
	for s in $BENCH_VM_SECTIONS; do
		in_list "$s" "$all_sections" && mains+=("$s")
	done
	# bench-all.sh's sections in one run of it: one results.md, one records.txt
	if [ ${#mains[@]} -gt 0 ]; then
		BENCH_SECTIONS="${mains[*]}" run_part main bash "$here/bench-all.sh" "$builddir" || rc=1
	fi
	for s in $BENCH_VM_SECTIONS; do
		in_list "$s" "$all_sections" && continue
		case $s in
		devices) BENCH_OUT=$out/devices run_part devices bash "$here/bench-devices.sh" "$builddir" ;;
		scale) SCALE_OUT=$out/scale.md run_part scale bash "$here/bench-scale.sh" ;;
		mpi-auto-progress)
			BENCH_OUT=$out/mpi-auto-progress run_part mpi-auto-progress bash "$here/mpi-auto-progress.sh"
			;;
		blocking) run_part blocking bash "$here/blocking-pingpong.sh" ;;
		demo) run_part demo bash "$here/fair-demo.sh" ;;
		pingpong) run_part pingpong bash "$srcdir/test/integration/dp-bench.sh" "$builddir" ;;
		dgram) run_part dgram bash "$srcdir/test/integration/dgram-bench.sh" "$builddir" ;;
		sos) BENCH_OUT=$out/sos run_part sos bash "$here/sos-bench.sh" ;;
		esac || rc=1
	done
	return $rc
}

# ------------------------------------------------------------------ the report
# report SECTIONS: $out/report.md from what the sections wrote
report() {
	local s f t rc
	{
		echo "# vwait benchmarks"
		echo
		echo "- commit: $commit"
		echo "- machine: $host_name"
		[ -s "$out/guest.txt" ] && echo "- VM: $(cat "$out/guest.txt") (one boot for every VM section)"
		echo "- date: $(date -u '+%F %T UTC')"
		echo "- command: make bench SECTIONS=\"$1\"$knobs"
		echo
		echo "Only ratios within one VM boot mean anything (the guest's CPU is emulated): the"
		echo "method is in doc/benchmarks.md. Each section's raw output is beside this file."
		echo
		echo "| section | where | seconds | exit |"
		echo "|---|---|---:|---:|"
		while read -r s t rc; do
			echo "| $s | $(field "$s" 2 | grep . || echo vm) | $t | $rc |"
		done <"$out/sections.txt"
		if [ -n "$(intersect "$1" "$all_sections")" ] && [ -s "$out/results.md" ]; then
			echo
			sed '1s/^## vwait benchmarks/## bench-all.sh sections/' "$out/results.md"
			for f in think policy; do
				[ -s "$out/$f.png" ] && printf '\n![%s](%s.png)\n' "$f" "$f"
			done
		fi
		for s in devices scale mpi-auto-progress blocking demo pingpong dgram sos scale-util util two-node; do
			f=
			case $s in
			devices) f=$out/devices/results.md ;;
			scale) f=$out/scale.md ;;
			mpi-auto-progress) f=$out/mpi-auto-progress/results.txt ;;
			sos) f=$out/sos/results.txt ;;
			scale-util) f=$out/scale-util.txt ;;
			*) f=$out/$s.txt ;;
			esac
			in_list "$s" "$1" && [ -s "$f" ] || continue
			echo
			echo "## $s"
			echo
			case $f in
			*.md) sed 's/^# /### /' "$f" ;;
			*) echo '```' && cat "$f" && echo '```' ;;
			esac
			[ "$s" = scale ] && [ -s "$out/scale.png" ] && printf '\n![scale](scale.png)\n'
		done
	} >"$out/report.md"
	echo "bench: wrote $out/report.md"
}

# ------------------------------------------------------------------ on the host
if [ "${1:-}" = --guest ]; then
	[ -n "${RXE_ADDR:-}" ] || {
		echo "bench.sh --guest: run by run-in-vm.sh only" >&2
		exit 2
	}
	guest "${2:?build dir}"
	exit $?
fi

builddir=$(cd "${1:-${VWAIT_BUILDDIR:-$PWD}}" && pwd -P) || exit 2
words=${SECTIONS:-${BENCH_SECTIONS:-}}
if [ -z "$words" ]; then
	menu
	exit 0
fi
sections=$(expand "$words") || exit 2
out=${BENCH_OUT:-$builddir/bench-results}
mkdir -p "$out" && out=$(cd "$out" && pwd -P) || exit 2
: >"$out/sections.txt"
# what an earlier run left of the sections to run now goes, so that the report shows this run's
rm -f "$out/report.md" "$out/guest.txt"
for s in $sections; do
	case $s in
	devices | mpi-auto-progress | sos) rm -rf "${out:?}/$s" ;;
	scale) rm -f "$out"/scale.* ;;
	esac
	rm -f "$out/$s.txt"
done
[ -n "$(intersect "$sections" "$all_sections")" ] && rm -f "$out"/results.md "$out"/think.png "$out"/policy.png
commit=$(git -C "$srcdir" describe --always --dirty --abbrev=12 2>/dev/null) &&
	commit="$commit ($(git -C "$srcdir" log -1 --format=%s 2>/dev/null))" ||
	commit="unknown ($srcdir is no git checkout)"
host_name=${BENCH_HOST:-$(hostname), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')}
knobs=
for k in BENCH_REPEATS BENCH_PP_REPEATS BENCH_TURN_REPEATS BENCH_OVERSUB_BASE SCALE_SECTIONS VM_RDMA; do
	[ -n "${!k:-}" ] && knobs="$knobs $k=${!k}"
done
export BENCH_HOST=$host_name

need() { # FILE...: each in the build dir, else say what to build
	local f
	for f in "$@"; do
		[ -e "$builddir/$f" ] || {
			echo "bench: no $builddir/$f (make bench builds it; by hand: make $f)" >&2
			exit 2
		}
	done
}
vm=() host=() two=
for s in $sections; do
	case $(field "$s" 2) in
	vm) vm+=("$s") ;;
	host) host+=("$s") ;;
	*) two=1 ;;
	esac
	case $s in
	idle | policy) need test/integration/sread_idle ;;
	scale) need test/bench/cq_fds util/fi_vwait_echo ;;
	cost) need test/bench/thread_tax ;;
	turns) need test/bench/raw_pingpong ;;
	mpi-auto-progress) need test/integration/mpi_pingpong ;;
	scale-util) need test/bench/scale_util ;;
	util) need test/bench/bench_util ;;
	# SOS and what sos-bench.sh builds with its oshcc: on the host, before the boot
	sos) bash "$here/sos-bench.sh" build "$builddir" || exit 2 ;;
	esac
done
[ ${#vm[@]} -gt 0 ] && need .libs/libvwait-fi.so util/fi_vwait_bench
echo "bench: $sections (about $(minutes_of "$sections") min); report: $out/report.md"

rc=0
for s in "${host[@]}"; do
	case $s in
	scale-util) run_part scale-util bash "$here/scale-util.sh" "$builddir" ;;
	util) run_part util "$builddir/test/bench/bench_util" ;;
	esac || rc=1
done
if [ ${#vm[@]} -gt 0 ]; then
	rdma=${VM_RDMA:-rxe}
	in_list devices "${vm[*]}" && rdma=both
	BENCH_VM_SECTIONS="${vm[*]}" BENCH_OUT=$out VWAIT_BUILDDIR=$builddir VM_RDMA=$rdma \
		VM_TIMEOUT=${VM_TIMEOUT:-$(($(minutes_of "${vm[*]}") * 90 + 900))} \
		"$srcdir/contrib/vm/run-in-vm.sh" "$here/bench.sh" --guest "$builddir" || rc=1
	[ -s "$out/guest.txt" ] || {
		echo "bench: the guest wrote nothing to $out: BENCH_OUT must lie in the VM's share" \
			"(contrib/vm/run-in-vm.sh, VM_SHARE)" >&2
		rc=1
	}
fi
if [ -n "$two" ]; then
	run_part two-node env VWAIT_BUILDDIR="$builddir" VWAIT_SRCDIR="$srcdir" \
		"$srcdir/contrib/vm/two-node.sh" run "$srcdir/test/two-node/bench.sh" || rc=1
fi
if [ -s "$out/scale.dat" ] && command -v gnuplot >/dev/null; then
	bash "$here/scale-plot.sh" "$out/scale.dat" "$out/scale.png" || true
fi
report "$sections"
exit $rc
