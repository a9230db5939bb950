# SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
# test/integration/common.sh - helpers for integration tests (bash).
# shellcheck shell=bash
# Source it first:  . "$VWAIT_SRCDIR/test/integration/common.sh"
# Conventions: see the top of test/integration/run.sh.

# skip WHY...: the test cannot run here (no device...): exit 77
skip() {
	echo "SKIP: $*"
	exit 77
}

# fail WHY...: exit 1 with a message
fail() {
	echo "FAIL: $*"
	exit 1
}

# need_rxe: skip unless a verbs device and its address are there
need_rxe() {
	[ -n "${RXE_DEV:-}" ] && [ -e "/sys/class/infiniband/$RXE_DEV" ] ||
		skip "no verbs device (run it in the VM: make check-integration)"
	[ -n "${RXE_ADDR:-}" ] || skip "RXE_ADDR is not set (run it in the VM: make check-integration)"
}

# is_iwarp [DEV]: true when the verbs device (default RXE_DEV) is iWARP (siw, cxgb4, irdma in
# iWARP mode: node type RNIC), which has no UD, no immediate data and connects only through
# rdma_cm
is_iwarp() {
	case $(cat "/sys/class/infiniband/${1:-${RXE_DEV:-}}/node_type" 2>/dev/null) in
	*RNIC*) return 0 ;;
	esac
	return 1
}

# need_roce WHAT: need_rxe, and skip on an iWARP device, which cannot do WHAT
need_roce() {
	need_rxe
	! is_iwarp || skip "$RXE_DEV is iWARP: ${1:-this test needs InfiniBand or RoCE}"
}

# need_cmd CMD...: fail (not skip: contrib/deps.sh installs them) when a tool is missing
need_cmd() {
	local c
	for c in "$@"; do
		command -v "$c" >/dev/null || fail "$c not found (contrib/deps.sh installs it)"
	done
}

# expect_grep FILE PATTERN [WHAT]: fail unless the extended regex PATTERN matches a line of FILE
expect_grep() {
	grep -Eq -- "$2" "$1" || fail "${3:-expected /$2/} not found in $1"
}

# rxe_gidx DEV: prints the index of DEV's IPv4 GID on port 1 (the RoCE v2 one when there is
# one, else the first IPv4-mapped one), for raw verbs tools (ibv_rc_pingpong -g); nothing when
# DEV has none
rxe_gidx() {
	local g t first=
	for g in /sys/class/infiniband/"$1"/ports/1/gids/*; do
		[ -e "$g" ] || continue
		case $(cat "$g" 2>/dev/null) in
		0000:0000:0000:0000:0000:ffff:*)
			t=$(cat "/sys/class/infiniband/$1/ports/1/gid_attrs/types/${g##*/}" 2>/dev/null)
			case $t in *v2*)
				echo "${g##*/}"
				return 0
				;;
			esac
			[ -n "$first" ] || first=${g##*/}
			;;
		esac
	done
	[ -z "$first" ] || echo "$first"
}

# tcp_listening PORT: true when some socket listens on TCP PORT (IPv4 or IPv6)
tcp_listening() {
	local hex
	hex=$(printf '%04X' "$1")
	awk -v p=":$hex" '$4 == "0A" && substr($2, length($2) - 4) == p { f = 1 } END { exit !f }' \
		/proc/net/tcp /proc/net/tcp6 2>/dev/null
}

# server_ready NAME [PORT]: the server of run_pair listens on TCP PORT, or without one, has
# printed a line matching PAIR_READY
server_ready() {
	if [ -n "$2" ]; then
		tcp_listening "$2"
	else
		grep -Eq "$PAIR_READY" "$1.server.log" 2>/dev/null
	fi
}

# run_pair NAME 'SERVER CMD' 'CLIENT CMD' [PORT]: a server in the background and a
# client, both under `timeout` (PAIR_TIMEOUT seconds, default 60).  The client
# starts once the server listens on TCP PORT (its out-of-band socket: 18515 for
# ibv_*_pingpong, 47592 for fi_pingpong; waits up to PAIR_WAIT s, default 30),
# or, with PAIR_READY set, once the server's output has a line matching that
# regex (same wait), or PAIR_DELAY seconds (default 3) after the server otherwise.
# Output goes to NAME.server.log and NAME.client.log in the cwd and is printed.
# Returns 0 only if both exit 0.
# PAIR_TIMEOUT and PAIR_WAIT bound hangs: 10x a pair's or a listener's time in a loaded guest.
# PAIR_DELAY is for servers with no port to watch: a late server fails the client, visibly.
run_pair() {
	local name=$1 srv=$2 cli=$3 port=${4:-} t=${PAIR_TIMEOUT:-60} spid crc src n
	echo "== $name server: $srv"
	timeout -k 5 "$t" bash -c "$srv" >"$name.server.log" 2>&1 </dev/null &
	spid=$!
	if [ -n "$port" ] || [ -n "${PAIR_READY:-}" ]; then
		n=$((${PAIR_WAIT:-30} * 10))
		until server_ready "$name" "$port"; do
			kill -0 "$spid" 2>/dev/null || break
			n=$((n - 1))
			if [ "$n" -le 0 ]; then
				echo "== $name: the server is not ready (${port:+TCP port $port}${PAIR_READY:+/$PAIR_READY/}) yet; starting the client anyway"
				break
			fi
			sleep 0.1
		done
	else
		sleep "${PAIR_DELAY:-3}"
	fi
	echo "== $name client: $cli"
	timeout -k 5 "$t" bash -c "$cli" >"$name.client.log" 2>&1 </dev/null
	crc=$?
	# let the server finish on its own for up to 10 s, then stop it
	for _ in $(seq 100); do
		kill -0 "$spid" 2>/dev/null || break
		sleep 0.1
	done
	kill "$spid" 2>/dev/null
	wait "$spid"
	src=$?
	echo "== $name client output (exit $crc):"
	cat "$name.client.log"
	echo "== $name server output (exit $src):"
	cat "$name.server.log"
	[ "$crc" = 0 ] && [ "$src" = 0 ]
}
