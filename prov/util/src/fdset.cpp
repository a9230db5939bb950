/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* fd sets: an epoll set (FI_WAIT_FD) and a struct pollfd array with a change index
 * (FI_WAIT_POLLFD, and the array a waiter's blocking thread polls). */
#include "vwait/util/fdset.h"

#include <rdma/fi_errno.h>

#include <algorithm>
#include <cerrno>
#include <new>
#include <sys/epoll.h>

namespace vwait::util
{

namespace
{

uint32_t to_epoll(short events) noexcept
{
	uint32_t ev = 0;
	if (events & POLLIN)
		ev |= EPOLLIN;
	if (events & POLLOUT)
		ev |= EPOLLOUT;
	if (events & POLLPRI)
		ev |= EPOLLPRI;
	return ev;
}

} // namespace

int epoll_set::open() noexcept
{
	int err = 0;
	epfd_ = util::fd::epoll(&err);
	return epfd_ ? 0 : err;
}

int epoll_set::add(int raw_fd, short events) noexcept
{
	struct epoll_event ev = {};
	ev.events = to_epoll(events);
	ev.data.fd = raw_fd;
	if (::epoll_ctl(epfd_.get(), EPOLL_CTL_ADD, raw_fd, &ev) != 0)
		return -errno;
	return 0;
}

int epoll_set::del(int raw_fd) noexcept
{
	/* A non-NULL event keeps pre-2.6.9 kernels happy. */
	struct epoll_event ev = {};
	if (::epoll_ctl(epfd_.get(), EPOLL_CTL_DEL, raw_fd, &ev) != 0)
		return -errno;
	return 0;
}

int epoll_set::wait(int timeout_ms) noexcept
{
	struct epoll_event ev[8];
	int n = ::epoll_wait(epfd_.get(), ev, 8, timeout_ms);
	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	return n;
}

int pollfd_set::add(int raw_fd, short events, void *tag) noexcept
{
	lock_guard<fast_mutex> lock(mu_);
	for (const auto &p : fds_)
		if (p.fd == raw_fd)
			return -FI_EALREADY;
	try {
		fds_.push_back({raw_fd, events, 0});
		tags_.push_back(tag);
	} catch (const std::bad_alloc &) {
		if (fds_.size() > tags_.size())
			fds_.pop_back();
		return -FI_ENOMEM;
	}
	++change_index_;
	return 0;
}

int pollfd_set::del(int raw_fd) noexcept
{
	lock_guard<fast_mutex> lock(mu_);
	for (size_t i = 0; i < fds_.size(); ++i) {
		if (fds_[i].fd != raw_fd)
			continue;
		fds_.erase(fds_.begin() + static_cast<std::ptrdiff_t>(i));
		tags_.erase(tags_.begin() + static_cast<std::ptrdiff_t>(i));
		++change_index_;
		return 0;
	}
	return -FI_ENOENT;
}

size_t pollfd_set::size() const noexcept
{
	lock_guard<fast_mutex> lock(mu_);
	return fds_.size();
}

uint64_t pollfd_set::change_index() const noexcept
{
	lock_guard<fast_mutex> lock(mu_);
	return change_index_;
}

int pollfd_set::get(struct fi_wait_pollfd *out, const struct pollfd *prefix,
                    size_t nprefix) const noexcept
{
	if (!out)
		return -FI_EINVAL;
	lock_guard<fast_mutex> lock(mu_);
	size_t need = nprefix + fds_.size();
	size_t have = out->nfds;
	out->change_index = change_index_;
	out->nfds = need;
	if (have == 0)
		return need == 0 ? 0 : -FI_ETOOSMALL;
	if (have < need)
		return -FI_ETOOSMALL;
	if (!out->fd)
		return -FI_EINVAL;
	std::copy(prefix, prefix + nprefix, out->fd);
	std::copy(fds_.begin(), fds_.end(), out->fd + nprefix);
	for (size_t i = 0; i < need; ++i)
		out->fd[i].revents = 0;
	return 0;
}

void pollfd_set::snapshot(std::vector<struct pollfd> &fds, std::vector<void *> &tags,
                          uint64_t *index) const
{
	lock_guard<fast_mutex> lock(mu_);
	fds.insert(fds.end(), fds_.begin(), fds_.end());
	tags.insert(tags.end(), tags_.begin(), tags_.end());
	if (index)
		*index = change_index_;
}

} // namespace vwait::util
