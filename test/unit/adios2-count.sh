#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
# adios2_sst.py count, the system calls per step of the ADIOS2 reader's threads from its strace
# output (test/integration/adios2-sst.test, ADIOS2_STRACE), on a made-up trace of 2 steps: the
# calls before the first and after the last marker are left out, and so are the markers; a call
# is counted once, at its entry (not at "resumed"); another thread's calls fall in the phase
# the main thread's markers set at their time; --skip N starts at step N's wait; a read, write or ioctl is also counted by what
# made its fd (an eventfd, a file opened by name). No device, no ADIOS2.
src="${VWAIT_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
command -v python3 >/dev/null || { echo "python3 not found: skipped"; exit 77; }
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
cat >"$dir/trace" <<'TRACE'
100  10.000000 openat(AT_FDCWD, "x", O_RDONLY) = 3
100  10.050000 eventfd2(0, EFD_CLOEXEC|EFD_NONBLOCK) = 5
100  10.060000 openat(AT_FDCWD, "/dev/infiniband/uverbs0", O_RDWR|O_CLOEXEC) = 6
100  10.100000 clone3({flags=CLONE_VM, ...}, 88) = 101
100  11.000000 write(9, "vwait-mark wait-begin 0", 23) = 23
101  11.100000 poll([{fd=5, events=POLLIN}], 1, -1 <unfinished ...>
100  11.200000 futex(0x1, FUTEX_WAIT_BITSET_PRIVATE, 0, NULL, FUTEX_BITSET_MATCH_ANY <unfinished ...>
101  11.300000 <... poll resumed>) = 1 ([{fd=5, revents=POLLIN}])
101  11.310000 read(5, "a", 8) = 1
101  11.320000 futex(0x1, FUTEX_WAKE_PRIVATE, 1) = 1
100  11.330000 <... futex resumed>) = 0
100  11.400000 write(9, "vwait-mark read-begin 0", 23) = 23
100  11.410000 poll([{fd=6, events=POLLIN}], 1, -1) = 1 ([{fd=6, revents=POLLIN}])
101  11.420000 poll([{fd=5, events=POLLIN}], 1, -1 <unfinished ...>
100  11.500000 write(9, "vwait-mark verify-begin 0", 25) = 25
100  11.600000 write(9, "vwait-mark wait-begin 1", 23) = 23
100  11.700000 futex(0x1, FUTEX_WAIT_BITSET_PRIVATE, 0, NULL, FUTEX_BITSET_MATCH_ANY) = 0
101  11.710000 <... poll resumed>) = 1 ([{fd=5, revents=POLLIN}])
101  11.720000 read(5, "a", 8) = 1
101  11.730000 futex(0x1, FUTEX_WAKE_PRIVATE, 1) = 1
100  11.800000 write(9, "vwait-mark read-begin 1", 23) = 23
100  11.810000 poll([{fd=6, events=POLLIN}], 1, -1) = 1 ([{fd=6, revents=POLLIN}])
100  11.820000 poll([{fd=6, events=POLLIN}], 1, -1) = 1 ([{fd=6, revents=POLLIN}])
100  11.830000 ioctl(6, RDMA_VERBS_IOCTL, 0x7ffc) = 0
100  11.900000 write(9, "vwait-mark verify-begin 1", 25) = 25
100  12.000000 write(9, "vwait-mark wait-begin 2", 23) = 23
100  12.100000 write(9, "vwait-mark read-begin 2", 23) = 23
100  12.200000 write(9, "vwait-mark end 2", 16) = 16
101  12.300000 poll([{fd=5, events=POLLIN}], 1, -1) = 0
100  12.400000 exit_group(0) = ?
100  12.500000 +++ exited with 0 +++
TRACE
out=$(python3 "$src/test/integration/adios2_sst.py" count "$dir/trace") || {
	echo "count failed: $out"
	exit 1
}
echo "$out"
fail=0
# WANT: a line of the output, exactly
want() { printf '%s\n' "$out" | grep -qxF -- "$1" || { echo "missing: '$1'"; fail=1; }; }
want "trace $dir/trace: 2 steps (from step 0), 1.20 s between the first and the last marker"
want "thread 100 (main) created-by - sleeps-in poll([{fd=6, events=POLLIN}], 1, -1) = 1 ([{f"
want "  calls per step: wait 1.00 read 2.00 verify 0.00"
want "  wait: futex 1.00"
want "  read: poll 1.50 ioctl 0.50"
want "  read by fd: ioctl(uverbs0, RDMA_VERBS_IOCTL) 0.50"
want "thread 101 created-by 100 sleeps-in poll([{fd=5, events=POLLIN}], 1, -1 <unfinish"
want "  calls per step: wait 2.50 read 0.50 verify 0.00"
want "  wait: futex 1.00 read 1.00 poll 0.50"
want "  wait by fd: read(eventfd2) 1.00"
want "  read: poll 0.50"
# --skip 1: step 1 alone
out=$(python3 "$src/test/integration/adios2_sst.py" count --skip 1 "$dir/trace") || {
	echo "count --skip 1 failed: $out"
	exit 1
}
echo "$out"
want "trace $dir/trace: 1 steps (from step 1), 0.60 s between the first and the last marker"
want "  calls per step: wait 1.00 read 3.00 verify 0.00"
want "  calls per step: wait 2.00 read 0.00 verify 0.00"
exit $fail
