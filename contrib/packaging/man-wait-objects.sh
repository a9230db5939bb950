#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
# man-wait-objects.sh [FILE]: print fi_vwait(7)'s wait-object table, one line per object kind:
#   <kind> <FI_WAIT_x> <FI_WAIT_y> ...
# FILE is the roff source (fi_vwait.7 or fi_vwait.7.in) or the page as man renders it; stdin if
# absent. Table lines look like "wait-objects cq: FI_WAIT_NONE FI_WAIT_FD ..." (the hyphen is
# written "\-" in roff). Exits 1 if the file holds no such line.
set -eu
sed -n -e 's/^[[:space:]]*wait\\*-objects[[:space:]]\{1,\}\([a-z_]\{1,\}\):[[:space:]]*/\1 /p' "${1:--}" |
	tr -s ' \t' '  ' | sed -e 's/ *$//' | grep .
