#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
# check-packaging.sh TARBALL [WAIT_REPORT]: the packaging test (make check-packaging).
#   1. build the RPMs (rpmbuild -ta --nodeps, %check on) and check what they hold;
#   2. build the .debs (dpkg-buildpackage -us -uc -b, tests on; at the same time as 1) and check
#      what they hold;
#   3. install the .debs into THIS system, check that fi_info -l lists vwait and fi_info -e its
#      FI_VWAIT_* parameters with no FI_PROVIDER_PATH, that man finds fi_vwait(7), that the
#      installed page's wait-objects table is what the installed plugin reports (WAIT_REPORT,
#      the build's contrib/packaging/wait_report, if given) and that the header is installed;
#   4. remove them and check that nothing is left: dpkg -L fails, no file of the packages
#      remains, the provider directory holds no libvwait-fi.so.
# Needs root for 3-4. It refuses to run (exit 77, skipped) when the packages are already
# installed or a libvwait-fi.so not owned by a package sits in the provider directory, and a
# trap removes what it installed on any failure or interruption. One run at a time per host
# (flock). Packages are kept in VWAIT_PKG_OUT if set, the build logs (rpm.log, deb.log, ...) in
# VWAIT_PKG_LOGDIR if set. VWAIT_PKG_NOCHECK=1 builds both packages without running make check
# (rpmbuild --nocheck, DEB_BUILD_OPTIONS=nocheck) and says so; VWAIT_PKG_NOCHECK=rpm (or deb)
# does that for one of them only: setup.sh test, whose unit and distcheck stages have run the
# same make check with the same compiler, skips the RPM's (its %check is make check and
# nothing else) and keeps the .deb's, built with Debian's flags. VWAIT_PKG_FORMATS="deb" leaves the RPM
# out (default "rpm deb"): the debian13 stage of setup.sh test, whose root has no rpmbuild.
set -eu
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
	echo "usage: $0 TARBALL [WAIT_REPORT]" >&2
	exit 2
fi
wait_report=${2:-}
here=$(cd "$(dirname "$0")" && pwd)
tarball=$(readlink -f "$1")
[ -f "$tarball" ] || {
	echo "FAIL: $1: no such tarball (make dist makes one)"
	exit 1
}
pkgs="libfabric-vwait libfabric-vwait-dev libfabric-vwait-utils"
skip()
{
	echo "SKIP: $*"
	exit 77
}
formats=${VWAIT_PKG_FORMATS:-rpm deb}
want_rpm=0
case " $formats " in *" rpm "*) want_rpm=1 ;; esac
rpm_tools=
[ "$want_rpm" = 1 ] && rpm_tools="rpmbuild rpm"
for tool in $rpm_tools dpkg-buildpackage dh fakeroot dpkg fi_info flock; do
	command -v $tool >/dev/null 2>&1 || skip "$tool not found (install rpm dpkg-dev debhelper fakeroot libfabric-bin)"
done
[ "$(id -u)" -eq 0 ] || skip "must run as root: it installs and removes a .deb"

exec 9>/run/lock/vwait-check-packaging.lock
flock -w 1800 9 || {
	echo "FAIL: another check-packaging run holds /run/lock/vwait-check-packaging.lock"
	exit 1
}

multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
provdir=/usr/lib/$multiarch/libfabric
for p in $pkgs; do
	if dpkg-query -W -f '${db:Status-Status}' "$p" 2>/dev/null | grep -qv '^not-installed$'; then
		skip "$p is already installed here; this test will not touch it"
	fi
done
[ ! -e "$provdir/libvwait-fi.so" ] ||
	skip "$provdir/libvwait-fi.so exists (make install?); this test will not touch it"

# which formats build without make check: none, both (1), or those named
nocheck_rpm=0 nocheck_deb=0
case " ${VWAIT_PKG_NOCHECK:-0} " in
" 0 ") ;;
" 1 ") nocheck_rpm=1 nocheck_deb=1 ;;
*)
	for f in ${VWAIT_PKG_NOCHECK}; do
		case $f in
		rpm) nocheck_rpm=1 ;;
		deb) nocheck_deb=1 ;;
		*)
			echo "FAIL: VWAIT_PKG_NOCHECK='$VWAIT_PKG_NOCHECK': want 0, 1, or formats (rpm, deb)"
			exit 2
			;;
		esac
	done
	;;
esac
if [ "$nocheck_rpm" = 1 ]; then
	VWAIT_RPMBUILD_FLAGS="--nocheck ${VWAIT_RPMBUILD_FLAGS:-}"
	export VWAIT_RPMBUILD_FLAGS
fi
if [ "$nocheck_deb" = 1 ]; then
	DEB_BUILD_OPTIONS="nocheck ${DEB_BUILD_OPTIONS:-}"
	export DEB_BUILD_OPTIONS
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/vwait-check-packaging.XXXXXX")
out=${VWAIT_PKG_OUT:-$work/out}
installed=no
failures=0
cleanup()
{
	status=$?
	if [ -n "${debpid:-}" ]; then
		kill "$debpid" 2>/dev/null || true
		wait "$debpid" 2>/dev/null || true
	fi
	if [ "$installed" = yes ]; then
		echo "cleanup: purging $pkgs"
		dpkg --purge $pkgs >/dev/null 2>&1 || echo "cleanup: dpkg --purge $pkgs failed: remove them by hand"
	fi
	if [ -n "${VWAIT_PKG_LOGDIR:-}" ] && mkdir -p "$VWAIT_PKG_LOGDIR"; then
		for log in "$work"/*.log; do
			[ ! -f "$log" ] || cp "$log" "$VWAIT_PKG_LOGDIR/packaging-$(basename "$log")" || true
		done
	fi
	rm -rf "$work"
	exit $status
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

fail()
{
	echo "FAIL: $*"
	failures=$((failures + 1))
}
ok()
{
	echo "ok: $*"
}

secs()
{
	echo "$(($(date +%s) - $1)) s"
}

# The .deb builds in the background while the RPM builds: most of each build's time is its make
# check, whose tests mostly sleep (timeouts, idle waiters), so the two overlap well.
t_deb=$(date +%s)
"$here/build-deb.sh" "$tarball" "$out" >"$work/deb.log" 2>&1 &
debpid=$!

# 1. RPM
if [ "$want_rpm" = 1 ]; then
echo "== rpm: rpmbuild -ta --nodeps $(basename "$tarball")"
t0=$(date +%s)
if "$here/build-rpm.sh" "$tarball" "$out" >"$work/rpm.log" 2>&1; then
	ok "rpmbuild in $(secs "$t0") ($(grep -c . "$work/rpm.log") lines of log)"
	rpmfile=$(find "$out" -name 'libfabric-vwait-[0-9]*.rpm' ! -name '*.src.rpm' | head -n1)
	develfile=$(find "$out" -name 'libfabric-vwait-devel-[0-9]*.rpm' | head -n1)
	utilsfile=$(find "$out" -name 'libfabric-vwait-utils-[0-9]*.rpm' | head -n1)
	if [ -n "$rpmfile" ] && [ -n "$develfile" ] && [ -n "$utilsfile" ]; then
		rpm -qlp "$utilsfile" 2>/dev/null | grep -q '^/usr/bin/fi_vwait' &&
			ok "$(basename "$utilsfile") holds $(rpm -qlp "$utilsfile" 2>/dev/null | grep '^/usr/bin/' | tr '\n' ' ')" ||
			fail "$(basename "$utilsfile") holds no /usr/bin/fi_vwait* tool"
		! rpm -qlp "$rpmfile" 2>/dev/null | grep -q '^/usr/bin/' ||
			fail "$(basename "$rpmfile") ships programs: it is meant to hold the plugin only"
		rpm -qlp "$rpmfile" >"$work/rpm.files" 2>/dev/null
		rpm -qlp "$develfile" >"$work/rpm-devel.files" 2>/dev/null
		grep -Eq '^/usr/lib(64)?/libfabric/libvwait-fi\.so$' "$work/rpm.files" &&
			ok "$(basename "$rpmfile") holds the plugin in %{_libdir}/libfabric" ||
			fail "$(basename "$rpmfile") has no %{_libdir}/libfabric/libvwait-fi.so: $(tr '\n' ' ' <"$work/rpm.files")"
		grep -q '/man7/fi_vwait\.7' "$work/rpm.files" &&
			ok "$(basename "$rpmfile") holds fi_vwait(7)" ||
			fail "$(basename "$rpmfile") has no fi_vwait(7)"
		! grep -q '\.la$' "$work/rpm.files" || fail "$(basename "$rpmfile") ships a libtool .la"
		license=$(rpm -qp --qf '%{LICENSE}' "$rpmfile" 2>/dev/null)
		[ "$license" = "BSD-2-Clause OR GPL-2.0-only" ] &&
			ok "$(basename "$rpmfile") License: $license" ||
			fail "$(basename "$rpmfile") License: '$license', want 'BSD-2-Clause OR GPL-2.0-only'"
		grep -q '/COPYING$' "$work/rpm.files" && grep -q '/COPYING\.GPL-2$' "$work/rpm.files" &&
			ok "$(basename "$rpmfile") ships COPYING and COPYING.GPL-2" ||
			fail "$(basename "$rpmfile") lacks the license files (%license COPYING COPYING.GPL-2)"
		grep -qx '/usr/include/rdma/fi_ext_vwait.h' "$work/rpm-devel.files" &&
			ok "$(basename "$develfile") holds rdma/fi_ext_vwait.h" ||
			fail "$(basename "$develfile") has no /usr/include/rdma/fi_ext_vwait.h"
		if [ "$nocheck_rpm" = 1 ]; then
			echo "SKIP: %check not run (VWAIT_PKG_NOCHECK=$VWAIT_PKG_NOCHECK)"
		else
			grep -q '^# PASS:' "$work/rpm.log" &&
				ok "%check ran make check: $(grep '^# PASS:' "$work/rpm.log" | tail -n1)" ||
				fail "rpmbuild log shows no make check result"
		fi
	else
		fail "rpmbuild made no libfabric-vwait / -devel / -utils binary RPM"
	fi
else
	fail "build-rpm.sh failed; its log ends:"
	tail -n 40 "$work/rpm.log"
fi

# 2. Debian
else
	echo "== rpm: skipped (VWAIT_PKG_FORMATS=$formats)"
fi

echo "== deb: dpkg-buildpackage -us -uc -b (beside the RPM build)"
if wait "$debpid"; then
	debpid=
	ok "dpkg-buildpackage in $(secs "$t_deb") ($(grep -c . "$work/deb.log") lines of log)"
	if [ "$nocheck_deb" = 1 ]; then
		echo "SKIP: dh_auto_test not run (VWAIT_PKG_NOCHECK=$VWAIT_PKG_NOCHECK)"
	else
		grep -q '^# PASS:' "$work/deb.log" &&
			ok "dh_auto_test ran make check: $(grep '^# PASS:' "$work/deb.log" | tail -n1)" ||
			fail "dpkg-buildpackage log shows no make check result"
	fi
else
	debpid=
	fail "build-deb.sh failed; its log ends:"
	tail -n 40 "$work/deb.log"
fi
debs=""
for p in $pkgs; do
	f=$(find "$out" -name "${p}_*.deb" | head -n1)
	if [ -z "$f" ]; then
		fail "no ${p}_*.deb was built"
	else
		debs="$debs $f"
	fi
done
if [ "$failures" -ne 0 ]; then
	echo "$failures check(s) failed before installing anything"
	exit 1
fi
for f in $debs; do
	dpkg-deb -c "$f" | awk '$1 !~ /^d/ { sub(/^\./, "", $6); print $6 }' >>"$work/deb.files"
done
grep -qx "$provdir/libvwait-fi.so" "$work/deb.files" && ok "the .deb puts the plugin in $provdir" ||
	fail "no .deb holds $provdir/libvwait-fi.so"

# 3. install
echo "== install:$debs"
t0=$(date +%s)
installed=yes
if ! dpkg -i $debs >"$work/install.log" 2>&1; then
	fail "dpkg -i failed:"
	cat "$work/install.log"
	exit 1
fi
ok "dpkg -i"
if env -u FI_PROVIDER_PATH -u FI_PROVIDER fi_info -l 2>&1 | tr -d '\000' | grep -qx 'vwait:'; then
	ok "fi_info -l lists vwait without FI_PROVIDER_PATH"
else
	fail "fi_info -l does not list vwait once the package is installed"
	env -u FI_PROVIDER_PATH -u FI_PROVIDER fi_info -l 2>&1 | tr -d '\000' | head -n 40
fi
if env -u FI_PROVIDER_PATH -u FI_PROVIDER fi_info -e 2>&1 | tr -d '\000' | grep -q '^# FI_VWAIT_'; then
	ok "fi_info -e lists FI_VWAIT_* parameters without FI_PROVIDER_PATH"
else
	fail "fi_info -e lists no FI_VWAIT_* parameter once the package is installed"
fi
if [ -n "$wait_report" ]; then
	# man -l on the file man -w finds: "man 7 fi_vwait" may show man-db's formatted copy in
	# /var/cache/man, which a page with the same mtime (SOURCE_DATE_EPOCH, the changelog's
	# date) from an earlier build would still pass for
	page=$(man -w 7 fi_vwait 2>/dev/null) || page=/nonexistent
	man -l "$page" 2>/dev/null | "$here/man-wait-objects.sh" | sort >"$work/man.table" || true
	if env -u FI_PROVIDER_PATH -u FI_PROVIDER "$wait_report" >"$work/report.raw" 2>&1; then
		"$here/man-wait-objects.sh" "$work/report.raw" | sort >"$work/report.table"
		if [ -s "$work/man.table" ] && cmp -s "$work/man.table" "$work/report.table"; then
			ok "installed fi_vwait(7) lists the wait objects the installed plugin reports"
		else
			fail "installed fi_vwait(7) and plugin disagree on wait objects (< man, > plugin):"
			diff "$work/man.table" "$work/report.table" | grep '^[<>]'
		fi
	else
		fail "$wait_report against the installed plugin: $(cat "$work/report.raw")"
	fi
fi
if man -w 7 fi_vwait >/dev/null 2>&1; then
	ok "man -w 7 fi_vwait: $(man -w 7 fi_vwait)"
else
	fail "man does not find fi_vwait(7)"
fi
for f in $(grep '^/usr/bin/' "$work/deb.files"); do
	[ -x "$f" ] && ok "$f installed" || fail "$f is not installed or not executable"
done
[ -f /usr/include/rdma/fi_ext_vwait.h ] && ok "rdma/fi_ext_vwait.h installed" ||
	fail "/usr/include/rdma/fi_ext_vwait.h missing"
copyright=/usr/share/doc/libfabric-vwait/copyright
if head -n1 "$copyright" 2>/dev/null | grep -q '^Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/' &&
	grep -qx 'License: BSD-2-clause or GPL-2' "$copyright" && ! grep -q 'TBD' "$copyright"; then
	ok "$copyright: machine-readable, BSD-2-clause or GPL-2"
else
	fail "$copyright is missing, not machine-readable or has no 'License: BSD-2-clause or GPL-2'"
fi

# 4. remove
echo "== remove: dpkg -r $pkgs"
if ! dpkg -r $pkgs >"$work/remove.log" 2>&1; then
	fail "dpkg -r failed:"
	cat "$work/remove.log"
	exit 1
fi
installed=no
for p in $pkgs; do
	if dpkg -L "$p" >/dev/null 2>&1; then
		fail "dpkg -L $p still lists files after dpkg -r"
		installed=yes
	fi
	status=$(dpkg-query -W -f '${db:Status-Status}' "$p" 2>/dev/null || echo not-installed)
	[ "$status" = not-installed ] || {
		fail "$p is '$status' after dpkg -r, not not-installed"
		installed=yes
	}
done
left=0
while read -r f; do
	[ -e "$f" ] || [ -L "$f" ] || continue
	fail "$f is left after dpkg -r"
	left=$((left + 1))
done <"$work/deb.files"
[ "$left" -eq 0 ] && ok "no file of the packages is left ($(wc -l <"$work/deb.files") checked)"
if [ -d "$provdir" ] && [ -n "$(find "$provdir" -name 'libvwait*' 2>/dev/null)" ]; then
	fail "$provdir still holds: $(find "$provdir" -name 'libvwait*' | tr '\n' ' ')"
else
	ok "$provdir holds no libvwait file"
fi
if env -u FI_PROVIDER_PATH -u FI_PROVIDER fi_info -l 2>&1 | tr -d '\000' | grep -qx 'vwait:'; then
	fail "fi_info -l still lists vwait after removal"
else
	ok "fi_info -l no longer lists vwait"
fi

echo "install, checks and removal in $(secs "$t0")"
if [ "$failures" -ne 0 ]; then
	echo "$failures check(s) failed"
	exit 1
fi
echo "all packaging checks passed"
