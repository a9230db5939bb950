/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* What the three files of util::waiter share besides its class (wait.h): wait.cpp (members,
 * sources, signalling, FI_GETWAIT), wait_block.cpp (the blocking protocol: the peek and
 * trywait phases under the wait policy, the leader and its followers, fi_wait / fi_trywait,
 * the FI_WAIT_MUTEX_COND helper thread) and wait_set.cpp (the fid_wait shim of wait sets).
 * Not installed; nothing outside prov/util/src includes it. */
#ifndef VWAIT_UTIL_WAIT_IMPL_H
#define VWAIT_UTIL_WAIT_IMPL_H

#include "vwait/util/wait.h"

#include <poll.h>

namespace vwait::util
{

/* The signal of the calling thread, that wakes it while it leads a blocking wait (nullptr when
 * no eventfd can be opened). One per thread that ever blocks, reused by later threads when
 * it ends, closed only at unload or exit: a notifier may still raise it after its thread
 * moved on (a spurious wakeup, which every waiter allows). */
signal *thread_signal() noexcept;

/* The name of an enum fi_wait_obj value, for log lines. */
const char *kind_name(int k) noexcept;

} // namespace vwait::util

#endif
