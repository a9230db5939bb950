#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
# check-man.sh: checks of fi_vwait(7), run by make check.
#   1. the built page renders with no groff warning;
#   2. its wait-object table has one line per object kind (cq, cntr, eq, wait_set), each naming
#      "none" or only values of enum fi_wait_obj from the libfabric headers, none twice, and no
#      FI_WAIT_NONE / FI_WAIT_SET for a wait set (fi_poll(3)); and the table is what the built
#      plugin reports (contrib/packaging/wait_report, through libfabric and FI_VWAIT_WAIT_OPS);
#   3. its RUNTIME PARAMETERS name exactly the FI_VWAIT_* parameters the built plugin reports in
#      fi_info -e, with the same numeric defaults;
#   4. its version is the version of contrib/debian/changelog.
# Environment (set by make check): VWAIT_SRCDIR, VWAIT_BUILDDIR; CC, FABRIC_CFLAGS optional.
set -u
srcdir=${VWAIT_SRCDIR:-.}
builddir=${VWAIT_BUILDDIR:-.}
page=$builddir/prov/vwait/man/fi_vwait.7
plugin_dir=$builddir/.libs
failures=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/vwait-check-man.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT

fail()
{
	echo "FAIL: $*"
	failures=$((failures + 1))
}

if [ ! -f "$page" ]; then
	echo "FAIL: $page was not built"
	exit 1
fi

# 1. groff warnings
if command -v groff >/dev/null 2>&1; then
	groff -man -ww -z "$page" >"$tmp/groff" 2>&1
	if [ -s "$tmp/groff" ]; then
		fail "groff warns about $page:"
		cat "$tmp/groff"
	else
		echo "ok: $page renders without groff warnings"
	fi
else
	echo "SKIP: groff not installed, rendering not checked"
fi

# 2. the wait-object table
printf '#include <rdma/fi_eq.h>\n' | ${CC:-cc} ${FABRIC_CFLAGS:-} -E -P -x c - 2>"$tmp/cpp.err" |
	awk '/enum fi_wait_obj/ { on = 1 } on { print } on && /}/ { exit }' |
	grep -o 'FI_WAIT_[A-Z_]*' | sort -u >"$tmp/valid"
if [ ! -s "$tmp/valid" ]; then
	fail "could not read enum fi_wait_obj from <rdma/fi_eq.h>"
	cat "$tmp/cpp.err"
fi
if ! "$srcdir/contrib/packaging/man-wait-objects.sh" "$page" >"$tmp/table"; then
	fail "$page has no wait-objects table"
fi
cut -d' ' -f1 "$tmp/table" | sort >"$tmp/kinds"
printf '%s\n' cntr cq eq wait_set >"$tmp/kinds.want"
if ! cmp -s "$tmp/kinds" "$tmp/kinds.want"; then
	fail "wait-objects table kinds are [$(tr '\n' ' ' <"$tmp/kinds")], want one line each for [cntr cq eq wait_set]"
fi
while read -r kind objs; do
	if [ -z "$objs" ]; then
		fail "wait-objects $kind: lists nothing (write 'none' when no wait object is supported)"
		continue
	fi
	[ "$objs" != none ] || continue
	for obj in $objs; do
		grep -qx "$obj" "$tmp/valid" || fail "wait-objects $kind: $obj is not a value of enum fi_wait_obj"
	done
	dups=$(printf '%s\n' $objs | sort | uniq -d | tr '\n' ' ')
	[ -z "$dups" ] || fail "wait-objects $kind: lists $dups more than once"
	if [ "$kind" = wait_set ]; then
		for obj in FI_WAIT_NONE FI_WAIT_SET; do
			case " $objs " in *" $obj "*) fail "wait-objects wait_set: $obj is not a wait set's wait object" ;; esac
		done
	fi
done <"$tmp/table"
echo "ok: wait-objects table read: $(wc -l <"$tmp/table") kinds"

# 2b. the table against what the built plugin reports (contrib/packaging/wait_report)
report=$builddir/contrib/packaging/wait_report
normalize()
{
	while read -r kind objs; do
		printf '%s %s\n' "$kind" "$(printf '%s\n' $objs | sort | tr '\n' ' ' | sed 's/ $//')"
	done | sort
}
if [ ! -x "$report" ]; then
	fail "$report is not built: cannot compare the table with what vwait reports"
elif ! env -u FI_PROVIDER FI_PROVIDER_PATH="$plugin_dir" "$report" >"$tmp/report.raw" 2>"$tmp/report.err"; then
	fail "wait_report failed: $(cat "$tmp/report.err")"
else
	"$srcdir/contrib/packaging/man-wait-objects.sh" "$tmp/report.raw" | normalize >"$tmp/report"
	normalize <"$tmp/table" >"$tmp/table.norm"
	if cmp -s "$tmp/report" "$tmp/table.norm"; then
		echo "ok: wait-objects table matches what the plugin reports"
	else
		fail "wait-objects table differs from what the plugin reports (< man page, > plugin):"
		diff "$tmp/table.norm" "$tmp/report" | grep '^[<>]'
	fi
fi

# 3. parameters against the built plugin
awk '/^\.SH/ { on = ($0 ~ /RUNTIME PARAMETERS/) } on && prev == ".TP" && /^\.B FI_VWAIT_/ { print $2 } { prev = $0 }' \
	"$page" | sort >"$tmp/man.params"
if [ ! -s "$tmp/man.params" ]; then
	fail "$page documents no FI_VWAIT_* parameter under RUNTIME PARAMETERS"
fi
if ! command -v fi_info >/dev/null 2>&1; then
	echo "SKIP: fi_info (libfabric-bin) not installed, parameters not compared"
elif [ ! -e "$plugin_dir/libvwait-fi.so" ]; then
	fail "$plugin_dir/libvwait-fi.so is not built: cannot compare parameters"
else
	env -u FI_PROVIDER FI_PROVIDER_PATH="$plugin_dir" fi_info -e 2>&1 | tr -d '\000' >"$tmp/fi_info.e"
	grep -o '^# FI_VWAIT_[A-Z0-9_]*' "$tmp/fi_info.e" | cut -c3- | sort -u >"$tmp/prov.params"
	if [ ! -s "$tmp/prov.params" ]; then
		fail "FI_PROVIDER_PATH=$plugin_dir fi_info -e lists no FI_VWAIT_* parameter"
	fi
	for p in $(comm -23 "$tmp/prov.params" "$tmp/man.params"); do
		fail "$p is reported by fi_info -e but not documented in fi_vwait(7)"
	done
	for p in $(comm -13 "$tmp/prov.params" "$tmp/man.params"); do
		fail "$p is documented in fi_vwait(7) but not reported by fi_info -e"
	done
	for p in $(comm -12 "$tmp/prov.params" "$tmp/man.params"); do
		want=$(grep -A1 "^# $p:" "$tmp/fi_info.e" | sed -n 's/.*(default: \([0-9][0-9]*\)).*/\1/p' | head -n1)
		[ -n "$want" ] || continue
		got=$(awk -v p="$p" '$0 == ".B " p { on = 1; next } on && /^\.(TP|SH|SS)/ { exit }
			on { print }' "$page" | sed -n 's/^Default: \([0-9][0-9]*\)\..*/\1/p' | head -n1)
		[ "$got" = "$want" ] || fail "$p: fi_info -e says default $want, fi_vwait(7) says '${got:-nothing}'"
	done
	echo "ok: parameters compared: $(tr '\n' ' ' <"$tmp/prov.params")"
fi

# 4. version
page_version=$(sed -n 's/^\.TH .*"vwait \([0-9][^"]*\)".*/\1/p' "$page")
deb_version=$(sed -n '1s/^[^ ]* (\([^)-]*\)\(-[^)]*\)\{0,1\}).*/\1/p' "$srcdir/contrib/debian/changelog")
if [ -z "$page_version" ] || [ "$page_version" != "$deb_version" ]; then
	fail "fi_vwait(7) is version '$page_version', contrib/debian/changelog is '$deb_version'"
else
	echo "ok: version $page_version in fi_vwait(7) and contrib/debian/changelog"
fi

[ "$failures" -eq 0 ] || {
	echo "$failures check(s) failed"
	exit 1
}
exit 0
