/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* util::guard: runs fn, turning a C++ exception into a negative FI_E* code, so that nothing
 * throws across the ABI. Every fid slot that allocates goes through it. */
#ifndef VWAIT_UTIL_GUARD_H
#define VWAIT_UTIL_GUARD_H

#include <rdma/fi_errno.h>

#include <new>

namespace vwait::util
{

template <typename F>
int guard(F &&fn) noexcept
{
	try {
		return fn();
	} catch (const std::bad_alloc &) {
		return -FI_ENOMEM;
	} catch (...) {
		return -FI_EOTHER;
	}
}

} // namespace vwait::util

#endif
