#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
# contrib/deps.sh - install every Debian 12 package vwait needs to build, test
# and run its soft-RoCE VM test bed.  THE package list of the project lives
# here, in the groups below: add a package to the group that needs it.
#
#   contrib/deps.sh [--check|--list] [GROUP...]
#
# GROUP is one or more of: build test vm siw pkg debian13 dev (default: all of them).
#   (none)    install what is missing; quiet and quick when nothing is
#             (dpkg-query first, apt-get update only when something is missing)
#   --check   install nothing; print the missing packages, exit 1 if any
#   --list    print the packages of the groups, one a line
# Non-interactive; runs apt-get as root, or through sudo when not root.
# shellcheck disable=SC2034 # the deps_* lists are read through "declare -n"
set -u -o pipefail

# ------------------------------------------------------------------ the list
# build: compile the plugin, its tools and its unit tests (make check, distcheck)
deps_build=(
	g++ make autoconf automake libtool pkg-config
	libfabric-dev libibverbs-dev librdmacm-dev libcmocka-dev
)
# test: run the plugin and the integration tests (fi_info, fi_pingpong,
# ibv_rc_pingpong, the rxe user-space driver, perftest; Open MPI for
# test/integration/mpi-pingpong.test: configure builds its program if found; clang and
# its libFuzzer runtime for the fuzz stage of setup.sh test, test/fuzz; valgrind for
# test/integration/vwait-valgrind.test and make bench's instruction counts: the VM runs the
# host's /usr; gnuplot-nox for make bench's plot; python3-minimal: fabtests' runfabtests.sh
# exits 1 without it; strace: the system calls that the demo and make bench count;
# libpmix-dev: Sandia OpenSHMEM (contrib/sos) is built against Open MPI's PMIx)
deps_test=(
	libfabric1 libfabric-bin ibverbs-providers ibverbs-utils rdmacm-utils perftest
	openmpi-bin libopenmpi-dev netpipe-openmpi libpmix-dev
	clang libclang-rt-14-dev valgrind gnuplot-nox python3-minimal strace
)
# vm: contrib/vm/run-in-vm.sh (qemu, a kernel with rdma_rxe, a static busybox
# for the initramfs, modprobe, cpio, the rdma/ip tools)
deps_vm=(
	qemu-system-x86 linux-image-amd64 busybox-static kmod cpio iproute2
)
# siw: the soft-iWARP test bed (VM_RDMA=siw, contrib/vm/build-siw.sh builds siw.ko, which
# Debian's kernel lacks): the kernel's sources and the headers of the kernel the guest boots
# (linux-headers-amd64 follows linux-image-amd64 of the vm group; build-siw.sh names the exact
# package when another kernel is booted)
deps_siw=(
	linux-source-6.1 linux-headers-amd64
)
# pkg: make check-packaging (the packaging stage of setup.sh test): rpmbuild, dpkg-buildpackage
# with debhelper (compat 13; it pulls dh-autoreconf) and the implicit build-essential, fakeroot,
# and man / groff for the installed fi_vwait(7) and check-man.sh (also in Build-Depends)
deps_pkg=(
	rpm dpkg-dev debhelper fakeroot build-essential man-db groff-base
)
# debian13: the Debian 13 root of the debian13 stage of setup.sh test (contrib/debian13/mkroot.sh;
# the packages inside that root are listed there, and come from Debian's archive)
deps_debian13=(
	debootstrap
)
# dev: tools the build offers to developers (make format / format-check)
deps_dev=(
	clang-format
)
all_groups=(build test vm siw pkg debian13 dev)
# ---------------------------------------------------------------------------

die() {
	echo "deps.sh: $*" >&2
	exit 1
}

mode=install
groups=()
for arg in "$@"; do
	case $arg in
	--check) mode=check ;;
	--list) mode=list ;;
	-h | --help)
		sed -n '2,14p' "$0"
		exit 0
		;;
	build | test | vm | siw | pkg | debian13 | dev) groups+=("$arg") ;;
	*) die "unknown argument '$arg' (groups: ${all_groups[*]})" ;;
	esac
done
[ ${#groups[@]} -gt 0 ] || groups=("${all_groups[@]}")

wanted=()
for g in "${groups[@]}"; do
	declare -n list="deps_$g"
	wanted+=("${list[@]}")
	unset -n list
done

if [ "$mode" = list ]; then
	printf '%s\n' "${wanted[@]}"
	exit 0
fi

command -v dpkg-query >/dev/null || die "dpkg-query not found: this script is for Debian 12 (bookworm)"

missing=()
for p in "${wanted[@]}"; do
	case $(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null) in
	ii*) ;;
	*) missing+=("$p") ;;
	esac
done

if [ ${#missing[@]} -eq 0 ]; then
	echo "deps.sh: all ${#wanted[@]} packages installed (${groups[*]})"
	exit 0
fi
echo "deps.sh: missing: ${missing[*]}"
[ "$mode" = check ] && exit 1

if [ "$(id -u)" = 0 ]; then
	as_root=(env)
elif command -v sudo >/dev/null; then
	as_root=(sudo env)
else
	die "not root and no sudo: install as root: apt-get install --no-install-recommends ${missing[*]}"
fi
export DEBIAN_FRONTEND=noninteractive
apt_opts=(-y -q -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)
"${as_root[@]}" DEBIAN_FRONTEND=noninteractive apt-get -q update </dev/null ||
	die "apt-get update failed"
"${as_root[@]}" DEBIAN_FRONTEND=noninteractive apt-get install "${apt_opts[@]}" \
	--no-install-recommends "${missing[@]}" </dev/null ||
	die "apt-get install failed: ${missing[*]}"

still=()
for p in "${missing[@]}"; do
	case $(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null) in
	ii*) ;;
	*) still+=("$p") ;;
	esac
done
[ ${#still[@]} -eq 0 ] || die "still missing after apt-get install: ${still[*]}"
echo "deps.sh: installed ${missing[*]}"
