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
	 * of the raise that set it is done or about to be done, and no reset can slip between
	 * (a reset clears the flag only after it drains). */
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
	/* Drain first, then clear the flag with a read-modify-write: a raise that found the flag
	 * set before this point is seen by the caller's re-check (the exchange below synchronizes
	 * with it); a raise after it finds the flag clear and writes again. Clearing first would
	 * let the read swallow the write of a raise that then leaves the flag set forever. */
	uint64_t value;
	ssize_t n;
	do {
		n = ::read(efd_.get(), &value, sizeof(value));
	} while (n < 0 && errno == EINTR);
	raised_.exchange(false, std::memory_order_acq_rel);
}

} // namespace vwait::util
