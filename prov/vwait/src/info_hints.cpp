/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* fi_getinfo's hints against an endpoint type on a port: the caps and mr_mode they ask, and
 * why they cannot be met (one check for every type: the template says what it offers). */
#include "config.h"

#include "vwait/fi_deprecated.h"
#include "vwait/info_template.h"
#include "vwait/util/object.h"
#include "vwait/vwait.h"

#include <rdma/fi_endpoint.h>

#include <algorithm>
#include <cstring>

namespace vwait
{

namespace
{

constexpr uint64_t secondary_caps = FI_LOCAL_COMM | FI_REMOTE_COMM;
constexpr uint64_t required_mr_mode =
    FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
constexpr uint64_t local_mr_mode = fi_v1::local_mr; /* the pre-1.5 spelling of FI_MR_LOCAL */

/* A context count the hints ask: one, or shared when the type takes that. */
bool ctx_cnt_ok(const ep_template &t, size_t cnt)
{
	return cnt <= 1 || ((t.lax & lax_shared_ctx) && cnt == FI_SHARED_CONTEXT);
}

} // namespace

/* The caps to report: what was asked (a primary cap without direction bits gets both), or
 * everything the type offers. */
uint64_t hinted_caps(const ep_template &t, const struct fi_info *hints)
{
	if (!hints || !hints->caps)
		return t.caps | t.always_caps;
	uint64_t caps = hints->caps & t.caps;
	if ((caps & FI_MSG) && !(caps & (FI_SEND | FI_RECV)))
		caps |= FI_SEND | FI_RECV;
	if ((caps & FI_RMA) && !(caps & (FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE)))
		caps |= FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
	return caps | t.always_caps;
}

/* mr_mode as the application speaks it; -1 when it cannot be met. */
int64_t hinted_mr_mode(uint32_t version, const struct fi_info *hints, uint64_t *mode)
{
	if (!hints || !hints->domain_attr) {
		if (!FI_VERSION_LT(version, FI_VERSION(1, 5)))
			return static_cast<int64_t>(required_mr_mode);
		*mode |= local_mr_mode;
		return fi_v1::mr_basic;
	}
	int user = hints->domain_attr->mr_mode;
	bool old = FI_VERSION_LT(version, FI_VERSION(1, 5)) || user == fi_v1::mr_basic ||
	           user == fi_v1::mr_scalable;
	if (old) {
		if (user == fi_v1::mr_scalable)
			return -1;
		if (!(hints->mode & local_mr_mode))
			return -1;
		*mode |= local_mr_mode;
		return fi_v1::mr_basic;
	}
	/* From 1.5 on, FI_LOCAL_MR in mode means nothing beside an mr_mode of bits
	 * (fi_getinfo(3)): only the bits the application set count, and the answer has no
	 * other (fabtests getinfo mr_mode: never a bit the hints did not ask for). */
	uint64_t have = static_cast<uint64_t>(user);
	if ((have & required_mr_mode) != required_mr_mode)
		return -1;
	return static_cast<int64_t>(required_mr_mode);
}

bool takes_format(const ep_template &t, uint32_t format)
{
	if (format == FI_FORMAT_UNSPEC)
		return true;
	for (uint32_t f : t.addr_formats)
		if (f != FI_FORMAT_UNSPEC && f == format)
			return true;
	return false;
}

const char *hints_unmet(const ep_template &t, const port_desc &port, const struct fi_info *hints,
                        uint64_t caps)
{
	if (!hints)
		return nullptr;
	if (hints->caps & ~t.caps)
		return "caps";
	if (!(caps & (FI_MSG | FI_RMA)))
		return "caps (neither FI_MSG nor FI_RMA)";
	if (const struct fi_ep_attr *e = hints->ep_attr) {
		int type = util::raw_enum(e->type); /* an application's value may be no enum */
		if (type != FI_EP_UNSPEC && type != util::raw_enum(t.ep.type))
			return "ep_attr->type";
		if (e->protocol != FI_PROTO_UNSPEC && e->protocol != port_protocol(t, port))
			return "ep_attr->protocol";
		if (e->max_msg_size > port_max_msg_size(t, port))
			return t.datagram ? "ep_attr->max_msg_size (above the MTU)"
			                  : "ep_attr->max_msg_size";
		if (!ctx_cnt_ok(t, e->tx_ctx_cnt))
			return "ep_attr->tx_ctx_cnt";
		if (!ctx_cnt_ok(t, e->rx_ctx_cnt))
			return "ep_attr->rx_ctx_cnt";
	}
	size_t max_wr = static_cast<size_t>(port.dev_attr.max_qp_wr);
	size_t max_sge = std::min<size_t>(static_cast<size_t>(port.dev_attr.max_sge), 16);
	if (const struct fi_tx_attr *tx = hints->tx_attr) {
		if (tx->size > max_wr)
			return "tx_attr->size";
		if (tx->iov_limit > max_sge)
			return "tx_attr->iov_limit";
		if ((t.caps & FI_RMA) && tx->rma_iov_limit > t.tx.rma_iov_limit)
			return "tx_attr->rma_iov_limit";
		if (tx->inject_size > port.max_inline)
			return "tx_attr->inject_size";
		if (tx->caps & ~t.caps)
			return "tx_attr->caps";
		if (tx->msg_order & ~t.tx.msg_order)
			return "tx_attr->msg_order";
	}
	if (const struct fi_rx_attr *rx = hints->rx_attr) {
		if (rx->size > max_wr)
			return "rx_attr->size";
		if (rx->iov_limit > max_sge)
			return "rx_attr->iov_limit";
		if (rx->caps & ~t.caps)
			return "rx_attr->caps";
		if (rx->msg_order & ~t.rx.msg_order)
			return "rx_attr->msg_order";
	}
	if (!takes_format(t, hints->addr_format))
		return "addr_format";
	if (const struct fi_domain_attr *d = hints->domain_attr) {
		if (d->caps & ~secondary_caps)
			return "domain_attr->caps";
#if FI_MAJOR_VERSION >= 2
		if (!(t.lax & lax_group_id) && d->max_group_id) /* no peer groups (fi_av(3)) */
			return "domain_attr->max_group_id";
#endif
		int threading = util::raw_enum(d->threading);
		if (threading < FI_THREAD_UNSPEC || threading > FI_THREAD_ENDPOINT)
			return "domain_attr->threading";
		for (int progress :
		     {util::raw_enum(d->control_progress), util::raw_enum(d->data_progress)})
			if (progress < FI_PROGRESS_UNSPEC || progress > FI_PROGRESS_MANUAL)
				return "domain_attr->*_progress";
		if (d->name && port.device != d->name)
			return "domain_attr->name";
		if (!(t.lax & lax_mr_key_size) && d->mr_key_size > sizeof(uint32_t))
			return "domain_attr->mr_key_size";
		if (d->cq_data_size > port_cq_data_size(port))
			return port.iwarp
			           ? "domain_attr->cq_data_size (iWARP has no immediate data)"
			           : "domain_attr->cq_data_size";
		int av_type = util::raw_enum(d->av_type);
		if (!(t.lax & lax_av_type) && av_type != FI_AV_UNSPEC && av_type != FI_AV_MAP &&
		    av_type != FI_AV_TABLE)
			return "domain_attr->av_type";
	}
	if (const struct fi_fabric_attr *f = hints->fabric_attr) {
		if (f->name && port.fabric != f->name)
			return "fabric_attr->name";
		if (f->prov_name && strcasestr(f->prov_name, prov_name) == nullptr)
			return "fabric_attr->prov_name";
	}
	return nullptr;
}

} // namespace vwait
