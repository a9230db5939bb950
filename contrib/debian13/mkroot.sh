#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
# contrib/debian13/mkroot.sh - make (or reuse) a Debian 13 "trixie" root for vwait's
# debian13 test stage: debootstrap --variant=minbase from Debian's archive, the
# packages that build vwait and run its tests (libfabric 2.1, rdma-core, Open MPI 5,
# cmocka, the .deb tool chain), and this host's kernel modules, so that
# contrib/vm/run-in-vm.sh starts a VM on it (VM_ROOT=DIR) with the host's kernel.
#
#   contrib/debian13/mkroot.sh [--force] [--print]
#
# The root is cached at $VWAIT_DEBIAN13_ROOT (default /var/cache/vwait/debian13),
# outside any checkout, and made again only when it is missing or stale: its stamp
# (DIR/.vwait-root) records a hash of this recipe, and the kernel module trees it
# copied must still match the host's.  A stale root whose suite and mirror are still
# the recipe's is updated in place (apt-get install of the package list, the kernel
# module trees synced: seconds, not a new debootstrap; a package dropped from the list
# stays installed until --force); else a new root is made in DIR.new and renamed into
# place when complete, so an interrupted run never leaves a half root behind.
# --force makes a new one; --print only prints the path and whether it is current
# (exit 0 current, 1 missing or stale).  Needs root, debootstrap and the network path
# to Debian's archive (VWAIT_DEBIAN_MIRROR, default deb.debian.org).
# Cost (2 cores, this project's CI host): see contrib/debian13/README.md.
set -u -o pipefail

ROOT=${VWAIT_DEBIAN13_ROOT:-/var/cache/vwait/debian13}
MIRROR=${VWAIT_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITE=trixie

# The packages of the root: build (the tree, with warnings as errors), test (make check,
# the integration tier, Open MPI over vwait;ofi_rxm, fabtests), pkg (the .deb), vm (what
# run-in-vm.sh's guest side runs: ip, rdma, modprobe).
PACKAGES=(
	# build
	g++ make autoconf automake libtool pkg-config
	libfabric-dev libibverbs-dev librdmacm-dev libcmocka-dev
	# test
	libfabric1 libfabric-bin ibverbs-providers ibverbs-utils rdmacm-utils
	openmpi-bin libopenmpi-dev netpipe-openmpi valgrind
	# fabtests: runfabtests.sh asks python3 for errno values; fi_av_test resolves a service
	# name (getaddrinfo: /etc/services, which minbase lacks)
	python3-minimal netbase
	# ADIOS2's SST engine over libfabric (test/integration/adios2-sst.test): the Python
	# bindings of the serial build (python3-adios2 picks the serial or MPI one; the serial
	# one and numpy bring the least)
	python3-adios2 python3-adios2-serial
	# pkg
	dpkg-dev debhelper fakeroot build-essential man-db groff-base
	# vm guest side
	kmod iproute2 procps
)

die() {
	echo "mkroot: $*" >&2
	exit 1
}
log() { echo "mkroot: $*" >&2; }

force=0
print=0
for a in "$@"; do
	case $a in
	--force) force=1 ;;
	--print) print=1 ;;
	-h | --help)
		sed -n '2,22p' "$0"
		exit 0
		;;
	*) die "unknown argument '$a'" ;;
	esac
done

# kernels the VM may boot: the host's that have rdma_rxe (run-in-vm.sh picks the newest)
host_kernels() {
	local d
	for d in /lib/modules/*/; do
		[ -f "/boot/vmlinuz-$(basename "$d")" ] || continue
		find "$d" -name 'rdma_rxe.ko*' | grep -q . && basename "$d"
	done | sort -V
}

# the files the root gets besides its packages (both a new root and an updated one)
setup_files() {
	local dir=$1
	echo vm-rxe >"$dir/etc/hostname"
	# the guest's names (run-in-vm.sh names it vm-rxe): minbase has no /etc/hosts, so without
	# it every name (localhost, the host name) goes to DNS, which the guest has not, and
	# rdma_getaddrinfo fails with EAGAIN: upstream verbs then offers no FI_EP_MSG info
	cat >"$dir/etc/hosts" <<'HOSTS'
127.0.0.1	localhost
127.0.1.1	vm-rxe
::1		localhost ip6-localhost ip6-loopback
HOSTS
}

recipe=$({
	sed -n '/^SUITE=/p;/^PACKAGES=(/,/^)/p;/^setup_files() {/,/^}/p' "$0"
	echo "$MIRROR"
} | md5sum | cut -c1-12)
# what an in-place update cannot change: the suite and the archive
base=$(echo "$SUITE $MIRROR" | md5sum | cut -c1-12)
kernels=$(host_kernels | tr '\n' ' ')
want_stamp="recipe=$recipe kernels=$kernels"

current() {
	[ -f "$ROOT/.vwait-root" ] && [ "$(sed -n 1p "$ROOT/.vwait-root")" = "$want_stamp" ] || return 1
	local k
	for k in $kernels; do
		[ -f "$ROOT/usr/lib/modules/$k/modules.dep" ] || return 1
	done
}

if [ "$print" = 1 ]; then
	if current; then
		echo "$ROOT current ($want_stamp)"
		exit 0
	fi
	echo "$ROOT missing or stale (want $want_stamp)"
	exit 1
fi
if [ "$force" = 0 ] && current; then
	log "$ROOT is current ($(sed -n 2p "$ROOT/.vwait-root"))"
	exit 0
fi

[ "$(id -u)" = 0 ] || die "must run as root (debootstrap, chroot)"
command -v debootstrap >/dev/null || die "debootstrap not found (contrib/deps.sh debian13)"
[ -n "$kernels" ] || die "no host kernel with rdma_rxe under /lib/modules (apt-get install linux-image-amd64)"

NEW=$ROOT.new
mkdir -p "$(dirname "$ROOT")" || die "cannot create $(dirname "$ROOT")"
# one maker at a time
exec 8>"$ROOT.lock" || die "cannot open $ROOT.lock"
flock -w 3600 8 || die "another mkroot.sh holds $ROOT.lock"
if [ "$force" = 0 ] && current; then # made by the one we waited for
	log "$ROOT is current"
	exit 0
fi

mounted=()
umount_all() {
	local i
	for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[i]}" 2>/dev/null; done
	mounted=()
}
trap umount_all EXIT
export DEBIAN_FRONTEND=noninteractive

# install_packages DIR: the package list into the root at DIR (apt-get, in a chroot)
install_packages() {
	local dir=$1 m
	cp /etc/resolv.conf "$dir/etc/resolv.conf" 2>/dev/null
	for m in proc sys dev dev/pts; do
		case $m in
		proc) mount -t proc proc "$dir/proc" ;;
		sys) mount -t sysfs sys "$dir/sys" ;;
		*) mount --bind "/$m" "$dir/$m" ;;
		esac && mounted+=("$dir/$m")
	done
	chroot "$dir" apt-get -q update >>"$ROOT.log" 2>&1 || die "apt-get update in the root failed (log $ROOT.log)"
	chroot "$dir" apt-get -q install -y --no-install-recommends "${PACKAGES[@]}" >>"$ROOT.log" 2>&1 ||
		{
			tail -n 30 "$ROOT.log" >&2
			die "apt-get install in the root failed (log $ROOT.log)"
		}
	chroot "$dir" apt-get clean
	umount_all
}

# sync_kernels DIR: the host's kernel module trees (hard links when on the same file
# system: no copy), and none other
sync_kernels() {
	local dir=$1 k d
	mkdir -p "$dir/usr/lib/modules"
	for d in "$dir"/usr/lib/modules/*/; do
		[ -d "$d" ] || continue
		case " $kernels " in *" $(basename "$d") "*) ;; *) rm -rf "$d" ;; esac
	done
	for k in $kernels; do
		[ -f "$dir/usr/lib/modules/$k/modules.dep" ] && continue
		rm -rf "$dir/usr/lib/modules/$k"
		cp -al "/lib/modules/$k" "$dir/usr/lib/modules/$k" 2>/dev/null ||
			cp -a "/lib/modules/$k" "$dir/usr/lib/modules/$k" || die "cannot copy /lib/modules/$k"
	done
}

# write_stamp DIR T0 HOW
write_stamp() {
	# shellcheck disable=SC2016 # dpkg-query's format
	{
		echo "$want_stamp"
		echo "$3 $(date -u +%FT%TZ) in $(($(date +%s) - $2)) s: $(chroot "$1" dpkg-query -W -f='${Package} ${Version}\n' libfabric1 openmpi-bin ibverbs-providers 2>/dev/null | tr '\n' ';')"
		echo "base=$base"
	} >"$1/.vwait-root"
}

t0=$(date +%s)
if [ "$force" = 0 ] && [ -f "$ROOT/.vwait-root" ] && grep -qx "base=$base" "$ROOT/.vwait-root"; then
	log "$ROOT is stale: updating it in place (packages, kernel modules)"
	install_packages "$ROOT"
	sync_kernels "$ROOT"
	setup_files "$ROOT"
	write_stamp "$ROOT" "$t0" updated
	log "$ROOT ready: $(sed -n 2p "$ROOT/.vwait-root")"
	exit 0
fi

rm -rf "$NEW"
log "debootstrap --variant=minbase $SUITE $NEW $MIRROR"
debootstrap --variant=minbase --include=ca-certificates "$SUITE" "$NEW" "$MIRROR" >"$ROOT.log" 2>&1 ||
	{
		tail -n 30 "$ROOT.log" >&2
		die "debootstrap failed (log $ROOT.log)"
	}
t1=$(date +%s)
log "debootstrap took $((t1 - t0)) s"

cat >"$NEW/etc/apt/sources.list" <<SRC
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-updates main
SRC
# no daemons started from package scripts inside the chroot
printf '#!/bin/sh\nexit 101\n' >"$NEW/usr/sbin/policy-rc.d"
chmod 755 "$NEW/usr/sbin/policy-rc.d"
# no documentation but the man pages (the .deb checks install man pages)
cat >"$NEW/etc/dpkg/dpkg.cfg.d/01-vwait-nodoc" <<'NODOC'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/locale/*
NODOC
install_packages "$NEW"
t2=$(date +%s)
log "packages took $((t2 - t1)) s"

sync_kernels "$NEW"
setup_files "$NEW"
write_stamp "$NEW" "$t0" made
rm -rf "$ROOT.old"
[ -e "$ROOT" ] && mv "$ROOT" "$ROOT.old"
mv "$NEW" "$ROOT" || die "cannot move $NEW to $ROOT"
rm -rf "$ROOT.old"
log "$ROOT ready: $(sed -n 2p "$ROOT/.vwait-root")"
