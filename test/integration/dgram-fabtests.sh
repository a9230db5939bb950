#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
# test/integration/dgram-fabtests.sh - upstream fabtests over FI_EP_DGRAM, vwait beside upstream
# verbs, in ONE VM boot: fi_dgram_pingpong and fi_dgram (each -p PROV, names
# exchanged out of band with -E, as verbs needs without its name server; vwait also resolves
# an address and service, which contrib/fabtests/fabtests.sh exercises), and fi_rdm_pingpong
# over "vwait;ofi_rxd" (RDM layered on vwait's DGRAM).
# PASS/FAIL per test and provider; exit 1 if a vwait run fails (a verbs failure is reported,
# not counted: it is the yardstick).
#
#   test/integration/dgram-fabtests.sh [BUILDDIR]   (on the host: boots the VM and runs itself)
#   FABTESTS_BIN: where fabtests 1.17 is installed (default /var/cache/vwait/fabtests-1.17.1/bin,
#   contrib/fabtests.sh builds it there; or build it out of
#   tree as /work/shared/third_party/README.md says). Skips (77) without it.
# Cost: about 2 minutes.
# Not run: fi_dgram_waitset. It opens its fabric with its own init_fabric(), which never
# sets up the out-of-band socket that -E needs, so its name exchange is sendto(-1, ...) =
# EBADF and it exits 9 before any vwait call fails (as strace shows in the VM);
# without -E it passes on vwait (fabtests.sh's functional set runs it so).
# A wait set on a DGRAM CQ woken by a datagram is vwait-dgram-sread's job.
set -u -o pipefail
export LC_ALL=C
here=$(cd "$(dirname "$0")" && pwd -P)
srcdir=$(cd "$here/../.." && pwd -P)
bin=${FABTESTS_BIN:-/var/cache/vwait/fabtests-1.17.1/bin}

if [ -z "${RXE_ADDR:-}" ]; then
	builddir=$(cd "${1:-${VWAIT_BUILDDIR:-$PWD}}" && pwd -P) || exit 2
	[ -x "$bin/fi_dgram_pingpong" ] || {
		echo "SKIP: no fabtests in $bin (set FABTESTS_BIN)"
		exit 77
	}
	export VWAIT_BUILDDIR=$builddir FABTESTS_BIN=$bin
	exec env VM_TIMEOUT="${VM_TIMEOUT:-1500}" "$srcdir/contrib/vm/run-in-vm.sh" "$0" "$builddir"
fi

builddir=${1:-${VWAIT_BUILDDIR:-$PWD}}
export FI_PROVIDER_PATH=$builddir/.libs
. "$srcdir/test/integration/common.sh"
tmp=$(mktemp -d)
port=9300
vwait_failures=0

# run PROV TEST [ARGS...]: server and client of one fabtest, out-of-band name exchange
run() {
	local prov=$1 t=$2 spid rc src
	shift 2
	port=$((port + 1))
	timeout 120 "$bin/$t" -p "$prov" -E="$port" "$@" >"$tmp/srv" 2>&1 &
	spid=$!
	sleep 0.5
	timeout 120 "$bin/$t" -p "$prov" -E="$port" "$@" "$RXE_ADDR" >"$tmp/cli" 2>&1
	rc=$?
	wait "$spid"
	src=$?
	if [ "$rc" -eq 0 ] && [ "$src" -eq 0 ]; then
		echo "PASS $t -p '$prov' $*"
		grep -E '^ *[0-9]+[kmg]?  ' "$tmp/cli" | head -n 3 | sed 's/^/    /'
	else
		echo "FAIL $t -p '$prov' $* (client $rc, server $src)"
		tail -n 5 "$tmp/cli" "$tmp/srv" | sed 's/^/    /'
		case $prov in vwait*) vwait_failures=$((vwait_failures + 1)) ;; esac
	fi
}

echo "dgram-fabtests: ${RXE_DEV:-rxe0} ($RXE_ADDR), fabtests in $bin"
for prov in vwait verbs; do
	run "$prov" fi_dgram_pingpong -S 64 -I 100
	run "$prov" fi_dgram
done
run "vwait;ofi_rxd" fi_rdm_pingpong -S 64 -I 100
run "verbs;ofi_rxd" fi_rdm_pingpong -S 64 -I 100
rm -rf "$tmp"
[ "$vwait_failures" -eq 0 ]
