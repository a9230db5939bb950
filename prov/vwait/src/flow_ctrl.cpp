/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* ofi_rxm's credit-based flow control (flow_ctrl.h): the "ofix_flow_ctrl_v1" table that
 * fi_open_ops on a vwait domain hands out, each slot forwarding to the endpoint or domain. */
#include "config.h"

#include "vwait/domain.h"
#include "vwait/ep.h"
#include "vwait/flow_ctrl.h"
#include "vwait/vwait.h"

#include <cinttypes>

namespace vwait
{

namespace
{

/* the endpoint behind a fid ofi_rxm passed, or nullptr with a warning naming the call */
ep *flow_ep(struct fid_ep *fid, const char *call) noexcept
{
	ep *e = fid ? vwait_ep(&fid->fid) : nullptr;
	if (!e)
		FI_WARN(&prov, FI_LOG_EP_CTRL, "flow control %s: %p is not a vwait endpoint\n",
		        call, static_cast<void *>(fid));
	return e;
}

bool flow_available(struct fid_ep *fid) noexcept
{
	ep *e = flow_ep(fid, "available");
	return e && e->credit_flow_capable();
}

int flow_enable(struct fid_ep *fid, uint64_t threshold) noexcept
{
	ep *e = flow_ep(fid, "enable");
	return e ? e->enable_credit_flow(threshold) : -FI_EINVAL;
}

void flow_add_credits(struct fid_ep *fid, uint64_t credits) noexcept
{
	if (ep *e = flow_ep(fid, "add_credits"))
		e->add_credits(credits);
}

void flow_set_send_handler(struct fid_domain *fid, credit_send_fn fn) noexcept
{
	domain *dom = fid ? vwait_domain(&fid->fid) : nullptr;
	if (!dom) {
		FI_WARN(&prov, FI_LOG_DOMAIN,
		        "flow control set_send_handler: %p is not a vwait domain\n",
		        static_cast<void *>(fid));
		return;
	}
	dom->set_credit_sender(fn);
}

} // namespace

struct flow_ctrl_ops_v1 flow_ctrl_ops = {
    .size = sizeof(struct flow_ctrl_ops_v1),
    .available = flow_available,
    .enable = flow_enable,
    .add_credits = flow_add_credits,
    .set_send_handler = flow_set_send_handler,
};

} // namespace vwait
