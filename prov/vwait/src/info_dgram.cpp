/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* fi_getinfo's FI_EP_DGRAM part: one info per device and active port, a UD QP's attributes
 * (FI_MSG_PREFIX with the 40-byte GRH, max_msg_size = the port's active MTU), named by
 * FI_ADDR_IB_UD addresses (fi_addr_ib_ud://...). A node that is not such a name, with a
 * service, is asked for the name of the endpoint that serves it (ud_names.h). */
#include "config.h"

#include "vwait/av.h"
#include "vwait/fi_deprecated.h"
#include "vwait/info.h"
#include "vwait/ud_names.h"
#include "vwait/util/cq.h"
#include "vwait/verbs.h"
#include "vwait/vwait.h"

#include <rdma/fi_endpoint.h>

#include <algorithm>
#include <cinttypes>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

namespace vwait
{

namespace
{

struct info_free {
	void operator()(struct fi_info *i) const noexcept { fi_freeinfo(i); }
};
using dgram_info_ptr = std::unique_ptr<struct fi_info, info_free>;

constexpr uint64_t dgram_caps =
    FI_MSG | FI_SEND | FI_RECV | FI_SOURCE | FI_LOCAL_COMM | FI_REMOTE_COMM;
constexpr size_t default_size = 256;
constexpr size_t default_iov_limit = 4;

size_t mtu_bytes(enum ibv_mtu mtu) noexcept
{
	return size_t{128} << static_cast<int>(mtu);
}

/* Why hints cannot be met by a DGRAM endpoint of port, or nullptr. */
const char *dgram_unmet(const port_desc &port, size_t mtu, const struct fi_info *hints)
{
	if (!hints)
		return nullptr;
	if (hints->caps & ~dgram_caps)
		return "caps (DGRAM offers FI_MSG, FI_SEND, FI_RECV, FI_SOURCE)";
	if (hints->ep_attr) {
		const struct fi_ep_attr *e = hints->ep_attr;
		int type = util::raw_enum(e->type);
		if (type != FI_EP_UNSPEC && type != FI_EP_DGRAM)
			return "ep_attr->type";
		if (e->protocol != FI_PROTO_UNSPEC && e->protocol != FI_PROTO_IB_UD)
			return "ep_attr->protocol";
		if (e->max_msg_size > mtu)
			return "ep_attr->max_msg_size (above the MTU)";
		if (e->tx_ctx_cnt > 1 || e->rx_ctx_cnt > 1)
			return "ep_attr->*_ctx_cnt";
	}
	size_t max_wr = static_cast<size_t>(port.dev_attr.max_qp_wr);
	size_t max_sge = std::min<size_t>(static_cast<size_t>(port.dev_attr.max_sge), 16);
	if (hints->tx_attr) {
		if (hints->tx_attr->size > max_wr || hints->tx_attr->iov_limit > max_sge ||
		    hints->tx_attr->inject_size > port.max_inline ||
		    (hints->tx_attr->caps & ~dgram_caps) ||
		    hints->tx_attr->msg_order) /* UD: none */
			return "tx_attr";
	}
	if (hints->rx_attr) {
		if (hints->rx_attr->size > max_wr || hints->rx_attr->iov_limit > max_sge ||
		    (hints->rx_attr->caps & ~dgram_caps) || hints->rx_attr->msg_order)
			return "rx_attr";
	}
	if (hints->addr_format != FI_FORMAT_UNSPEC && hints->addr_format != FI_ADDR_IB_UD)
		return "addr_format";
	if (hints->domain_attr) {
		const struct fi_domain_attr *d = hints->domain_attr;
		if (d->caps & ~(FI_LOCAL_COMM | FI_REMOTE_COMM))
			return "domain_attr->caps";
		int threading = util::raw_enum(d->threading);
		if (threading < FI_THREAD_UNSPEC || threading > FI_THREAD_ENDPOINT)
			return "domain_attr->threading";
		for (int progress :
		     {util::raw_enum(d->control_progress), util::raw_enum(d->data_progress)})
			if (progress < FI_PROGRESS_UNSPEC || progress > FI_PROGRESS_MANUAL)
				return "domain_attr->*_progress";
		if (d->name && port.device != d->name)
			return "domain_attr->name";
		int av_type = util::raw_enum(d->av_type);
		if (av_type != FI_AV_UNSPEC && av_type != FI_AV_MAP && av_type != FI_AV_TABLE)
			return "domain_attr->av_type";
		if (d->cq_data_size > sizeof(uint32_t))
			return "domain_attr->cq_data_size";
	}
	if (hints->fabric_attr) {
		if (hints->fabric_attr->name && port.fabric != hints->fabric_attr->name)
			return "fabric_attr->name";
		if (hints->fabric_attr->prov_name &&
		    strcasestr(hints->fabric_attr->prov_name, prov_name) == nullptr)
			return "fabric_attr->prov_name";
	}
	return nullptr;
}

void *dup_name(const ud_name &n, size_t *len)
{
	void *p = malloc(sizeof(n));
	if (!p)
		throw std::bad_alloc();
	memcpy(p, &n, sizeof(n));
	*len = sizeof(n);
	return p;
}

dgram_info_ptr dgram_info(uint32_t version, const port_desc &port, const struct fi_info *hints,
                          const ud_name &src, const ud_name *dst)
{
	size_t mtu =
	    std::min<size_t>(mtu_bytes(port.port_attr.active_mtu), port.port_attr.max_msg_sz);
	if (const char *why = dgram_unmet(port, mtu, hints)) {
		FI_INFO(&prov, FI_LOG_CORE, "%s: DGRAM: hints->%s cannot be met\n",
		        port.device.c_str(), why);
		return nullptr;
	}
	/* FI_MSG_PREFIX when the application takes it (the GRH lands in its buffers); otherwise
	 * the endpoint keeps each receive's GRH itself */
	uint64_t mode = !hints || (hints->mode & FI_MSG_PREFIX) ? FI_MSG_PREFIX : 0;
	int64_t mr_mode = info_mr_mode(version, hints, &mode);
	if (mr_mode < 0) {
		FI_INFO(&prov, FI_LOG_CORE, "%s: DGRAM: hints mr_mode cannot be met\n",
		        port.device.c_str());
		return nullptr;
	}
	/* a QP completes in order; API 2.0 retired comp_order ("set to 0", fi_endpoint(3)) */
	const uint64_t comp_order =
	    FI_VERSION_LT(version, FI_VERSION(2, 0)) ? fi_v1::order_strict : 0;
	dgram_info_ptr info(fi_allocinfo());
	if (!info)
		throw std::bad_alloc();
	const struct fi_tx_attr *htx = hints ? hints->tx_attr : nullptr;
	const struct fi_rx_attr *hrx = hints ? hints->rx_attr : nullptr;
	const struct fi_domain_attr *hdom = hints ? hints->domain_attr : nullptr;
	size_t max_wr = static_cast<size_t>(port.dev_attr.max_qp_wr);
	size_t max_sge = std::min<size_t>(static_cast<size_t>(port.dev_attr.max_sge), 16);
	uint64_t caps = hints && hints->caps ? (hints->caps & dgram_caps) : dgram_caps;
	if ((caps & FI_MSG) && !(caps & (FI_SEND | FI_RECV)))
		caps |= FI_SEND | FI_RECV;
	caps |= FI_MSG | FI_LOCAL_COMM | FI_REMOTE_COMM;

	info->caps = caps;
	info->mode = mode;
	info->addr_format = FI_ADDR_IB_UD;
	info->src_addr = dup_name(src, &info->src_addrlen);
	if (dst)
		info->dest_addr = dup_name(*dst, &info->dest_addrlen);

	info->tx_attr->caps = caps & (FI_MSG | FI_SEND);
	info->tx_attr->mode = mode;
	info->tx_attr->op_flags = htx ? htx->op_flags : 0;
	info->tx_attr->msg_order = 0; /* UD: no ordering */
	info->tx_attr->comp_order = comp_order;
	info->tx_attr->inject_size = std::min(port.max_inline, mtu);
	info->tx_attr->size = htx && htx->size ? htx->size : std::min(default_size, max_wr);
	info->tx_attr->iov_limit =
	    htx && htx->iov_limit ? htx->iov_limit : std::min(default_iov_limit, max_sge);
	info->tx_attr->rma_iov_limit = 0;

	info->rx_attr->caps = caps & (FI_MSG | FI_RECV | FI_SOURCE);
	info->rx_attr->mode = mode;
	info->rx_attr->op_flags = hrx ? hrx->op_flags : 0;
	info->rx_attr->msg_order = 0; /* UD: no ordering */
	info->rx_attr->comp_order = comp_order;
	info->rx_attr->size = hrx && hrx->size ? hrx->size : std::min(default_size, max_wr);
	info->rx_attr->iov_limit =
	    hrx && hrx->iov_limit ? hrx->iov_limit : std::min(default_iov_limit, max_sge);

	info->ep_attr->type = FI_EP_DGRAM;
	info->ep_attr->protocol = FI_PROTO_IB_UD;
	info->ep_attr->protocol_version = 1;
	info->ep_attr->max_msg_size = mtu;
	info->ep_attr->msg_prefix_size = (mode & FI_MSG_PREFIX) ? ud_prefix_size : 0;
	info->ep_attr->tx_ctx_cnt = 1;
	info->ep_attr->rx_ctx_cnt = 1;

	port_attrs(version, info.get(), port, hints, mr_mode);
	info->domain_attr->av_type = hdom && hdom->av_type ? hdom->av_type : FI_AV_UNSPEC;
	return info;
}

/* The UD name of port (QPN 0: fi_getname gives the endpoint's), false if it has no GID. */
bool port_name(const port_desc &port, ud_name *out)
{
	int count = 0;
	verbs::device_list_ptr list = verbs::get_device_list(&count);
	for (int i = 0; i < count; i++) {
		if (port.device != ibv_get_device_name(list[i]))
			continue;
		verbs::context_ptr ctx(ibv_open_device(list[i]));
		if (!ctx)
			return false;
		union ibv_gid gid;
		int index = 0;
		if (ud_local_gid(ctx.get(), port.port_num, &gid, &index) != 0)
			return false;
		*out = ud_name{};
		memcpy(out->gid, gid.raw, sizeof(out->gid));
		out->lid = port.port_attr.lid;
		out->qkey = ud_qkey;
		return true;
	}
	return false;
}

} // namespace

struct fi_info *dgram_port_info(uint32_t version, const port_desc &port,
                                const struct fi_info *hints, const ud_name &src,
                                const ud_name *dst)
{
	return dgram_info(version, port, hints, src, dst).release();
}

bool wants_dgram_only(const struct fi_info *hints) noexcept
{
	return hints && ((hints->ep_attr && util::raw_enum(hints->ep_attr->type) == FI_EP_DGRAM) ||
	                 hints->addr_format == FI_ADDR_IB_UD);
}

int dgram_getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
                  const struct fi_info *hints, bool resolve, struct fi_info **info) noexcept
{
	*info = nullptr;
	if (version < min_api_version)
		return -FI_ENODATA;
	if (hints && hints->ep_attr) {
		int type = util::raw_enum(hints->ep_attr->type);
		if (type != FI_EP_UNSPEC && type != FI_EP_DGRAM)
			return -FI_ENODATA;
	}
	return guard([&] {
		ud_name src_hint = {}, dst = {};
		bool have_src = false, have_dst = false;
		if (hints && hints->addr_format == FI_ADDR_IB_UD) {
			if (hints->src_addr && hints->src_addrlen >= sizeof(ud_name)) {
				memcpy(&src_hint, hints->src_addr, sizeof(ud_name));
				have_src = true;
			}
			if (hints->dest_addr && hints->dest_addrlen >= sizeof(ud_name)) {
				memcpy(&dst, hints->dest_addr, sizeof(ud_name));
				have_dst = true;
			}
		}
		if (node) {
			ud_name n;
			if (ud_name_parse(node, &n)) {
				if (flags & FI_SOURCE) {
					src_hint = n;
					have_src = true;
				} else {
					dst = n;
					have_dst = true;
				}
			} else if (!(flags & FI_SOURCE)) {
				/* an address and a service: ask the endpoint there for its name
				 * (ud_names.h), only when the hints ask for DGRAM alone */
				if (!resolve || !service) {
					FI_INFO(&prov, FI_LOG_CORE,
					        "DGRAM: node \"%s\" is no fi_addr_ib_ud:// name%s: "
					        "no DGRAM info\n",
					        node,
					        resolve ? " and no service is given"
					                : " (FI_EP_DGRAM not asked for)");
					return -FI_ENODATA;
				}
				int ret = ud_name_resolve(node, service, get_params().cm_timeout_ms,
				                          &dst);
				if (ret)
					return ret;
				have_dst = true;
			}
		}
		uint16_t svc = have_src ? src_hint.service : 0;
		if (service && (flags & FI_SOURCE))
			svc = static_cast<uint16_t>(strtoul(service, nullptr, 10));

		dgram_info_ptr head;
		struct fi_info *last = nullptr;
		for (const port_desc &port : info_ports()) {
			if (port.iwarp) { /* iWARP is connected only: no UD QP */
				FI_INFO(&prov, FI_LOG_CORE, "%s is iWARP: no DGRAM endpoint\n",
				        port.device.c_str());
				continue;
			}
			ud_name src;
			if (!port_name(port, &src))
				continue;
			if (have_src && memcmp(src.gid, src_hint.gid, sizeof(src.gid)) != 0)
				continue;
			src.service = svc;
			dgram_info_ptr one =
			    dgram_info(version, port, hints, src, have_dst ? &dst : nullptr);
			if (!one)
				continue;
			struct fi_info *raw = one.release();
			if (last)
				last->next = raw;
			else
				head.reset(raw);
			last = raw;
		}
		if (!head)
			return -FI_ENODATA;
		*info = head.release();
		return FI_SUCCESS;
	});
}

} // namespace vwait
