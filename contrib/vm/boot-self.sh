# shellcheck shell=bash
# SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
# contrib/vm/boot-self.sh - sourced by the scripts that run inside the VM but are started on
# the host (the benchmarks): boot the guest and run the calling script in it.
#
#   boot_self NAME TIMEOUT BUILDDIR FILE...
#
# On the host, it checks that BUILDDIR (default $VWAIT_BUILDDIR, else the current directory)
# holds every FILE, exports VWAIT_BUILDDIR and execs contrib/vm/run-in-vm.sh on the calling
# script with BUILDDIR as its argument, VM_TIMEOUT defaulting to TIMEOUT seconds. The caller
# tells host from guest (the guest sets RXE_ADDR, and SIW_ADDR with VM_RDMA=siw or both) and
# calls it only on the host. Other run-in-vm.sh settings (VM_RDMA, ...) pass through the
# environment.
boot_self()
{
	local name=$1 timeout=$2 dir=$3 f
	shift 3
	builddir=$(cd "${dir:-${VWAIT_BUILDDIR:-$PWD}}" && pwd -P) || exit 2
	for f in "$@"; do
		[ -e "$builddir/$f" ] || {
			echo "$name: no $builddir/$f (make all in the build dir)" >&2
			exit 2
		}
	done
	export VWAIT_BUILDDIR=$builddir
	exec env VM_TIMEOUT="${VM_TIMEOUT:-$timeout}" \
		"$(dirname "${BASH_SOURCE[0]}")/run-in-vm.sh" "$0" "$builddir"
}
