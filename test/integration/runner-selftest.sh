#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
# Host-tier check (make check) of the integration runner itself: run.sh on a
# throw-away tree of fake tests must report PASS/FAIL/SKIP lines, time out a
# hung test, refuse a non-executable one, select by pattern, print a failing
# test's output, end with "N passed, N failed, N skipped" and exit non-zero
# exactly when something failed.  Under make check it also checks that every
# test/integration/*.test (committed, in a git checkout) is in dist_check_SCRIPTS.
set -u -o pipefail
src=${VWAIT_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd -P)}
run=$src/test/integration/run.sh
work=$(mktemp -d "${TMPDIR:-/tmp}/vwait-runner.XXXXXX") || exit 99
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src/test/integration" "$work/build/.libs"
t=$work/src/test/integration
cp "$src/test/integration/common.sh" "$t/"

printf '#!/bin/sh\necho "output of the failing test"\nexit 3\n' >"$t/a-fails.test"
printf '#!/bin/sh\n# timeout: 1\nsleep 30\n' >"$t/b-hangs.test"
printf '#!/bin/sh\nexit 0\n' >"$t/c-not-executable.test"
printf '#!/bin/sh\n[ "$FI_PROVIDER_PATH" = "$VWAIT_BUILDDIR/.libs" ] && [ "$PWD" = "$VWAIT_TEST_TMPDIR" ] && [ "$VWAIT_TEST_TIMEOUT" = 180 ]\n' >"$t/d-passes.test"
printf '#!/bin/bash\n. "$VWAIT_SRCDIR/test/integration/common.sh"\nskip "no such thing here"\n' >"$t/e-skips.test"
chmod +x "$t"/a-fails.test "$t"/b-hangs.test "$t"/d-passes.test "$t"/e-skips.test

errors=0
check() { # WHAT COMMAND...
	if "${@:2}"; then echo "ok: $1"; else
		echo "NOT OK: $1"
		errors=$((errors + 1))
	fi
}
has() { grep -Eq -- "$1" "$work/out"; }

VWAIT_SRCDIR=$work/src VWAIT_BUILDDIR=$work/build RXE_DEV='' RXE_ADDR='' VWAIT_TEST_TIMEOUT='' \
	"$run" >"$work/out" 2>&1
rc=$?
cat "$work/out"
check "exit status 1 when tests fail (got $rc)" [ "$rc" = 1 ]
check "FAIL line for a failing test" has '^FAIL a-fails \([0-9.]+s\)$'
check "a failing test's output is shown" has '^output of the failing test$'
check "a hung test times out" has '^FAIL b-hangs \((1|2)\.[0-9]s\)$'
check "a non-executable test fails" has '^FAIL c-not-executable '
check "PASS line, with the documented environment" has '^PASS d-passes \([0-9.]+s\)$'
check "SKIP line for exit 77" has '^SKIP e-skips \([0-9.]+s\)$'
check "the skip reason is shown" has 'no such thing here'
check "final line" [ "$(tail -n 1 "$work/out")" = "1 passed, 3 failed, 1 skipped" ]
check "per-test logs kept" [ -s "$work/build/test/integration/logs/a-fails.log" ]

VWAIT_SRCDIR=$work/src VWAIT_BUILDDIR=$work/build "$run" 'd-*' 'e-*' >"$work/out" 2>&1
rc=$?
check "only passes and skips: exit 0 (got $rc)" [ "$rc" = 0 ]
check "patterns select tests" [ "$(tail -n 1 "$work/out")" = "1 passed, 0 failed, 1 skipped" ]

VWAIT_SRCDIR=$work/src VWAIT_BUILDDIR=$work/build "$run" 'd-*.test' 'e-skips.test' >"$work/out" 2>&1
check "patterns may carry .test" [ "$(tail -n 1 "$work/out")" = "1 passed, 0 failed, 1 skipped" ]

VWAIT_SRCDIR=$work/src VWAIT_BUILDDIR=$work/build "$run" 'nothing-*' >"$work/out" 2>&1
rc=$?
check "no test matched: exit non-zero (got $rc)" [ "$rc" != 0 ]

# every test in the source tree is distributed (dist_check_SCRIPTS, in a fragment)
if [ -n "${VWAIT_DIST_CHECK_SCRIPTS:-}" ]; then
	# in a git checkout only the committed tests (others may be work in progress)
	if git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
		mapfile -t present < <(git -C "$src" ls-files 'test/integration/*.test' 'test/two-node/*.test')
	else
		present=()
		for f in "$src"/test/integration/*.test "$src"/test/two-node/*.test; do
			[ -e "$f" ] && present+=("${f#"$src"/}")
		done
	fi
	for n in "${present[@]}"; do
		case " $VWAIT_DIST_CHECK_SCRIPTS " in
		*" $n "*) ;;
		*) check "$n is in dist_check_SCRIPTS (list it in test/integration/Makefile.include or a *.mk beside it)" false ;;
		esac
	done
	echo "ok: checked ${#present[@]} test/{integration,two-node}/*.test against dist_check_SCRIPTS"
fi

echo "$errors check(s) failed"
[ "$errors" = 0 ]
