/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* The FI_EP_MSG endpoint: an RC QP made through rdma_cm on the endpoint base. Its connection
 * management (connect, accept, shutdown, names, disconnects) is in cm.cpp. */
#include "config.h"

#include "vwait/ep.h"
#include "vwait/vwait.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace vwait
{

rc_ep::rc_ep(domain *dom, info_ptr info, verbs::cm_id_ptr id, bool from_connreq)
    : ep(dom, std::move(info)), id_(std::move(id)), passive_(from_connreq)
{
	id_->context = static_cast<cm_target *>(this);
}

rc_ep::~rc_ep()
{
	if (eq_)
		eq_->unprobe(this); /* before the QP goes: the keepalive may be probing it */
	close_rings();
	{
		/* the QP first (a thread draining the EQ may be in disconnected()), then the id,
		 * which waits for the acknowledgement of any event of it being converted. No thread
		 * may be inside rdma_get_cm_event for the id meanwhile: it may be moving the QP. */
		std::unique_lock<util::mutex> events;
		if (eq_ && id_->channel == eq_->channel())
			events = eq_->hold_progress();
		util::lock_guard<util::mutex> lock(qp_mutex_);
		qp_gone_ = true;
		if (id_->qp)
			rdma_destroy_qp(id_.get());
	}
	id_.reset();
}

int rc_ep::check_enable() noexcept
{
	if (!eq_) {
		FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_enable: no EQ bound\n");
		return -FI_ENOEQ;
	}
	if (!id_->verbs) {
		FI_WARN(&prov, FI_LOG_EP_CTRL,
		        "fi_enable: endpoint has no local device (open it with src_addr or "
		        "dest_addr)\n");
		return -FI_EOPBADSTATE;
	}
	if (id_->verbs != domain_->context()) {
		FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_enable: address is on %s, domain is %s\n",
		        ibv_get_device_name(id_->verbs->device), domain_->name());
		return -FI_EINVAL;
	}
	return FI_SUCCESS;
}

int rc_ep::create_qp(struct ibv_qp_init_attr &attr, struct ibv_qp **qp) noexcept
{
	util::lock_guard<util::mutex> qp_lock(qp_mutex_);
	attr.qp_type = IBV_QPT_RC;
	if (get_params().keepalive_ms > 0)
		attr.cap.max_send_wr++; /* the keepalive probe's slot */
	errno = 0;
	if (rdma_create_qp(id_.get(), domain_->pd(), &attr) != 0) {
		int ret = verbs::create_code();
		FI_WARN(&prov, FI_LOG_EP_CTRL,
		        "rdma_create_qp(send %u, recv %u, sge %u/%u, inline %u): %s\n",
		        attr.cap.max_send_wr, attr.cap.max_recv_wr, attr.cap.max_send_sge,
		        attr.cap.max_recv_sge, attr.cap.max_inline_data, fi_strerror(-ret));
		return ret;
	}
	*qp = id_->qp;
	return FI_SUCCESS;
}

bool rc_ep::probe() noexcept
{
	util::lock_guard<util::mutex> lock(qp_mutex_);
	if (qp_gone_ || !id_->qp)
		return true;
	/* iWARP has no RC retry budget (its transport is TCP, which gives a dead peer up after
	 * its own retransmissions), and siw's query_qp fills in neither the QP's state nor its
	 * timeout and retry count: nothing to probe by, and a state read back there is not the
	 * QP's (an "error" would shut a live connection). Said once per QP. */
	if (id_->verbs->device->transport_type == IBV_TRANSPORT_IWARP) {
		if (!budget_told_) {
			budget_told_ = true;
			FI_WARN(&prov, FI_LOG_EP_CTRL,
			        "keepalive: QP %u is on iWARP device %s: no RC retry budget, no "
			        "probe; a dead peer is found only when TCP gives up "
			        "(net.ipv4.tcp_retries2)\n",
			        id_->qp->qp_num, ibv_get_device_name(id_->verbs->device));
		}
		return true;
	}
	struct ibv_qp_attr attr = {};
	struct ibv_qp_init_attr init = {};
	if (ibv_query_qp(id_->qp, &attr, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT, &init) !=
	    0)
		return true;
	if (attr.qp_state == IBV_QPS_ERR)
		return false;
	if (attr.qp_state != IBV_QPS_RTS)
		return true;
	/* The RC retry budget: retry_cnt + 1 local ACK timeouts of 4.096 us << timeout. */
	const int64_t budget =
	    (int64_t{4096} << std::min<int>(attr.timeout, 31)) * (attr.retry_cnt + 1);
	const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
	                        std::chrono::steady_clock::now().time_since_epoch())
	                        .count();
	if (!budget_told_) {
		budget_told_ = true;
		FI_INFO(&prov, FI_LOG_EP_CTRL,
		        "keepalive: QP %u: timeout %u, retry_cnt %u: RC retry budget %lld ms\n",
		        id_->qp->qp_num, attr.timeout, attr.retry_cnt,
		        static_cast<long long>(budget / 1000000));
		if (attr.timeout == 0)
			FI_WARN(&prov, FI_LOG_EP_CTRL,
			        "keepalive: QP %u has no local ACK timeout: a dead peer goes "
			        "unnoticed\n",
			        id_->qp->qp_num);
		else if (attr.retry_cnt == 7)
			FI_WARN(
			    &prov, FI_LOG_EP_CTRL,
			    "keepalive: QP %u has retry_cnt 7 (the connecting side asked for it), "
			    "which some devices (rxe) take as retry forever: a dead peer may go "
			    "unnoticed\n",
			    id_->qp->qp_num);
	}
	/* A port that is down holds the QP's packets without counting retries (rxe): down for
	 * longer than the budget counts as a broken connection, as retries running out would. */
	struct ibv_port_attr port = {};
	if (ibv_query_port(id_->verbs, id_->port_num, &port) == 0 &&
	    port.state != IBV_PORT_ACTIVE) {
		if (!port_down_since_)
			port_down_since_ = now;
		FI_DBG(&prov, FI_LOG_EP_CTRL, "keepalive: QP %u: port down for %lld ms\n",
		       id_->qp->qp_num, static_cast<long long>((now - port_down_since_) / 1000000));
		return !(attr.timeout && now - port_down_since_ > budget);
	}
	port_down_since_ = 0;
	/* A NIC may restart the QP's retransmission timer with every packet it sends (rxe leaves
	 * a running timer alone): a probe each period shorter than one ACK timeout would then keep
	 * a dead peer's retries from ever running out. So one probe per budget at most: the first
	 * probe after the peer died goes out within budget + period, its retries run out within
	 * one budget more, and the next period sees the QP in error: 2 x (budget + period). */
	if (last_probe_ && now - last_probe_ < budget)
		return true;
	last_probe_ = now;
	/* zero bytes need no remote buffer; unsignalled: a completion only if it fails. While
	 * an earlier probe still holds the slot (a NIC that frees it only when the CQ is
	 * polled), the post fails and this period is skipped. */
	struct ibv_send_wr wr = {};
	wr.wr_id = probe_wr_id;
	wr.opcode = IBV_WR_RDMA_WRITE;
	struct ibv_send_wr *bad = nullptr;
	int ret = ibv_post_send(id_->qp, &wr, &bad);
	if (ret && ret != ENOMEM)
		FI_DBG(&prov, FI_LOG_EP_CTRL, "keepalive probe: %s\n", strerror(ret));
	return true;
}

void rc_ep::probe_failed() noexcept
{
	util::lock_guard<util::mutex> lock(qp_mutex_);
	if (!qp_gone_)
		rdma_disconnect(id_.get());
}

int rc_ep_open(domain *dom, struct fi_info *info, struct fid_ep **out, void *context)
{
	/* info->handle: a connection request (the passive side of a connection), or a passive
	 * endpoint whose address the new endpoint takes (fi_endpoint(3)) */
	pep *from_pep = nullptr;
	connreq *req = nullptr;
	if (info->handle && info->handle->fclass == FI_CLASS_PEP) {
		from_pep = vwait_pep(info->handle);
		if (!from_pep) {
			FI_WARN(&prov, FI_LOG_EP_CTRL,
			        "fi_endpoint: info->handle is not a vwait passive endpoint\n");
			return -FI_EINVAL;
		}
	} else if (info->handle && info->handle->fclass == FI_CLASS_CONNREQ) {
		req = connreq::of(info->handle);
		if (!req) {
			FI_WARN(&prov, FI_LOG_EP_CTRL,
			        "fi_endpoint: info->handle is not a vwait connection request\n");
			return -FI_EINVAL;
		}
	} else if (info->handle) {
		FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_endpoint: info->handle class %zu unsupported\n",
		        info->handle->fclass);
		return -FI_EINVAL;
	}
	const bool from_connreq = req != nullptr;
	if (!from_connreq) {
		if (int ret = check_sockaddr(info->src_addr, info->src_addrlen, info->addr_format,
		                             "fi_endpoint: info->src_addr"))
			return ret == -FI_ENODATA ? -FI_EINVAL : ret;
		if (int ret = check_sockaddr(info->dest_addr, info->dest_addrlen, info->addr_format,
		                             "fi_endpoint: info->dest_addr"))
			return ret == -FI_ENODATA ? -FI_EINVAL : ret;
	}
	info_ptr copy(fi_dupinfo(info));
	if (!copy)
		return -FI_ENOMEM;
	copy->handle = nullptr;
	verbs::cm_id_ptr id;
	auto *dst = static_cast<struct sockaddr *>(info->dest_addr);
	/* dest_addr given: the route now, from src_addr (or the address of the id: bound) */
	auto resolve_dst = [&](struct sockaddr *src) {
		int ms = get_params().cm_timeout_ms;
		if (rdma_resolve_addr(id.get(), src, dst, ms) != 0 ||
		    rdma_resolve_route(id.get(), ms) != 0) {
			int ret = verbs::errno_code();
			FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_endpoint: resolving dest_addr: %s\n",
			        fi_strerror(-ret));
			return ret;
		}
		return 0;
	};
	if (from_connreq) {
		id = req->take_id();
		if (!id) {
			FI_WARN(&prov, FI_LOG_EP_CTRL,
			        "fi_endpoint: connection request already taken\n");
			return -FI_EINVAL;
		}
	} else if (from_pep) {
		if (int ret = from_pep->take_id(&id))
			return ret;
		if (dst) {
			if (int ret = resolve_dst(nullptr)) {
				from_pep->restore_id(std::move(id));
				return ret;
			}
		}
	} else {
		if (int ret = verbs::create_id(nullptr, nullptr, &id)) {
			FI_WARN(&prov, FI_LOG_EP_CTRL, "rdma_create_id: %s\n", fi_strerror(-ret));
			return ret;
		}
		auto *src = static_cast<struct sockaddr *>(info->src_addr);
		if (src && !dst && rdma_bind_addr(id.get(), src) != 0) {
			int ret = verbs::errno_code();
			FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_endpoint: rdma_bind_addr: %s\n",
			        fi_strerror(-ret));
			return ret;
		}
		if (dst) {
			if (int ret = resolve_dst(src))
				return ret;
		}
	}
	bool resolved = from_connreq || dst;
	auto obj = std::make_unique<rc_ep>(dom, std::move(copy), std::move(id), from_connreq);
	obj->set_route_resolved(resolved);
	ep_install(std::move(obj), &rc_ep_cm_ops, &ep_msg_ops, &ep_rma_ops, context, out);
	if (from_connreq) {
		/* the endpoint owns the id: the handle is done */
		delete req;
		info->handle = nullptr;
	}
	return FI_SUCCESS;
}

} // namespace vwait
