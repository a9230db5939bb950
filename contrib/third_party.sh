# SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
# contrib/third_party.sh - sourced by the scripts that build upstream test suites from sources
# the project never copies into its tree (contrib/fabtests, contrib/sos; ../shared/third_party
# on this machine).
#
# third_party_src GIVEN NAME: the source of NAME (fabtests-1.17.1, sos-1.5.3) in GIVEN, which
# is a folder holding NAME.tar.xz, a tarball, or a source tree (with configure.ac). Prints it;
# returns 1 when GIVEN is empty or holds none.
third_party_src() {
	local s=$1 name=$2
	[ -n "$s" ] || return 1
	if [ -d "$s" ] && [ -f "$s/$name.tar.xz" ]; then
		echo "$s/$name.tar.xz"
	elif [ -f "$s" ] || [ -f "$s/configure.ac" ]; then
		echo "$s"
	else
		return 1
	fi
}
