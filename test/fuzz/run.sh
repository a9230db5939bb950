#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
# test/fuzz/run.sh - run vwait's libFuzzer targets for a bounded time each (make fuzz-run).
#
#   run.sh -t SECONDS -d BUILD/test/fuzz -c SRC/test/fuzz/corpus TARGET...
#
# Each TARGET (fuzz_getinfo, fuzz_cm, fuzz_control) runs -max_total_time=SECONDS from a working
# corpus in BUILD/test/fuzz/work-TARGET, seeded from the tree's corpus/TARGET (the tree is
# never written). A crash, a leak, a sanitizer report or a timeout fails the run, leaving the
# input as BUILD/test/fuzz/crash-* (rerun: BUILD/test/fuzz/TARGET crash-FILE). Prints the
# executions of each target and their total. FUZZ_ARGS adds libFuzzer options (e.g. -jobs=2).
set -u -o pipefail

secs=15 dir= corpus=
while getopts t:d:c: opt; do
	case $opt in
	t) secs=$OPTARG ;;
	d) dir=$OPTARG ;;
	c) corpus=$OPTARG ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ -n "$dir" ] && [ -n "$corpus" ] && [ $# -gt 0 ] || {
	sed -n '2,12p' "$0"
	exit 2
}

total=0 failed=0
for t in "$@"; do
	work=$dir/work-$t
	mkdir -p "$work" || exit 1
	log=$dir/$t.log
	# shellcheck disable=SC2086 # FUZZ_ARGS is a list of options
	"$dir/$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
		-artifact_prefix="$dir/" ${FUZZ_ARGS:-} "$work" "$corpus/$t" >"$log" 2>&1
	rc=$?
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
	cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1)
	if [ "$rc" != 0 ]; then
		failed=$((failed + 1))
		echo "fuzz: $t FAILED (exit $rc) after ${execs:-?} executions; last 60 lines of $log:"
		tail -n 60 "$log"
	else
		echo "fuzz: $t: ${execs:-0} executions in ${secs}s (${cov:-cov: ?}, corpus $(find "$work" -type f | wc -l) inputs)"
	fi
	total=$((total + ${execs:-0}))
done
echo "fuzz: $total executions over $# targets, $failed failed"
[ "$failed" = 0 ]
