#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
# contrib/vm/build-siw.sh - soft-iWARP (siw) for the VM test bed.  Debian 12's kernel is
# built without siw (# CONFIG_RDMA_SIW is not set), so this builds siw.ko out of tree from
# Debian's kernel sources (package linux-source-6.1: /usr/src/linux-source-6.1.tar.xz)
# against the headers of exactly the kernel the guest boots (linux-headers-<version>: its
# Module.symvers carries the CRCs of ib_core's exports, which the module must match), and
# caches it beside run-in-vm.sh's initramfs.  run-in-vm.sh runs it itself for VM_RDMA=siw.
#
#   contrib/vm/build-siw.sh          build if needed; prints the module's path
#
# Knobs: VM_KERNEL_VER (default: as run-in-vm.sh, the newest kernel with rdma_rxe.ko),
# VM_CACHE (as run-in-vm.sh), SIW_SOURCE (a kernel source tarball or tree instead of
# /usr/src/linux-source-<major.minor>.tar.xz), SIW_JOBS (make -j, default 2).
# Exits 0 with the path on stdout; 1 with the reason (and the packages to install) on stderr.
set -u -o pipefail

die() {
	echo "build-siw: $*" >&2
	exit 1
}

if [ -z "${VM_KERNEL_VER:-}" ]; then
	for d in $(ls -1d /lib/modules/*/ 2>/dev/null | sort -rV); do
		v=$(basename "$d")
		if [ -f "/boot/vmlinuz-$v" ] && find "$d" -name 'rdma_rxe.ko*' | grep . >/dev/null; then
			VM_KERNEL_VER=$v
			break
		fi
	done
fi
[ -n "${VM_KERNEL_VER:-}" ] || die "no kernel with rdma_rxe found (apt-get install linux-image-amd64)"
KVER=$VM_KERNEL_VER
CACHE=${VM_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/vm-rxe}
OUT=$CACHE/siw-$KVER.ko

# the kernel's package version (what the headers and the sources must match)
image_ver=$(dpkg-query -W -f='${Version}' "linux-image-$KVER" 2>/dev/null) || image_ver=
base=$(echo "$KVER" | sed -n 's/^\([0-9]*\.[0-9]*\)\..*/\1/p') # 6.1.0-56-amd64 -> 6.1
[ -n "$base" ] || die "cannot tell the kernel series of $KVER"

headers=/lib/modules/$KVER/build
if [ ! -f "$headers/Module.symvers" ] || [ ! -f "$headers/Makefile" ]; then
	die "no headers for kernel $KVER ($headers/Module.symvers missing): apt-get install linux-headers-$KVER${image_ver:+ (version $image_ver, as linux-image-$KVER)}; contrib/deps.sh siw installs linux-headers-amd64, which follows linux-image-amd64"
fi
headers_ver=$(dpkg-query -W -f='${Version}' "linux-headers-$KVER" 2>/dev/null) || headers_ver=
if [ -n "$image_ver" ] && [ -n "$headers_ver" ] && [ "$image_ver" != "$headers_ver" ]; then
	die "linux-headers-$KVER is $headers_ver but the kernel is $image_ver: install the same version"
fi

src=${SIW_SOURCE:-/usr/src/linux-source-$base.tar.xz}
[ -e "$src" ] || die "no kernel sources at $src: apt-get install linux-source-$base${image_ver:+ (best: version $image_ver, as linux-image-$KVER)}; contrib/deps.sh siw installs it"
src_ver=
[ -z "${SIW_SOURCE:-}" ] && src_ver=$(dpkg-query -W -f='${Version}' "linux-source-$base" 2>/dev/null)
# the upstream part (6.1.192 of 6.1.192-2) must be the kernel's; a Debian revision apart is
# told (the siw driver itself rarely changes between revisions; insmod checks the symbols)
if [ -n "$src_ver" ] && [ -n "$image_ver" ] && [ "${src_ver%-*}" != "${image_ver%-*}" ]; then
	die "linux-source-$base is $src_ver but the kernel is $image_ver: apt-get install linux-source-$base=$image_ver (or the kernel of the sources)"
fi
[ -n "$src_ver" ] && [ -n "$image_ver" ] && [ "$src_ver" != "$image_ver" ] &&
	echo "build-siw: note: linux-source-$base $src_ver, kernel $image_ver (Debian revisions differ)" >&2

# cached: built from these sources for these headers (dpkg keeps a package's mtimes: the
# stamp names the versions, sizes and times)
stamp="$src $(stat -L -c %s.%Y "$src") ${src_ver:-?} $(stat -L -c %s.%Y "$headers/Module.symvers") ${headers_ver:-?}"
if [ -s "$OUT" ] && [ "$(cat "$OUT.stamp" 2>/dev/null)" = "$stamp" ]; then
	echo "$OUT"
	exit 0
fi

for t in make gcc strip; do command -v "$t" >/dev/null || die "$t not found (contrib/deps.sh build)"; done
mkdir -p "$CACHE" || die "cannot create $CACHE"
work=$(mktemp -d "${TMPDIR:-/tmp}/build-siw.XXXXXX") || die "mktemp failed"
trap 'rm -rf "$work"' EXIT
rel=drivers/infiniband/sw/siw
echo "build-siw: building siw.ko for $KVER from $src" >&2
if [ -d "$src" ]; then
	cp -r "$src/$rel" "$work/siw" || die "no $rel in $src"
else
	# only the driver's directory (one pass over the tarball, ~30 s)
	tar -xJf "$src" -C "$work" --wildcards "*/$rel" || die "cannot extract $rel from $src"
	mv "$work"/*/"$rel" "$work/siw" || die "no $rel in $src"
fi
make -C "$headers" M="$work/siw" CONFIG_RDMA_SIW=m -j"${SIW_JOBS:-2}" modules >"$work/build.log" 2>&1 || {
	tail -n 30 "$work/build.log" >&2
	die "building siw.ko failed (log above)"
}
ko=$work/siw/siw.ko
[ -s "$ko" ] || die "the build made no siw.ko"
vermagic=$(modinfo -F vermagic "$ko" 2>/dev/null)
case $vermagic in "$KVER "*) ;; *) die "siw.ko has vermagic '$vermagic', not $KVER" ;; esac
strip --strip-debug "$ko" || die "strip failed"
cp "$ko" "$OUT.tmp.$$" && mv "$OUT.tmp.$$" "$OUT" && echo "$stamp" >"$OUT.stamp" ||
	die "cannot write $OUT"
echo "build-siw: $OUT (depends: $(modinfo -F depends "$OUT"))" >&2
echo "$OUT"
