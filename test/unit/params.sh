#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
# The wait-policy parameters through a stock libfabric: fi_info -e lists FI_VWAIT_WAIT_POLICY
# and FI_VWAIT_SPIN_US (and FI_VWAIT_SHUTDOWN_HOLD_MS); a bad value gets exactly one warning line naming it and the value
# kept (the default, or the clamp). No device needed: the plugin reads its parameters at load.
lib="${VWAIT_BUILDDIR:?run through make check}/.libs"
command -v fi_info >/dev/null || { echo "fi_info not found: skipped"; exit 77; }
export FI_PROVIDER_PATH="$lib"
unset FI_PROVIDER FI_VWAIT_WAIT_POLICY FI_VWAIT_SPIN_US
fail=0
listed=$(fi_info -e 2>/dev/null | grep -c -E '^# FI_VWAIT_(WAIT_POLICY|SPIN_US):')
echo "fi_info -e lists $listed of the 2 wait-policy parameters"
[ "$listed" = 2 ] || fail=1
# VAR VALUE EXPECTED-TEXT: one warning line with the text
warns() {
	out=$(env "$1=$2" FI_LOG_LEVEL=warn FI_LOG_PROV=vwait fi_info -p vwait 2>&1 >/dev/null |
		grep -F "$1=$2")
	n=$(printf '%s' "$out" | grep -c .)
	echo "$1=$2: $n warning line(s): $out"
	[ "$n" = 1 ] && printf '%s' "$out" | grep -qF "$3" || fail=1
}
warns FI_VWAIT_WAIT_POLICY bogus "using adaptive"
warns FI_VWAIT_SPIN_US -5 "using 1000"
warns FI_VWAIT_SPIN_US 99999 "using 10000"
# the shutdown hold's (fi_vwait(7), Progress)
held=$(fi_info -e 2>/dev/null | grep -c -E '^# FI_VWAIT_SHUTDOWN_HOLD_MS:')
echo "fi_info -e lists FI_VWAIT_SHUTDOWN_HOLD_MS: $held"
[ "$held" = 1 ] || fail=1
warns FI_VWAIT_SHUTDOWN_HOLD_MS -1 "is negative; using 1000"
warns FI_VWAIT_KEEPALIVE_MS -5 "is negative; using 0"
warns FI_VWAIT_CM_TIMEOUT 0 "is not positive; using 2000"
# ofi_rxm's flow control (fi_vwait(7), ofi_rxm)
flow=$(fi_info -e 2>/dev/null | grep -c -E '^# FI_VWAIT_FLOW_CTRL:')
echo "fi_info -e lists FI_VWAIT_FLOW_CTRL: $flow"
[ "$flow" = 1 ] || fail=1
# the registration cache (fi_vwait(7), Registration cache)
mrc=$(fi_info -e 2>/dev/null | grep -a -c -E '^# FI_VWAIT_MR_CACHE:')
echo "fi_info -e lists FI_VWAIT_MR_CACHE: $mrc"
[ "$mrc" = 1 ] || fail=1
# good values: no warning
for v in "FI_VWAIT_WAIT_POLICY=block" "FI_VWAIT_WAIT_POLICY=Fixed" "FI_VWAIT_SPIN_US=0" \
	"FI_VWAIT_SHUTDOWN_HOLD_MS=0"; do
	n=$(env "$v" FI_LOG_LEVEL=warn FI_LOG_PROV=vwait fi_info -p vwait 2>&1 >/dev/null |
		grep -c "${v%%=*}")
	echo "$v: $n warning line(s)"
	[ "$n" = 0 ] || fail=1
done
exit $fail
