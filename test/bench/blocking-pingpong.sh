#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
# Blocking ping-pong, side by side, in ONE VM boot: vwait in every wait mode, upstream verbs
# (spinning and fi_cq_sread on FI_WAIT_FD) and raw ibv_rc_pingpong (-e: completion-channel
# events, the floor of blocking; and spinning). Prints latency and CPU time per message and the
# ratios against the raw floor and upstream verbs. Figures mean something only as ratios
# within one run (the VM's CPU is emulated).
#
#   make bench SECTIONS=blocking   (boots the VM; BENCH_SIZE, BENCH_ITERS, BENCH_MODES)
#   test/bench/blocking-pingpong.sh   (inside the VM, from the build dir)
set -u -o pipefail
: "${VWAIT_BUILDDIR:=$PWD}"
export FI_PROVIDER_PATH="$VWAIT_BUILDDIR/.libs"
bench="$VWAIT_BUILDDIR/util/fi_vwait_bench"
addr=${RXE_ADDR:?run it in the VM (make bench SECTIONS=blocking)}
dev=${RXE_DEV:-rxe0}
size=${BENCH_SIZE:-64}
iters=${BENCH_ITERS:-2000}
# MODE:N (waitset, pollset): the set holds N CQs, one in use and N-1 idle
modes=${BENCH_MODES:-"spin sread-unspec sread-fd sread-pollfd sread-mutex sread-yield trywait-poll waitset waitset:64 pollset pollset:1024 cntr-wait"}
port=7600
tmp=$(mktemp -d)
results=()

gidx=
for g in /sys/class/infiniband/$dev/ports/1/gids/*; do
	case $(cat "$g" 2>/dev/null) in 0000:0000:0000:0000:0000:ffff:*) gidx=${g##*/}; break ;; esac
done

# pair NAME 'SERVER' 'CLIENT': prints the client's output
pair() {
	local name=$1
	timeout 120 bash -c "$2" >"$tmp/$name.srv" 2>&1 &
	local spid=$! i
	sleep 1
	timeout 120 bash -c "$3" >"$tmp/$name.cli" 2>&1
	local rc=$?
	for i in $(seq 50); do kill -0 $spid 2>/dev/null || break; sleep 0.1; done
	kill $spid 2>/dev/null
	wait $spid 2>/dev/null
	[ $rc = 0 ] || { echo "  ($name: client exit $rc)"; sed 's/^/    /' "$tmp/$name.cli" "$tmp/$name.srv" | tail -8; }
	return $rc
}

run_fi() { # PROV MODE[:MEMBERS]
	local p=$1 m=$2 line n=1
	case $m in *:*) n=${m#*:} m=${m%%:*} ;; esac
	port=$((port + 1))
	if pair "$p-$2" "$bench -p '$p' -m $m -N $n -S $size -I $iters -P $port" \
		"$bench -p '$p' -m $m -N $n -S $size -I $iters -P $port $addr"; then
		line=$(grep '^RESULT' "$tmp/$p-$2.cli")
		results+=("$p $2 $(sed -E 's/.*lat_us=([0-9.]+) cpu_us_per_msg=([0-9.]+).*/\1 \2/' <<<"$line")")
	elif grep -q UNSUPPORTED "$tmp/$p-$2.cli"; then
		results+=("$p $2 unsupported -")
	else
		results+=("$p $2 failed -")
	fi
}

run_raw() { # NAME EXTRA_FLAGS
	local name=$1 flags=$2 usec
	port=$((port + 1))
	if pair "$name" "ibv_rc_pingpong -d $dev -g $gidx -p $port -s $size -n $iters $flags" \
		"ibv_rc_pingpong -d $dev -g $gidx -p $port -s $size -n $iters $flags $addr"; then
		# "... iters in ... seconds = X usec/iter": one iteration is one round trip
		usec=$(sed -nE 's/.* ([0-9.]+) usec\/iter.*/\1/p' "$tmp/$name.cli")
		results+=("raw $name $(awk -v u="$usec" 'BEGIN{printf "%.2f", u/2}') -")
	else
		results+=("raw $name failed -")
	fi
}

echo "blocking ping-pong: $size bytes, $iters iterations, device $dev, $(date -u +%FT%TZ)"
run_raw ibv_rc_pingpong-e "-e"
run_raw ibv_rc_pingpong ""
run_fi verbs spin
run_fi verbs sread-fd
for m in $modes; do run_fi vwait "$m"; done

floor=$(printf '%s\n' "${results[@]}" | awk '$1=="raw" && $2=="ibv_rc_pingpong-e" {print $3}')
vsread=$(printf '%s\n' "${results[@]}" | awk '$1=="verbs" && $2=="sread-fd" {print $3}')
printf '\n%-7s %-20s %12s %14s %12s %12s\n' provider mode "lat (us)" "cpu us/msg" "/ raw -e" "/ verbs sread"
printf '%s\n' "${results[@]}" | awk -v floor="$floor" -v vs="$vsread" '{
	r1 = ($3+0 > 0 && floor+0 > 0) ? sprintf("%.2fx", $3/floor) : "-";
	r2 = ($3+0 > 0 && vs+0 > 0) ? sprintf("%.2fx", $3/vs) : "-";
	printf "%-7s %-20s %12s %14s %12s %12s\n", $1, $2, $3, $4, r1, r2 }'
rm -rf "$tmp"
