/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* Ops slots for what an object does not do, the one mechanism for every ops table of either
 * layer: `.slot = unsupported{}` fills a slot of any signature with a function that returns
 * -FI_ENOSYS (the value libfabric's callers expect for "not supported"), never crashes. */
#ifndef VWAIT_UTIL_ENOSYS_H
#define VWAIT_UTIL_ENOSYS_H

#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

namespace vwait::util
{

template <typename R, typename... A>
using slot_fn = R (*)(A...);

struct unsupported {
	template <typename R, typename... A>
	operator slot_fn<R, A...>() const noexcept
	{
		return [](A...) -> R { return static_cast<R>(-FI_ENOSYS); };
	}
};

/* An fi_ops table with close and control (default: -FI_ENOSYS) and -FI_ENOSYS in every other
 * slot: what most objects hand out. */
inline struct fi_ops fi_ops_with(int (*close)(struct fid *),
                                 int (*control)(struct fid *, int, void *) = unsupported{}) noexcept
{
	struct fi_ops ops = {};
	ops.size = sizeof(struct fi_ops);
	ops.close = close;
	ops.bind = unsupported{};
	ops.control = control;
	ops.ops_open = unsupported{};
	ops.tostr = unsupported{};
	ops.ops_set = unsupported{};
	return ops;
}

} // namespace vwait::util

#endif
