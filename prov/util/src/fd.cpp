/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* util::fd: the move-only descriptor owner. */
#include "vwait/util/fd.h"

#include <cerrno>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

namespace vwait::util
{

void fd::reset(int raw) noexcept
{
	if (fd_ >= 0 && fd_ != raw)
		::close(fd_);
	fd_ = raw;
}

int fd::close() noexcept
{
	int raw = release();
	if (raw < 0)
		return 0;
	/* Linux always releases the descriptor, even when close reports EINTR. */
	if (::close(raw) != 0 && errno != EINTR)
		return -errno;
	return 0;
}

fd fd::eventfd_nonblock(int *err) noexcept
{
	int raw = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (err)
		*err = raw < 0 ? -errno : 0;
	return fd(raw);
}

fd fd::epoll(int *err) noexcept
{
	int raw = ::epoll_create1(EPOLL_CLOEXEC);
	if (err)
		*err = raw < 0 ? -errno : 0;
	return fd(raw);
}

int set_nonblock(int raw) noexcept
{
	int flags = ::fcntl(raw, F_GETFL);
	if (flags < 0)
		return -errno;
	if (flags & O_NONBLOCK)
		return 0;
	if (::fcntl(raw, F_SETFL, flags | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

} // namespace vwait::util
