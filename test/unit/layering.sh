#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
# The layering of the source tree, and its licence line (no build needed):
#  1. the util layer (prov/util, include/vwait/util) includes no verbs or rdma_cm header
#     (<infiniband/...>, <rdma/rdma_*.h>) and no provider header: its own "vwait/util/..."
#     and files beside it only;
#  2. the tools (util/) use libfabric's public headers only: <rdma/fabric.h>, <rdma/fi_*.h>
#     and "vwait/fi_deprecated.h" (itself public-API only), no verbs, rdma_cm, provider
#     (<rdma/providers/...>) or internal vwait header;
#  3. every source file (C/C++, shell, .test, make fragments, configure.ac, the linker map)
#     carries the licence of COPYING in an SPDX line within its first 3 lines (and the
#     m4 macros of config/).
#   layering.sh [SRCDIR]      (make check: VWAIT_SRCDIR)
#   layering.sh --self-test   a tree with one breach of each rule must fail each
export LC_ALL=C
spdx='SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only'
# Files that work in progress elsewhere this session has in hand: they get the line with it.
# Listed here, a file without the line is reported, not failed.
pending_spdx='contrib/debian13/ contrib/fabtests/ contrib/setup.sh'

# includes FILE: its #include targets, one a line, <x> or "x" as written
includes() {
	sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*\([<"][^>"]*[>"]\).*/\1/p' "$1"
}

# sources: the files rule 3 covers, relative to the cwd (build trees and fuzz corpora left out)
sources() {
	for f in Makefile.am configure.ac autogen.sh config/libvwait.map config/vwait_dep.m4; do
		[ -e "$f" ] && echo "$f"
	done
	for d in .ci prov include util test contrib; do
		[ -d "$d" ] || continue
		find "$d" \( -name '_build*' -o -name corpus -o -name autom4te.cache \) -prune -o \
			-type f \( -name '*.c' -o -name '*.cpp' -o -name '*.h' -o -name '*.sh' -o \
			-name '*.test' -o -name '*.include' -o -name '*.mk' -o -path .ci/run -o \
			-path contrib/debian/rules \) -print
	done | sort
}

pending() { # FILE: true when FILE (or a directory above it) is in pending_spdx
	for p in $pending_spdx; do
		case $1 in "$p" | "$p"*) case $p in */ | "$1") return 0 ;; esac ;; esac
	done
	return 1
}

# check: the three rules over the tree in the cwd; prints each breach, returns 1 on any
check() {
	bad=0
	for f in $(find prov/util include/vwait/util -type f \( -name '*.h' -o -name '*.cpp' -o \
		-name '*.c' \) 2>/dev/null | sort); do
		dir=$(dirname "$f")
		for inc in $(includes "$f"); do
			case $inc in
			'<infiniband/'* | '<rdma/rdma_'* | '<rdma/ib_'*)
				echo "layering: $f includes $inc: the util layer has no verbs or rdma_cm"
				bad=1
				;;
			'"vwait/util/'* | '"config.h"') ;;
			'"'*)
				name=${inc#\"}
				name=${name%\"}
				if [ ! -e "$dir/$name" ]; then
					echo "layering: $f includes $inc: the util layer includes vwait/util/ only"
					bad=1
				fi
				;;
			esac
		done
	done
	for f in $(find util -type f \( -name '*.h' -o -name '*.cpp' -o -name '*.c' \) \
		2>/dev/null | sort) include/vwait/fi_deprecated.h; do
		[ -e "$f" ] || continue
		for inc in $(includes "$f"); do
			case $inc in
			'<rdma/fabric.h>' | '<rdma/fi_'*) ;;
			'"vwait/fi_deprecated.h"' | '"config.h"') ;;
			'<rdma/'* | '<infiniband/'* | '"'*)
				echo "layering: $f includes $inc: a tool uses libfabric's public headers only"
				bad=1
				;;
			esac
		done
	done
	nspdx=0
	for f in $(sources); do
		nspdx=$((nspdx + 1))
		head -n 3 "$f" | grep -qF "$spdx" && continue
		if pending "$f"; then
			echo "layering: note: $f has no SPDX line yet (pending)"
		else
			echo "layering: $f has no line '$spdx' in its first 3 lines"
			bad=1
		fi
	done
	echo "layering: $nspdx source files, rules checked: util layer, tools, SPDX"
	return $bad
}

if [ "${1:-}" = --self-test ]; then
	tmp=$(mktemp -d) || exit 99
	trap 'rm -rf "$tmp"' EXIT
	ok=1
	# a clean tree passes, then each breach alone fails
	breach() { # NAME FILE LINE: FILE gets LINE; check must fail
		(
			cd "$tmp" || exit 99
			rm -rf t && mkdir -p t/prov/util/src t/include/vwait/util t/util && cd t || exit 99
			printf '/* %s */\n#include "vwait/util/wait.h"\n#include <rdma/fabric.h>\n' \
				"$spdx" >prov/util/src/a.cpp
			printf '/* %s */\n#include <rdma/fi_domain.h>\n#include <poll.h>\n' "$spdx" \
				>util/tool.cpp
			printf '# %s\n' "$spdx" >configure.ac
			[ -z "$2" ] || printf '%s\n' "$3" >>"$2"
			check >/dev/null
		)
		rc=$?
		if [ "$1" = clean ]; then
			[ $rc = 0 ] || { echo "self-test: the clean tree failed" && ok=0; }
		else
			[ $rc = 1 ] || { echo "self-test: $1 passed unnoticed" && ok=0; }
		fi
	}
	breach clean "" ""
	breach "util verbs" prov/util/src/a.cpp '#include <infiniband/verbs.h>'
	breach "util rdma_cm" prov/util/src/a.cpp '#include <rdma/rdma_cma.h>'
	breach "util provider header" prov/util/src/a.cpp '#include "vwait/ep.h"'
	breach "tool verbs" util/tool.cpp '#include <infiniband/verbs.h>'
	breach "tool provider API" util/tool.cpp '#include <rdma/providers/fi_prov.h>'
	breach "tool internal header" util/tool.cpp '#include "vwait/util/wait.h"'
	breach "no SPDX" util/other.sh 'echo hi'
	[ $ok = 1 ] && echo "self-test: every breach caught" && exit 0
	exit 1
fi

cd "${1:-${VWAIT_SRCDIR:?run through make check, or give SRCDIR}}" || exit 99
check
