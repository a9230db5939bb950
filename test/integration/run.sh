#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
# test/integration/run.sh - the integration tier: tests on a real verbs device.
# It runs inside the soft-RoCE VM (make check-integration boots the VM once and
# runs it there); on a machine without a device every test that needs one skips.
#
#   test/integration/run.sh [PATTERN...]     (PATTERN: shell glob on test names)
#   make check-integration [INTEGRATION_TESTS='vwait-dp-* raw-*']   (from a build dir)
#   VWAIT_TIER=two-node test/integration/run.sh ...  the tests of test/two-node/ instead (run
#   on the host inside contrib/vm/two-node.sh run; make check-two-node)
#
# ---------------------------------------------------------------- conventions
# * A test is an executable script test/integration/<name>.test (name: lower
#   case, words joined by '-', prefixed by what it exercises: vwait-..., verbs-...,
#   raw-...).  run.sh runs them all, sorted by name (LC_ALL=C), one at a time,
#   each in its own scratch directory (also $VWAIT_TEST_TMPDIR) with stdin /dev/null.
# * Exit status: 0 = pass, 77 = skip (say why on stdout first), anything else =
#   fail.  A test that times out fails.  A test needing a device calls
#   need_rxe (from common.sh) and skips when there is none.
# * Every test gets a timeout: VWAIT_TEST_TIMEOUT seconds (default 180), or the
#   value of a line "# timeout: SECONDS" in its first 20 lines.  Start every
#   background process (servers) through `timeout` too; common.sh's run_pair
#   does that for you.
# * Environment given to each test:
#     VWAIT_BUILDDIR    build dir: .libs/libvwait-fi.so and the built test programs
#     VWAIT_SRCDIR      source tree (top)
#     FI_PROVIDER_PATH  $VWAIT_BUILDDIR/.libs (so libfabric loads the built plugin)
#     RXE_DEV, RXE_ADDR the verbs device (rxe0) and the IPv4 address to listen on
#                       and connect to (set by contrib/vm/run-in-vm.sh; empty on a
#                       machine without a device)
#     RXE_GIDX          GID index of RXE_DEV's IPv4 (RoCE v2) GID, for raw verbs
#     VWAIT_TEST_TMPDIR this test's scratch directory (also its cwd)
#     VWAIT_TEST_TIMEOUT the test's own timeout (seconds)
# * C++ test programs: list them in test/integration/Makefile.include (or a
#   test/integration/*.mk fragment beside it) as check_PROGRAMS (built by make
#   check-integration before the VM boots) and run them from a .test script as
#   "$VWAIT_BUILDDIR/test/integration/<prog>".  Add every .test to
#   dist_check_SCRIPTS (directly or through integration_tests), so make distcheck
#   carries it; make check (runner-selftest.sh) fails on a committed .test that
#   is not there.
# * Shared helpers: `. "$VWAIT_SRCDIR/test/integration/common.sh"` (skip, fail,
#   need_rxe, need_cmd, run_pair, expect_grep).
# * Output: the test's stdout+stderr go to
#   $VWAIT_BUILDDIR/test/integration/logs/<name>.log, and are printed here when
#   the test fails.  One line "PASS|FAIL|SKIP <name> (<seconds>s)" per test, then
#   exactly "N passed, N failed, N skipped".  run.sh exits 0 only if nothing
#   failed and at least one test ran.
# ---------------------------------------------------------------------------
set -u -o pipefail
export LC_ALL=C

here=$(cd "$(dirname "$0")" && pwd -P)
: "${VWAIT_SRCDIR:=$(cd "$here/../.." && pwd -P)}"
: "${VWAIT_BUILDDIR:=$PWD}"
VWAIT_SRCDIR=$(cd "$VWAIT_SRCDIR" && pwd -P) || exit 2
VWAIT_BUILDDIR=$(cd "$VWAIT_BUILDDIR" && pwd -P) || exit 2
export VWAIT_SRCDIR VWAIT_BUILDDIR
export FI_PROVIDER_PATH="$VWAIT_BUILDDIR/.libs"

if [ ! -e "$VWAIT_BUILDDIR/.libs/libvwait-fi.so" ]; then
	echo "run.sh: warning: no $VWAIT_BUILDDIR/.libs/libvwait-fi.so (set VWAIT_BUILDDIR to the build dir)"
fi

# the device: as run-in-vm.sh announced it, else the first one the kernel has
if [ -z "${RXE_DEV:-}" ]; then
	for d in /sys/class/infiniband/*; do
		[ -e "$d" ] && RXE_DEV=${d##*/} && break
	done
fi
: "${RXE_DEV:=}"
: "${RXE_ADDR:=}"
RXE_GIDX=${RXE_GIDX:-}
if [ -n "$RXE_DEV" ] && [ -z "$RXE_GIDX" ]; then
	# shellcheck source=common.sh
	RXE_GIDX=$(. "$VWAIT_SRCDIR/test/integration/common.sh" && rxe_gidx "$RXE_DEV")
fi
export RXE_DEV RXE_ADDR RXE_GIDX

default_timeout=${VWAIT_TEST_TIMEOUT:-180}
tier=${VWAIT_TIER:-integration}
logdir=$VWAIT_BUILDDIR/test/$tier/logs
tmproot=$VWAIT_BUILDDIR/test/$tier/tmp
mkdir -p "$logdir" "$tmproot" || exit 2

echo "$tier: src $VWAIT_SRCDIR, build $VWAIT_BUILDDIR, device '${RXE_DEV}' addr '${RXE_ADDR}' gid index '${RXE_GIDX}', kernel $(uname -r)"

selected() { # name
	local name=$1 p
	[ ${#patterns[@]} -eq 0 ] && return 0
	for p in "${patterns[@]}"; do
		# shellcheck disable=SC2254
		case $name in $p) return 0 ;; esac
	done
	return 1
}
patterns=("${@%.test}") # "name" and "name.test" both select name.test

now() { date +%s.%N; }
pass=0
fail=0
skip=0
shopt -s nullglob
for t in "$VWAIT_SRCDIR"/test/"$tier"/*.test; do
	name=$(basename "$t" .test)
	selected "$name" || continue
	log=$logdir/$name.log
	tmo=$(sed -n '1,20s/^# *timeout: *\([0-9][0-9]*\).*/\1/p' "$t" | head -n 1)
	tmo=${tmo:-$default_timeout}
	scratch=$tmproot/$name
	rm -rf "$scratch" && mkdir -p "$scratch"
	t0=$(now)
	if [ ! -x "$t" ]; then
		echo "run.sh: $t is not executable (chmod +x it)" > "$log"
		rc=126
	else
		(
			cd "$scratch" &&
				VWAIT_TEST_TMPDIR=$scratch VWAIT_TEST_TIMEOUT=$tmo \
					exec timeout -k 10 "$tmo" "$t"
		) </dev/null >"$log" 2>&1
		rc=$?
	fi
	dt=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
	case $rc in
	0)
		pass=$((pass + 1))
		line="PASS $name (${dt}s)"
		;;
	77)
		skip=$((skip + 1))
		why=$(grep -m1 -i 'skip' "$log" | cut -c1-160)
		echo "----- $name: ${why:-skipped (exit 77)}"
		line="SKIP $name (${dt}s)"
		;;
	*)
		fail=$((fail + 1))
		what="exit $rc"
		[ "$rc" = 124 ] || [ "$rc" = 137 ] && what="timed out after ${tmo}s"
		line="FAIL $name (${dt}s)"
		echo "----- $name: $what; its output ($log):"
		cat "$log"
		echo "----- end of $name"
		;;
	esac
	echo "$line"
done

total=$((pass + fail + skip))
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ] || exit 1
if [ "$total" = 0 ]; then
	echo "run.sh: no test matched under $VWAIT_SRCDIR/test/$tier" >&2
	exit 1
fi
exit 0
