/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* The RMA path of an endpoint: fi_read / fi_write and their variants, posted on the endpoint
 * base's send ring (fi_ops_rma). */
#include "config.h"

#include "vwait/ep.h"
#include "vwait/vwait.h"

#include <arpa/inet.h>

#include <cinttypes>

namespace vwait
{

namespace
{

constexpr size_t max_sge_per_wr = 16;
constexpr uint64_t tx_flag_bits =
    FI_COMPLETION | FI_INJECT | FI_REMOTE_CQ_DATA | FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE |
    FI_INJECT_COMPLETE | FI_FENCE | FI_MORE | FI_MSG | FI_RMA | FI_SEND | FI_WRITE | FI_READ;

} // namespace

ssize_t ep::post_rma(bool write, const struct iovec *iov, void **desc, size_t count, uint64_t addr,
                     uint64_t key, uint64_t data, void *context, uint64_t flags,
                     bool silent) noexcept
{
	const char *op = write ? "write" : "read";
	if (flags & ~tx_flag_bits) {
		FI_WARN(&prov, FI_LOG_EP_DATA, "%s: flags 0x%" PRIx64 " not supported\n", op,
		        flags);
		return -FI_EBADFLAGS;
	}
	if (key > UINT32_MAX) {
		FI_WARN(&prov, FI_LOG_EP_DATA, "%s: key 0x%" PRIx64 " is not a verbs rkey\n", op,
		        key);
		return -FI_EINVAL;
	}
	if (!write && (flags & FI_REMOTE_CQ_DATA)) {
		FI_WARN(&prov, FI_LOG_EP_DATA, "read: FI_REMOTE_CQ_DATA is for writes\n");
		return -FI_EBADFLAGS;
	}
	if (flags & no_tx_flags_) {
		FI_WARN(&prov, FI_LOG_EP_DATA,
		        "write: remote CQ data (FI_REMOTE_CQ_DATA) needs immediate data, which an "
		        "iWARP device does not have (cq_data_size 0)\n");
		return -FI_EOPNOTSUPP;
	}
	struct ibv_sge sge[max_sge_per_wr];
	const tx_sges g = gather_tx(silent ? "inject_write" : op, iov, desc, count,
	                            write ? rma_iov_limit_ : read_iov_limit_, write, silent, sge);
	if (g.n < 0)
		return g.n;
	struct ibv_send_wr wr = {};
	wr.sg_list = sge;
	wr.num_sge = g.n;
	wr.wr.rdma.remote_addr = addr;
	wr.wr.rdma.rkey = static_cast<uint32_t>(key);
	if (write) {
		if (flags & FI_REMOTE_CQ_DATA) {
			wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
			wr.imm_data = htonl(static_cast<uint32_t>(data));
		} else {
			wr.opcode = IBV_WR_RDMA_WRITE;
		}
		if (g.inl && g.total)
			wr.send_flags |= IBV_SEND_INLINE;
	} else {
		wr.opcode = IBV_WR_RDMA_READ;
	}
	if (flags & FI_FENCE)
		wr.send_flags |= IBV_SEND_FENCE;
	bool report = !silent && (!tx_selective_ || (flags & FI_COMPLETION));
	return post_tx_wr(&wr, context, FI_RMA | (write ? FI_WRITE : FI_READ), g.total, report);
}

namespace
{

/* fi_ops_rma */
ssize_t rma_read(struct fid_ep *fid, void *buf, size_t len, void *desc, fi_addr_t, uint64_t addr,
                 uint64_t key, void *context) noexcept
{
	struct iovec iov = {buf, len};
	ep *e = ep_of(fid);
	return e->post_rma(false, &iov, &desc, 1, addr, key, 0, context, e->tx_op_flags());
}

ssize_t rma_readv(struct fid_ep *fid, const struct iovec *iov, void **desc, size_t count, fi_addr_t,
                  uint64_t addr, uint64_t key, void *context) noexcept
{
	ep *e = ep_of(fid);
	return e->post_rma(false, iov, desc, count, addr, key, 0, context, e->tx_op_flags());
}

ssize_t rma_msg(struct fid_ep *fid, const struct fi_msg_rma *msg, uint64_t flags, bool write,
                const char *op) noexcept
{
	if (!msg || (msg->rma_iov_count && !msg->rma_iov) || msg->rma_iov_count > 1) {
		FI_WARN(&prov, FI_LOG_EP_DATA, "%s: msg %p rma_iov_count %zu (rma_iov_limit 1)\n",
		        op, static_cast<const void *>(msg), msg ? msg->rma_iov_count : 0);
		return -FI_EINVAL;
	}
	uint64_t addr = msg->rma_iov_count ? msg->rma_iov[0].addr : 0;
	uint64_t key = msg->rma_iov_count ? msg->rma_iov[0].key : 0;
	return ep_of(fid)->post_rma(write, msg->msg_iov, msg->desc, msg->iov_count, addr, key,
	                            msg->data, msg->context, flags);
}

ssize_t rma_readmsg(struct fid_ep *fid, const struct fi_msg_rma *msg, uint64_t flags) noexcept
{
	return rma_msg(fid, msg, flags, false, "fi_readmsg");
}

ssize_t rma_write(struct fid_ep *fid, const void *buf, size_t len, void *desc, fi_addr_t,
                  uint64_t addr, uint64_t key, void *context) noexcept
{
	struct iovec iov = {const_cast<void *>(buf), len};
	ep *e = ep_of(fid);
	return e->post_rma(true, &iov, &desc, 1, addr, key, 0, context, e->tx_op_flags());
}

ssize_t rma_writev(struct fid_ep *fid, const struct iovec *iov, void **desc, size_t count,
                   fi_addr_t, uint64_t addr, uint64_t key, void *context) noexcept
{
	ep *e = ep_of(fid);
	return e->post_rma(true, iov, desc, count, addr, key, 0, context, e->tx_op_flags());
}

ssize_t rma_writemsg(struct fid_ep *fid, const struct fi_msg_rma *msg, uint64_t flags) noexcept
{
	return rma_msg(fid, msg, flags, true, "fi_writemsg");
}

ssize_t rma_inject(struct fid_ep *fid, const void *buf, size_t len, fi_addr_t, uint64_t addr,
                   uint64_t key) noexcept
{
	struct iovec iov = {const_cast<void *>(buf), len};
	return ep_of(fid)->post_rma(true, &iov, nullptr, 1, addr, key, 0, nullptr, 0, true);
}

ssize_t rma_writedata(struct fid_ep *fid, const void *buf, size_t len, void *desc, uint64_t data,
                      fi_addr_t, uint64_t addr, uint64_t key, void *context) noexcept
{
	struct iovec iov = {const_cast<void *>(buf), len};
	ep *e = ep_of(fid);
	return e->post_rma(true, &iov, &desc, 1, addr, key, data, context,
	                   e->tx_op_flags() | FI_REMOTE_CQ_DATA);
}

ssize_t rma_injectdata(struct fid_ep *fid, const void *buf, size_t len, uint64_t data, fi_addr_t,
                       uint64_t addr, uint64_t key) noexcept
{
	struct iovec iov = {const_cast<void *>(buf), len};
	return ep_of(fid)->post_rma(true, &iov, nullptr, 1, addr, key, data, nullptr,
	                            FI_REMOTE_CQ_DATA, true);
}

} // namespace

struct fi_ops_rma ep_rma_ops = {
    .size = sizeof(struct fi_ops_rma),
    .read = rma_read,
    .readv = rma_readv,
    .readmsg = rma_readmsg,
    .write = rma_write,
    .writev = rma_writev,
    .writemsg = rma_writemsg,
    .inject = rma_inject,
    .writedata = rma_writedata,
    .injectdata = rma_injectdata,
};

} // namespace vwait
