/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* vwait FI_EP_DGRAM endpoints: a UD QP on the endpoint base, addressed through an AV. */
#ifndef VWAIT_EP_DGRAM_H
#define VWAIT_EP_DGRAM_H

#include "vwait/av.h"
#include "vwait/ep.h"
#include "vwait/ud_names.h"
#include "vwait/verbs.h"

#include <cstdint>
#include <vector>

namespace vwait
{

/* A UD endpoint: its QP goes INIT -> RTR -> RTS at fi_enable (no connection); every send
 * names its peer through the bound AV; receives carry the 40-byte GRH in their prefix
 * (FI_MSG_PREFIX), from which fi_cq_readfrom learns the sender. */
class ud_ep final : public ep
{
public:
	ud_ep(domain *dom, info_ptr info, uint8_t port, const union ibv_gid &gid, int sgid_index,
	      uint16_t lid);
	~ud_ep() override;

	/* fi_send and its variants: iov[0] starts with the prefix, which is not sent. */
	ssize_t send(const struct iovec *iov, void **desc, size_t count, fi_addr_t dest,
	             uint64_t data, void *context, uint64_t flags, bool silent = false) noexcept;
	int getname(void *addr, size_t *addrlen) noexcept;

protected:
	int check_enable() noexcept override;
	int create_qp(struct ibv_qp_init_attr &attr, struct ibv_qp **qp) noexcept override;
	int bind_kind(struct fid *bfid, uint64_t flags) noexcept override;

private:
	util::held<av> av_;
	/* where what a receive's buffers cannot hold goes (ep::set_rx_spill): registered once,
	 * shared by every receive; freed after the QP */
	std::vector<uint8_t> spill_;
	verbs::mr_ptr spill_mr_;
	/* without FI_MSG_PREFIX: the GRH of each receive slot, kept here (ep::set_rx_hidden) */
	std::vector<uint8_t> grh_;
	verbs::mr_ptr grh_mr_;
	struct ibv_qp *qp_ = nullptr;
	uint8_t port_;
	ud_name name_ = {};
	size_t mtu_;
	bool source_; /* FI_SOURCE: receives report their sender */
	bool prefix_; /* FI_MSG_PREFIX: the application's buffers hold the GRH */
	/* with a service in its source address: answers for name_ on that UDP port (stopped
	 * first at close) */
	ud_name_service names_;
};

} // namespace vwait

#endif
