/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* util::poll_set: fi_poll_open / fi_poll_add / fi_poll_del / fi_poll / fi_close.
 *
 * Members are vwait CQs and counters (found through ctl_get_waitable; EQs, wait sets and
 * foreign fids are refused with -FI_EINVAL and a warning). Each member reports notify()/wake()
 * to the poll set, which queues it on a ready list; fi_poll looks only at that list (plus the
 * members that are not self_notifying()), so its cost follows the members with events, not the
 * member count. A member whose events arrive on an fd (waitable::events_from: a verbs CQ's
 * completion channel) has that fd drained, without blocking, at the start of every fi_poll
 * (one read for one channel, a poll() for several), and is armed whenever it is found empty.
 * A CQ that is still not empty after being reported stays on the list and is
 * reported again by the next fi_poll; a counter is reported when its success or error value
 * changed since the last fi_poll (waitable::poll_ready). count bounds the context array; what
 * does not fit stays queued for the next call.
 */
#ifndef VWAIT_UTIL_POLL_H
#define VWAIT_UTIL_POLL_H

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/providers/fi_prov.h>

#include <functional>

namespace vwait::util
{

/* attr may be NULL; attr->flags != 0, NULL out: -FI_EINVAL with a warning. fi_close with
 * members: -FI_EBUSY. on_close (optional) runs after a successful fi_close. */
int poll_open(const struct fi_provider *prov, struct fi_poll_attr *attr, struct fid_poll **out,
              std::function<void()> on_close = {}) noexcept;

} // namespace vwait::util

#endif
