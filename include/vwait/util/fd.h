/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* util::fd: a move-only owner of one file descriptor (the shape of folly's File and seastar's
 * file_desc). Closing is the destructor's job; errors are negative FI_E* values, never
 * exceptions. */
#ifndef VWAIT_UTIL_FD_H
#define VWAIT_UTIL_FD_H

#include <utility>

namespace vwait::util
{

class fd
{
public:
	fd() noexcept = default;
	/* Takes ownership of raw (may be -1: empty). */
	explicit fd(int raw) noexcept : fd_(raw) {}
	fd(const fd &) = delete;
	fd &operator=(const fd &) = delete;
	fd(fd &&other) noexcept : fd_(other.release()) {}
	fd &operator=(fd &&other) noexcept
	{
		if (this != &other)
			reset(other.release());
		return *this;
	}
	~fd() { reset(); }

	int get() const noexcept { return fd_; }
	explicit operator bool() const noexcept { return fd_ >= 0; }
	/* Gives up ownership: the caller closes the returned descriptor. */
	int release() noexcept { return std::exchange(fd_, -1); }
	/* Closes the owned descriptor (if any), then owns raw. */
	void reset(int raw = -1) noexcept;
	/* Closes now and reports the result: 0 or -errno (EINTR counts as closed). */
	int close() noexcept;

	/* Owners of fresh descriptors; on failure the owner is empty and *err (if given) holds
	 * -errno. All are O_CLOEXEC / O_NONBLOCK where the call has such flags. */
	static fd eventfd_nonblock(int *err = nullptr) noexcept;
	static fd epoll(int *err = nullptr) noexcept;

private:
	int fd_ = -1;
};

/* Sets O_NONBLOCK on raw: 0 or -errno. */
int set_nonblock(int raw) noexcept;

} // namespace vwait::util

#endif
