/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* util::signal: a coalescing, level-triggered eventfd. */
#include "vwait/util/signal.h"

#include <rdma/fi_errno.h>

#include <cerrno>
#include <cstdint>
#include <unistd.h>

namespace vwait::util
{

int signal::open() noexcept
{
	int err = 0;
	efd_ = util::fd::eventfd_nonblock(&err);
	raised_.store(false, std::memory_order_release);
	return efd_ ? 0 : err;
}

void signal::raise() noexcept
{
	/* Only the raise that flips the flag writes: a raise that finds it set knows the write
	 * of the raise that set it is done or about to be done (a reset clears the flag only
	 * after it has read that write). */
	if (raised_.exchange(true, std::memory_order_acq_rel))
		return;
	uint64_t one = 1;
	ssize_t n;
	do {
		n = ::write(efd_.get(), &one, sizeof(one));
	} while (n < 0 && errno == EINTR);
	/* EAGAIN means the counter is near overflow: the fd is readable anyway. */
}

void signal::reset() noexcept
{
	/* Invariant: flag clear => nothing to read and no write on its way. So a clear flag
	 * needs no system call (the common case: fi_trywait on an idle object). */
	if (!raised_.load(std::memory_order_acquire))
		return;
	uint64_t value;
	ssize_t n;
	do {
		n = ::read(efd_.get(), &value, sizeof(value));
	} while (n < 0 && errno == EINTR);
	/* Nothing read with the flag set: a raise is between its flag and its write. Its write
	 * will make the fd readable, so the flag stays set (the next reset drains and clears);
	 * clearing it here would leave a readable fd behind a clear flag. */
	if (n != static_cast<ssize_t>(sizeof(value)))
		return;
	/* Drained: clear with a read-modify-write, after the read. A raise that found the flag
	 * set until now is seen by the caller's re-check (this exchange synchronizes with it); a
	 * raise after it finds the flag clear and writes again. */
	raised_.exchange(false, std::memory_order_acq_rel);
}

} // namespace vwait::util
