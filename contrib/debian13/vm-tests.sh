#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
# contrib/debian13/vm-tests.sh D13_BUILDDIR [D12_BUILDDIR] - what the debian13 stage of
# contrib/setup.sh test runs in ONE VM booted on the Debian 13 root (VM_ROOT):
#   1. the integration tier of the tree built in that root (D13_BUILDDIR), Open MPI 5 over
#      vwait;ofi_rxm included (mpi-pingpong.test), and ADIOS2's SST engine (adios2-sst.test,
#      which only this root can run: Debian 12 has no ADIOS2), upstream verbs beside them; but the tests in
#      D13_LEAVE_OUT (default below: what Debian 12's tier covers alike and costs most: the
#      race and valgrind runs, device removal, open/close cycles), so that the stage stays
#      near 4 min in the TCG guest (the whole tier: ~6.5 min). D13_LEAVE_OUT= runs them all;
#      D13_TESTS='glob...' runs exactly those;
#   2. when D12_BUILDDIR (a build made on Debian 12, libfabric 1.17 headers) is given: that
#      plugin loaded by Debian 13's libfabric 2.1: fi_info -p vwait and -p "vwait;ofi_rxm" offer
#      it, and Open MPI 5 runs its ping-pong over it (mpi-pingpong.test with FI_PROVIDER_PATH
#      pointing at the Debian 12 plugin).
set -u -o pipefail
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
d13=${1:?usage: $0 D13_BUILDDIR [D12_BUILDDIR]}
d12=${2:-}
[ -n "${RXE_ADDR:-}" ] || {
	echo "SKIP: RXE_ADDR not set: run inside contrib/vm/run-in-vm.sh"
	exit 77
}
echo "== $(cat /etc/debian_version 2>/dev/null) libfabric $(fi_info --version | sed -n 's/^libfabric: //p')"
rc=0
# left out by default: the costliest tests in the TCG guest that Debian 12's tier covers alike
# (above); vwait-bench-turns: a smoke test of the benchmark's driver; NetPIPE over Open MPI
# (Open MPI 5 runs mpi-pingpong and mpi-auto-progress here); and vwait-mr-cache, whose
# monitor is the kernel's userfaultfd: the guest boots the host's kernel, as Debian 12's tier
# does (adios2-sst registers through the cache here)
leave_out=${D13_LEAVE_OUT-vwait-fault-race vwait-valgrind vwait-fault-device-gone vwait-dp-cycles vwait-sets-many vwait-bench-turns mpi-netpipe mpi-netpipe-integrity vwait-mr-cache}
# shellcheck disable=SC2206 # globs and names, split on blanks
tests=(${D13_TESTS:-})
if [ ${#tests[@]} -eq 0 ]; then
	for t in "$src"/test/integration/*.test; do
		t=$(basename "$t" .test)
		case " $leave_out " in *" $t "*) ;; *) tests+=("$t") ;; esac
	done
fi
echo "== integration tier of $d13 (${#tests[@]} tests; left out: ${D13_TESTS:+all but D13_TESTS}${D13_TESTS:-${leave_out:-none}})"
VWAIT_BUILDDIR=$d13 VWAIT_SRCDIR=$src "$src/test/integration/run.sh" "${tests[@]}" || rc=1
if [ -n "$d12" ]; then
	[ -f "$d12/.libs/libvwait-fi.so" ] || {
		echo "FAIL: no Debian 12 plugin in $d12/.libs"
		exit 1
	}
	t=$(mktemp -d)
	cd "$t" || exit 1
	echo "== the Debian 12 plugin ($d12/.libs) under libfabric $(fi_info --version | sed -n 's/^libfabric: //p')"
	export FI_PROVIDER_PATH=$d12/.libs
	if fi_info -p vwait >fi_info.out 2>&1 && grep -q 'provider: vwait' fi_info.out; then
		echo "PASS: fi_info -p vwait offers the Debian 12 plugin ($(grep -c 'provider: vwait' fi_info.out) infos)"
	else
		cat fi_info.out
		echo "FAIL: fi_info -p vwait does not offer the Debian 12 plugin"
		rc=1
	fi
	if fi_info -p "vwait;ofi_rxm" -t FI_EP_RDM >rdm.out 2>&1 && grep -q 'vwait;ofi_rxm' rdm.out; then
		echo "PASS: fi_info -p 'vwait;ofi_rxm' -t FI_EP_RDM offers it"
	else
		cat rdm.out
		echo "FAIL: fi_info -p 'vwait;ofi_rxm' -t FI_EP_RDM does not offer it"
		rc=1
	fi
	# Open MPI 5 (its mtl/ofi asks for API 1.18) over the Debian 12 plugin; the program is
	# the Debian 13 build's
	VWAIT_BUILDDIR=$d13 VWAIT_SRCDIR=$src bash "$src/test/integration/mpi-pingpong.test" >mpi.log 2>&1
	r=$?
	case $r in
	0) echo "PASS: Open MPI 5 ping-pong over the Debian 12 plugin ($(grep -m1 'all data verified' mpi.log))" ;;
	77) echo "SKIP: $(grep '^SKIP' mpi.log | tail -n 1)" ;;
	*)
		tail -n 40 mpi.log
		echo "FAIL: Open MPI 5 over the Debian 12 plugin (exit $r)"
		rc=1
		;;
	esac
	cd / && rm -rf "$t"
fi
exit $rc
