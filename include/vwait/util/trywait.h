/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* util::trywait: fi_trywait over any mix of vwait CQs, counters, EQs and wait sets.
 *
 * All fids must be vwait objects with a wait object of one type (FI_WAIT_FD, POLLFD, ...):
 * otherwise -FI_EINVAL with one warning line naming the index and the fid. Objects opened with
 * FI_WAIT_NONE: -FI_EINVAL. For each fid: a wait set, or an object with a private waiter, runs
 * waiter::trywait() (reset its signal, drain its sources, check its ready members); a member of
 * a wait set runs its own trywait(). -FI_EAGAIN as soon as one of them has something queued;
 * 0 when blocking on every native wait object is safe. count <= 0 or NULL fids: -FI_EINVAL.
 */
#ifndef VWAIT_UTIL_TRYWAIT_H
#define VWAIT_UTIL_TRYWAIT_H

#include <rdma/fabric.h>
#include <rdma/providers/fi_prov.h>

namespace vwait::util
{

int trywait(const struct fi_provider *prov, struct fid **fids, int count) noexcept;

} // namespace vwait::util

#endif
