/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* fd sets behind a waiter's public wait object.
 *
 * util::epoll_set (FI_WAIT_FD): one epoll fd; fds added/removed at run time (level-triggered).
 * util::pollfd_set (FI_WAIT_POLLFD and the array a waiter's blocking thread polls): a struct
 * pollfd array with a change_index that moves on every add / remove, each entry with a tag.
 * Both are thread safe (pollfd_set: one leaf mutex; epoll: the kernel's).
 */
#ifndef VWAIT_UTIL_FDSET_H
#define VWAIT_UTIL_FDSET_H

#include "vwait/util/fast_mutex.h"
#include "vwait/util/fd.h"
#include "vwait/util/thread_safety.h"

#include <rdma/fi_eq.h>

#include <cstdint>
#include <mutex>
#include <poll.h>
#include <vector>

namespace vwait::util
{

class epoll_set
{
public:
	/* 0 or -errno. */
	int open() noexcept;
	/* 0, -EEXIST, -errno. events: poll(2) bits (POLLIN...), mapped to EPOLL*. */
	int add(int raw_fd, short events) noexcept;
	int del(int raw_fd) noexcept;
	int fd() const noexcept { return epfd_.get(); }
	/* epoll_wait on the set: number ready, 0 on timeout, -errno (EINTR reported as 0). */
	int wait(int timeout_ms) noexcept;

private:
	util::fd epfd_;
};

class pollfd_set
{
public:
	/* 0, -FI_EALREADY (fd present), -FI_ENOMEM. Moves change_index. */
	int add(int raw_fd, short events, void *tag) noexcept;
	/* 0 or -FI_ENOENT. Moves change_index. */
	int del(int raw_fd) noexcept;
	size_t size() const noexcept;
	uint64_t change_index() const noexcept;
	/* FI_GETWAIT for POLLFD: the nprefix entries of prefix (e.g. the waiter's own eventfd),
	 * then the set. nfds in/out: on return it holds the number needed; -FI_ETOOSMALL when the
	 * caller's nfds is short (nfds = 0: the cheap probe, fills change_index and nfds only,
	 * -FI_ETOOSMALL unless nothing is needed). -FI_EINVAL for NULL out, or fd NULL with
	 * nfds > 0. revents of the copies are 0. */
	int get(struct fi_wait_pollfd *out, const struct pollfd *prefix,
	        size_t nprefix) const noexcept;
	/* Appends a copy of the set (for poll(2) outside the lock) to fds/tags; *index (if
	 * given) receives the change_index of that copy. May throw std::bad_alloc. */
	void snapshot(std::vector<struct pollfd> &fds, std::vector<void *> &tags,
	              uint64_t *index = nullptr) const;

private:
	mutable fast_mutex mu_{lock_level::fdset}; /* 4 bytes, not 40: one in every waiter */
	std::vector<struct pollfd> fds_ VWAIT_GUARDED_BY(mu_);
	std::vector<void *> tags_ VWAIT_GUARDED_BY(mu_);
	uint64_t change_index_ VWAIT_GUARDED_BY(mu_) = 0;
};

} // namespace vwait::util

#endif
