#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
# contrib/sos/sos.sh - Sandia OpenSHMEM's own unit suite (tests-sos) over vwait;ofi_rxm, with
# upstream verbs;ofi_rxm beside it as the yardstick. The project never copies SOS into its
# tree: it builds it from SOS_SRC, and skips (exit 77, "SKIP: why") when none is given.
#
#   contrib/sos/sos.sh build         build + install SOS, unless done, and its unit programs
#                                    (SOS_BUILD_TESTS: only those, by name)
#   contrib/sos/sos.sh run [PROV...] (in the VM: RXE_ADDR set) every unit program on SOS_NP
#                                    PEs for each PROV (default "vwait;ofi_rxm" "verbs;ofi_rxm"),
#                                    the providers taking turns program by program, then one
#                                    table; exit 1 when a program failed over a vwait PROV
#   contrib/sos/sos.sh list          the unit programs run, after SOS_TESTS and the excludes
#   contrib/sos/sos.sh ci-tests      the names in contrib/sos/ci.tests, CI's subset
#   contrib/sos/sos.sh prefix        print the install prefix
#
# The build: SOS_VER (1.5.3) with --enable-hard-polling (SOS's default build asks for
#   FI_RMA_EVENT, target-side counters, which ofi_rxm does not offer) and --enable-ofi-mr=basic
#   (SOS's default "scalable" registration mode is mr_mode 0, which rxm over a verbs core does not
#   offer: fi_getinfo answers ENODATA for vwait and verbs alike). Open MPI's mpirun launches the
#   PEs over its PMIx (Debian's libpmix-dev, /usr/lib/x86_64-linux-gnu/pmix2).
# SOS_SRC: an SOS source tree, sos-<ver>.tar.xz, or a folder holding it (this machine:
#   ../shared/third_party).
# SOS_PREFIX: where it goes (default /var/cache/vwait/sos-<ver>; the unit programs are built in
#   its src/ and run from there).
# SOS_TESTS: the programs to run, by name (default: every unit program built); excluded are
#   those in contrib/sos/sos.exclude, each with its reason, and SOS_EXCLUDE (names).
# SOS_NP: PEs per program (default 2). SOS_TIMEOUT: seconds per program (default 120).
# SOS_OUT: one log per program and provider, table.txt and summary.txt (default ./sos-out).
set -u -o pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
ver=${SOS_VER:-1.5.3}
PREFIX=${SOS_PREFIX:-/var/cache/vwait/sos-$ver}
unit=$PREFIX/src/modules/tests-sos/test/unit
pmix=${SOS_PMIX:-/usr/lib/x86_64-linux-gnu/pmix2}
skip() {
	echo "SKIP: $*"
	exit 77
}
die() {
	echo "sos: $*" >&2
	exit 1
}

# shellcheck source=contrib/third_party.sh
. "$here/../third_party.sh"
find_src() { third_party_src "${SOS_SRC:-}" "sos-$ver"; }

build() {
	local src stamp t
	src=$(find_src) || skip "SOS_SRC not given or holds no sos-$ver (a tree, a tarball or a folder of sos-<ver>.tar.xz)"
	[ -d "$pmix" ] || skip "no PMIx in $pmix (Debian's libpmix-dev, with Open MPI)"
	command -v mpirun >/dev/null || skip "no mpirun (Open MPI launches the PEs)"
	stamp="$ver $(if [ -f "$src" ]; then md5sum <"$src" | cut -c1-12; else echo "$src"; fi)"
	t=$PREFIX/build.log
	if [ "$(cat "$PREFIX/.vwait-stamp" 2>/dev/null)" = "$stamp" ]; then
		echo "SOS $ver already installed in $PREFIX"
	else
		rm -rf "$PREFIX"
		mkdir -p "$PREFIX/unpack" || die "cannot create $PREFIX"
		if [ -f "$src" ]; then
			tar -xJf "$src" -C "$PREFIX/unpack" || die "cannot unpack $src"
			mv "$PREFIX"/unpack/* "$PREFIX/src" || die "unexpected layout in $src"
			rmdir "$PREFIX/unpack"
		else
			rmdir "$PREFIX/unpack"
			cp -a "$src" "$PREFIX/src" || die "cannot copy $src"
		fi
		echo "building SOS $ver into $PREFIX (hard polling, basic MR)"
		(cd "$PREFIX/src" && ./autogen.sh && ./configure -q --with-ofi=/usr --with-pmix="$pmix" \
			--disable-fortran --enable-hard-polling --enable-ofi-mr=basic --prefix="$PREFIX" &&
			make -j"${SETUP_JOBS:-2}" -s && make -s install) >"$t" 2>&1 ||
			{
				tail -n 40 "$t"
				die "SOS build failed (log: $t)"
			}
		echo "$stamp" >"$PREFIX/.vwait-stamp"
	fi
	# the unit programs: SOS_BUILD_TESTS (names), or all of them; make builds what is missing
	# shellcheck disable=SC2086 # a list of names
	(cd "$unit" && if [ -n "${SOS_BUILD_TESTS:-}" ]; then
		make -j"${SETUP_JOBS:-2}" -s $SOS_BUILD_TESTS
	else
		make -j"${SETUP_JOBS:-2}" -s check TESTS=
	fi) >>"$t" 2>&1 || {
		tail -n 40 "$t"
		die "SOS unit programs failed to build (log: $t)"
	}
	echo "SOS $ver in $PREFIX, unit programs in $unit"
}

# the unit programs: the suite's own list (check_PROGRAMS, as make check runs them), built
programs() {
	# shellcheck disable=SC2016 # make's $(check_PROGRAMS) and sed's $, not the shell's
	printf 'vwait-print:\n\t@echo $(check_PROGRAMS)\n' |
		make -s -C "$unit" -f Makefile -f - vwait-print 2>/dev/null | tr ' ' '\n' |
		sed 's/\$(EXEEXT)$//' | while read -r p; do [ -n "$p" ] && [ -x "$unit/$p" ] && echo "$p"; done
}
excluded() { # NAME: its reason, if excluded
	local r
	r=$(sed -n "s/^$1[[:space:]]\{1,\}//p" "$here/sos.exclude" | head -n 1)
	[ -n "$r" ] && {
		echo "$r"
		return 0
	}
	case " ${SOS_EXCLUDE:-} " in *" $1 "*)
		echo "SOS_EXCLUDE"
		return 0
		;;
	esac
	return 1
}
list() {
	[ -f "$PREFIX/.vwait-stamp" ] || skip "SOS $ver not built in $PREFIX (sos.sh build)"
	local p
	for p in ${SOS_TESTS:-$(programs)}; do
		excluded "$p" >/dev/null || echo "$p"
	done
}

# one program on SOS_NP PEs over PROV: PASS, FAIL(rc) or TIMEOUT, and its seconds
one() { # PROV NAME LOG
	local t0 r v xs=()
	t0=$(date +%s)
	for v in FI_PROVIDER_PATH FI_LOG_LEVEL FI_LOG_PROV FI_TCP_IFACE; do
		[ -z "${!v:-}" ] || xs+=(-x "$v")
	done
	# rxe's max_cqe is 32767: rxm sizes its core CQs by FI_UNIVERSE_SIZE; SOS's default of 10
	# teams is short of what shmem_team_split_2d and self_collectives make
	(cd "$unit" && SHMEM_OFI_PROVIDER=$1 FI_UNIVERSE_SIZE=32 SHMEM_TEAMS_MAX=32 \
		timeout -k 5 "${SOS_TIMEOUT:-120}" mpirun --allow-run-as-root --oversubscribe \
		-np "${SOS_NP:-2}" -x SHMEM_OFI_PROVIDER -x FI_UNIVERSE_SIZE -x SHMEM_TEAMS_MAX \
		"${xs[@]}" "./$2") >"$3" 2>&1
	r=$?
	# mpirun killed on the timeout leaves its PEs running, and with hard polling they spin:
	# the next programs would share the CPUs and the memory with them
	if pkill -9 -f "^$unit/" 2>/dev/null; then
		echo "sos.sh: killed the PEs mpirun left of $2" >>"$3"
		for _ in 1 2 3 4 5 6 7 8 9 10; do
			pgrep -f "^$unit/" >/dev/null || break
			sleep 1
		done
	fi
	case $r in
	0) echo "PASS $(($(date +%s) - t0))" ;;
	124 | 137) echo "TIMEOUT $(($(date +%s) - t0))" ;;
	*) echo "FAIL($r) $(($(date +%s) - t0))" ;;
	esac
}

run() {
	[ -n "${RXE_ADDR:-}" ] || skip "RXE_ADDR not set: run inside contrib/vm/run-in-vm.sh"
	[ -f "$PREFIX/.vwait-stamp" ] || skip "SOS $ver not built in $PREFIX (sos.sh build)"
	local out=${SOS_OUT:-$PWD/sos-out} progs p prov name res i=0 rc=0
	mkdir -p "$out" || die "cannot create $out"
	[ $# -gt 0 ] || set -- "vwait;ofi_rxm" "verbs;ofi_rxm"
	mapfile -t progs < <(list)
	[ ${#progs[@]} -gt 0 ] || die "no unit program to run"
	echo "SOS $ver unit suite: ${#progs[@]} programs, ${SOS_NP:-2} PEs, ${SOS_TIMEOUT:-120} s each, over: $*"
	: >"$out/results.txt"
	for p in "${progs[@]}"; do
		# the providers take turns: the first one of each program alternates
		local order=("$@")
		if [ $((i % 2)) = 1 ] && [ $# -gt 1 ]; then
			order=()
			for ((k = $#; k >= 1; k--)); do order+=("${!k}"); done
		fi
		i=$((i + 1))
		for prov in "${order[@]}"; do
			name=${prov//;/+}
			res=$(one "$prov" "$p" "$out/$p.$name.log")
			echo "$p $name $res" >>"$out/results.txt"
			echo "$p  $prov: $res"
		done
	done
	table "$out" "$@" | tee "$out/table.txt"
	for prov in "$@"; do
		case $prov in vwait*) ! grep -q " ${prov//;/+} \(FAIL\|TIMEOUT\)" "$out/results.txt" || rc=1 ;; esac
	done
	return $rc
}

# the table: per provider passed / failed / timed out and the seconds, then each program that
# did not pass somewhere
table() { # OUT PROV...
	local out=$1 prov name
	shift
	printf '%-16s %6s %6s %8s %10s\n' provider passed failed timeout seconds
	for prov in "$@"; do
		name=${prov//;/+}
		awk -v n="$name" -v p="$prov" '$2 == n {
			if ($3 == "PASS") ok++; else if ($3 == "TIMEOUT") to++; else bad++; s += $4 }
			END { printf "%-16s %6d %6d %8d %10d\n", p, ok, bad, to, s }' "$out/results.txt"
	done
	awk '$3 != "PASS" { print $1 }' "$out/results.txt" | sort -u | while read -r p; do
		printf '  %-36s' "$p"
		for prov in "$@"; do
			name=${prov//;/+}
			printf ' %s %-14s' "$prov" "$(awk -v p="$p" -v n="$name" '$1 == p && $2 == n { print $3 }' "$out/results.txt")"
		done
		echo
	done
	grep -v '^#' "$here/sos.exclude" | grep -v '^[[:space:]]*$' | sed 's/^/  excluded: /'
}

case ${1:-} in
build) build ;;
run)
	shift
	run "$@"
	;;
list) list ;;
ci-tests) sed -e 's/#.*//' -e 's/[[:space:]].*//' "$here/ci.tests" | grep -v '^$' | tr '\n' ' ' ;;
prefix) echo "$PREFIX" ;;
*)
	echo "usage: $0 build | run [PROV...] | list | ci-tests | prefix" >&2
	exit 2
	;;
esac
