/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* RAII owners for verbs objects and the one place where verbs' three error conventions
 * (NULL + errno, positive errno, bare -1 + errno) become negative FI_E* codes. */
#ifndef VWAIT_VERBS_H
#define VWAIT_VERBS_H

#include <infiniband/verbs.h>
#include <rdma/fi_errno.h>
#include <rdma/rdma_cma.h>

#include <cerrno>
#include <memory>

namespace vwait::verbs
{

/* NULL + errno / -1 + errno: the errno, negated (never 0: a failure is a failure). */
inline int errno_code() noexcept
{
	return errno > 0 ? -errno : -FI_EOTHER;
}
/* A create call that failed (NULL, or -1) with errno cleared before it: that errno, or
 * -FI_ENOSPC when the library set none. libsiw refuses a queue whose mmap key is its "no key"
 * value without setting one (siw_key_plug); errno then still names an earlier call. */
inline int create_code() noexcept
{
	return errno > 0 ? -errno : -FI_ENOSPC;
}
/* Functions that return a positive errno (ibv_req_notify_cq, ibv_post_*, ibv_modify_qp). */
inline int positive_code(int ret) noexcept
{
	return ret > 0 ? -ret : (ret < 0 ? errno_code() : 0);
}

/* A destroy, close or free call of a deleter below failed with code (a negative FI_E*): one
 * FI_WARN line naming the call (the object is gone from vwait's view either way). */
void destroy_failed(const char *call, int code) noexcept;
/* ret: what call returned, in either verbs convention (positive errno, or -1 + errno) */
inline void check_destroy(const char *call, int ret) noexcept
{
	if (ret != 0)
		destroy_failed(call, positive_code(ret));
}

struct device_list_deleter {
	void operator()(struct ibv_device **list) const noexcept { ibv_free_device_list(list); }
};
using device_list_ptr = std::unique_ptr<struct ibv_device *[], device_list_deleter>;

struct context_deleter {
	void operator()(struct ibv_context *ctx) const noexcept
	{
		check_destroy("ibv_close_device", ibv_close_device(ctx));
	}
};
using context_ptr = std::unique_ptr<struct ibv_context, context_deleter>;

struct pd_deleter {
	void operator()(struct ibv_pd *pd) const noexcept
	{
		check_destroy("ibv_dealloc_pd", ibv_dealloc_pd(pd));
	}
};
using pd_ptr = std::unique_ptr<struct ibv_pd, pd_deleter>;

struct comp_channel_deleter {
	void operator()(struct ibv_comp_channel *ch) const noexcept
	{
		check_destroy("ibv_destroy_comp_channel", ibv_destroy_comp_channel(ch));
	}
};
using comp_channel_ptr = std::unique_ptr<struct ibv_comp_channel, comp_channel_deleter>;

struct cq_deleter {
	void operator()(struct ibv_cq *cq) const noexcept
	{
		check_destroy("ibv_destroy_cq", ibv_destroy_cq(cq));
	}
};
using cq_ptr = std::unique_ptr<struct ibv_cq, cq_deleter>;

struct mr_deleter {
	void operator()(struct ibv_mr *mr) const noexcept
	{
		check_destroy("ibv_dereg_mr", ibv_dereg_mr(mr));
	}
};
using mr_ptr = std::unique_ptr<struct ibv_mr, mr_deleter>;

/* An rdma_cm id; its QP, when rdma_create_qp made one, goes first (rdma_destroy_id refuses
 * nothing, but the QP would leak). */
struct cm_id_deleter {
	void operator()(struct rdma_cm_id *id) const noexcept
	{
		if (id->qp)
			rdma_destroy_qp(id);
		check_destroy("rdma_destroy_id", rdma_destroy_id(id));
	}
};
using cm_id_ptr = std::unique_ptr<struct rdma_cm_id, cm_id_deleter>;

struct event_channel_deleter {
	void operator()(struct rdma_event_channel *ch) const noexcept
	{
		rdma_destroy_event_channel(ch);
	}
};
using event_channel_ptr = std::unique_ptr<struct rdma_event_channel, event_channel_deleter>;

/* rdma_cm's own device contexts: the ones every rdma_cm_id of the process points at. */
struct cm_devices_deleter {
	void operator()(struct ibv_context **list) const noexcept { rdma_free_devices(list); }
};
using cm_devices_ptr = std::unique_ptr<struct ibv_context *[], cm_devices_deleter>;

struct addrinfo_deleter {
	void operator()(struct rdma_addrinfo *ai) const noexcept { rdma_freeaddrinfo(ai); }
};
using addrinfo_ptr = std::unique_ptr<struct rdma_addrinfo, addrinfo_deleter>;

/* Soft-iWARP (siw): an iWARP device with siw's vendor id ("bmt"), whatever its name. */
inline bool is_siw(const struct ibv_context *ctx, const struct ibv_device_attr &attr) noexcept
{
	return ctx->device->transport_type == IBV_TRANSPORT_IWARP && attr.vendor_id == 0x626d74;
}

/* The kernel hands out the mmap keys of a device context's queues page by page from 0, and
 * libsiw takes key 0x90000 (page 144; its SIW_INVAL_UOBJ_KEY) for "no key": it destroys the
 * CQ, QP or SRQ whose first queue starts there and fails without setting errno, and since the
 * next queue starts at the same free page, every later one fails too. So a process could
 * hold 144 small CQs, or about 10 connections, per siw device. The plug is one CQ large enough
 * (32768 entries of 32 bytes: 257 pages) to cover page 144, made while the context holds fewer
 * pages, so that no queue starts there: 1 MiB of kernel memory per context. One per context,
 * shared by its domains and destroyed with the last; an empty pointer, with a warning, when
 * it cannot be made. */
std::shared_ptr<struct ibv_cq> siw_key_plug(struct ibv_context *ctx) noexcept;

/* rdma_cm calls return -1 + errno. */
inline int cm_code(int ret) noexcept
{
	return ret == 0 ? 0 : errno_code();
}

/* A synchronous id (no event channel: rdma_resolve_* block until done), or a channel's id. */
inline int create_id(struct rdma_event_channel *ch, void *owner, cm_id_ptr *out) noexcept
{
	struct rdma_cm_id *id = nullptr;
	if (rdma_create_id(ch, &id, owner, RDMA_PS_TCP) != 0)
		return errno_code();
	out->reset(id);
	return 0;
}

/* The device list, or an empty pointer with *count = 0 (no device, or no verbs at all). */
inline device_list_ptr get_device_list(int *count) noexcept
{
	*count = 0;
	device_list_ptr list(ibv_get_device_list(count));
	if (!list)
		*count = 0;
	return list;
}

} // namespace vwait::verbs

#endif
