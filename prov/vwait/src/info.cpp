/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* fi_getinfo: one info per verbs device, active port and endpoint type (FI_EP_MSG), with the
 * device's limits, filtered by the hints. Addresses are resolved through rdma_cm, which also
 * tells which device an address belongs to. */
#include "config.h"

#include "vwait/cm.h"
#include "vwait/ep.h"
#include "vwait/fi_deprecated.h"
#include "vwait/info.h"
#include "vwait/nic.h"
#include "vwait/util/thread_safety.h"
#include "vwait/verbs.h"
#include "vwait/vwait.h"

#include <rdma/fi_endpoint.h>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <climits>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace vwait
{

namespace
{

/* What probe_max_inline found, per device name, until the provider's cleanup. On the heap:
 * libfabric calls the cleanup from its own destructor, after this library's static
 * destructors have run (std::mutex's is trivial). */
util::mutex inline_mutex{lock_level::alone};
std::vector<std::pair<std::string, size_t>> *inline_known = nullptr;

/* The largest max_inline_data an RC QP of this device accepts (verbs has no attribute for
 * it): found by creating QPs, once per device while the provider is loaded. */
size_t probe_max_inline(struct ibv_context *ctx, const std::string &device)
{
	util::lock_guard<util::mutex> lock(inline_mutex);
	if (!inline_known)
		inline_known = new std::vector<std::pair<std::string, size_t>>;
	for (const auto &k : *inline_known)
		if (k.first == device)
			return k.second;
	size_t found = 0;
	verbs::pd_ptr pd(ibv_alloc_pd(ctx));
	verbs::cq_ptr cq(pd ? ibv_create_cq(ctx, 1, nullptr, nullptr, 0) : nullptr);
	for (size_t want : {1024, 512, 256, 128, 64, 32}) {
		if (!cq)
			break;
		struct ibv_qp_init_attr attr = {};
		attr.send_cq = cq.get();
		attr.recv_cq = cq.get();
		attr.cap.max_send_wr = 1;
		attr.cap.max_recv_wr = 1;
		attr.cap.max_send_sge = 1;
		attr.cap.max_recv_sge = 1;
		attr.cap.max_inline_data = static_cast<uint32_t>(want);
		attr.qp_type = IBV_QPT_RC;
		struct ibv_qp *qp = ibv_create_qp(pd.get(), &attr);
		if (qp) {
			found = std::max<size_t>(want, attr.cap.max_inline_data);
			ibv_destroy_qp(qp);
			break;
		}
	}
	FI_INFO(&prov, FI_LOG_CORE, "%s: max inline data %zu\n", device.c_str(), found);
	inline_known->emplace_back(device, found);
	return found;
}

std::vector<port_desc> active_ports()
{
	std::vector<port_desc> ports;
	int count = 0;
	verbs::device_list_ptr list = verbs::get_device_list(&count);
	if (count == 0) {
		FI_INFO(&prov, FI_LOG_CORE,
		        "no verbs device found (ibv_get_device_list: %s); vwait offers nothing\n",
		        errno ? strerror(errno) : "empty list");
		return ports;
	}
	const std::string &only = get_params().device;
	for (int i = 0; i < count; i++) {
		const char *name = ibv_get_device_name(list[i]);
		if (!only.empty() && only != name)
			continue;
		verbs::context_ptr ctx(ibv_open_device(list[i]));
		if (!ctx) {
			FI_WARN(&prov, FI_LOG_CORE, "ibv_open_device(%s): %s\n", name,
			        strerror(errno));
			continue;
		}
		struct ibv_device_attr dev_attr;
		if (int ret = ibv_query_device(ctx.get(), &dev_attr)) {
			FI_WARN(&prov, FI_LOG_CORE, "ibv_query_device(%s): %s\n", name,
			        strerror(ret));
			continue;
		}
		for (uint8_t p = 1; p <= dev_attr.phys_port_cnt; p++) {
			struct ibv_port_attr port_attr;
			if (ibv_query_port(ctx.get(), p, &port_attr) != 0)
				continue;
			if (port_attr.state != IBV_PORT_ACTIVE) {
				FI_INFO(&prov, FI_LOG_CORE, "%s port %u is not active\n", name, p);
				continue;
			}
			union ibv_gid gid;
			if (ibv_query_gid(ctx.get(), p, 0, &gid) != 0)
				continue;
			char fabric[32];
			snprintf(fabric, sizeof(fabric), "IB-0x%" PRIx64,
			         static_cast<uint64_t>(be64toh(gid.global.subnet_prefix)));
			size_t max_inline = probe_max_inline(ctx.get(), name);
			bool iwarp = ctx->device->transport_type == IBV_TRANSPORT_IWARP;
			ports.push_back(
			    port_desc{name, fabric, p, dev_attr, port_attr, max_inline, iwarp});
		}
	}
	if (ports.empty())
		FI_INFO(&prov, FI_LOG_CORE, "no verbs device has an active port\n");
	return ports;
}

/* An address with the device rdma_cm binds it to. */
struct cm_addr {
	struct sockaddr_storage addr = {};
	std::string device;
	bool valid() const noexcept { return addr.ss_family != 0; }
	const struct sockaddr *sa() const noexcept
	{
		return reinterpret_cast<const struct sockaddr *>(&addr);
	}
};

cm_addr make_addr(const struct sockaddr *sa, struct ibv_context *verbs)
{
	cm_addr a;
	memcpy(&a.addr, sa, sockaddr_size(sa));
	if (verbs)
		a.device = ibv_get_device_name(verbs->device);
	return a;
}

/* Binds sa to learn its device (empty when the address is not on an RDMA device). */
cm_addr bind_probe(const struct sockaddr *sa)
{
	verbs::cm_id_ptr id;
	if (verbs::create_id(nullptr, nullptr, &id) != 0)
		return {};
	if (rdma_bind_addr(id.get(), const_cast<struct sockaddr *>(sa)) != 0 || !id->verbs)
		return {};
	return make_addr(sa, id->verbs);
}

/* The IP addresses of the host's interfaces that rdma_cm binds to an RDMA device. */
std::vector<cm_addr> device_addrs()
{
	std::vector<cm_addr> out;
	struct ifaddrs *ifs = nullptr;
	if (getifaddrs(&ifs) != 0)
		return out;
	std::unique_ptr<struct ifaddrs, void (*)(struct ifaddrs *)> owner(ifs, freeifaddrs);
	for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
		if (!i->ifa_addr ||
		    (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6))
			continue;
		cm_addr a = bind_probe(i->ifa_addr);
		if (!a.device.empty())
			out.push_back(a);
	}
	return out;
}

/* Where the application wants to talk: source and/or destination, and the device of them. */
struct endpoints {
	cm_addr src;
	cm_addr dst;
	std::string device; /* empty: any */
};

void set_port(struct sockaddr_storage *ss, uint16_t port_be)
{
	if (ss->ss_family == AF_INET)
		reinterpret_cast<struct sockaddr_in *>(ss)->sin_port = port_be;
	else if (ss->ss_family == AF_INET6)
		reinterpret_cast<struct sockaddr_in6 *>(ss)->sin6_port = port_be;
}

uint16_t port_of(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return reinterpret_cast<const struct sockaddr_in *>(sa)->sin_port;
	if (sa->sa_family == AF_INET6)
		return reinterpret_cast<const struct sockaddr_in6 *>(sa)->sin6_port;
	return 0;
}

/* -FI_ENODATA when node/service/hints name addresses vwait cannot use. */
int resolve(const char *node, const char *service, uint64_t flags, const struct fi_info *hints,
            endpoints *ep)
{
	const struct sockaddr *hint_src =
	    hints ? static_cast<const struct sockaddr *>(hints->src_addr) : nullptr;
	const struct sockaddr *hint_dst =
	    hints ? static_cast<const struct sockaddr *>(hints->dest_addr) : nullptr;
	const struct sockaddr *src = hint_src;
	const struct sockaddr *dst = hint_dst;
	verbs::addrinfo_ptr ai;
	if (node || service) {
		struct rdma_addrinfo want = {};
		want.ai_port_space = RDMA_PS_TCP;
		bool passive = (flags & FI_SOURCE) || !node;
		if (passive)
			want.ai_flags |= RAI_PASSIVE;
		if (flags & FI_NUMERICHOST)
			want.ai_flags |= RAI_NUMERICHOST;
		struct rdma_addrinfo *res = nullptr;
		if (rdma_getaddrinfo(node, service, &want, &res) != 0) {
			FI_INFO(&prov, FI_LOG_CORE, "rdma_getaddrinfo(%s, %s): %s\n",
			        node ? node : "-", service ? service : "-", strerror(errno));
			return -FI_ENODATA;
		}
		ai.reset(res);
		if (passive)
			src = ai->ai_src_addr;
		else
			dst = ai->ai_dst_addr;
	}
	if (dst) {
		verbs::cm_id_ptr id;
		if (verbs::create_id(nullptr, nullptr, &id) != 0)
			return -FI_ENODATA;
		if (rdma_resolve_addr(id.get(), const_cast<struct sockaddr *>(src),
		                      const_cast<struct sockaddr *>(dst),
		                      get_params().cm_timeout_ms) != 0 ||
		    !id->verbs) {
			FI_INFO(&prov, FI_LOG_CORE, "rdma_resolve_addr: %s\n", strerror(errno));
			return -FI_ENODATA;
		}
		ep->dst = make_addr(dst, id->verbs);
		ep->src = make_addr(rdma_get_local_addr(id.get()), id->verbs);
		/* the source port is the one asked for (0: none): the port this resolving id was
		 * given goes with it, and each endpoint opened from the info binds its own */
		set_port(&ep->src.addr, src ? port_of(src) : 0);
		ep->device = ep->dst.device;
		return 0;
	}
	if (src) {
		bool any = (src->sa_family == AF_INET &&
		            reinterpret_cast<const struct sockaddr_in *>(src)->sin_addr.s_addr ==
		                htonl(INADDR_ANY));
		if (any) {
			/* a port on every device: keep the port, take each device's address */
			ep->src = make_addr(src, nullptr);
			return 0;
		}
		/* a port already in use cannot be probed by binding: probe with port 0 */
		struct sockaddr_storage probe = {};
		memcpy(&probe, src, sockaddr_size(src));
		set_port(&probe, 0);
		cm_addr a = bind_probe(reinterpret_cast<struct sockaddr *>(&probe));
		if (a.device.empty()) {
			FI_INFO(&prov, FI_LOG_CORE, "source address is on no RDMA device\n");
			return -FI_ENODATA;
		}
		ep->src = make_addr(src, nullptr);
		ep->src.device = a.device;
		ep->device = a.device;
	}
	return 0;
}

void *dup_sockaddr(const struct sockaddr *sa, size_t *len)
{
	*len = sockaddr_size(sa);
	void *p = malloc(*len);
	if (!p)
		throw std::bad_alloc();
	memcpy(p, sa, *len);
	return p;
}

char *dup(const std::string &s)
{
	char *p = strdup(s.c_str());
	if (!p)
		throw std::bad_alloc();
	return p;
}

constexpr uint64_t msg_caps = FI_MSG | FI_SEND | FI_RECV;
constexpr uint64_t rma_caps = FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
constexpr uint64_t secondary_caps = FI_LOCAL_COMM | FI_REMOTE_COMM;
constexpr uint64_t all_caps = msg_caps | rma_caps | secondary_caps;
constexpr uint64_t required_mr_mode =
    FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
constexpr uint64_t local_mr_mode = fi_v1::local_mr; /* the pre-1.5 spelling of FI_MR_LOCAL */
constexpr size_t default_size = 256;
constexpr size_t default_iov_limit = 4;
constexpr size_t default_inject_size = 256;
constexpr uint64_t rc_msg_order = FI_ORDER_RAR | FI_ORDER_RAW | FI_ORDER_RAS | FI_ORDER_WAW |
                                  FI_ORDER_WAS | FI_ORDER_SAW | FI_ORDER_SAS;

/* The caps to report: what was asked (a primary cap without direction bits gets both), or
 * everything. */
uint64_t pick_caps(const struct fi_info *hints)
{
	if (!hints || !hints->caps)
		return all_caps;
	uint64_t caps = hints->caps & all_caps;
	if ((caps & FI_MSG) && !(caps & (FI_SEND | FI_RECV)))
		caps |= FI_SEND | FI_RECV;
	if ((caps & FI_RMA) && !(caps & (FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE)))
		caps |= FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
	return caps | secondary_caps;
}

/* mr_mode as the application speaks it; -1 when it cannot be met. */
int64_t pick_mr_mode(uint32_t version, const struct fi_info *hints, uint64_t *mode)
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

uint32_t msg_protocol(const port_desc &port)
{
	return port.iwarp ? FI_PROTO_IWARP : FI_PROTO_RDMA_CM_IB_RC;
}

/* The bytes of remote CQ data a send or write carries: verbs' 32-bit immediate data, which
 * iWARP does not have (RFC 5040 has no such field; siw posts no *_WITH_IMM). */
size_t cq_data_size(const port_desc &port)
{
	return port.iwarp ? 0 : sizeof(uint32_t);
}

/* The default inject size: the usual one, or less when the device's QPs take less inline
 * data (siw: 80 bytes at most, an RC QP asking for more is refused). */
size_t inject_default(const port_desc &port)
{
	return port.iwarp ? std::min(default_inject_size, port.max_inline) : default_inject_size;
}

/* Why hints cannot be met, or nullptr. */
const char *unmet(const port_desc &port, const struct fi_info *hints, uint64_t caps)
{
	if (!hints)
		return nullptr;
	if (hints->caps & ~all_caps)
		return "caps";
	if (!(caps & (FI_MSG | FI_RMA)))
		return "caps (neither FI_MSG nor FI_RMA)";
	if (hints->ep_attr) {
		const struct fi_ep_attr *e = hints->ep_attr;
		int type = util::raw_enum(e->type); /* an application's value may be no enum */
		if (type != FI_EP_UNSPEC && type != FI_EP_MSG)
			return "ep_attr->type";
		if (e->protocol != FI_PROTO_UNSPEC && e->protocol != msg_protocol(port))
			return "ep_attr->protocol";
		if (e->max_msg_size > port.port_attr.max_msg_sz)
			return "ep_attr->max_msg_size";
		if (e->tx_ctx_cnt > 1 && e->tx_ctx_cnt != FI_SHARED_CONTEXT)
			return "ep_attr->tx_ctx_cnt";
		if (e->rx_ctx_cnt > 1 && e->rx_ctx_cnt != FI_SHARED_CONTEXT)
			return "ep_attr->rx_ctx_cnt";
	}
	size_t max_wr = static_cast<size_t>(port.dev_attr.max_qp_wr);
	size_t max_sge = std::min<size_t>(static_cast<size_t>(port.dev_attr.max_sge), 16);
	if (hints->tx_attr) {
		if (hints->tx_attr->size > max_wr)
			return "tx_attr->size";
		if (hints->tx_attr->iov_limit > max_sge)
			return "tx_attr->iov_limit";
		if (hints->tx_attr->rma_iov_limit > 1)
			return "tx_attr->rma_iov_limit";
		if (hints->tx_attr->inject_size > port.max_inline)
			return "tx_attr->inject_size";
		if (hints->tx_attr->caps & ~all_caps)
			return "tx_attr->caps";
		if (hints->tx_attr->msg_order & ~rc_msg_order)
			return "tx_attr->msg_order";
	}
	if (hints->rx_attr) {
		if (hints->rx_attr->size > max_wr)
			return "rx_attr->size";
		if (hints->rx_attr->iov_limit > max_sge)
			return "rx_attr->iov_limit";
		if (hints->rx_attr->caps & ~all_caps)
			return "rx_attr->caps";
		if (hints->rx_attr->msg_order & ~rc_msg_order)
			return "rx_attr->msg_order";
	}
	switch (hints->addr_format) {
	case FI_FORMAT_UNSPEC:
	case FI_SOCKADDR:
	case FI_SOCKADDR_IN:
	case FI_SOCKADDR_IN6:
		break;
	default:
		return "addr_format";
	}
	if (hints->domain_attr) {
		if (hints->domain_attr->caps & ~secondary_caps)
			return "domain_attr->caps";
#if FI_MAJOR_VERSION >= 2
		if (hints->domain_attr->max_group_id) /* no peer groups (fi_av(3)) */
			return "domain_attr->max_group_id";
#endif
		int threading = util::raw_enum(hints->domain_attr->threading);
		if (threading < FI_THREAD_UNSPEC || threading > FI_THREAD_ENDPOINT)
			return "domain_attr->threading";
		for (int progress : {util::raw_enum(hints->domain_attr->control_progress),
		                     util::raw_enum(hints->domain_attr->data_progress)})
			if (progress < FI_PROGRESS_UNSPEC || progress > FI_PROGRESS_MANUAL)
				return "domain_attr->*_progress";
		if (hints->domain_attr->name && port.device != hints->domain_attr->name)
			return "domain_attr->name";
		if (hints->domain_attr->mr_key_size > sizeof(uint32_t))
			return "domain_attr->mr_key_size";
		if (hints->domain_attr->cq_data_size > cq_data_size(port))
			return port.iwarp
			           ? "domain_attr->cq_data_size (iWARP has no immediate data)"
			           : "domain_attr->cq_data_size";
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

info_ptr msg_info(uint32_t version, const port_desc &port, const struct fi_info *hints,
                  const cm_addr &src, const cm_addr &dst)
{
	uint64_t caps = pick_caps(hints);
	if (const char *why = unmet(port, hints, caps)) {
		FI_INFO(&prov, FI_LOG_CORE, "%s: hints->%s cannot be met\n", port.device.c_str(),
		        why);
		return nullptr;
	}
	uint64_t mode = 0;
	int64_t mr_mode = pick_mr_mode(version, hints, &mode);
	/* RC completes in order; API 2.0 retired comp_order ("set to 0", fi_endpoint(3)) */
	const uint64_t comp_order =
	    FI_VERSION_LT(version, FI_VERSION(2, 0)) ? fi_v1::order_strict : 0;
	if (mr_mode < 0) {
		FI_INFO(&prov, FI_LOG_CORE,
		        "%s: hints mr_mode 0x%x lacks FI_MR_LOCAL | "
		        "FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY\n",
		        port.device.c_str(), hints->domain_attr->mr_mode);
		return nullptr;
	}
	/* a receive that takes remote CQ data consumes a posted buffer */
	uint64_t rx_mode = 0;
	if (port.iwarp)
		; /* no remote CQ data */
	else if (!hints ||
	         ((hints->mode | (hints->rx_attr ? hints->rx_attr->mode : 0)) & FI_RX_CQ_DATA))
		rx_mode = FI_RX_CQ_DATA;

	info_ptr info(fi_allocinfo());
	if (!info)
		throw std::bad_alloc();
	const struct fi_tx_attr *htx = hints ? hints->tx_attr : nullptr;
	const struct fi_rx_attr *hrx = hints ? hints->rx_attr : nullptr;
	size_t max_wr = static_cast<size_t>(port.dev_attr.max_qp_wr);
	size_t max_sge = std::min<size_t>(static_cast<size_t>(port.dev_attr.max_sge), 16);

	info->caps = caps;
	info->mode = mode;
	const cm_addr &named = src.valid() ? src : dst;
	info->addr_format =
	    named.valid() && named.addr.ss_family == AF_INET6 ? FI_SOCKADDR_IN6 : FI_SOCKADDR_IN;
	if (src.valid())
		info->src_addr = dup_sockaddr(src.sa(), &info->src_addrlen);
	if (dst.valid())
		info->dest_addr = dup_sockaddr(dst.sa(), &info->dest_addrlen);

	info->tx_attr->caps = caps & (FI_MSG | FI_RMA | FI_SEND | FI_READ | FI_WRITE);
	info->tx_attr->mode = mode;
	info->tx_attr->op_flags = htx ? htx->op_flags : 0;
	info->tx_attr->msg_order = rc_msg_order;
	info->tx_attr->comp_order = comp_order;
	info->tx_attr->inject_size =
	    std::max<size_t>(inject_default(port), htx ? htx->inject_size : 0);
	info->tx_attr->size = htx && htx->size ? htx->size : std::min(default_size, max_wr);
	info->tx_attr->iov_limit =
	    htx && htx->iov_limit ? htx->iov_limit : std::min(default_iov_limit, max_sge);
	info->tx_attr->rma_iov_limit = 1;

	info->rx_attr->caps = caps & (FI_MSG | FI_RMA | FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE);
	info->rx_attr->mode = mode | rx_mode;
	info->rx_attr->op_flags = hrx ? hrx->op_flags : 0;
	info->rx_attr->msg_order = rc_msg_order;
	info->rx_attr->comp_order = comp_order;
	info->rx_attr->size = hrx && hrx->size ? hrx->size : std::min(default_size, max_wr);
	info->rx_attr->iov_limit =
	    hrx && hrx->iov_limit ? hrx->iov_limit : std::min(default_iov_limit, max_sge);

	info->ep_attr->type = FI_EP_MSG;
	info->ep_attr->protocol = msg_protocol(port);
	info->ep_attr->protocol_version = 1;
	info->ep_attr->max_msg_size = port.port_attr.max_msg_sz;
	info->ep_attr->max_order_raw_size = port.port_attr.max_msg_sz;
	info->ep_attr->max_order_war_size = port.port_attr.max_msg_sz;
	info->ep_attr->max_order_waw_size = port.port_attr.max_msg_sz;
	info->ep_attr->tx_ctx_cnt = 1;
	info->ep_attr->rx_ctx_cnt = 1;

	port_attrs(version, info.get(), port, hints, mr_mode);
	return info;
}

} // namespace

void forget_probes() noexcept
{
	util::lock_guard<util::mutex> lock(inline_mutex);
	delete inline_known;
	inline_known = nullptr;
}

int check_hints(uint32_t version, const struct fi_info *hints) noexcept
{
	if (version < min_api_version) {
		FI_INFO(&prov, FI_LOG_CORE, "API version %u.%u is older than 1.5\n",
		        FI_MAJOR(version), FI_MINOR(version));
		return -FI_ENODATA;
	}
	if (!hints)
		return FI_SUCCESS;
	if (int ret = check_sockaddr(hints->src_addr, hints->src_addrlen, hints->addr_format,
	                             "fi_getinfo: hints->src_addr"))
		return ret;
	if (int ret = check_sockaddr(hints->dest_addr, hints->dest_addrlen, hints->addr_format,
	                             "fi_getinfo: hints->dest_addr"))
		return ret;
	if (hints->src_addr && hints->dest_addr &&
	    static_cast<const struct sockaddr *>(hints->src_addr)->sa_family !=
	        static_cast<const struct sockaddr *>(hints->dest_addr)->sa_family) {
		FI_WARN(&prov, FI_LOG_CORE,
		        "fi_getinfo: hints->src_addr and dest_addr are of different families\n");
		return -FI_EINVAL;
	}
	return FI_SUCCESS;
}

struct fi_info *port_info(uint32_t version, const port_desc &port, const struct fi_info *hints,
                          const struct sockaddr *src, const struct sockaddr *dst)
{
	cm_addr s, d;
	if (src)
		s = make_addr(src, nullptr);
	if (dst)
		d = make_addr(dst, nullptr);
	return msg_info(version, port, hints, s, d).release();
}

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
	info->domain_attr->cq_data_size = port.iwarp ? 0 : sizeof(uint32_t);
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

size_t link_mtu_bytes(enum ibv_mtu mtu) noexcept
{
	return mtu >= IBV_MTU_256 && mtu <= IBV_MTU_4096 ? size_t{128} << mtu : 0;
}

uint64_t link_speed_bps(uint8_t active_speed, uint8_t active_width) noexcept
{
	uint64_t lane; /* per lane, bits per second, as ibv_devinfo names the speeds */
	switch (active_speed) {
	case 1:
		lane = 2500000000ULL;
		break; /* SDR */
	case 2:
		lane = 5000000000ULL;
		break; /* DDR */
	case 4:        /* QDR */
	case 8:
		lane = 10000000000ULL;
		break; /* FDR10 */
	case 16:
		lane = 14000000000ULL;
		break; /* FDR */
	case 32:
		lane = 25000000000ULL;
		break; /* EDR */
	case 64:
		lane = 50000000000ULL;
		break; /* HDR */
	case 128:
		lane = 100000000000ULL;
		break; /* NDR */
	default:
		return 0;
	}
	switch (active_width) {
	case 1:
		return lane; /* 1X */
	case 2:
		return lane * 4; /* 4X */
	case 4:
		return lane * 8; /* 8X */
	case 8:
		return lane * 12; /* 12X */
	case 16:
		return lane * 2; /* 2X */
	default:
		return 0;
	}
}

nic_desc port_nic_desc(const port_desc &port, const std::string &sysfs)
{
	nic_desc nd;
	nd.device = port.device;
	nd.firmware = port.dev_attr.fw_ver;
	nd.vendor_id = port.dev_attr.vendor_id;
	nd.vendor_part = port.dev_attr.vendor_part_id;
	nd.hw_ver = port.dev_attr.hw_ver;
	nd.up = port.port_attr.state == IBV_PORT_ACTIVE;
	nd.network_type =
	    port.port_attr.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand";
	nd.mtu = link_mtu_bytes(port.port_attr.active_mtu);
	nd.speed = link_speed_bps(port.port_attr.active_speed, port.port_attr.active_width);
	/* the kernel driver bound to the device (mlx5_core, ...); a software device with no bus
	 * device (rxe, siw) has none: its ib_device's driver is the rdma link type */
	char link[PATH_MAX];
	std::string base = sysfs + "/class/infiniband/" + port.device;
	ssize_t n = readlink((base + "/device/driver").c_str(), link, sizeof(link) - 1);
	if (n > 0) {
		link[n] = '\0';
		const char *slash = strrchr(link, '/');
		nd.driver = slash ? slash + 1 : link;
	} else if (port.iwarp && port.device.compare(0, 3, "siw") == 0) {
		nd.driver = "siw"; /* siw's ib_device has no parent attribute, unlike rxe's */
	} else if (access((base + "/parent").c_str(), F_OK) == 0) {
		nd.driver = port.device.compare(0, 3, "rxe") == 0 ? "rdma_rxe" : "";
	}
	return nd;
}

std::vector<port_desc> info_ports()
{
	return active_ports();
}

int64_t info_mr_mode(uint32_t version, const struct fi_info *hints, uint64_t *mode)
{
	return pick_mr_mode(version, hints, mode);
}

namespace
{

int msg_getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
                const struct fi_info *hints, struct fi_info **info) noexcept
{
	*info = nullptr;
	if (hints && hints->ep_attr && util::raw_enum(hints->ep_attr->type) != FI_EP_UNSPEC &&
	    util::raw_enum(hints->ep_attr->type) != FI_EP_MSG)
		return -FI_ENODATA;
	if (int ret = check_hints(version, hints))
		return ret;
	return guard([&] {
		std::vector<port_desc> ports = active_ports();
		if (ports.empty())
			return -FI_ENODATA;
		endpoints where;
		if (int ret = resolve(node, service, flags, hints, &where))
			return ret;
		std::vector<cm_addr> addrs;
		if (!where.src.valid() || where.src.device.empty())
			addrs = device_addrs();
		uint32_t want_family = AF_UNSPEC;
		if (hints && hints->addr_format == FI_SOCKADDR_IN)
			want_family = AF_INET;
		else if (hints && hints->addr_format == FI_SOCKADDR_IN6)
			want_family = AF_INET6;

		info_ptr head; /* owns the whole list until it is handed out */
		struct fi_info *last = nullptr;
		for (const port_desc &port : ports) {
			if (!where.device.empty() && where.device != port.device)
				continue;
			cm_addr src = where.src;
			if (!src.valid() || src.device.empty()) {
				/* the device's own address (the port asked for, if any) */
				uint16_t port_be = 0;
				if (src.valid())
					port_be = reinterpret_cast<struct sockaddr_in *>(&src.addr)
					              ->sin_port;
				auto it =
				    std::find_if(addrs.begin(), addrs.end(), [&](const cm_addr &a) {
					    return a.device == port.device &&
					           (want_family == AF_UNSPEC ||
					            a.addr.ss_family == want_family);
				    });
				if (it == addrs.end()) {
					FI_INFO(&prov, FI_LOG_CORE,
					        "%s has no IP address: no MSG endpoint\n",
					        port.device.c_str());
					continue;
				}
				src = *it;
				set_port(&src.addr, port_be);
			}
			info_ptr one = msg_info(version, port, hints, src, where.dst);
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

} // namespace

/* MSG infos first, then DGRAM ones (hints naming one type get that type only). hints->handle a
 * vwait passive endpoint: MSG infos only, each with that handle (fi_getinfo(3)), for an active
 * endpoint that takes its address (fi_endpoint(3), rc_ep_open). */
int getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
            const struct fi_info *hints, struct fi_info **info) noexcept
{
	*info = nullptr;
	if (hints && hints->handle && hints->handle->fclass == FI_CLASS_PEP) {
		if (!vwait_pep(hints->handle)) {
			FI_INFO(
			    &prov, FI_LOG_CORE,
			    "fi_getinfo: hints->handle is another provider's passive endpoint\n");
			return -FI_ENODATA;
		}
		if (wants_dgram_only(hints))
			return -FI_ENODATA;
		int ret = msg_getinfo(version, node, service, flags, hints, info);
		for (struct fi_info *i = ret == 0 ? *info : nullptr; i; i = i->next)
			i->handle = hints->handle;
		return ret;
	}
	if (wants_dgram_only(hints))
		return dgram_getinfo(version, node, service, flags, hints, true, info);
	int ret = msg_getinfo(version, node, service, flags, hints, info);
	if (ret != 0 && ret != -FI_ENODATA)
		return ret;
	if (hints && hints->ep_attr && util::raw_enum(hints->ep_attr->type) == FI_EP_MSG)
		return ret;
	struct fi_info *dgram = nullptr;
	if (dgram_getinfo(version, node, service, flags, hints, false, &dgram) != 0)
		return ret;
	if (!*info) {
		*info = dgram;
		return FI_SUCCESS;
	}
	struct fi_info *last = *info;
	while (last->next)
		last = last->next;
	last->next = dgram;
	return FI_SUCCESS;
}

} // namespace vwait
