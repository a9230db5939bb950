/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* fi_sets: wait sets and poll sets, fi_wait_open, fi_wait, fi_poll_open, fi_poll_add,
 * fi_poll_del and fi_poll, called through one wrapper each. libfabric 2.x headers mark these six
 * FI_DEPRECATED_FUNC, and a program built with warnings as errors would fail on them; the
 * wrappers silence that warning around these calls alone, so any other deprecated use still
 * fails such a build. Against 1.x headers they are the plain calls.
 *
 * fi_vwait_bench and vwait's tests call wait sets and poll sets through these. It is
 * libfabric's public API only and belongs to no provider: a program that uses the sets copies
 * this header beside its own sources. C has no namespace: a C program puts the same two
 * pragmas around its calls. */
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>

#include <cstdint>

namespace fi_sets
{

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

inline int wait_open(struct fid_fabric *fabric, struct fi_wait_attr *attr,
                     struct fid_wait **waitset)
{
	return fi_wait_open(fabric, attr, waitset);
}

inline int wait(struct fid_wait *waitset, int timeout)
{
	return fi_wait(waitset, timeout);
}

inline int poll_open(struct fid_domain *domain, struct fi_poll_attr *attr,
                     struct fid_poll **pollset)
{
	return fi_poll_open(domain, attr, pollset);
}

inline int poll_add(struct fid_poll *pollset, struct fid *event_fid, uint64_t flags)
{
	return fi_poll_add(pollset, event_fid, flags);
}

inline int poll_del(struct fid_poll *pollset, struct fid *event_fid, uint64_t flags)
{
	return fi_poll_del(pollset, event_fid, flags);
}

inline int poll(struct fid_poll *pollset, void **context, int count)
{
	return fi_poll(pollset, context, count);
}

#pragma GCC diagnostic pop

} // namespace fi_sets
