/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* The FI_EP_DGRAM endpoint: a UD QP on the endpoint base (rings, binds, counters, receives),
 * its sends addressed through an AV, with the ops tables of a connectionless endpoint. */
#include "config.h"

#include "vwait/ep_dgram.h"
#include "vwait/util/enosys.h"
#include "vwait/vwait.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cinttypes>
#include <cstring>
#include <memory>

namespace vwait
{

namespace
{

constexpr size_t max_sge_per_wr = 16;
constexpr uint64_t dgram_tx_flags = FI_COMPLETION | FI_INJECT | FI_REMOTE_CQ_DATA |
                                    FI_TRANSMIT_COMPLETE | FI_INJECT_COMPLETE | FI_MORE | FI_MSG |
                                    FI_SEND;

} // namespace

ud_ep::ud_ep(domain *dom, info_ptr info, uint8_t port, const union ibv_gid &gid, int sgid_index,
             uint16_t lid)
    : ep(dom, std::move(info)), port_(port)
{
	(void)sgid_index;
	memcpy(name_.gid, gid.raw, sizeof(name_.gid));
	name_.lid = lid;
	name_.qkey = ud_qkey;
	if (info_->src_addr && info_->src_addrlen >= sizeof(ud_name))
		name_.service = static_cast<const ud_name *>(info_->src_addr)->service;
	struct ibv_port_attr pa = {};
	ibv_query_port(dom->context(), port, &pa);
	mtu_ = link_mtu_bytes(pa.active_mtu);
	if (info_->ep_attr && info_->ep_attr->max_msg_size)
		mtu_ = mtu_ ? std::min(mtu_, info_->ep_attr->max_msg_size)
		            : info_->ep_attr->max_msg_size; /* the port's MTU unknown */
	/* receive buffers carry the prefix and may be of any size: only sends are bounded by
	 * the MTU (send() checks) */
	max_msg_size_ = size_t{1} << 31;
	uint64_t caps = info_->caps | (info_->rx_attr ? info_->rx_attr->caps : 0);
	source_ = caps & FI_SOURCE;
	prefix_ = (info_->mode | (info_->rx_attr ? info_->rx_attr->mode : 0)) & FI_MSG_PREFIX;
}

ud_ep::~ud_ep()
{
	names_.stop();
	close_rings();
	if (qp_)
		ibv_destroy_qp(qp_);
	spill_mr_.reset();
	grh_mr_.reset();
}

int ud_ep::bind_kind(struct fid *bfid, uint64_t flags) noexcept
{
	if (bfid->fclass != FI_CLASS_AV)
		return ep::bind_kind(bfid, flags);
	if (flags) {
		FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_ep_bind(av): flags 0x%" PRIx64 " must be 0\n",
		        flags);
		return -FI_EBADFLAGS;
	}
	av *a = verbs_av_of(bfid);
	if (!a) {
		FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_ep_bind: fid %p is not a vwait AV\n",
		        static_cast<void *>(bfid));
		return -FI_EINVAL;
	}
	if (a->parent() != domain_) {
		FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_ep_bind: AV of another domain\n");
		return -FI_EINVAL;
	}
	if (av_) {
		FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_ep_bind: an AV is already bound\n");
		return -FI_EINVAL;
	}
	av_.reset(a);
	return FI_SUCCESS;
}

int ud_ep::check_enable() noexcept
{
	if (!av_) {
		FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_enable: no AV bound\n");
		return -FI_ENOAV;
	}
	if (source_)
		set_rx_source(&av::source_of, av_);
	if (!spill_mr_) {
		int ret = guard([&] {
			spill_.assign(ud_prefix_size + 4096, 0); /* the largest MTU */
			spill_mr_.reset(ibv_reg_mr(domain_->pd(), spill_.data(), spill_.size(),
			                           IBV_ACCESS_LOCAL_WRITE));
			return spill_mr_ ? 0 : verbs::errno_code();
		});
		if (ret) {
			FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_enable: ibv_reg_mr(spill buffer): %s\n",
			        fi_strerror(-ret));
			return ret;
		}
		struct ibv_sge sge = {};
		sge.addr = reinterpret_cast<uintptr_t>(spill_.data());
		sge.length = static_cast<uint32_t>(spill_.size());
		sge.lkey = spill_mr_->lkey;
		set_rx_spill(sge);
	}
	if (!prefix_ && !grh_mr_) {
		int ret = guard([&] {
			grh_.assign(ud_prefix_size * rx_depth(), 0);
			grh_mr_.reset(ibv_reg_mr(domain_->pd(), grh_.data(), grh_.size(),
			                         IBV_ACCESS_LOCAL_WRITE));
			return grh_mr_ ? 0 : verbs::errno_code();
		});
		if (ret) {
			FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_enable: ibv_reg_mr(GRH buffers): %s\n",
			        fi_strerror(-ret));
			return ret;
		}
		set_rx_hidden(reinterpret_cast<uintptr_t>(grh_.data()),
		              static_cast<uint32_t>(ud_prefix_size), grh_mr_->lkey);
	}
	return FI_SUCCESS;
}

int ud_ep::create_qp(struct ibv_qp_init_attr &attr, struct ibv_qp **qp) noexcept
{
	attr.qp_type = IBV_QPT_UD;
	attr.cap.max_recv_sge += prefix_ ? 1 : 2; /* the spill entry, the GRH kept here */
	struct ibv_qp *q = ibv_create_qp(domain_->pd(), &attr);
	if (!q) {
		int ret = verbs::errno_code();
		FI_WARN(&prov, FI_LOG_EP_CTRL,
		        "ibv_create_qp(UD, send %u, recv %u, sge %u/%u, inline %u): %s\n",
		        attr.cap.max_send_wr, attr.cap.max_recv_wr, attr.cap.max_send_sge,
		        attr.cap.max_recv_sge, attr.cap.max_inline_data, fi_strerror(-ret));
		return ret;
	}
	struct ibv_qp_attr a = {};
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = port_;
	a.qkey = ud_qkey;
	int ret =
	    ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
	if (ret == 0) {
		a = {};
		a.qp_state = IBV_QPS_RTR;
		ret = ibv_modify_qp(q, &a, IBV_QP_STATE);
	}
	if (ret == 0) {
		a = {};
		a.qp_state = IBV_QPS_RTS;
		a.sq_psn = 0;
		ret = ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
	}
	if (ret) {
		FI_WARN(&prov, FI_LOG_EP_CTRL, "ibv_modify_qp(UD to RTS): %s\n", strerror(ret));
		ibv_destroy_qp(q);
		return verbs::positive_code(ret);
	}
	qp_ = q;
	name_.qpn = q->qp_num;
	*qp = q;
	/* a peer's fi_getinfo(node, service) finds this endpoint by its service; without the
	 * port the endpoint still works, named by fi_getname alone */
	if (name_.service) {
		if (int err = names_.start(name_))
			FI_WARN(&prov, FI_LOG_EP_CTRL,
			        "fi_enable: DGRAM name service on UDP port %u: %s (peers need "
			        "fi_getname's name)\n",
			        name_.service, fi_strerror(-err));
	}
	return FI_SUCCESS;
}

int ud_ep::getname(void *addr, size_t *addrlen) noexcept
{
	if (!addrlen) {
		FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_getname: addrlen is NULL\n");
		return -FI_EINVAL;
	}
	util::lock_guard<util::fast_mutex> lock(mutex_);
	if (!enabled_) {
		FI_WARN(&prov, FI_LOG_EP_CTRL,
		        "fi_getname: a DGRAM endpoint has its name (its QP number) once enabled\n");
		return -FI_EOPBADSTATE;
	}
	size_t have = *addrlen;
	*addrlen = sizeof(ud_name);
	if (!addr || have < sizeof(ud_name))
		return -FI_ETOOSMALL;
	memcpy(addr, &name_, sizeof(name_));
	return FI_SUCCESS;
}

ssize_t ud_ep::send(const struct iovec *iov, void **desc, size_t count, fi_addr_t dest,
                    uint64_t data, void *context, uint64_t flags, bool silent) noexcept
{
	if (flags & ~dgram_tx_flags) {
		FI_WARN(&prov, FI_LOG_EP_DATA, "send: flags 0x%" PRIx64 " not supported\n", flags);
		return -FI_EBADFLAGS;
	}
	const size_t skip = prefix_ ? ud_prefix_size : 0;
	if (count > max_sge_per_wr || (count && !iov) ||
	    (skip && (!count || iov[0].iov_len < skip))) {
		FI_WARN(&prov, FI_LOG_EP_DATA, "send: iov count %zu%s\n", count,
		        skip ? ", or iov[0] without room for the 40-byte prefix (FI_MSG_PREFIX)"
		             : "");
		return -FI_EINVAL;
	}
	struct ibv_ah *ah = nullptr;
	uint32_t qpn = 0, qkey = 0;
	if (!av_ || !av_->dest(dest, &ah, &qpn, &qkey)) {
		FI_WARN(&prov, FI_LOG_EP_DATA, "send: dest_addr %" PRIu64 " is not in the AV\n",
		        static_cast<uint64_t>(dest));
		return -FI_EINVAL;
	}
	/* the prefix stays behind */
	struct iovec v[max_sge_per_wr];
	std::copy(iov, iov + count, v);
	if (skip) {
		v[0].iov_base = static_cast<char *>(v[0].iov_base) + skip;
		v[0].iov_len -= skip;
	}
	size_t sum = 0;
	for (size_t i = 0; i < count; i++)
		sum += v[i].iov_len;
	if (sum > mtu_) {
		FI_WARN(&prov, FI_LOG_EP_DATA,
		        "send: %zu bytes exceed max_msg_size %zu (the MTU)\n", sum, mtu_);
		return -FI_EMSGSIZE;
	}
	struct ibv_sge sge[max_sge_per_wr];
	const tx_sges g = gather_tx(silent ? "inject" : "send", v, desc, count, tx_iov_limit_, true,
	                            silent || (flags & FI_INJECT), sge);
	if (g.n < 0)
		return g.n;
	struct ibv_send_wr wr = {};
	wr.sg_list = sge;
	wr.num_sge = g.n;
	if (flags & FI_REMOTE_CQ_DATA) {
		wr.opcode = IBV_WR_SEND_WITH_IMM;
		wr.imm_data = htonl(static_cast<uint32_t>(data));
	} else {
		wr.opcode = IBV_WR_SEND;
	}
	if (g.inl && g.total)
		wr.send_flags |= IBV_SEND_INLINE;
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = qpn;
	wr.wr.ud.remote_qkey = qkey;
	bool report = !silent && (!tx_selective_ || (flags & FI_COMPLETION));
	return post_tx_wr(&wr, context, FI_SEND | FI_MSG, g.total, report);
}

namespace
{

ud_ep *ud_of(struct fid_ep *fid) noexcept
{
	return static_cast<ud_ep *>(ep_of(fid));
}

int dgram_getname(fid_t fid, void *addr, size_t *addrlen) noexcept
{
	return static_cast<ud_ep *>(ep_of(fid))->getname(addr, addrlen);
}

ssize_t dgram_send(struct fid_ep *fid, const void *buf, size_t len, void *desc, fi_addr_t dest,
                   void *context) noexcept
{
	struct iovec iov = {const_cast<void *>(buf), len};
	ud_ep *e = ud_of(fid);
	return e->send(&iov, &desc, 1, dest, 0, context, e->tx_op_flags());
}

ssize_t dgram_sendv(struct fid_ep *fid, const struct iovec *iov, void **desc, size_t count,
                    fi_addr_t dest, void *context) noexcept
{
	ud_ep *e = ud_of(fid);
	return e->send(iov, desc, count, dest, 0, context, e->tx_op_flags());
}

ssize_t dgram_sendmsg(struct fid_ep *fid, const struct fi_msg *msg, uint64_t flags) noexcept
{
	if (!msg) {
		FI_WARN(&prov, FI_LOG_EP_DATA, "fi_sendmsg: msg is NULL\n");
		return -FI_EINVAL;
	}
	return ud_of(fid)->send(msg->msg_iov, msg->desc, msg->iov_count, msg->addr, msg->data,
	                        msg->context, flags);
}

ssize_t dgram_inject(struct fid_ep *fid, const void *buf, size_t len, fi_addr_t dest) noexcept
{
	struct iovec iov = {const_cast<void *>(buf), len};
	return ud_of(fid)->send(&iov, nullptr, 1, dest, 0, nullptr, 0, true);
}

ssize_t dgram_senddata(struct fid_ep *fid, const void *buf, size_t len, void *desc, uint64_t data,
                       fi_addr_t dest, void *context) noexcept
{
	struct iovec iov = {const_cast<void *>(buf), len};
	ud_ep *e = ud_of(fid);
	return e->send(&iov, &desc, 1, dest, data, context, e->tx_op_flags() | FI_REMOTE_CQ_DATA);
}

ssize_t dgram_injectdata(struct fid_ep *fid, const void *buf, size_t len, uint64_t data,
                         fi_addr_t dest) noexcept
{
	struct iovec iov = {const_cast<void *>(buf), len};
	return ud_of(fid)->send(&iov, nullptr, 1, dest, data, nullptr, FI_REMOTE_CQ_DATA, true);
}

struct fi_ops_cm dgram_cm_ops = {
    .size = sizeof(struct fi_ops_cm),
    .setname = util::unsupported{},
    .getname = dgram_getname,
    .getpeer = util::unsupported{},
    .connect = util::unsupported{},
    .listen = util::unsupported{},
    .accept = util::unsupported{},
    .reject = util::unsupported{},
    .shutdown = util::unsupported{},
    .join = util::unsupported{}, /* multicast: -FI_ENOSYS (fi_vwait(7)) */
};

struct fi_ops_msg dgram_msg_ops = {
    .size = sizeof(struct fi_ops_msg),
    .recv = ep_recv,
    .recvv = ep_recvv,
    .recvmsg = ep_recvmsg,
    .send = dgram_send,
    .sendv = dgram_sendv,
    .sendmsg = dgram_sendmsg,
    .inject = dgram_inject,
    .senddata = dgram_senddata,
    .injectdata = dgram_injectdata,
};

struct fi_ops_rma dgram_rma_ops = {
    .size = sizeof(struct fi_ops_rma),
    .read = util::unsupported{},
    .readv = util::unsupported{},
    .readmsg = util::unsupported{},
    .write = util::unsupported{},
    .writev = util::unsupported{},
    .writemsg = util::unsupported{},
    .inject = util::unsupported{},
    .writedata = util::unsupported{},
    .injectdata = util::unsupported{},
};

} // namespace

int ud_ep_open(domain *dom, struct fi_info *info, struct fid_ep **out, void *context)
{
	if (info->handle) {
		FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_endpoint: a DGRAM endpoint takes no handle\n");
		return -FI_EINVAL;
	}
	if (info->addr_format != FI_FORMAT_UNSPEC && info->addr_format != FI_ADDR_IB_UD) {
		FI_WARN(&prov, FI_LOG_EP_CTRL,
		        "fi_endpoint: addr_format %u is not FI_ADDR_IB_UD for a DGRAM endpoint\n",
		        info->addr_format);
		return -FI_EINVAL;
	}
	if (info->src_addr && info->src_addrlen < sizeof(ud_name)) {
		FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_endpoint: src_addrlen %zu < %zu\n",
		        info->src_addrlen, sizeof(ud_name));
		return -FI_EINVAL;
	}
	uint8_t port = 0;
	union ibv_gid gid;
	int index = 0;
	uint16_t lid = 0;
	if (int ret = ud_local_port(dom->context(), &port, &gid, &index, &lid)) {
		FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_endpoint: %s has no active port with a GID\n",
		        dom->name());
		return ret;
	}
	info_ptr copy(fi_dupinfo(info));
	if (!copy)
		return -FI_ENOMEM;
	auto obj = std::make_unique<ud_ep>(dom, std::move(copy), port, gid, index, lid);
	return ep_install(std::move(obj), &dgram_cm_ops, &dgram_msg_ops, &dgram_rma_ops, context,
	                  out);
}

} // namespace vwait
