#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
# test/integration/mr-torture.sh - the registration cache's long runs, in the VM (make
# check-mr-torture): vwait-mr-cache.test at MR_REMAP_ROUNDS rounds (default 10000) plain and
# under malloc churn + SIGPROF, then mpi-netpipe-integrity.test at NP_INTEGRITY_REPEATS
# messages per size (default 20). Each test runs as run.sh runs it, but without its CI
# timeout (the pairs' own timeouts scale with the rounds). Prints one PASS / FAIL line per
# test and its cache figures; exits non-zero on any failure.
set -u -o pipefail
: "${VWAIT_BUILDDIR:?}" "${VWAIT_SRCDIR:?}"
export FI_PROVIDER_PATH=$VWAIT_BUILDDIR/.libs
export MR_REMAP_ROUNDS=${MR_REMAP_ROUNDS:-10000} NP_INTEGRITY_REPEATS=${NP_INTEGRITY_REPEATS:-20}
logs=$VWAIT_BUILDDIR/test/integration/logs/mr-torture
mkdir -p "$logs" || exit 1
rc=0
for t in ${MR_TORTURE_TESTS:-vwait-mr-cache mpi-netpipe-integrity}; do
	d=$(mktemp -d) || exit 1
	t0=$SECONDS
	(cd "$d" && VWAIT_TEST_TMPDIR=$d bash "$VWAIT_SRCDIR/test/integration/$t.test") \
		>"$logs/$t.log" 2>&1 </dev/null
	r=$?
	case $r in 0) s=PASS ;; 77) s=SKIP ;; *) s=FAIL rc=1 ;; esac
	echo "$s $t ($((SECONDS - t0))s, MR_REMAP_ROUNDS=$MR_REMAP_ROUNDS NP_INTEGRITY_REPEATS=$NP_INTEGRITY_REPEATS)"
	grep -a -E '^(remap|stress)|rounds of|^cache:|^sizes|PROGRESS' "$logs/$t.log" | tail -n 12 | sed 's/^/  /'
	[ $r = 0 ] || [ $r = 77 ] || tail -n 30 "$logs/$t.log"
	cp -r "$d" "$logs/$t.tmp" 2>/dev/null
	rm -rf "$d"
done
exit $rc
