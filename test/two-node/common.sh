# SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
# test/two-node/common.sh - helpers for the two-node tier (bash).
# shellcheck shell=bash
# The tests of test/two-node/ run ON THE HOST, inside `contrib/vm/two-node.sh run` (make
# check-two-node boots the pair once and runs test/integration/run.sh with VWAIT_TIER=two-node),
# and drive the two guests: node a (client side) and node b (server side) on one private link.
# Source it first:  . "$VWAIT_SRCDIR/test/two-node/common.sh"
# Conventions (exit 0/77/other, "# timeout:", scratch dir = cwd): test/integration/run.sh.
# The scratch dir sits under the shared build dir, so a file one node writes there is seen by
# the host and by the other node.
# shellcheck source=../integration/common.sh
. "$VWAIT_SRCDIR/test/integration/common.sh"
TN=$VWAIT_SRCDIR/contrib/vm/two-node.sh
ADDR_A=${TWO_NODE_ADDR_A:-169.254.78.1}
ADDR_B=${TWO_NODE_ADDR_B:-169.254.78.2}

# need_two_node: skip unless inside a two-node run
need_two_node() {
	[ -n "${TWO_NODE_DIR:-}" ] && [ -d "$TWO_NODE_DIR" ] ||
		skip "not inside contrib/vm/two-node.sh run (make check-two-node)"
}

# tn_start NODE NAME 'CMD': CMD (bash -c) on NODE as job NAME (unique per run); killed at exit
tn_jobs=()
tn_start() {
	local j="$2-$$-$RANDOM"
	eval "tn_job_$(echo "$2" | tr -c 'a-zA-Z0-9_\n' _)=$j"
	tn_jobs+=("$j")
	# TN_TIMEOUT: a hang; 10x a job's time in the emulated guests
	"$TN" start "$1" "$j" timeout -k 5 "${TN_TIMEOUT:-120}" bash -c "$3"
}
# tn_wait NAME [SECONDS]: job NAME's output, then its status
tn_wait() {
	local v
	v=tn_job_$(echo "$1" | tr -c 'a-zA-Z0-9_\n' _)
	"$TN" wait "${!v}" "${2:-0}"
}
# tn_signal NAME [SIG]
tn_signal() {
	local v
	v=tn_job_$(echo "$1" | tr -c 'a-zA-Z0-9_\n' _)
	"$TN" signal "${!v}" "${2:-KILL}"
}
# at exit: every job still running is killed (a test that timed out leaves nothing behind),
# the link is up and both nodes run
tn_cleanup() {
	local j
	for j in "${tn_jobs[@]}"; do
		"$TN" signal "$j" KILL >/dev/null 2>&1
	done
	"$TN" link up >/dev/null 2>&1
	"$TN" alive a || "$TN" boot a
	"$TN" alive b || "$TN" boot b
}
trap tn_cleanup EXIT

# tn_pair NAME 'SERVER' 'CLIENT' [PORT]: SERVER on node b, then CLIENT on node a once b
# listens on TCP PORT (or TN_DELAY seconds, default 3, when no PORT). Outputs in
# NAME.server.log / NAME.client.log, printed; 0 only if both exit 0 (their exit statuses in
# tn_crc and tn_src).
tn_pair() {
	local name=$1 srv=$2 cli=$3 port=${4:-} crc src n
	echo "== $name server (node b): $srv"
	rm -f "$name.listening"
	if [ -n "$port" ]; then
		tn_start b "$name-srv" ". '$VWAIT_SRCDIR/test/integration/common.sh'; $srv & p=\$!
			for i in \$(seq 300); do tcp_listening $port && break; kill -0 \$p 2>/dev/null || break; sleep 0.1; done
			touch '$PWD/$name.listening'; wait \$p"
		for n in $(seq 400); do
			[ -e "$name.listening" ] && break
			sleep 0.1
		done
	else
		tn_start b "$name-srv" "$srv"
		sleep "${TN_DELAY:-3}"
	fi
	echo "== $name client (node a): $cli"
	tn_start a "$name-cli" "$cli"
	tn_wait "$name-cli" >"$name.client.log" 2>&1
	crc=$?
	tn_wait "$name-srv" 30 >"$name.server.log" 2>&1
	src=$?
	tn_crc=$crc tn_src=$src
	echo "== $name client output (exit $crc):"
	cat "$name.client.log"
	echo "== $name server output (exit $src):"
	cat "$name.server.log"
	[ "$crc" = 0 ] && [ "$src" = 0 ]
}

# tn_feed FEEDER_JOB WAITER_JOB PORT 'FEEDER OPTIONS' 'WAITER OPTIONS': test/two-node/xnode's
# feeder on node b and its waiter on node a, connected on PORT; the listener first, the other
# once it listens (xnode -L; up to 30 s). On RoCE the feeder listens and the waiter connects.
# On iWARP the waiter listens and the feeder connects: the feeder sends first, and MPA lets
# only the connecting side do that (a message the accepting side sends at once can reach the
# other side with the MPA reply, and siw there fails the connect: FI_ECONNABORTED; fi_vwait(7)).
tn_feed() {
	local fj=$1 wj=$2 port=$3 fo=$4 wo=$5 x=$VWAIT_BUILDDIR/test/two-node/xnode
	local l=$PWD/$2.listening lj
	rm -f "$l"
	if tn_is_iwarp; then
		lj=$wj
		tn_start a "$wj" "$x waiter -l $port -L $l $wo"
	else
		lj=$fj
		tn_start b "$fj" "$x feeder -l $port -L $l $fo"
	fi
	for _ in $(seq 300); do
		[ -e "$l" ] && break
		sleep 0.1
	done
	[ -e "$l" ] || { tn_wait "$lj" 1; fail "$lj never listened on port $port"; }
	if tn_is_iwarp; then
		tn_start b "$fj" "$x feeder -c $ADDR_A -p $port $fo"
	else
		tn_start a "$wj" "$x waiter -c $ADDR_B -p $port $wo"
	fi
}

# tn_link_ready: the link is up (qemu) and the device's port (RXE_DEV on the nodes: rxe0, or
# siw0 with VM_RDMA=siw) is ACTIVE on both nodes (up to 30 s). siw ignores the carrier: its
# port stays ACTIVE while the link is down.
tn_link_ready() {
	local w='for i in $(seq 300); do grep -q ACTIVE "/sys/class/infiniband/$RXE_DEV/ports/1/state" && exit 0; sleep 0.1; done; exit 1'
	"$TN" link up >/dev/null 2>&1
	"$TN" both "$w" "$w" >/dev/null
}

# tn_is_iwarp: true when node a's device is iWARP (is_iwarp of test/integration/common.sh, run
# on the node; both nodes have the same kind); asked once per test
tn_is_iwarp() {
	if [ -z "${tn_iwarp:-}" ]; then
		tn_iwarp=no
		"$TN" on a bash -c ". '$VWAIT_SRCDIR/test/integration/common.sh' && is_iwarp" && tn_iwarp=yes
	fi
	[ "$tn_iwarp" = yes ]
}
# tn_need_roce WHAT: skip when the nodes' device is iWARP, which cannot do WHAT
tn_need_roce() {
	! tn_is_iwarp || skip "the nodes' device is iWARP: ${1:-this test needs InfiniBand or RoCE}"
}

# gidx: (a shell snippet for a node's command) prints the node's device's IPv4 RoCE v2 GID index
# (rxe_gidx of test/integration/common.sh, run on the node)
gidx="\$(. $VWAIT_SRCDIR/test/integration/common.sh && rxe_gidx \$RXE_DEV)"
