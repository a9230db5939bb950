#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
# Clang's thread-safety analysis sees vwait's annotated locks (include/vwait/util/thread_safety.h):
# for util::fast_mutex, util::mutex and util::shared_mutex, a guarded member written under
# util::lock_guard (read under util::shared_lock) and a VWAIT_REQUIRES function called under it
# compile with -Wthread-safety -Werror; the same write or call without the lock does not. The tree itself is checked by every clang build (configure adds
# -Wthread-safety when the compiler has it; CI's fuzz stage builds with clang and -Werror).
# Skips (77) without clang++. About a second a case.
top=${srcdir:-$(dirname "$0")/../..}
command -v clang++ >/dev/null || {
	echo "SKIP: clang++ not found"
	exit 77
}
t=$(mktemp -d) || exit 1
trap 'rm -rf "$t"' EXIT
fail=0
# check MUTEX BODY EXPECTED: a struct with a member guarded by m of type util::MUTEX and a
# function f() { BODY }; EXPECTED is "compiles" or "fails"
check() {
	cat >"$t/c.cpp" <<EOF
#include "vwait/util/fast_mutex.h"
struct s {
	vwait::util::$1 m{vwait::lock_level::endpoint};
	int v VWAIT_GUARDED_BY(m) = 0;
	void needs() VWAIT_REQUIRES(m) { v++; }
	void f() { $2 }
};
EOF
	if clang++ -std=c++17 -fsyntax-only -Wthread-safety -Werror -I "$top/include" "$t/c.cpp" \
		>"$t/err" 2>&1; then
		got=compiles
	else
		got=fails
	fi
	if [ "$got" = "$3" ]; then
		echo "PASS: $1: { $2 } $got"
	else
		echo "FAIL: $1: { $2 } $got, expected: $3"
		sed 's/^/   | /' "$t/err"
		fail=1
	fi
}
for m in fast_mutex mutex shared_mutex; do
	g="vwait::util::lock_guard<vwait::util::$m> g(m);"
	check $m "$g v++;" compiles
	check $m "$g needs();" compiles
	check $m "v++;" fails
	check $m "needs();" fails
	check $m "{ $g } v++;" fails
done
# a shared_mutex held shared: read, not written
s="vwait::util::shared_lock g(m);"
check shared_mutex "$s int x = v; (void)x;" compiles
check shared_mutex "$s v++;" fails
check shared_mutex "int x = v; (void)x;" fails
exit $fail
