/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* Ops slots that vwait leaves unimplemented, for any slot signature: `.slot = unsupported{}`
 * fills it with a function that returns -FI_ENOSYS. */
#ifndef VWAIT_SLOTS_H
#define VWAIT_SLOTS_H

#include <rdma/fi_errno.h>

namespace vwait
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

} // namespace vwait

#endif
