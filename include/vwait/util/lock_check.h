/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* The lock order checked at run time (lock_order.h): every util::mutex, util::shared_mutex and
 * util::fast_mutex carries its level, and in a build configured with --enable-lock-check
 * (VWAIT_LOCK_CHECK; --enable-debug and CI's unit, ASan and TSan stages turn it on) each
 * thread keeps a small stack of the levels it holds. A blocking take of level N while the
 * thread holds a level >= N aborts, naming both levels and the stack: the order is broken
 * there whether or not another thread happens to take the pair the other way round this run
 * (the model is the Linux kernel's lockdep, reduced to a total order). A try_lock never waits,
 * so it is not checked; once it succeeds, its level is held like any other.
 *
 * In other builds the functions below are empty inline functions and the mutexes store no
 * level: the check costs nothing. */
#ifndef VWAIT_UTIL_LOCK_CHECK_H
#define VWAIT_UTIL_LOCK_CHECK_H

#include "vwait/util/lock_order.h"

namespace vwait::util::lock_check
{

#ifdef VWAIT_LOCK_CHECK
inline constexpr bool enabled = true;
/* Before a blocking take of a lock of this level: abort if the thread holds one of the same
 * or a greater level (or any lock, for lock_level::alone); then it is held. */
void acquire(int level) noexcept;
/* A try_lock of this level succeeded: held, no order check. */
void acquired(int level) noexcept;
/* The thread released a lock of this level (the innermost of that level it holds). */
void release(int level) noexcept;
/* The lock's name in lock_order.h ("cq_progress"), "?" for a level it does not name. */
const char *name(int level) noexcept;
#else
inline constexpr bool enabled = false;
inline void acquire(int) noexcept {}
inline void acquired(int) noexcept {}
inline void release(int) noexcept {}
#endif

/* A BasicLockable m of this level taken (blocking), tried, released: the calls above
 * around its own. */
template <class M>
inline void take(int level, M &&m)
{
	acquire(level);
	m.lock();
}
template <class M>
inline bool try_take(int level, M &&m)
{
	if (!m.try_lock())
		return false;
	acquired(level);
	return true;
}
template <class M>
inline void give(int level, M &&m)
{
	m.unlock();
	release(level);
}

} // namespace vwait::util::lock_check

#endif
