#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
# build-rpm.sh TARBALL OUTDIR: build libfabric-vwait and libfabric-vwait-devel RPMs from a
# "make dist" tarball (which carries contrib/rpm/libfabric-vwait.spec) and copy them to OUTDIR.
# Debian's rpm database is empty, so BuildRequires cannot be checked: --nodeps. %check runs
# make check. Extra rpmbuild arguments: VWAIT_RPMBUILD_FLAGS.
set -eu
if [ $# -ne 2 ]; then
	echo "usage: $0 TARBALL OUTDIR" >&2
	exit 2
fi
tarball=$(readlink -f "$1")
mkdir -p "$2"
outdir=$(readlink -f "$2")
command -v rpmbuild >/dev/null 2>&1 || {
	echo "$0: rpmbuild not found (Debian package rpm)" >&2
	exit 3
}
top=$(mktemp -d "${TMPDIR:-/tmp}/vwait-rpm.XXXXXX")
trap 'rm -rf "$top"' EXIT
rpmbuild -ta --nodeps --define "_topdir $top" --define "_smp_mflags -j${VWAIT_JOBS:-2}" \
	${VWAIT_RPMBUILD_FLAGS:-} "$tarball"
find "$top/RPMS" "$top/SRPMS" -name '*.rpm' -exec cp -v {} "$outdir/" \;
