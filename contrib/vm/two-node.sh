#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
# contrib/vm/two-node.sh - two soft-RoCE guests on a private link: vwait between two
# machines.  Each node is a guest of run-in-vm.sh (same kernel, initramfs, root and
# share) with ONE virtio NIC; the two NICs are joined by a qemu socket netdev in UDP
# mode over the host's 127.0.0.1 (each qemu sends its frames to the other's port;
# nothing else is reachable, no host network configuration).  rxe0 is bound to that
# NIC in each guest: every packet crosses the link (ARP, RoCE v2, retransmissions).
#
#   contrib/vm/two-node.sh run CMD [ARGS...]
#       takes the host-wide VM lock once, boots node a and node b, runs CMD ON THE
#       HOST (in $PWD) with TWO_NODE_DIR set so that it can drive the nodes with the
#       commands below, powers both off and exits with CMD's status.
#   Inside `run` (TWO_NODE_DIR set):
#   two-node.sh on NODE CMD [ARGS...]   run CMD on node a|b (in $PWD, with this shell's
#                                       exported environment); its stdout/stderr come
#                                       here; exits with its status (255: node died)
#   two-node.sh start NODE NAME CMD...  the same in the background, as job NAME
#   two-node.sh wait NAME [SECONDS]     wait for job NAME: its output, then its status
#                                       (124 when SECONDS ran out; 255: node died)
#   two-node.sh signal NAME [SIG]       send SIG (default KILL) to job NAME's process group
#   two-node.sh both 'CMD_A' 'CMD_B'    CMD_A on a and CMD_B on b at once (bash -c), both
#                                       outputs (prefixed a:/b:), 0 only if both exit 0
#   two-node.sh link down|up            the link's carrier (qemu monitor set_link, node a's
#                                       and node b's side)
#   two-node.sh kill NODE               SIGKILL the node's qemu (a node that dies silently)
#   two-node.sh boot NODE               start a killed node again (same address, same link)
#   two-node.sh alive NODE              exit 0 when the node's qemu runs
#   two-node.sh rsh HOST CMD...         (on a node too) CMD (a shell command line, as ssh
#                                       takes it) on the node whose address or name is HOST:
#                                       a remote shell for launchers, e.g. Open MPI's
#                                       --mca plm_rsh_agent "two-node.sh rsh"
#
# On the nodes, commands see RXE_DEV=rxe0 (siw0 with VM_RDMA=siw: soft-iWARP on both nodes,
# see run-in-vm.sh), RXE_ADDR (their own address), RXE_PEER_ADDR
# (the other node's), TWO_NODE=a|b, and the usual run-in-vm.sh environment; host name
# node-a / node-b.  Addresses: TWO_NODE_ADDR_A (169.254.78.1), TWO_NODE_ADDR_B (169.254.78.2).
#
# Knobs: VM_CPUS (default 1 per node), VM_MEM (default 1G per node), VM_TIMEOUT (whole
# run, default 1800), VM_LOCK / VM_LOCK_WAIT (as run-in-vm.sh), TWO_NODE_PORT (UDP port
# of node a; b uses the next one; default: random in 20000-39999), TWO_NODE_BOOT_WAIT
# (seconds for a node to come up, default 180), VM_VERBOSE=1 (each node's run-in-vm.sh log).
# The nodes' queues and logs live in a directory under $PWD (the guests see it through
# the share), removed at the end unless VM_KEEP=1.
set -u -o pipefail
self=$(cd "$(dirname "$0")" && pwd -P)/$(basename "$0")
here=$(dirname "$self")
die() {
	echo "two-node: $*" >&2
	exit 125
}

node_ok() { case $1 in a | b) ;; *) die "node must be a or b, not '$1'" ;; esac }
need_dir() { [ -n "${TWO_NODE_DIR:-}" ] && [ -d "$TWO_NODE_DIR" ] || die "$1: only inside 'two-node.sh run'"; }
alive() { # NODE: the node's qemu runs (on a node, where qemu cannot be seen: assumed)
	local p
	[ -n "${TWO_NODE:-}" ] && return 0
	p=$(cat "$TWO_NODE_DIR/qemu.$1.pid" 2>/dev/null) && [ -n "$p" ] && kill -0 "$p" 2>/dev/null
}

# ---------------------------------------------------------------- the guest side
# agent QUEUE: runs in the guest as run-in-vm.sh's command.  A job is QUEUE/ID.cmd (a bash
# script written by the host); it runs in its own process group with its output in
# QUEUE/ID.out / ID.err, its pid in ID.pid and its status in ID.rc (written last).  The agent
# ends (and the guest powers off) when QUEUE/stop appears.
agent() {
	local q=$1 f id
	echo "$(hostname) $RXE_ADDR up" >"$q/ready"
	while [ ! -e "$q/stop" ]; do
		for f in "$q"/*.cmd; do
			[ -e "$f" ] || continue
			id=${f##*/}
			id=${id%.cmd}
			mv "$f" "$q/$id.job" || continue
			(
				setsid bash "$q/$id.job" >"$q/$id.out" 2>"$q/$id.err" </dev/null &
				echo $! >"$q/$id.pid"
				wait $!
				echo $? >"$q/$id.rc.tmp"
				mv "$q/$id.rc.tmp" "$q/$id.rc"
			) &
		done
		sleep 0.1
	done
	sync
	exit 0
}

# ---------------------------------------------------------------- the host side
# submit NODE NAME CMD...: queue a job (the command with this shell's cwd and environment)
submit() {
	local node=$1 name=$2 q
	shift 2
	q=$TWO_NODE_DIR/q.$node
	[ ! -e "$q/$name.job" ] && [ ! -e "$q/$name.cmd" ] || die "job $name exists on node $node"
	{
		echo "# job $name on node $node"
		export -p | grep -vE '^declare -x (BASH_[A-Z_]*|SHLVL|PWD|OLDPWD|_|HOSTNAME|DISPLAY|SSH_[A-Z_]*|XDG_RUNTIME_DIR|TERM|VM_[A-Z_]*|RXE_[A-Z_]*|TWO_NODE)(=|$)'
		echo "export TWO_NODE=$node"
		printf 'cd %q || exit 125\n' "$PWD"
		printf 'exec'
		printf ' %q' "$@"
		echo
	} >"$q/$name.tmp" && mv "$q/$name.tmp" "$q/$name.cmd" || die "cannot queue $name"
	echo "$node" >"$TWO_NODE_DIR/job.$name"
}

# job_wait NAME [SECONDS]: output (stdout, then stderr to stderr), then the status
job_wait() {
	local name=$1 limit=${2:-0} node q n=0 rc
	node=$(cat "$TWO_NODE_DIR/job.$name" 2>/dev/null) || die "no job $name"
	q=$TWO_NODE_DIR/q.$node
	while [ ! -e "$q/$name.rc" ]; do
		if ! alive "$node"; then
			sleep 0.5 # the last writes of a node that powered off
			[ -e "$q/$name.rc" ] && break
			cat "$q/$name.out" 2>/dev/null
			cat "$q/$name.err" >&2 2>/dev/null
			echo "two-node: node $node died before job $name ended" >&2
			return 255
		fi
		if [ "$limit" != 0 ] && [ $((n / 10)) -ge "$limit" ]; then
			echo "two-node: job $name on node $node still runs after ${limit}s" >&2
			return 124
		fi
		sleep 0.1
		n=$((n + 1))
	done
	cat "$q/$name.out" 2>/dev/null
	cat "$q/$name.err" >&2 2>/dev/null
	rc=$(cat "$q/$name.rc")
	return "${rc:-255}"
}

job_id=0
next_id() { echo "j$$-$((job_id++))-$RANDOM"; }

monitor() { # NODE COMMAND: one line to the node's qemu monitor
	alive "$1" || return 1
	echo "$2" >"$TWO_NODE_DIR/mon.$1.in"
}

# boot NODE: run-in-vm.sh in the background with the node's NIC, address and monitor
boot() {
	local node=$1 me peer lport rport mac addr paddr q
	case $node in
	a) lport=$port rport=$((port + 1)) mac=52:54:00:77:00:0a addr=$addr_a paddr=$addr_b ;;
	b) lport=$((port + 1)) rport=$port mac=52:54:00:77:00:0b addr=$addr_b paddr=$addr_a ;;
	esac
	q=$TWO_NODE_DIR/q.$node
	rm -rf "$q" "$TWO_NODE_DIR/qemu.$node.pid"
	mkdir -p "$q" || die "mkdir $q"
	VM_LOCK=none VM_CPUS=${VM_CPUS:-1} VM_MEM=${VM_MEM:-1G} VM_TIMEOUT=${VM_TIMEOUT:-1800} \
		VM_NIC="socket,udp=127.0.0.1:$rport,localaddr=127.0.0.1:$lport" VM_NIC_MAC=$mac \
		VM_RXE_NETDEV=nic VM_RXE_ADDR=$addr VM_RXE_PREFIX=24 VM_RXE_PEER=$paddr \
		VM_MONITOR=$TWO_NODE_DIR/mon.$node VM_PIDFILE=$TWO_NODE_DIR/qemu.$node.pid \
		VM_HOSTNAME=node-$node \
		"$here/run-in-vm.sh" "$self" agent "$q" >"$TWO_NODE_DIR/node.$node.log" 2>&1 &
	echo $! >"$TWO_NODE_DIR/runner.$node.pid"
}

# up NODE...: wait until each node's agent runs
up() {
	local node n limit=$((${TWO_NODE_BOOT_WAIT:-180} * 10))
	for node in "$@"; do
		n=0
		until [ -e "$TWO_NODE_DIR/q.$node/ready" ]; do
			if ! kill -0 "$(cat "$TWO_NODE_DIR/runner.$node.pid")" 2>/dev/null || [ $n -ge $limit ]; then
				echo "two-node: node $node did not come up; its log:" >&2
				cat "$TWO_NODE_DIR/node.$node.log" >&2
				return 1
			fi
			sleep 0.1
			n=$((n + 1))
		done
	done
}

# down NODE...: stop the agents, wait for the guests to power off (else kill them)
down() {
	local node p n
	for node in "$@"; do touch "$TWO_NODE_DIR/q.$node/stop" 2>/dev/null; done
	for node in "$@"; do
		p=$(cat "$TWO_NODE_DIR/runner.$node.pid" 2>/dev/null) || continue
		for n in $(seq 300); do
			kill -0 "$p" 2>/dev/null || break
			[ "$n" = 300 ] && { kill -KILL "$(cat "$TWO_NODE_DIR/qemu.$node.pid" 2>/dev/null)" 2>/dev/null; }
			sleep 0.1
		done
		wait "$p" 2>/dev/null
		[ "${VM_VERBOSE:-0}" = 1 ] && sed "s/^/node $node: /" "$TWO_NODE_DIR/node.$node.log" >&2
	done
	return 0
}

cmd_run() {
	[ $# -ge 1 ] || die "usage: $0 run CMD [ARGS...]"
	[ -z "${TWO_NODE_DIR:-}" ] || die "already inside a two-node run ($TWO_NODE_DIR)"
	# one lock for the pair (the nodes' own run-in-vm.sh runs skip theirs)
	local lock=${VM_LOCK:-/tmp/vwait-vm.lock} rc t0
	if [ "$lock" != none ] && command -v flock >/dev/null; then
		{ exec 9>>"$lock" && chmod a+rw "$lock"; } 2>/dev/null || exec 9<"$lock" || die "cannot open $lock"
		if ! flock -n 9; then
			echo "two-node: another VM is running on this host; waiting for $lock" >&2
			flock -w "${VM_LOCK_WAIT:-1800}" 9 || die "gave up waiting for $lock"
		fi
	fi
	TWO_NODE_DIR=$(mktemp -d "$PWD/.two-node.XXXXXX") || die "mktemp in $PWD failed"
	export TWO_NODE_DIR
	port=${TWO_NODE_PORT:-$((20000 + RANDOM % 20000))}
	addr_a=${TWO_NODE_ADDR_A:-169.254.78.1}
	addr_b=${TWO_NODE_ADDR_B:-169.254.78.2}
	# what boot needs again (two-node.sh boot, from CMD)
	printf 'port=%q addr_a=%q addr_b=%q\n' "$port" "$addr_a" "$addr_b" >"$TWO_NODE_DIR/conf"
	cleanup() {
		down a b
		if [ "${VM_KEEP:-0}" = 1 ]; then echo "two-node: kept $TWO_NODE_DIR" >&2; else rm -rf "$TWO_NODE_DIR"; fi
	}
	trap cleanup EXIT
	trap 'exit 130' INT TERM HUP
	t0=$(date +%s)
	boot a
	boot b
	up a b || exit 125
	echo "two-node: nodes a ($addr_a) and b ($addr_b) up in $(($(date +%s) - t0)) s" >&2
	"$@"
	rc=$?
	exit "$rc"
}

load_conf() { need_dir "$1" && . "$TWO_NODE_DIR/conf"; }

case ${1:-} in
agent)
	agent "$2"
	;;
run)
	shift
	cmd_run "$@"
	;;
on)
	[ $# -ge 3 ] || die "usage: $0 on NODE CMD [ARGS...]"
	need_dir on
	node_ok "$2"
	name=$(next_id)
	submit "$2" "$name" "${@:3}"
	job_wait "$name"
	;;
start)
	[ $# -ge 4 ] || die "usage: $0 start NODE NAME CMD [ARGS...]"
	need_dir start
	node_ok "$2"
	submit "$2" "$3" "${@:4}"
	;;
wait)
	[ $# -ge 2 ] || die "usage: $0 wait NAME [SECONDS]"
	need_dir wait
	job_wait "$2" "${3:-0}"
	;;
signal)
	[ $# -ge 2 ] || die "usage: $0 signal NAME [SIG]"
	need_dir signal
	node=$(cat "$TWO_NODE_DIR/job.$2" 2>/dev/null) || die "no job $2"
	pid=$(cat "$TWO_NODE_DIR/q.$node/$2.pid" 2>/dev/null) || die "job $2 has not started"
	name=$(next_id)
	submit "$node" "$name" kill -"${3:-KILL}" -- -"$pid"
	job_wait "$name"
	;;
both)
	[ $# = 3 ] || die "usage: $0 both 'CMD_A' 'CMD_B'"
	need_dir both
	na=$(next_id)
	nb=$(next_id)
	submit a "$na" bash -c "$2"
	submit b "$nb" bash -c "$3"
	job_wait "$na" >"$TWO_NODE_DIR/$na.log" 2>&1
	ra=$?
	job_wait "$nb" >"$TWO_NODE_DIR/$nb.log" 2>&1
	rb=$?
	sed 's/^/a: /' "$TWO_NODE_DIR/$na.log"
	sed 's/^/b: /' "$TWO_NODE_DIR/$nb.log"
	echo "two-node: a exited $ra, b exited $rb"
	[ "$ra" = 0 ] && [ "$rb" = 0 ]
	;;
link)
	need_dir link
	case ${2:-} in up) v=on ;; down) v=off ;; *) die "usage: $0 link up|down" ;; esac
	rc=0
	monitor a "set_link nic0 $v" || rc=1
	monitor b "set_link nic0 $v" || rc=1
	exit $rc
	;;
kill)
	need_dir kill
	node_ok "${2:-}"
	alive "$2" || die "node $2 is not running"
	kill -KILL "$(cat "$TWO_NODE_DIR/qemu.$2.pid")"
	;;
boot)
	load_conf boot
	node_ok "${2:-}"
	alive "$2" && die "node $2 runs"
	wait_runner=$(cat "$TWO_NODE_DIR/runner.$2.pid" 2>/dev/null)
	while [ -n "$wait_runner" ] && kill -0 "$wait_runner" 2>/dev/null; do sleep 0.1; done
	boot "$2"
	up "$2"
	;;
rsh)
	[ $# -ge 3 ] || die "usage: $0 rsh HOST CMD..."
	need_dir rsh
	load_conf rsh
	case $2 in
	"$addr_a" | node-a | a) node=a ;;
	"$addr_b" | node-b | b) node=b ;;
	*) die "rsh: unknown host $2" ;;
	esac
	name=$(next_id)
	submit "$node" "$name" bash -c "${*:3}"
	job_wait "$name"
	;;
alive)
	need_dir alive
	node_ok "${2:-}"
	alive "$2"
	;;
*)
	sed -n '2,/^set -u/p' "$self" | sed '$d;s/^# \{0,1\}//'
	exit 2
	;;
esac
