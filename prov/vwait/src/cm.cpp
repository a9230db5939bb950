/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* Connection management: the framing of CM private data, the FI_CONNREQ handle from the
 * listener's event to fi_endpoint or fi_reject, the socket-address helpers, and the MSG
 * endpoint's side of rdma_cm (fi_connect, fi_accept, fi_shutdown, fi_getname, fi_getpeer,
 * disconnects) with its fi_ops_cm. */
#include "config.h"

#include "vwait/ep.h"
#include "vwait/util/enosys.h"
#include "vwait/vwait.h"

#include <infiniband/ib.h>
#include <netinet/in.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

namespace vwait
{

std::pair<const uint8_t *, size_t> cm_data(const void *raw, size_t raw_len) noexcept
{
	if (!raw || raw_len < cm_hdr_size)
		return {nullptr, 0};
	auto *p = static_cast<const uint8_t *>(raw);
	size_t len = p[0];
	if (len > raw_len - cm_hdr_size)
		return {nullptr, 0};
	return {p + cm_hdr_size, len};
}

std::vector<uint8_t> cm_wrap(const void *data, size_t len)
{
	std::vector<uint8_t> v(cm_hdr_size + len);
	v[0] = static_cast<uint8_t>(len);
	if (len)
		memcpy(v.data() + cm_hdr_size, data, len);
	return v;
}

size_t sockaddr_size(const struct sockaddr *sa) noexcept
{
	switch (sa->sa_family) {
	case AF_INET6:
		return sizeof(struct sockaddr_in6);
	case AF_IB:
		return sizeof(struct sockaddr_ib);
	default:
		return sizeof(struct sockaddr_in);
	}
}

namespace
{

/* a malloc'ed copy, as fi_freeinfo frees it */
void *dup_addr(const struct sockaddr *sa, size_t *len) noexcept
{
	*len = sockaddr_size(sa);
	void *p = malloc(*len);
	if (p)
		memcpy(p, sa, *len);
	return p;
}

uint32_t addr_format_of(const struct sockaddr *sa) noexcept
{
	switch (sa->sa_family) {
	case AF_INET6:
		return FI_SOCKADDR_IN6;
	case AF_IB:
		return FI_SOCKADDR_IB;
	default:
		return FI_SOCKADDR_IN;
	}
}

} // namespace

int copy_sockaddr(const struct sockaddr *sa, void *addr, size_t *addrlen, const char *what) noexcept
{
	if (!addrlen) {
		FI_WARN(&prov, FI_LOG_EP_CTRL, "%s: addrlen is NULL\n", what);
		return -FI_EINVAL;
	}
	size_t need = sockaddr_size(sa);
	size_t have = *addrlen;
	*addrlen = need;
	if (!addr || have < need)
		return -FI_ETOOSMALL;
	memcpy(addr, sa, need);
	return FI_SUCCESS;
}

int check_sockaddr(const void *addr, size_t len, uint32_t addr_format, const char *what) noexcept
{
	if (!addr)
		return FI_SUCCESS;
	switch (addr_format) {
	case FI_FORMAT_UNSPEC:
	case FI_SOCKADDR:
	case FI_SOCKADDR_IN:
	case FI_SOCKADDR_IN6:
		break;
	default:
		FI_WARN(&prov, FI_LOG_CORE, "%s: addr_format %u is not a sockaddr format\n", what,
		        addr_format);
		return -FI_ENODATA;
	}
	sa_family_t family;
	if (len < sizeof(family)) {
		FI_WARN(&prov, FI_LOG_CORE, "%s: addrlen %zu holds no address family\n", what, len);
		return -FI_EINVAL;
	}
	memcpy(&family, static_cast<const char *>(addr) + offsetof(struct sockaddr, sa_family),
	       sizeof(family));
	size_t need;
	uint32_t format;
	switch (family) {
	case AF_INET:
		need = sizeof(struct sockaddr_in);
		format = FI_SOCKADDR_IN;
		break;
	case AF_INET6:
		need = sizeof(struct sockaddr_in6);
		format = FI_SOCKADDR_IN6;
		break;
	default:
		FI_WARN(&prov, FI_LOG_CORE,
		        "%s: address family %u is neither AF_INET nor AF_INET6\n", what,
		        static_cast<unsigned>(family));
		return -FI_ENODATA;
	}
	if (len < need) {
		FI_WARN(&prov, FI_LOG_CORE, "%s: addrlen %zu < %zu for address family %u\n", what,
		        len, need, static_cast<unsigned>(family));
		return -FI_EINVAL;
	}
	if (addr_format != FI_FORMAT_UNSPEC && addr_format != FI_SOCKADDR &&
	    addr_format != format) {
		FI_WARN(&prov, FI_LOG_CORE, "%s: address family %u does not match addr_format %u\n",
		        what, static_cast<unsigned>(family), addr_format);
		return -FI_EINVAL;
	}
	return FI_SUCCESS;
}

namespace
{

int connreq_close(struct fid *handle) noexcept;

struct fi_ops connreq_fi_ops = util::fi_ops_with(connreq_close);

/* fi_close on a handle: what fi_reject without data does */
int connreq_close(struct fid *handle) noexcept
{
	std::unique_ptr<connreq> req(connreq::of(handle));
	return req->reject(nullptr, 0);
}

} // namespace

connreq::connreq(struct rdma_cm_id *id) noexcept : id_(id)
{
	box_.fid.fclass = FI_CLASS_CONNREQ;
	box_.fid.context = nullptr;
	box_.fid.ops = &connreq_fi_ops;
	box_.obj = this;
}

connreq::~connreq()
{
	if (id_)
		rdma_reject(id_.get(), nullptr, 0);
}

connreq *connreq::of(struct fid *handle) noexcept
{
	return util::fid_box<struct fid, connreq>::checked(handle, FI_CLASS_CONNREQ,
	                                                   &connreq_fi_ops);
}

int connreq::reject(const void *param, size_t paramlen) noexcept
{
	if (!id_) {
		FI_WARN(&prov, FI_LOG_EP_CTRL,
		        "fi_reject: the connection request was taken by fi_endpoint\n");
		return -FI_EINVAL;
	}
	return guard([&] {
		std::vector<uint8_t> data = cm_wrap(param, paramlen);
		verbs::cm_id_ptr id = take_id();
		int ret = verbs::cm_code(
		    rdma_reject(id.get(), data.data(), static_cast<uint8_t>(data.size())));
		if (ret)
			FI_WARN(&prov, FI_LOG_EP_CTRL, "rdma_reject: %s\n", fi_strerror(-ret));
		return ret;
	});
}

struct fi_info *connreq::new_info(const struct fi_info *listener, struct rdma_cm_id *id) noexcept
{
	info_ptr info(fi_dupinfo(listener));
	if (!info)
		return nullptr;
	free(info->src_addr);
	free(info->dest_addr);
	info->src_addr = dup_addr(rdma_get_local_addr(id), &info->src_addrlen);
	info->dest_addr = dup_addr(rdma_get_peer_addr(id), &info->dest_addrlen);
	if (!info->src_addr || !info->dest_addr)
		return nullptr;
	info->addr_format = addr_format_of(rdma_get_peer_addr(id));
	if (id->verbs) {
		char *name = strdup(ibv_get_device_name(id->verbs->device));
		if (!name)
			return nullptr;
		free(info->domain_attr->name);
		info->domain_attr->name = name;
	}
	auto *req = new (std::nothrow) connreq(id);
	if (!req)
		return nullptr;
	info->handle = req->handle();
	return info.release();
}

void connreq::discard(struct fi_info *info) noexcept
{
	if (!info)
		return;
	delete of(info->handle);
	info->handle = nullptr;
	fi_freeinfo(info);
}

void connreq::forget(struct fi_info *info) noexcept
{
	if (connreq *req = of(info->handle)) {
		(void)req->take_id().release();
		delete req;
	}
	info->handle = nullptr;
	fi_freeinfo(info);
}

void rc_ep::disconnected(struct rdma_cm_id *id) noexcept
{
	/* moves the QP to the error state: what is still posted flushes */
	util::lock_guard<util::mutex> lock(qp_mutex_);
	if (!qp_gone_)
		rdma_disconnect(id);
}

void rc_ep::unread_marks(std::vector<cq_mark> &marks) noexcept
{
	verbs_cq *const tx = app_tx_cq_.load(std::memory_order_acquire);
	verbs_cq *const rx = app_rx_cq_.load(std::memory_order_acquire);
	for (verbs_cq *q : {tx, rx == tx ? nullptr : rx}) {
		if (!q)
			continue;
		q->progress();
		if (!q->queued())
			continue;
		try {
			marks.push_back({q, q->unread_mark()});
		} catch (...) { /* no memory: FI_SHUTDOWN is not held for this CQ */
		}
	}
}

/* Under mutex_ (connect, accept): rdma_migrate_id waits for the acks of the id's CM events,
 * which the EQ's progress gives, so the EQ's progress (eq_progress, eq_probe) must never take
 * an endpoint-level lock: it takes eq_probe, qp and the inner locks after them only, and a
 * take of an endpoint lock under them aborts in a lock-check build. */
int rc_ep::migrate_to_eq() noexcept
{
	if (id_->channel == eq_->channel())
		return FI_SUCCESS;
	if (rdma_migrate_id(id_.get(), eq_->channel()) != 0) {
		int ret = verbs::errno_code();
		FI_WARN(&prov, FI_LOG_EP_CTRL, "rdma_migrate_id: %s\n", fi_strerror(-ret));
		return ret;
	}
	return FI_SUCCESS;
}

namespace
{

struct rdma_conn_param conn_param(const domain &dom, const std::vector<uint8_t> &data)
{
	struct rdma_conn_param p = {};
	p.private_data = data.data();
	p.private_data_len = static_cast<uint8_t>(data.size());
	p.responder_resources =
	    static_cast<uint8_t>(std::min(dom.device_attr().max_qp_rd_atom, 255));
	p.initiator_depth =
	    static_cast<uint8_t>(std::min(dom.device_attr().max_qp_init_rd_atom, 255));
	/* 6, not 7: the IB spec counts 7 as seven retries, but rxe (rxe_comp.c) takes 7 as retry
	 * forever, and a peer that died would then never fail the QP (the keepalive relies on
	 * it). The accepting side's QP gets the count the connecting side asked for. */
	p.retry_count = 6;
	p.rnr_retry_count = 7; /* a receiver without buffers makes the sender wait */
	return p;
}

/* ret (a negative code of rdma_connect): the FI_E* code of the error entry when it is the
 * peer's answer (refused, unreachable, timed out), which an iWARP device gives inside
 * rdma_connect and RoCE as an rdma_cm event; 0 otherwise */
int peer_failure(int ret) noexcept
{
	switch (-ret) {
	case ECONNREFUSED:
	case ECONNRESET:
		return FI_ECONNREFUSED;
	case ETIMEDOUT:
		return FI_ETIMEDOUT;
	case EHOSTUNREACH:
	case ENETUNREACH:
		return FI_EHOSTUNREACH;
	default:
		return 0;
	}
}

} // namespace

int rc_ep::connect(const void *addr, const void *param, size_t paramlen) noexcept
{
	if (paramlen > cm_connect_data_max || (paramlen && !param)) {
		FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_connect: paramlen %zu (max %zu) or NULL param\n",
		        paramlen, cm_connect_data_max);
		return -FI_EINVAL;
	}
	util::lock_guard<util::fast_mutex> lock(mutex_);
	if (!enabled_ || passive_ || connecting_) {
		FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_connect: endpoint %s\n",
		        !enabled_ ? "not enabled"
		                  : (passive_ ? "was accepted" : "already connecting"));
		return -FI_EOPBADSTATE;
	}
	return guard([&] {
		if (!route_resolved_) {
			if (!addr) {
				FI_WARN(
				    &prov, FI_LOG_EP_CTRL,
				    "fi_connect: addr is NULL and the endpoint has no dest_addr\n");
				return -FI_EINVAL;
			}
			int ms = get_params().cm_timeout_ms;
			auto *dst = static_cast<struct sockaddr *>(const_cast<void *>(addr));
			if (rdma_resolve_addr(id_.get(), nullptr, dst, ms) != 0 ||
			    rdma_resolve_route(id_.get(), ms) != 0) {
				int ret = verbs::errno_code();
				FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_connect: resolving addr: %s\n",
				        fi_strerror(-ret));
				return ret;
			}
			route_resolved_ = true;
		}
		if (int ret = migrate_to_eq())
			return ret;
		std::vector<uint8_t> data = cm_wrap(param, paramlen);
		struct rdma_conn_param p = conn_param(*domain_, data);
		if (rdma_connect(id_.get(), &p) != 0) {
			int ret = verbs::errno_code();
			if (int err = peer_failure(ret)) {
				/* the peer's answer, not a misuse: on the EQ, as on RoCE */
				FI_INFO(&prov, FI_LOG_EP_CTRL, "rdma_connect: %s\n",
				        fi_strerror(-ret));
				connecting_ = true;
				eq_->connect_failed(cm_fid(), err);
				return FI_SUCCESS;
			}
			FI_WARN(&prov, FI_LOG_EP_CTRL, "rdma_connect: %s\n", fi_strerror(-ret));
			return ret;
		}
		connecting_ = true;
		return FI_SUCCESS;
	});
}

int rc_ep::accept(const void *param, size_t paramlen) noexcept
{
	if (paramlen > cm_accept_data_max || (paramlen && !param)) {
		FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_accept: paramlen %zu (max %zu) or NULL param\n",
		        paramlen, cm_accept_data_max);
		return -FI_EINVAL;
	}
	util::lock_guard<util::fast_mutex> lock(mutex_);
	if (!enabled_ || !passive_ || connecting_) {
		FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_accept: endpoint %s\n",
		        !enabled_ ? "not enabled"
		                  : (!passive_ ? "is not from a connection request"
		                               : "already accepted"));
		return -FI_EOPBADSTATE;
	}
	return guard([&] {
		if (int ret = migrate_to_eq())
			return ret;
		std::vector<uint8_t> data = cm_wrap(param, paramlen);
		struct rdma_conn_param p = conn_param(*domain_, data);
		if (rdma_accept(id_.get(), &p) != 0) {
			int ret = verbs::errno_code();
			FI_WARN(&prov, FI_LOG_EP_CTRL, "rdma_accept: %s\n", fi_strerror(-ret));
			return ret;
		}
		connecting_ = true;
		return FI_SUCCESS;
	});
}

int rc_ep::shutdown() noexcept
{
	util::lock_guard<util::fast_mutex> lock(mutex_);
	if (!connecting_)
		return -FI_ENOTCONN;
	if (rdma_disconnect(id_.get()) != 0) {
		int ret = verbs::errno_code();
		FI_INFO(&prov, FI_LOG_EP_CTRL, "rdma_disconnect: %s\n", fi_strerror(-ret));
		return ret;
	}
	/* rdma_disconnect puts an InfiniBand or RoCE QP in the error state, which flushes both
	 * queues. siw's QP goes to closing with its transmit stopped instead, flushing its
	 * receive queue, and its send queue only when a send was in progress at that moment; no
	 * later transition (error, destroy) flushes it. What was still queued would never
	 * complete. (A disconnect by the peer closes the connection under the QP, which flushes
	 * both.) */
	if (verbs::is_siw(id_->verbs, parent()->device_attr()))
		strand_sends();
	return FI_SUCCESS;
}

int rc_ep::getname(void *addr, size_t *addrlen) noexcept
{
	return copy_sockaddr(rdma_get_local_addr(id_.get()), addr, addrlen, "fi_getname");
}

int rc_ep::getpeer(void *addr, size_t *addrlen) noexcept
{
	return copy_sockaddr(rdma_get_peer_addr(id_.get()), addr, addrlen, "fi_getpeer");
}

namespace
{

rc_ep *rc_of(struct fid_ep *fid) noexcept
{
	return static_cast<rc_ep *>(ep_of(fid));
}

rc_ep *rc_of(struct fid *fid) noexcept
{
	return static_cast<rc_ep *>(ep_of(fid));
}

int ep_getname(fid_t fid, void *addr, size_t *addrlen) noexcept
{
	return rc_of(fid)->getname(addr, addrlen);
}

int ep_getpeer(struct fid_ep *fid, void *addr, size_t *addrlen) noexcept
{
	return rc_of(fid)->getpeer(addr, addrlen);
}

int ep_connect(struct fid_ep *fid, const void *addr, const void *param, size_t paramlen) noexcept
{
	return rc_of(fid)->connect(addr, param, paramlen);
}

int ep_accept(struct fid_ep *fid, const void *param, size_t paramlen) noexcept
{
	return rc_of(fid)->accept(param, paramlen);
}

int ep_shutdown(struct fid_ep *fid, uint64_t flags) noexcept
{
	(void)flags;
	return rc_of(fid)->shutdown();
}

} // namespace

struct fi_ops_cm rc_ep_cm_ops = {
    .size = sizeof(struct fi_ops_cm),
    .setname = util::unsupported{},
    .getname = ep_getname,
    .getpeer = ep_getpeer,
    .connect = ep_connect,
    .listen = util::unsupported{},
    .accept = ep_accept,
    .reject = util::unsupported{},
    .shutdown = ep_shutdown,
    .join = util::unsupported{},
};

} // namespace vwait
