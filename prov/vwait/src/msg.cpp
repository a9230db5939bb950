/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* The message path of an endpoint: fi_send / fi_recv and their variants, posted on the
 * endpoint base's rings (fi_ops_msg). */
#include "config.h"

#include "vwait/ep.h"
#include "vwait/vwait.h"

#include <arpa/inet.h>

#include <cinttypes>
#include <cstring>

namespace vwait
{

namespace
{

constexpr size_t max_sge_per_wr = 16;
constexpr uint64_t tx_flag_bits = FI_COMPLETION | FI_INJECT | FI_REMOTE_CQ_DATA |
                                  FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE | FI_INJECT_COMPLETE |
                                  FI_FENCE | FI_MORE | FI_MSG | FI_RMA | FI_SEND | FI_WRITE |
                                  FI_READ | credit_priority_flags;
constexpr uint64_t rx_flag_bits = FI_COMPLETION | FI_MORE | FI_MSG | FI_RECV;

/* A send of nsge sges, with the remote CQ data in the immediate when flags ask for it. Not the
 * whole work request cleared (128 bytes: 16 stores more per send): the fields an RC send
 * reads, and the union's rdma part, which a provider may copy into its work queue entry
 * whatever the opcode. */
inline void init_send_wr(struct ibv_send_wr &wr, struct ibv_sge *sge, int nsge, uint64_t flags,
                         uint64_t data) noexcept
{
	wr.next = nullptr;
	wr.sg_list = sge;
	wr.num_sge = nsge;
	wr.wr.rdma.remote_addr = 0;
	wr.wr.rdma.rkey = 0;
	if (flags & FI_REMOTE_CQ_DATA) {
		wr.opcode = IBV_WR_SEND_WITH_IMM;
		wr.imm_data = htonl(static_cast<uint32_t>(data));
	} else {
		wr.opcode = IBV_WR_SEND;
		wr.imm_data = 0;
	}
}

/* The cold ends of post_send and post_recv, out of line: a warning and the code. */
__attribute__((noinline, cold)) ssize_t bad_tx_flags(uint64_t flags, uint64_t no_tx_flags) noexcept
{
	if (flags & no_tx_flags) {
		FI_WARN(&prov, FI_LOG_EP_DATA,
		        "send: remote CQ data (FI_REMOTE_CQ_DATA) needs immediate data, which "
		        "an iWARP device does not have (cq_data_size 0)\n");
		return -FI_EOPNOTSUPP;
	}
	FI_WARN(&prov, FI_LOG_EP_DATA, "send: flags 0x%" PRIx64 " not supported\n", flags);
	return -FI_EBADFLAGS;
}

__attribute__((noinline, cold)) ssize_t bad_rx_flags(uint64_t flags) noexcept
{
	FI_WARN(&prov, FI_LOG_EP_DATA, "recv: flags 0x%" PRIx64 " not supported\n", flags);
	return -FI_EBADFLAGS;
}

__attribute__((noinline, cold)) ssize_t rx_not_enabled() noexcept
{
	FI_WARN(&prov, FI_LOG_EP_DATA, "recv on an endpoint that is not enabled\n");
	return -FI_EOPBADSTATE;
}

__attribute__((noinline, cold)) ssize_t rx_post_failed(int ret) noexcept
{
	if (ret == ENOMEM)
		return -FI_EAGAIN;
	FI_WARN(&prov, FI_LOG_EP_DATA, "ibv_post_recv: %s\n", strerror(ret));
	return verbs::positive_code(ret);
}

} // namespace

__attribute__((always_inline)) inline ssize_t ep::post_send(const struct iovec *iov, void **desc,
                                                            size_t count, uint64_t data,
                                                            void *context, uint64_t flags,
                                                            bool silent) noexcept
{
	if (__builtin_expect(flags & (~tx_flag_bits | no_tx_flags_), 0))
		return bad_tx_flags(flags, no_tx_flags_);
	struct ibv_sge sge[max_sge_per_wr];
	const tx_sges g = gather_tx(silent ? "inject" : "send", iov, desc, count, tx_iov_limit_,
	                            true, silent || (flags & FI_INJECT), sge);
	if (g.n < 0)
		return g.n;
	struct ibv_send_wr wr;
	init_send_wr(wr, sge, g.n, flags, data);
	wr.send_flags = g.inl && g.total ? IBV_SEND_INLINE : 0;
	if (flags & FI_FENCE)
		wr.send_flags |= IBV_SEND_FENCE;
	bool report = !silent && (!tx_selective_ || (flags & FI_COMPLETION));
	return post_tx_wr(&wr, context, FI_SEND | FI_MSG, g.total, report,
	                  (flags & credit_priority_flags) != 0);
}

__attribute__((always_inline)) inline ssize_t ep::post_recv(const struct iovec *iov, void **desc,
                                                            size_t count, void *context,
                                                            uint64_t flags) noexcept
{
	if (__builtin_expect(flags & ~rx_flag_bits, 0))
		return bad_rx_flags(flags);
	struct ibv_sge sge[max_sge_per_wr + 2];
	size_t total = 0;
	const int first = rx_hidden_stride_ ? 1 : 0; /* sge[0]: the hidden part, if any */
	int n = check_iov("recv", iov, desc, count, rx_iov_limit_, true, sge + first, &total);
	if (n < 0)
		return n;
	int nsge = n + first;
	if (rx_spill_.length)
		sge[nsge++] = rx_spill_;
	uint64_t grant = 0;
	{
		util::lock_guard<util::fast_mutex> lock(rx_mutex_);
		if (__builtin_expect(!enabled_, 0))
			return rx_not_enabled();
		wr_ring &ring = *rx_;
		wr_slot *slot = ring.claim();
		if (!slot)
			return -FI_EAGAIN;
		slot->context = context;
		slot->flags = FI_RECV | FI_MSG;
		slot->len = total;
		slot->report = !rx_selective_ || (flags & FI_COMPLETION);
		if (first) {
			sge[0].addr = rx_hidden_base_ + ring.head * rx_hidden_stride_;
			sge[0].length = rx_hidden_stride_;
			sge[0].lkey = rx_hidden_lkey_;
		}
		slot->buf =
		    nsge > 0 ? reinterpret_cast<const void *>(static_cast<uintptr_t>(sge[0].addr))
		             : nullptr;
		struct ibv_recv_wr wr;
		wr.next = nullptr;
		wr.wr_id = reinterpret_cast<uintptr_t>(slot);
		wr.sg_list = sge;
		wr.num_sge = nsge;
		struct ibv_recv_wr *bad = nullptr;
		if (int ret = ibv_post_recv(qp_, &wr, &bad); __builtin_expect(ret != 0, 0))
			return rx_post_failed(ret);
		ring.commit();
		/* ofi_rxm's flow control, once on (enable_credit_flow counts the receives posted
		 * before from the ring): each receive counts towards the next grant */
		if (__builtin_expect(rx_credits_.enabled(), 0))
			grant = rx_credits_.posted();
	}
	if (__builtin_expect(grant != 0, 0))
		grant_credits(grant); /* outside the lock */
	return FI_SUCCESS;
}

ssize_t ep::inject(const void *buf, size_t len, uint64_t data, uint64_t flags) noexcept
{
	/* what gather_tx finds for one buffer that fits inline, without its other cases */
	if (__builtin_expect(!buf || len == 0 || len > inject_size_ || len > max_msg_size_ ||
	                         len > UINT32_MAX || tx_iov_limit_ == 0 || (flags & no_tx_flags_),
	                     0)) {
		struct iovec iov = {const_cast<void *>(buf), len};
		return post_send(&iov, nullptr, 1, data, nullptr, flags, true);
	}
	struct ibv_sge sge;
	sge.addr = reinterpret_cast<uintptr_t>(buf);
	sge.length = static_cast<uint32_t>(len);
	sge.lkey = 0;
	struct ibv_send_wr wr;
	init_send_wr(wr, &sge, 1, flags, data);
	wr.send_flags = IBV_SEND_INLINE;
	return post_tx_wr(&wr, nullptr, FI_SEND | FI_MSG, len, false);
}

/* fi_ops_msg receives: the same for every endpoint kind (ep_dgram.cpp uses them too) */
ssize_t ep_recv(struct fid_ep *fid, void *buf, size_t len, void *desc, fi_addr_t,
                void *context) noexcept
{
	struct iovec iov = {buf, len};
	ep *e = ep_of(fid);
	return e->post_recv(&iov, &desc, 1, context, e->rx_op_flags());
}

ssize_t ep_recvv(struct fid_ep *fid, const struct iovec *iov, void **desc, size_t count, fi_addr_t,
                 void *context) noexcept
{
	ep *e = ep_of(fid);
	return e->post_recv(iov, desc, count, context, e->rx_op_flags());
}

ssize_t ep_recvmsg(struct fid_ep *fid, const struct fi_msg *msg, uint64_t flags) noexcept
{
	if (!msg) {
		FI_WARN(&prov, FI_LOG_EP_DATA, "fi_recvmsg: msg is NULL\n");
		return -FI_EINVAL;
	}
	return ep_of(fid)->post_recv(msg->msg_iov, msg->desc, msg->iov_count, msg->context, flags);
}

namespace
{

/* fi_ops_msg */
ssize_t msg_send(struct fid_ep *fid, const void *buf, size_t len, void *desc, fi_addr_t,
                 void *context) noexcept
{
	struct iovec iov = {const_cast<void *>(buf), len};
	ep *e = ep_of(fid);
	return e->post_send(&iov, &desc, 1, 0, context, e->tx_op_flags());
}

ssize_t msg_sendv(struct fid_ep *fid, const struct iovec *iov, void **desc, size_t count, fi_addr_t,
                  void *context) noexcept
{
	ep *e = ep_of(fid);
	return e->post_send(iov, desc, count, 0, context, e->tx_op_flags());
}

ssize_t msg_sendmsg(struct fid_ep *fid, const struct fi_msg *msg, uint64_t flags) noexcept
{
	if (!msg) {
		FI_WARN(&prov, FI_LOG_EP_DATA, "fi_sendmsg: msg is NULL\n");
		return -FI_EINVAL;
	}
	return ep_of(fid)->post_send(msg->msg_iov, msg->desc, msg->iov_count, msg->data,
	                             msg->context, flags);
}

ssize_t msg_inject(struct fid_ep *fid, const void *buf, size_t len, fi_addr_t) noexcept
{
	return ep_of(fid)->inject(buf, len, 0, 0);
}

ssize_t msg_senddata(struct fid_ep *fid, const void *buf, size_t len, void *desc, uint64_t data,
                     fi_addr_t, void *context) noexcept
{
	struct iovec iov = {const_cast<void *>(buf), len};
	ep *e = ep_of(fid);
	return e->post_send(&iov, &desc, 1, data, context, e->tx_op_flags() | FI_REMOTE_CQ_DATA);
}

ssize_t msg_injectdata(struct fid_ep *fid, const void *buf, size_t len, uint64_t data,
                       fi_addr_t) noexcept
{
	return ep_of(fid)->inject(buf, len, data, FI_REMOTE_CQ_DATA);
}

} // namespace

struct fi_ops_msg ep_msg_ops = {
    .size = sizeof(struct fi_ops_msg),
    .recv = ep_recv,
    .recvv = ep_recvv,
    .recvmsg = ep_recvmsg,
    .send = msg_send,
    .sendv = msg_sendv,
    .sendmsg = msg_sendmsg,
    .inject = msg_inject,
    .senddata = msg_senddata,
    .injectdata = msg_injectdata,
};

} // namespace vwait
