#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
# test/bench/mr-cache.sh - the registration cache, counted, in one VM boot (make bench-mr-cache):
# three arms, vwait;ofi_rxm with FI_VWAIT_MR_CACHE=0 (vwait-off) and =1 (vwait-on), upstream
# verbs;ofi_rxm with its own MR cache (verbs; FI_UNIVERSE_SIZE=32 so that rxm fits rxe's CQs),
# Open MPI's OFI MTL (no descriptors: ofi_rxm registers each rendezvous buffer):
#   - counts: NetPIPE at 1 MiB, -n 200 against -n 20 (NetPIPE runs 3 trials of N round trips:
#     540 more round trips, 1080 more messages), both ranks under strace -f -c -e trace=ioctl:
#     ioctl calls per message; registrations per message from the cache's line at domain
#     close (FI_LOG_LEVEL=info; vwait-on only);
#   - CPU per message: user + system time of both ranks (GNU time), the same difference,
#     CPU_REPEATS rounds (default BENCH_REPEATS, 2), the arms' order rotated; NetPIPE's 1 MiB
#     one-way time;
#   - bandwidth 16 KiB - 4 MiB (NetPIPE -n BW_N, default 10), BENCH_REPEATS rounds: median
#     Mb/s per size;
#   - fi_mr_reg + fi_close of a 1 MiB buffer (test/bench/mr_reg_cost): vwait off, a hit, a
#     miss (two buffers, FI_MR_CACHE_MAX_COUNT=1), verbs; system calls per hit (strace -c,
#     -n 10000 against -n 1000); callgrind (BENCH_CALLGRIND=1, the default): the cache's own
#     instructions per hit and per miss (test/bench/mr_cache_cost) and today's uncached call;
#   - computed, not measured: the time a real NIC would spend registering per 1 MiB message,
#     from the registrations counted here and UCX's model of an InfiniBand registration,
#     16 us + 0.06 ns/B.
# MR_BENCH_SECTIONS (default "counts cpu bw cost") runs a subset.
# Writes BENCH_OUT (default $VWAIT_BUILDDIR/bench-mr-cache)/results.txt.
set -u -o pipefail
B=${VWAIT_BUILDDIR:-$PWD}
export FI_PROVIDER_PATH=$B/.libs
reps=${BENCH_REPEATS:-2}
cpu_reps=${CPU_REPEATS:-$reps}
bw_n=${BW_N:-10}
out=${BENCH_OUT:-$B/bench-mr-cache}
[ -n "${RXE_ADDR:-}" ] || {
	echo "SKIP: RXE_ADDR not set: run inside contrib/vm/run-in-vm.sh"
	exit 77
}
mkdir -p "$out" && cd "$out" || exit 1
arms=(vwait-off vwait-on verbs)
mib=1048576
sections=" ${MR_BENCH_SECTIONS:-counts cpu bw cost} "
want() { [[ $sections == *" $1 "* ]]; }

mpi() ( # ARM WRAP CMD...: mpirun of 2 ranks over the arm, each rank as WRAP CMD (WRAP: a
	# bash command line that runs "$@", $R the rank)
	local arm=$1 wrap=$2 prov=${1%%-*} v pass=()
	shift 2
	export FI_PROVIDER=$prov FI_LOG_LEVEL=info FI_LOG_PROV=vwait
	unset FI_UNIVERSE_SIZE FI_VWAIT_MR_CACHE
	[ "$prov" = verbs ] && export FI_UNIVERSE_SIZE=32
	case $arm in vwait-off) export FI_VWAIT_MR_CACHE=0 ;; vwait-on) export FI_VWAIT_MR_CACHE=1 ;; esac
	for v in FI_PROVIDER FI_PROVIDER_PATH FI_UNIVERSE_SIZE FI_VWAIT_MR_CACHE FI_LOG_LEVEL FI_LOG_PROV; do
		[ -n "${!v:-}" ] && pass+=(-x "$v")
	done
	timeout -k 5 600 mpirun --allow-run-as-root --oversubscribe -np 2 --mca pml cm --mca mtl ofi \
		--mca mtl_ofi_provider_include "$prov" --mca btl ^openib,ofi "${pass[@]}" \
		bash -c "R=\$OMPI_COMM_WORLD_RANK; $wrap" bash "$@"
)

# cache FIELD LOG: the sum over the ranks of a figure of the cache's closing line
cache() {
	grep -a -o "registration cache: .*" "$2" | awk -v f="$1" '{
		for (i = 2; i <= NF; i++) if ($(i + 1) ~ "^" f) { s += $i; n++ } }
		END { if (n) print s; else print "-" }'
}
# per DIFF COUNT: DIFF / COUNT with two decimals, or "-"
per() { awk -v d="$1" -v c="$2" 'BEGIN { if (d == "-" || c == 0) print "-"; else printf "%.2f", d / c }'; }
stats() { # VALUES...: median min-max
	printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END {
		if (NR == 0) { print "-"; exit }
		m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		printf "%.2f (%.2f-%.2f, n=%d)", m, v[1], v[NR], NR }'
}
np1m() { echo NPopenmpi -l $mib -u $mib -n "$1" -p 0 -o "$2"; }
msgs=$((2 * 3 * (200 - 20)))

strace_cmd="strace -f --seccomp-bpf"
strace -f --seccomp-bpf -c -o /dev/null true 2>/dev/null || strace_cmd="strace -f"
echo "== counts: NetPIPE 1 MiB, -n 200 against -n 20 ($msgs messages), $strace_cmd -c -e trace=ioctl on both ranks"
declare -A ioc regs hits
count_arms=("${arms[@]}")
want counts || count_arms=()
for arm in "${count_arms[@]}"; do
	for n in 20 200; do
		d=strace.$arm.$n
		rm -rf "$d" && mkdir -p "$d"
		# shellcheck disable=SC2046 # NetPIPE's words
		if ! mpi "$arm" "exec $strace_cmd -c -e trace=ioctl -o $PWD/$d/rank\$R \"\$@\"" \
			$(np1m "$n" "$d/np.out") >"$d.log" 2>&1; then
			echo "$arm -n $n: FAILED"
			tail -n 5 "$d.log"
		fi
		ioc[$arm.$n]=$(cat "$d"/rank* 2>/dev/null | awk '$NF == "ioctl" { s += $4 } END { print s + 0 }')
		regs[$arm.$n]=$(cache registrations "$d.log")
		hits[$arm.$n]=$(cache hits "$d.log")
	done
	echo "$arm: ioctl ${ioc[$arm.20]} (-n 20), ${ioc[$arm.200]} (-n 200); cache registrations ${regs[$arm.20]} / ${regs[$arm.200]}, hits ${hits[$arm.20]} / ${hits[$arm.200]}"
done

echo "== CPU of both ranks per message, 1 MiB, $cpu_reps rounds"
declare -A cpu lat
want cpu || cpu_reps=0
for r in $(seq "$cpu_reps"); do
	for k in 0 1 2; do
		arm=${arms[$(((r + k) % 3))]}
		declare -A c=()
		for n in 20 200; do
			d=cpu.$arm.$n.$r
			rm -rf "$d" && mkdir -p "$d"
			# shellcheck disable=SC2046
			mpi "$arm" "exec /usr/bin/time -f '%U %S' -o $PWD/$d/rank\$R \"\$@\"" \
				$(np1m "$n" "$d/np.out") >"$d.log" 2>&1 || echo "round $r $arm -n $n: FAILED"
			c[$n]=$(cat "$d"/rank* 2>/dev/null | awk 'NF == 2 { s += $1 + $2 } END { print s + 0 }')
		done
		u=$(awk -v a="${c[20]}" -v b="${c[200]}" -v m=$msgs 'BEGIN { printf "%.1f", (b - a) / m * 1e6 }')
		l=$(awk '{ printf "%.1f", $3 * 1e6; exit }' "cpu.$arm.200.$r/np.out" 2>/dev/null)
		cpu[$arm]+="$u "
		lat[$arm]+="${l:-} "
		echo "round $r $arm: CPU ${c[20]} s (-n 20), ${c[200]} s (-n 200): $u us per message; one-way ${l:-?} us"
	done
done

echo "== bandwidth 16 KiB - 4 MiB (NetPIPE -n $bw_n), $reps rounds"
bw_reps=$reps
want bw || bw_reps=0
for r in $(seq "$bw_reps"); do
	for k in 0 1 2; do
		arm=${arms[$(((r + k) % 3))]}
		mpi "$arm" 'exec "$@"' NPopenmpi -l 16384 -u 4194304 -n "$bw_n" -p 0 -o "bw.$arm.$r" \
			>"bw.$arm.$r.log" 2>&1 || echo "round $r $arm: FAILED"
	done
done
# NetPIPE's -o files only (bw.ARM.R; not the runs' logs, bw.ARM.R.log), their numeric rows
bwtab=$(for arm in "${arms[@]}"; do
	for r in $(seq "$bw_reps"); do
		cat "bw.$arm.$r" 2>/dev/null
	done | awk -v a="$arm" '$1 ~ /^[0-9]+$/ && NF >= 2 { print $1, a, $2 }'
done | sort -k1,1n -k2,2 -k3,3g | awk '
	# POSIX awk (mawk is the default awk of Debian): input sorted by size, arm and value
	!($1 in seen) { seen[$1] = 1; sz[++n] = $1 }
	{ k = $1 " " $2; c[k]++; v[k, c[k]] = $3 }
	END {
		printf "%-9s %-22s %-22s %-22s\n", "bytes", "vwait-off Mb/s", "vwait-on Mb/s", "verbs Mb/s"
		split("vwait-off vwait-on verbs", arms, " ")
		for (i = 1; i <= n; i++) {
			printf "%-9s", sz[i]
			for (j = 1; j <= 3; j++) {
				k = sz[i] " " arms[j]; m = c[k]
				if (!m) { printf " %-22s", "-"; continue }
				med = m % 2 ? v[k, (m + 1) / 2] : (v[k, m / 2] + v[k, m / 2 + 1]) / 2
				printf " %-22s", sprintf("%.0f (%.0f-%.0f)", med, v[k, 1], v[k, m])
			}
			printf "\n"
		}
	}')
echo "$bwtab"

echo "== fi_mr_reg + fi_close of 1 MiB (test/bench/mr_reg_cost)"
cost=$B/test/bench/mr_reg_cost
reg_lines='' sc_line='' cg_lines=''
want cost && reg_lines=$(
	FI_VWAIT_MR_CACHE=0 "$cost" -n 1000 same | sed 's/^/cache off: /'
	FI_VWAIT_MR_CACHE=1 "$cost" -n 10000 same | sed 's/^/hit:       /'
	FI_VWAIT_MR_CACHE=1 FI_MR_CACHE_MAX_COUNT=1 "$cost" -n 1000 alt | sed 's/^/miss:      /'
	FI_UNIVERSE_SIZE=32 "$cost" -p verbs -n 10000 same | sed 's/^/verbs:     /'
)
echo "$reg_lines"
sc() { # N: system calls of a run of N hits
	FI_VWAIT_MR_CACHE=1 strace -f -c -o "sc.$1" "$cost" -n "$1" same >/dev/null 2>&1
	awk '$NF == "total" { print $4 }' "sc.$1"
}
if want cost; then
	s1=$(sc 1000) s2=$(sc 10000)
	sc_line="system calls per hit: $(per "$((s2 - s1))" 9000) ($s1 at -n 1000, $s2 at -n 10000)"
	echo "$sc_line"
fi
if want cost && [ "${BENCH_CALLGRIND:-1}" = 1 ] && command -v valgrind >/dev/null; then
	cg() { # NAME N CMD...: instructions per round of CMD's instrumented loop
		local name=$1 n=$2 tot
		shift 2
		valgrind -q --tool=callgrind --instr-atstart=no --callgrind-out-file="cg.$name" "$@" \
			>"cg.$name.log" 2>&1
		tot=$(awk '/^totals:/ { print $2; exit }' "cg.$name")
		echo "$name: $(per "${tot:-0}" "$n") instructions per call (callgrind, $n calls)"
	}
	cg_lines=$(
		cg "cache hit (util::mr_cache get + put)" 10000 "$B/test/bench/mr_cache_cost" -n 10000 hit
		cg "cache miss (util::mr_cache get + put, no verbs)" 10000 "$B/test/bench/mr_cache_cost" -n 10000 miss
		FI_VWAIT_MR_CACHE=0 cg "vwait fi_mr_reg + fi_close, cache off (user space only)" 200 "$cost" -n 200 same
	)
	echo "$cg_lines"
fi

# the per-message rows
table=$(
	printf '%-10s %-18s %-22s %-26s %s\n' arm "ioctl per message" "registrations per msg" "CPU us per message" "1 MiB one-way us"
	for arm in "${arms[@]}"; do
		i=$(per "$((${ioc[$arm.200]:-0} - ${ioc[$arm.20]:-0}))" $msgs)
		if [ "${regs[$arm.200]:--}" != - ] && [ "${regs[$arm.20]:--}" != - ]; then
			g=$(per "$((regs[$arm.200] - regs[$arm.20]))" $msgs)
		else
			g="- (no cache line)"
		fi
		# shellcheck disable=SC2086
		printf '%-10s %-18s %-22s %-26s %s\n' "$arm" "$i" "$g" "$(stats ${cpu[$arm]:-})" "$(stats ${lat[$arm]:-})"
	done
)
# computed: registrations a real NIC would make per 1 MiB message, each 16 us + 0.06 ns/B
# (UCX's model), against the wire time of 1 MiB at 100 Gb/s
computed=$(awk -v off="${ioc[vwait-off.200]:-0}" -v off0="${ioc[vwait-off.20]:-0}" \
	-v on="${ioc[vwait-on.200]:-0}" -v on0="${ioc[vwait-on.20]:-0}" -v m=$msgs -v b=$mib 'BEGIN {
	reg = 16 + 0.06e-3 * b; wire = b * 8 / 100e3
	# a registration and a deregistration are one ioctl each on rxe: registrations = ioctl / 2
	roff = (off - off0) / m / 2; ron = (on - on0) / m / 2
	printf "COMPUTED, not measured: one registration of 1 MiB = 16 us + 0.06 ns/B = %.1f us (UCX model); 1 MiB at 100 Gb/s = %.1f us on the wire\n", reg, wire
	printf "  cache off: %.2f registrations per message -> %.1f us per message registering (+%.0f %% over the wire time, if on the critical path)\n", roff, roff * reg, 100 * roff * reg / wire
	printf "  cache on:  %.2f registrations per message -> %.1f us per message\n", ron, ron * reg
	printf "  bandwidth bound at 1 MiB, wire + registering: off %.1f Gb/s, on %.1f Gb/s (of 100)\n", b * 8 / (wire + roff * reg) / 1e3, b * 8 / (wire + ron * reg) / 1e3
}')

{
	echo "Registration cache, Open MPI ofi MTL, 2 ranks in one guest ($(uname -r), ${RXE_DEV:-rxe0})"
	echo "per message = (figure at -n 200 - figure at -n 20) / $msgs, both ranks summed"
	echo "$table"
	echo
	echo "bandwidth, NetPIPE -n $bw_n, median (min-max) over $reps rounds"
	echo "$bwtab"
	echo
	echo "$reg_lines"
	echo "$sc_line"
	[ -n "$cg_lines" ] && echo "$cg_lines"
	echo
	echo "$computed"
} | tee results.txt
