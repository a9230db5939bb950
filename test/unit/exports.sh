#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
# The plugin exports exactly one symbol, libfabric's entry point fi_prov_ini, and resolves every
# symbol it uses at link time (-Wl,-z,defs).
so="${VWAIT_BUILDDIR:?run through make check}/.libs/libvwait-fi.so"
[ -f "$so" ] || { echo "not built: $so"; exit 1; }
exported=$(nm -D --defined-only "$so" | awk '$2 ~ /^[TDBRVWiu]$/ { print $3 }' | sort)
echo "exported: $exported"
[ "$exported" = "fi_prov_ini" ] || { echo "FAIL: expected exactly fi_prov_ini"; exit 1; }
# every undefined symbol must be found in a library the DSO names as NEEDED
if ! LD_BIND_NOW=1 ldd -r "$so" 2>&1 | grep -q 'undefined symbol'; then
	echo "all symbols resolve"
else
	ldd -r "$so"; exit 1
fi
