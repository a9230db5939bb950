/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* A mutex for the short critical sections of the polling path (the verbs CQ's
 * ibv_poll_cq + translate): uncontended, lock and unlock are one atomic instruction each,
 * inline, where std::mutex costs two calls into libpthread (about 55 instructions per
 * fi_cq_read under callgrind). Contended, it spins a little, then sleeps on a futex (three
 * states: 0 free, 1 locked, 2 locked with sleepers; unlock wakes one sleeper when the state
 * was 2). Not recursive; a BasicLockable for util::lock_guard, annotated for Clang's
 * thread-safety analysis (thread_safety.h), with its level in lock_order.h (checked in a
 * lock-check build, lock_check.h; nothing stored or done otherwise). */
#ifndef VWAIT_UTIL_FAST_MUTEX_H
#define VWAIT_UTIL_FAST_MUTEX_H

#include "vwait/util/cpu_relax.h"
#include "vwait/util/thread_safety.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

namespace vwait::util
{

class VWAIT_CAPABILITY("mutex") fast_mutex : lock_level_of
{
public:
	constexpr explicit fast_mutex(int level) noexcept : lock_level_of(level) {}
	fast_mutex(const fast_mutex &) = delete;
	fast_mutex &operator=(const fast_mutex &) = delete;

	void lock() noexcept VWAIT_ACQUIRE()
	{
		lock_check::acquire(level());
		int c = 0;
		if (__builtin_expect(state_.compare_exchange_strong(c, 1, std::memory_order_acquire,
		                                                    std::memory_order_relaxed),
		                     1))
			return;
		lock_contended(c);
	}
	bool try_lock() noexcept VWAIT_TRY_ACQUIRE(true)
	{
		int c = 0;
		if (!state_.compare_exchange_strong(c, 1, std::memory_order_acquire,
		                                    std::memory_order_relaxed))
			return false;
		lock_check::acquired(level());
		return true;
	}
	void unlock() noexcept VWAIT_RELEASE()
	{
		if (__builtin_expect(state_.exchange(0, std::memory_order_release) == 2, 0))
			futex(FUTEX_WAKE_PRIVATE, 1);
		lock_check::release(level());
	}

private:
	static_assert(sizeof(std::atomic<int>) == sizeof(int), "a futex word");

	__attribute__((noinline)) void lock_contended(int c) noexcept
	{
		/* a holder of the polling path leaves within microseconds: look a few times
		 * before sleeping */
		for (int i = 0; i < 100 && c == 1; i++) {
			cpu_relax();
			c = 0;
			if (state_.compare_exchange_weak(c, 1, std::memory_order_acquire,
			                                 std::memory_order_relaxed))
				return;
		}
		if (c != 2)
			c = state_.exchange(2, std::memory_order_acquire);
		while (c != 0) {
			futex(FUTEX_WAIT_PRIVATE, 2);
			c = state_.exchange(2, std::memory_order_acquire);
		}
	}
	void futex(int op, int val) noexcept
	{
		syscall(SYS_futex, reinterpret_cast<int *>(&state_), op, val, nullptr, nullptr, 0);
	}

	std::atomic<int> state_{0};
};

} // namespace vwait::util

#endif
