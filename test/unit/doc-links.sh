#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
# Every relative link and image of README.md and doc/*.md names a file or folder that exists:
# in a checkout, and (make distcheck runs this from the tarball) in the release tarball, so a
# page or plot missing from EXTRA_DIST fails here. Web links and #anchors are not checked.
#   doc-links.sh [SRCDIR]      (make check: VWAIT_SRCDIR)
cd "${1:-${VWAIT_SRCDIR:?run through make check, or give SRCDIR}}" || exit 99
fail=0
n=0
for page in README.md doc/*.md; do
	[ -f "$page" ] || { echo "FAIL: $page missing"; fail=1; continue; }
	dir=$(dirname "$page")
	# ](target) of [text](target) and ![alt](target), one a line
	for target in $(grep -o '](\([^)]*\))' "$page" | sed 's/^](\(.*\))$/\1/'); do
		case "$target" in
		http://* | https://* | mailto:* | '#'*) continue ;;
		esac
		path=${target%%#*}
		n=$((n + 1))
		[ -e "$dir/$path" ] || { echo "FAIL: $page links to $target: not found"; fail=1; }
	done
done
echo "$n relative links checked"
[ "$n" -gt 0 ] || { echo "FAIL: no link found (the parser is broken)"; fail=1; }
exit $fail
