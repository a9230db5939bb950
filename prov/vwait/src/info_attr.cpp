/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* fi_getinfo's attributes: each endpoint type's defaults as static data (its template), and
 * build_info, which applies a port's limits (work requests, SGEs, inline data, the MTU, what
 * iWARP lacks) and the hints to a template. MSG: an RC QP through rdma_cm. DGRAM: a UD QP
 * (FI_MSG_PREFIX with the 40-byte GRH, max_msg_size = the port's active MTU). */
#include "config.h"

#include "vwait/av.h"
#include "vwait/fi_deprecated.h"
#include "vwait/info_template.h"
#include "vwait/vwait.h"

#include <rdma/fi_endpoint.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

namespace vwait
{

namespace
{

constexpr uint64_t secondary_caps = FI_LOCAL_COMM | FI_REMOTE_COMM;
constexpr uint64_t rc_msg_order = FI_ORDER_RAR | FI_ORDER_RAW | FI_ORDER_RAS | FI_ORDER_WAW |
                                  FI_ORDER_WAS | FI_ORDER_SAW | FI_ORDER_SAS;
constexpr size_t max_sge_reported = 16;

int check_version(uint32_t version, const struct fi_info *) noexcept
{
	return version < min_api_version ? -FI_ENODATA : 0;
}

} // namespace

const ep_template msg_template = {
    .name = "MSG",
    .datagram = false,
    .caps = FI_MSG | FI_SEND | FI_RECV | FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ |
            FI_REMOTE_WRITE | secondary_caps,
    .always_caps = secondary_caps,
    .mode = 0,
    .rx_mode = FI_RX_CQ_DATA, /* a receive that takes remote CQ data consumes a buffer */
    .lax = lax_av_type | lax_shared_ctx,
    .tx = {.caps = FI_MSG | FI_RMA | FI_SEND | FI_READ | FI_WRITE,
           .msg_order = rc_msg_order,
           .inject_size = 256,
           .size = default_queue_size,
           .iov_limit = 4,
           .rma_iov_limit = 1},
    .rx = {.caps = FI_MSG | FI_RMA | FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE,
           .msg_order = rc_msg_order,
           .size = default_queue_size,
           .iov_limit = 4},
    .ep = {.type = FI_EP_MSG,
           .protocol = FI_PROTO_RDMA_CM_IB_RC, /* FI_PROTO_IWARP on iWARP */
           .protocol_version = 1,
           .tx_ctx_cnt = 1,
           .rx_ctx_cnt = 1},
    .addr_formats = {FI_SOCKADDR, FI_SOCKADDR_IN, FI_SOCKADDR_IN6, FI_FORMAT_UNSPEC},
    .check = check_hints,
    .names = msg_names,
};

const ep_template dgram_template = {
    .name = "DGRAM",
    .datagram = true,
    .caps = FI_MSG | FI_SEND | FI_RECV | FI_SOURCE | secondary_caps,
    .always_caps = FI_MSG | secondary_caps,
    .mode = FI_MSG_PREFIX, /* else the endpoint keeps each receive's GRH itself */
    .rx_mode = 0,
    .lax = lax_mr_key_size | lax_group_id,
    .tx = {.caps = FI_MSG | FI_SEND,
           .msg_order = 0,   /* UD: no ordering */
           .inject_size = 0, /* what the QP takes inline, up to the MTU */
           .size = default_queue_size,
           .iov_limit = 4,
           .rma_iov_limit = 0},
    .rx = {.caps = FI_MSG | FI_RECV | FI_SOURCE,
           .msg_order = 0,
           .size = default_queue_size,
           .iov_limit = 4},
    .ep = {.type = FI_EP_DGRAM,
           .protocol = FI_PROTO_IB_UD,
           .protocol_version = 1,
           .tx_ctx_cnt = 1,
           .rx_ctx_cnt = 1},
    .addr_formats = {FI_ADDR_IB_UD, FI_FORMAT_UNSPEC},
    .check = check_version,
    .names = dgram_names,
};

namespace
{

void *dup_addr(const info_addr &a, size_t *len)
{
	*len = a.len;
	void *p = malloc(a.len);
	if (!p)
		throw std::bad_alloc();
	memcpy(p, &a.bytes, a.len);
	return p;
}

char *dup(const std::string &s)
{
	char *p = strdup(s.c_str());
	if (!p)
		throw std::bad_alloc();
	return p;
}

} // namespace

/* The bytes of remote CQ data a send or write carries: verbs' 32-bit immediate data, which
 * iWARP does not have (RFC 5040 has no such field; siw posts no *_WITH_IMM). */
size_t port_cq_data_size(const port_desc &port)
{
	return port.iwarp ? 0 : sizeof(uint32_t);
}

uint32_t port_protocol(const ep_template &t, const port_desc &port)
{
	if (port.iwarp && !t.datagram)
		return FI_PROTO_IWARP;
	return t.ep.protocol;
}

/* RC: the port's largest message; UD: one packet, the active MTU. */
size_t port_max_msg_size(const ep_template &t, const port_desc &port)
{
	if (!t.datagram)
		return port.port_attr.max_msg_sz;
	return std::min<size_t>(link_mtu_bytes(port.port_attr.active_mtu),
	                        port.port_attr.max_msg_sz);
}

namespace
{

/* The inline data the tx side offers: RC the template's (less when the device's QPs take
 * less: siw, 80 bytes at most), or more when asked (up to max_inline, unmet() checked); UD
 * what the QP takes, up to the MTU. */
size_t inject_size(const ep_template &t, const port_desc &port, const struct fi_tx_attr *htx,
                   size_t max_msg)
{
	if (t.datagram)
		return std::min(port.max_inline, max_msg);
	size_t def = port.iwarp ? std::min(t.tx.inject_size, port.max_inline) : t.tx.inject_size;
	return std::max<size_t>(def, htx ? htx->inject_size : 0);
}

/* The domain, fabric and nic attributes of an info of port (any endpoint type). */
void port_attrs(uint32_t version, struct fi_info *info, const port_desc &port,
                const struct fi_info *hints, int64_t mr_mode)
{
	const struct fi_domain_attr *hdom = hints ? hints->domain_attr : nullptr;
	info->domain_attr->name = dup(port.device);
	info->domain_attr->threading = hdom && hdom->threading ? hdom->threading : FI_THREAD_SAFE;
	info->domain_attr->control_progress =
	    hdom && hdom->control_progress ? hdom->control_progress : FI_PROGRESS_AUTO;
	info->domain_attr->data_progress =
	    hdom && hdom->data_progress ? hdom->data_progress : FI_PROGRESS_AUTO;
	info->domain_attr->resource_mgmt = FI_RM_ENABLED;
	info->domain_attr->av_type = FI_AV_UNSPEC;
	info->domain_attr->mr_mode = static_cast<int>(mr_mode);
	info->domain_attr->mr_key_size = sizeof(uint32_t);
	info->domain_attr->cq_data_size = port_cq_data_size(port);
	info->domain_attr->cq_cnt = static_cast<size_t>(port.dev_attr.max_cq);
	info->domain_attr->ep_cnt = static_cast<size_t>(port.dev_attr.max_qp);
	info->domain_attr->tx_ctx_cnt = static_cast<size_t>(port.dev_attr.max_qp);
	info->domain_attr->rx_ctx_cnt = static_cast<size_t>(port.dev_attr.max_qp);
	info->domain_attr->max_ep_tx_ctx = 1;
	info->domain_attr->max_ep_rx_ctx = 1;
	info->domain_attr->mr_iov_limit = 1;
	info->domain_attr->mr_cnt = static_cast<size_t>(port.dev_attr.max_mr);
	/* counters are vwait's own (util::sw_cntr), one per fi_cntr_open, not a device resource: no
	 * device bound; as many as CQs, the resource they count */
	info->domain_attr->cntr_cnt = static_cast<size_t>(port.dev_attr.max_cq);
	info->domain_attr->caps = secondary_caps;

	info->fabric_attr->name = dup(port.fabric);
	info->fabric_attr->prov_version = prov.version;
	info->fabric_attr->api_version = version; /* as the application asked (fi_fabric(3)) */

	info->nic = nic_create(port_nic_desc(port, "/sys"));
}

} // namespace

const char *port_lacks(const ep_template &t, const port_desc &port) noexcept
{
	return t.datagram && port.iwarp ? "is iWARP" : nullptr; /* connected only: no UD QP */
}

info_ptr build_info(uint32_t version, const ep_template &t, const port_desc &port,
                    const struct fi_info *hints, const info_names &names)
{
	uint64_t caps = hinted_caps(t, hints);
	const size_t max_msg = port_max_msg_size(t, port);
	if (const char *why = hints_unmet(t, port, hints, caps)) {
		FI_INFO(&prov, FI_LOG_CORE, "%s: %s: hints->%s cannot be met\n",
		        port.device.c_str(), t.name, why);
		return nullptr;
	}
	uint64_t mode = !hints || (hints->mode & t.mode) ? t.mode : 0;
	int64_t mr_mode = hinted_mr_mode(version, hints, &mode);
	if (mr_mode < 0) {
		FI_INFO(&prov, FI_LOG_CORE,
		        "%s: %s: hints mr_mode 0x%x lacks FI_MR_LOCAL | "
		        "FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY\n",
		        port.device.c_str(), t.name, hints->domain_attr->mr_mode);
		return nullptr;
	}
	uint64_t rx_mode = mode;
	if (t.rx_mode && port_cq_data_size(port) &&
	    (!hints || ((hints->mode | (hints->rx_attr ? hints->rx_attr->mode : 0)) & t.rx_mode)))
		rx_mode |= t.rx_mode;
	/* a QP completes in order; API 2.0 retired comp_order ("set to 0", fi_endpoint(3)) */
	const uint64_t comp_order =
	    FI_VERSION_LT(version, FI_VERSION(2, 0)) ? fi_v1::order_strict : 0;

	info_ptr info(fi_allocinfo());
	if (!info)
		throw std::bad_alloc();
	const struct fi_tx_attr *htx = hints ? hints->tx_attr : nullptr;
	const struct fi_rx_attr *hrx = hints ? hints->rx_attr : nullptr;
	const struct fi_domain_attr *hdom = hints ? hints->domain_attr : nullptr;
	const size_t max_wr = static_cast<size_t>(port.dev_attr.max_qp_wr);
	const size_t max_sge =
	    std::min<size_t>(static_cast<size_t>(port.dev_attr.max_sge), max_sge_reported);

	info->caps = caps;
	info->mode = mode;
	info->addr_format = names.format;
	if (names.src.len)
		info->src_addr = dup_addr(names.src, &info->src_addrlen);
	if (names.dst.len)
		info->dest_addr = dup_addr(names.dst, &info->dest_addrlen);

	struct fi_tx_attr *tx = info->tx_attr;
	tx->caps = caps & t.tx.caps;
	tx->mode = mode;
	tx->op_flags = htx ? htx->op_flags : 0;
	tx->msg_order = t.tx.msg_order;
	tx->comp_order = comp_order;
	tx->inject_size = inject_size(t, port, htx, max_msg);
	tx->size = htx && htx->size ? htx->size : std::min(t.tx.size, max_wr);
	tx->iov_limit = htx && htx->iov_limit ? htx->iov_limit : std::min(t.tx.iov_limit, max_sge);
	tx->rma_iov_limit = t.tx.rma_iov_limit;

	struct fi_rx_attr *rx = info->rx_attr;
	rx->caps = caps & t.rx.caps;
	rx->mode = rx_mode;
	rx->op_flags = hrx ? hrx->op_flags : 0;
	rx->msg_order = t.rx.msg_order;
	rx->comp_order = comp_order;
	rx->size = hrx && hrx->size ? hrx->size : std::min(t.rx.size, max_wr);
	rx->iov_limit = hrx && hrx->iov_limit ? hrx->iov_limit : std::min(t.rx.iov_limit, max_sge);

	struct fi_ep_attr *ep = info->ep_attr;
	ep->type = t.ep.type;
	ep->protocol = port_protocol(t, port);
	ep->protocol_version = t.ep.protocol_version;
	ep->max_msg_size = max_msg;
	ep->msg_prefix_size = (mode & FI_MSG_PREFIX) ? ud_prefix_size : 0;
	const size_t ordered = t.datagram ? 0 : max_msg; /* UD: no ordering */
	ep->max_order_raw_size = ordered;
	ep->max_order_war_size = ordered;
	ep->max_order_waw_size = ordered;
	ep->tx_ctx_cnt = t.ep.tx_ctx_cnt;
	ep->rx_ctx_cnt = t.ep.rx_ctx_cnt;

	port_attrs(version, info.get(), port, hints, mr_mode);
	if (!(t.lax & lax_av_type)) /* a type with an AV */
		info->domain_attr->av_type = hdom && hdom->av_type ? hdom->av_type : FI_AV_UNSPEC;
	return info;
}

} // namespace vwait
