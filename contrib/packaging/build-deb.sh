#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
# build-deb.sh TARBALL OUTDIR: build the libfabric-vwait Debian packages from a "make dist"
# tarball: unpack it, copy its contrib/debian/ to debian/, link the tarball as the .orig
# tarball, run dpkg-buildpackage -us -uc -b (tests on: dh_auto_test runs make check), and
# copy the .deb files to OUTDIR. Extra dpkg-buildpackage arguments: VWAIT_DPKG_FLAGS.
set -eu
if [ $# -ne 2 ]; then
	echo "usage: $0 TARBALL OUTDIR" >&2
	exit 2
fi
tarball=$(readlink -f "$1")
mkdir -p "$2"
outdir=$(readlink -f "$2")
for tool in dpkg-buildpackage dh fakeroot; do
	command -v $tool >/dev/null 2>&1 || {
		echo "$0: $tool not found (Debian packages dpkg-dev, debhelper, fakeroot)" >&2
		exit 3
	}
done
work=$(mktemp -d "${TMPDIR:-/tmp}/vwait-deb.XXXXXX")
trap 'rm -rf "$work"' EXIT
tar -C "$work" -xf "$tarball"
src=$(find "$work" -mindepth 1 -maxdepth 1 -type d)
[ -d "$src/contrib/debian" ] || {
	echo "$0: $tarball has no contrib/debian" >&2
	exit 1
}
cp -R "$src/contrib/debian" "$src/debian"
# The tarball's version (vwait-X.Y.Z.tar.gz) must be the upstream version of debian/changelog.
upstream=$(cd "$src" && dpkg-parsechangelog -S Version | sed 's/-[^-]*$//')
tar_version=$(basename "$src" | sed 's/^[^-]*-//')
if [ "$upstream" != "$tar_version" ]; then
	echo "$0: contrib/debian/changelog is version $upstream, the tarball $tar_version: add a changelog entry" >&2
	exit 1
fi
source_name=$(cd "$src" && dpkg-parsechangelog -S Source)
ln -s "$tarball" "$work/${source_name}_${upstream}.orig.tar.gz"
(cd "$src" && DEB_BUILD_OPTIONS="parallel=${VWAIT_JOBS:-2} ${DEB_BUILD_OPTIONS:-}" \
	dpkg-buildpackage -us -uc -b ${VWAIT_DPKG_FLAGS:-})
find "$work" -maxdepth 1 \( -name '*.deb' -o -name '*.ddeb' -o -name '*.buildinfo' -o -name '*.changes' \) \
	-exec cp -v {} "$outdir/" \;
