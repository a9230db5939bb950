#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
# The layering of the source tree, its licence line and no history in it (no build needed):
#  1. the util layer (prov/util, include/vwait/util) includes no verbs or rdma_cm header
#     (<infiniband/...>, <rdma/rdma_*.h>) and no provider header: its own "vwait/util/..."
#     and files beside it only;
#  2. the tools (util/) use libfabric's public headers only: <rdma/fabric.h>, <rdma/fi_*.h>,
#     their own headers beside them (util/fi_sets.h, util/bench/bench.h) and
#     "vwait/policy_stats.h" (itself public-API only), no verbs, rdma_cm, provider
#     (<rdma/providers/...>) or internal vwait header, not even vwait/fi_deprecated.h;
#  3. every source file (C/C++, shell, .test, make fragments, configure.ac, the linker map)
#     carries the licence of COPYING in an SPDX line within its first 3 lines (and the
#     m4 macros of config/);
#  4. no history where the reasons live (prov/, the man page included, include/, util/,
#     contrib/, test/, Makefile.am, configure.ac): no line names a benchmark boot ("boot vv",
#     "boots a-d"), an issue number ("issue 37") or an ISO date ("2026-11-29", roff's
#     "2026\-11\-29"). The reason for a rule belongs in the code; the story of how it was
#     found, in git log. A man page's .TH date, packaging changelogs and English ("boot it",
#     "boot a VM") are not history (history_re, below).
#   layering.sh [SRCDIR]      (make check: VWAIT_SRCDIR)
#   layering.sh --self-test   a tree with one breach of each rule must fail each
export LC_ALL=C
spdx='SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only'
# Files whose format has no comment a licence line could go in without changing what they
# say (fi_ubertest's config files: "#:" lines are part of its syntax). Listed here, a file
# without the line is reported, not failed.
pending_spdx='contrib/fabtests/ubertest-vwait-ci.test contrib/fabtests/ubertest-vwait.test'

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

# Rule 4. A boot name is one letter or a doubled one (boots are named a, b, ... z, aa, bb, ...),
# so "boot of", "boot it", "boot to" are English; "a" alone is the article far more often, so
# only "boots a-d" and "(boot a," count.
boot_name='([b-z]|aa|bb|cc|dd|ee|ff|gg|hh|ii|jj|kk|ll|mm|nn|oo|pp|qq|rr|ss|tt|uu|vv|ww|xx|yy|zz)\b'
history_re='\b[Bb]oots? ('"$boot_name"'|a-[b-z]\b|a[,;:)])|\b[Ii]ssues? #?[0-9]+\b'
history_re=$history_re'|\b20[0-9]{2}\\?-[0-9]{2}\\?-[0-9]{2}\b'
# What is left out before the match, each line kept in place so that the line numbers hold:
# a man page's .TH line, a spec's %changelog to its end, two-node.sh's "boot a|b" command
# (alone at the start of a line, or after $T or two-node.sh as in its README).
# shellcheck disable=SC2016 # sed's $ and a literal $T
history_keep='s/^\.TH .*//; /^%changelog/,$d; s/(^[[:space:]]*|\$T |"\$TN" |two-node\.sh )boot [ab]\b//g'

# history_files: the files rule 4 covers, relative to the cwd (build trees, generated Makefiles
# and packaging changelogs left out: a changelog is history by nature)
history_files() {
	for d in prov include util contrib; do
		[ -d "$d" ] || continue
		find "$d" \( -name '_build*' -o -name corpus -o -name autom4te.cache -o -name .deps -o \
			-name .libs \) -prune -o -type f ! -path contrib/debian/changelog ! -name ChangeLog \
			! -name 'CHANGELOG*' ! -name 'NEWS*' ! -name Makefile ! -name Makefile.in -print
	done | sort
	# the tests' scripts, programs and make fragments (not the results the bench writes, nor
	# this file, whose examples are the rule's)
	[ -d test ] && find test \( -name results -o -name corpus -o -name .deps -o -name .libs \) \
		-prune -o -type f \( -name '*.c' -o -name '*.cpp' -o -name '*.h' -o -name '*.sh' -o \
		-name '*.test' -o -name '*.include' -o -name '*.mk' -o -name '*.py' \) \
		! -path test/unit/layering.sh -print | sort
	for f in Makefile.am configure.ac; do
		[ -f "$f" ] && echo "$f"
	done
}

pending() { # FILE: true when FILE (or a directory above it) is in pending_spdx
	for p in $pending_spdx; do
		case $1 in "$p" | "$p"*) case $p in */ | "$1") return 0 ;; esac ;; esac
	done
	return 1
}

# check: the four rules over the tree in the cwd; prints each breach, returns 1 on any
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
		2>/dev/null | sort) include/vwait/policy_stats.h; do
		[ -e "$f" ] || continue
		dir=$(dirname "$f")
		for inc in $(includes "$f"); do
			case $inc in
			'<rdma/fabric.h>' | '<rdma/fi_'*) ;;
			'"vwait/policy_stats.h"' | '"config.h"') ;;
			'"vwait/'* | '<rdma/'* | '<infiniband/'*)
				echo "layering: $f includes $inc: a tool uses libfabric's public headers only"
				bad=1
				;;
			'"'*)
				name=${inc#\"}
				name=${name%\"}
				case $(realpath -m --relative-to=. "$dir/$name") in
				util/*) [ -e "$dir/$name" ] && continue ;; # its own, beside it
				esac
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
	nhist=0
	for f in $(history_files); do
		nhist=$((nhist + 1))
		hits=$(sed -E "$history_keep" "$f" | grep -nIE "$history_re") || continue
		printf '%s\n' "$hits" | while IFS= read -r hit; do
			printf 'layering: %s:%s (a boot, issue or date: history, for git log)\n' "$f" "$hit"
		done
		bad=1
	done
	echo "layering: $nspdx source files, $nhist for history, rules checked: util layer, tools," \
		"SPDX, history"
	return $bad
}

if [ "${1:-}" = --self-test ]; then
	tmp=$(mktemp -d) || exit 99
	trap 'rm -rf "$tmp"' EXIT
	ok=1
	# a clean tree passes, then each breach alone fails, naming its file
	breach() { # NAME FILE LINE: FILE gets LINE; check must fail
		(
			cd "$tmp" || exit 99
			rm -rf t && mkdir -p t/prov/util/src t/prov/vwait/man t/include/vwait/util t/util \
				t/contrib/debian t/contrib/rpm t/contrib/vm t/test/bench t/test/two-node && cd t ||
				exit 99
			printf '/* %s */\n#include "vwait/util/wait.h"\n#include <rdma/fabric.h>\n' \
				"$spdx" >prov/util/src/a.cpp
			printf '/* %s */\n#include <rdma/fi_domain.h>\n#include <poll.h>\n' "$spdx" \
				>util/tool.cpp
			printf '#include "sets.h"\n' >>util/tool.cpp
			printf '/* %s */\n#include <rdma/fi_eq.h>\n' "$spdx" >util/sets.h
			printf '# %s\n' "$spdx" | tee configure.ac Makefile.am >test/two-node/x.test
			printf '/* %s */\n' "$spdx" >include/vwait/util/w.h
			# what rule 4 lets be: English after "boot", the .TH date, changelogs, two-node
			printf '.TH "x" "7" "2026\\-11\\-22"\nOne boot of the VM; boot it, boot a VM.\n' \
				>prov/vwait/man/x.7.in
			printf 'x (0.1-1) unstable; urgency=low\n  * issue 5\n -- x  2026-11-22\n' \
				>contrib/debian/changelog
			printf 'Name: x\n%%changelog\n* issue 5, 2026-11-22\n' >contrib/rpm/x.spec.in
			# shellcheck disable=SC2016 # a literal $T, as in two-node.sh's README
			printf '# %s\n\tboot a\n\tboot b\n$T kill b; $T boot b  # again\n' "$spdx" \
				>contrib/vm/two.sh
			printf '# %s\n# from boot to boot, in one boot on 2 cores\n' "$spdx" >test/bench/b.sh
			[ -z "$2" ] || printf '%s\n' "$3" >>"$2"
			check >../out
		)
		rc=$?
		if [ "$1" = clean ]; then
			[ $rc = 0 ] || { echo "self-test: the clean tree failed:" && cat "$tmp/out" && ok=0; }
		elif [ $rc != 1 ]; then
			echo "self-test: $1 passed unnoticed" && ok=0
		elif ! grep -q "^layering: $2" "$tmp/out"; then
			echo "self-test: $1 failed, but not on $2:" && cat "$tmp/out" && ok=0
		fi
	}
	breach clean "" ""
	breach "util verbs" prov/util/src/a.cpp '#include <infiniband/verbs.h>'
	breach "util rdma_cm" prov/util/src/a.cpp '#include <rdma/rdma_cma.h>'
	breach "util provider header" prov/util/src/a.cpp '#include "vwait/ep.h"'
	breach "tool verbs" util/tool.cpp '#include <infiniband/verbs.h>'
	breach "tool provider API" util/tool.cpp '#include <rdma/providers/fi_prov.h>'
	breach "tool internal header" util/tool.cpp '#include "vwait/util/wait.h"'
	breach "tool provider shim" util/tool.cpp '#include "vwait/fi_deprecated.h"'
	breach "tool header outside util" util/tool.cpp '#include "../prov/util/src/a.cpp"'
	breach "no SPDX" util/other.sh 'echo hi'
	breach "boot name" prov/util/src/a.cpp '/* 2.9x spinning (boot v) */'
	breach "doubled boot name" include/vwait/util/w.h '/* until boot vv */'
	breach "boot range" contrib/vm/two.sh '# boots a-d with 9'
	breach "issue number" util/tool.cpp '/* 560 bytes, issue 37 */'
	breach "ISO date" test/bench/b.sh '# 121 s on 2026-11-29'
	breach "date in a test" test/two-node/x.test '# on siw, 2026-11-29, the client hung'
	breach "issue in make" Makefile.am '# issue 37: 500 FD CQs'
	breach "roff date" prov/vwait/man/x.7.in '(until 2026\-11\-30 it armed)'
	[ $ok = 1 ] && echo "self-test: every breach caught" && exit 0
	exit 1
fi

cd "${1:-${VWAIT_SRCDIR:?run through make check, or give SRCDIR}}" || exit 99
check
