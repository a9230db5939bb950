/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* The vwait domain: the rdma_cm context of one verbs device and a protection domain on it.
 * It opens CQs, counters, endpoints and memory regions (mr.cpp). */
#include "config.h"

#include "vwait/av.h"
#include "vwait/cntr.h"
#include "vwait/cq.h"
#include "vwait/domain.h"
#include "vwait/ep.h"
#include "vwait/util/enosys.h"
#include "vwait/util/fd.h"
#include "vwait/util/poll.h"
#include "vwait/vwait.h"

#include <cstring>
#include <memory>

namespace vwait
{

domain::domain(fabric *fab, verbs::cm_devices_ptr devices, struct ibv_context *ctx,
               verbs::pd_ptr pd, const struct ibv_device_attr &attr, uint32_t api_version)
    : fabric_(fab), devices_(std::move(devices)), ctx_(ctx), pd_(std::move(pd)), attr_(attr),
      api_version_(api_version), channels_(ctx, &domain::async_source, this)
{
	if (verbs::is_siw(ctx, attr))
		siw_plug_ = verbs::siw_key_plug(ctx);
	mr_cache_ = mr_cache_open(this); /* after pd_: the cache registers on it */
}

domain::~domain()
{
	/* every cached registration deregistered, then the protection domain */
	mr_cache_close(name(), std::move(mr_cache_));
	pd_.reset();
}

void domain::poll_async_events_now_and_then() noexcept
{
	const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
	                        std::chrono::steady_clock::now().time_since_epoch())
	                        .count();
	int64_t next = async_poll_next_ns_.load(std::memory_order_relaxed);
	if (now < next || !async_poll_next_ns_.compare_exchange_strong(
	                      next, now + std::chrono::nanoseconds(async_poll_interval).count(),
	                      std::memory_order_relaxed))
		return;
	poll_async_events();
}

void domain::poll_async_events() noexcept
{
	std::unique_lock<util::mutex> lock(async_mutex_, std::try_to_lock);
	if (!lock.owns_lock())
		return;
	struct ibv_async_event ev;
	while (ibv_get_async_event(ctx_, &ev) == 0) {
		switch (ev.event_type) {
		case IBV_EVENT_CQ_ERR:
			/* rxe raises one per lost entry: the CQ warns once. The CQ is woken: its
			 * next progress() queues the FI_EOVERRUN error that ends a blocked read
			 * (the CQ cannot be destroyed before this event is acked). */
			if (ev.element.cq && ev.element.cq->cq_context) {
				verbs_cq *q = verbs_cq::from_context(ev.element.cq->cq_context);
				if (q->set_overrun()) {
					FI_WARN(&prov, FI_LOG_CQ,
					        "%s: completion queue overrun (IBV_EVENT_CQ_ERR), "
					        "completions were lost\n",
					        name());
					q->notify();
				}
			}
			break;
		case IBV_EVENT_DEVICE_FATAL:
			/* What is posted is lost; the application learns it from the EQ
			 * (RDMA_CM_EVENT_DEVICE_REMOVAL: FI_ENODEV) and from flushed work. */
			FI_WARN(&prov, FI_LOG_DOMAIN,
			        "%s: fatal device error (IBV_EVENT_DEVICE_FATAL): close every "
			        "object of this domain\n",
			        name());
			break;
		case IBV_EVENT_PORT_ERR:
			FI_WARN(&prov, FI_LOG_DOMAIN, "%s: port %d is down (IBV_EVENT_PORT_ERR)\n",
			        name(), ev.element.port_num);
			break;
		case IBV_EVENT_QP_FATAL:
		case IBV_EVENT_QP_REQ_ERR:
		case IBV_EVENT_QP_ACCESS_ERR:
			FI_WARN(&prov, FI_LOG_EP_DATA, "%s: QP %u: %s\n", name(),
			        ev.element.qp ? ev.element.qp->qp_num : 0,
			        ibv_event_type_str(ev.event_type));
			break;
		default:
			FI_INFO(&prov, FI_LOG_DOMAIN, "%s: async event %s\n", name(),
			        ibv_event_type_str(ev.event_type));
			break;
		}
		ibv_ack_async_event(&ev);
	}
}

namespace
{

/* fi_poll_open: a util poll set that holds the domain while it exists. It drains the
 * completion channels of its verbs CQs (verbs_cq::events_from) and looks only at the CQs they name.
 */
int domain_poll_open(struct fid_domain *domain_fid, struct fi_poll_attr *attr,
                     struct fid_poll **pollset) noexcept
{
	if (!domain_fid) {
		FI_WARN(&prov, FI_LOG_DOMAIN, "fi_poll_open: domain is NULL\n");
		return -FI_EINVAL;
	}
	domain *dom = domain_of(domain_fid);
	dom->hold();
	int ret = util::poll_open(&prov, attr, pollset, [dom] { dom->unhold(); });
	if (ret)
		dom->unhold();
	return ret;
}

int domain_close(struct fid *fid) noexcept
{
	auto *box = domain_box::of(fid);
	if (box->obj->busy()) {
		FI_WARN(&prov, FI_LOG_DOMAIN, "fi_close(domain %s): objects still open\n",
		        box->obj->name());
		return -FI_EBUSY;
	}
	delete box->obj;
	delete box;
	return FI_SUCCESS;
}

/* fi_open_ops on a domain: ofi_rxm's flow control (flow_ctrl.h), unless FI_VWAIT_FLOW_CTRL=0;
 * any other name as on the fabric (FI_VWAIT_WAIT_OPS). */
int domain_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops,
                    void *context) noexcept
{
	if (name && ops && strcmp(name, flow_ctrl_ops_name) == 0) {
		if (!get_params().flow_ctrl) {
			FI_INFO(&prov, FI_LOG_DOMAIN,
			        "fi_open_ops(%s): off (FI_VWAIT_FLOW_CTRL=0)\n", name);
			return -FI_ENOSYS;
		}
		if (flags) {
			FI_WARN(&prov, FI_LOG_DOMAIN, "fi_open_ops(%s): flags 0x%llx must be 0\n",
			        name, static_cast<unsigned long long>(flags));
			return -FI_EBADFLAGS;
		}
		*ops = &flow_ctrl_ops;
		return FI_SUCCESS;
	}
	return fabric_ops_open(fid, name, flags, ops, context);
}

struct fi_ops domain_fi_ops = [] {
	struct fi_ops ops = util::fi_ops_with(domain_close);
	ops.ops_open = domain_ops_open;
	return ops;
}();

struct fi_ops_domain domain_ops = {
    .size = sizeof(struct fi_ops_domain),
    .av_open = av_open,
    .cq_open = cq_open,
    .endpoint = ep_open,
    .scalable_ep = util::unsupported{},
    .cntr_open = cntr_open,
    .poll_open = domain_poll_open,
    .stx_ctx = util::unsupported{},
    .srx_ctx = util::unsupported{},
    .query_atomic = util::unsupported{},
    .query_collective = util::unsupported{},
};

struct fi_ops_mr domain_mr_ops = {
    .size = sizeof(struct fi_ops_mr),
    .reg = mr_reg,
    .regv = mr_regv,
    .regattr = mr_regattr,
};

/* rdma_cm's context of the device called name (it owns the list the context lives in). */
struct ibv_context *find_context(const char *name, verbs::cm_devices_ptr *devices)
{
	int count = 0;
	devices->reset(rdma_get_devices(&count));
	if (!*devices)
		return nullptr;
	for (int i = 0; i < count; i++) {
		struct ibv_context *ctx = (*devices)[i];
		if (strcmp(ibv_get_device_name(ctx->device), name) == 0)
			return ctx;
	}
	return nullptr;
}

} // namespace

domain *vwait_domain(struct fid *fid) noexcept
{
	return domain_box::checked(fid, FI_CLASS_DOMAIN, &domain_fi_ops);
}

int domain_open(struct fid_fabric *fabric_fid, struct fi_info *info, struct fid_domain **out,
                void *context) noexcept
{
	if (!fabric_fid || !info || !out) {
		FI_WARN(&prov, FI_LOG_DOMAIN, "fi_domain: %s is NULL\n",
		        !fabric_fid ? "fabric" : (!info ? "info" : "domain"));
		return -FI_EINVAL;
	}
	*out = nullptr;
	if (!info->domain_attr || !info->domain_attr->name) {
		FI_WARN(&prov, FI_LOG_DOMAIN, "fi_domain: info->domain_attr->name is NULL\n");
		return -FI_EINVAL;
	}
	return guard([&] {
		const char *name = info->domain_attr->name;
		verbs::cm_devices_ptr devices;
		struct ibv_context *ctx = find_context(name, &devices);
		if (!ctx) {
			FI_WARN(&prov, FI_LOG_DOMAIN, "fi_domain: no verbs device named %s\n",
			        name);
			return -FI_ENODEV;
		}
		struct ibv_device_attr attr;
		if (int ret = ibv_query_device(ctx, &attr)) {
			FI_WARN(&prov, FI_LOG_DOMAIN, "ibv_query_device(%s): %s\n", name,
			        strerror(ret));
			return verbs::positive_code(ret);
		}
		verbs::pd_ptr pd(ibv_alloc_pd(ctx));
		if (!pd) {
			int ret = verbs::errno_code();
			FI_WARN(&prov, FI_LOG_DOMAIN, "ibv_alloc_pd(%s): %s\n", name,
			        fi_strerror(-ret));
			return ret;
		}
		/* async events are read without blocking, from the CQ read path */
		if (int ret = util::set_nonblock(ctx->async_fd))
			FI_WARN(&prov, FI_LOG_DOMAIN, "%s: async fd stays blocking: %s\n", name,
			        strerror(-ret));
		auto *fab = fabric_box::of(fabric_fid)->obj;
		auto obj = std::make_unique<domain>(fab, std::move(devices), ctx, std::move(pd),
		                                    attr, fabric_fid->api_version);
		domain_box::hand_out(obj, FI_CLASS_DOMAIN, context, &domain_fi_ops, out,
		                     [](struct fid_domain &f) {
			                     f.ops = &domain_ops;
			                     f.mr = &domain_mr_ops;
		                     });
		return FI_SUCCESS;
	});
}

} // namespace vwait
