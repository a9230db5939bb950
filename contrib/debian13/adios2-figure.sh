#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
# contrib/debian13/adios2-figure.sh [D13_BUILDDIR] - the ADIOS2 SST figure: in ONE VM booted
# on the Debian 13 root, test/integration/adios2-sst.test with more steps and repeats:
# ADIOS2_REPEATS (default 5) alternated runs of vwait;ofi_rxm and upstream verbs;ofi_rxm, each
# ADIOS2_STEPS (default 40) steps of 1 MiB, ADIOS2_INTERVAL (default 0.5) s apart, every
# element verified (at 0.1 s the reader cannot keep up on the emulated CPU, and its "waiting"
# CPU is SST catching up, not waiting); first one verbs run at the default FI_UNIVERSE_SIZE, to show how it fails
# (ADIOS2_VERBS_DEFAULT=0 leaves it out). Prints each run's figures (steps/s, the reader's CPU
# waiting and reading, by thread, with each thread's context switches per step), then median
# and min-max. ADIOS2_STRACE="STRACE-COMMAND" (ADIOS2_STRACE_REPEATS pairs, default 2) adds
# runs with the reader under strace -f and its system calls per step by thread and phase
# (test/integration/adios2-sst.test). D13_BUILDDIR: a tree built in the root
# (contrib/setup.sh's debian13-build stage: _build/ci-debian13, the default).
# Root only (the VM on the root). About 4 min of VM for the defaults in the TCG guest.
set -u -o pipefail
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
d13=$(cd "${1:-$src/_build/ci-debian13}" && pwd -P) || exit 1
[ -f "$d13/.libs/libvwait-fi.so" ] || {
	echo "adios2-figure: no plugin in $d13/.libs (contrib/setup.sh test with SETUP_STAGES='debian13-root debian13-build')" >&2
	exit 1
}
root=${VWAIT_DEBIAN13_ROOT:-/var/cache/vwait/debian13}
export ADIOS2_STEPS=${ADIOS2_STEPS:-40} ADIOS2_REPEATS=${ADIOS2_REPEATS:-5}
export ADIOS2_INTERVAL=${ADIOS2_INTERVAL:-0.5}
export ADIOS2_VERBS_DEFAULT=${ADIOS2_VERBS_DEFAULT:-1}
export VWAIT_BUILDDIR=$d13 VWAIT_SRCDIR=$src FI_PROVIDER_PATH=$d13/.libs
# shellcheck disable=SC2016 # expanded in the guest
VM_ROOT=$root VM_TIMEOUT=${VM_TIMEOUT:-3000} "$src/contrib/vm/run-in-vm.sh" \
	bash -c 'cd "$(mktemp -d)" && bash "$VWAIT_SRCDIR/test/integration/adios2-sst.test"'
