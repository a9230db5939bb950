/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* util::signal: one nonblocking eventfd used as a level-triggered "something happened" flag.
 *
 * Contract:
 *  - raise() makes the fd readable; raises coalesce (a raise while already raised is a cheap
 *    atomic check, no system call).
 *  - reset() makes the fd unreadable again (drains the eventfd); on a signal that is not
 *    raised it costs no system call. Right after a reset racing a raise the fd may turn
 *    readable once more (a spurious wakeup, never a lost one).
 *  - No lost wakeup when the waiting side follows: reset(); re-check the queues; block on fd().
 *    A raise() that the re-check cannot see happened after the reset, so fd() is readable.
 *  - Thread safe: any number of raisers; reset() may race with raise() safely. Several threads
 *    resetting the same signal is allowed but then each must re-check everything it waits for
 *    (util::waiter never lets two of its threads block on the same signal it resets).
 */
#ifndef VWAIT_UTIL_SIGNAL_H
#define VWAIT_UTIL_SIGNAL_H

#include "vwait/util/fd.h"

#include <atomic>

namespace vwait::util
{

class signal
{
public:
	signal() noexcept = default;
	signal(const signal &) = delete;
	signal &operator=(const signal &) = delete;

	/* Creates the eventfd: 0 or a negative FI_E* code. Must succeed before any other call. */
	int open() noexcept;
	bool is_open() const noexcept { return static_cast<bool>(efd_); }

	void raise() noexcept;
	void reset() noexcept;
	/* True while raised (may be stale the moment it returns). */
	bool raised() const noexcept { return raised_.load(std::memory_order_acquire); }
	/* Readable (POLLIN) while raised. Owned by the signal: do not close it. */
	int fd() const noexcept { return efd_.get(); }

private:
	util::fd efd_;
	std::atomic<bool> raised_{false};
};

} // namespace vwait::util

#endif
