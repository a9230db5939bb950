/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* fi_getinfo's addresses: the names functions of the endpoint types. MSG resolves node /
 * service / hints through rdma_cm, which also tells which device an address belongs to, and
 * names each port by its device's IP address. (DGRAM's names: ud_names.cpp.) */
#include "config.h"

#include "vwait/cm.h"
#include "vwait/info_template.h"
#include "vwait/verbs.h"
#include "vwait/vwait.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace vwait
{

namespace
{

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

} // namespace

std::string address_device(const char *node)
{
	struct addrinfo hints = {}, *res = nullptr;
	hints.ai_family = AF_UNSPEC;
	if (!node || getaddrinfo(node, nullptr, &hints, &res) != 0)
		return "";
	std::unique_ptr<struct addrinfo, void (*)(struct addrinfo *)> owner(res, freeaddrinfo);
	for (struct addrinfo *a = res; a; a = a->ai_next) {
		cm_addr c = bind_probe(a->ai_addr);
		if (!c.device.empty())
			return c.device;
	}
	return "";
}

namespace
{

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

void set_names(const cm_addr &src, const cm_addr &dst, info_names *n)
{
	const cm_addr &named = src.valid() ? src : dst;
	n->format =
	    named.valid() && named.addr.ss_family == AF_INET6 ? FI_SOCKADDR_IN6 : FI_SOCKADDR_IN;
	if (src.valid())
		n->src.set(src.sa(), sockaddr_size(src.sa()));
	if (dst.valid())
		n->dst.set(dst.sa(), sockaddr_size(dst.sa()));
}

} // namespace

void info_addr::set(const void *addr, size_t n) noexcept
{
	len = std::min(n, sizeof(bytes));
	memcpy(&bytes, addr, len);
}

info_names sockaddr_names(const struct sockaddr *src, const struct sockaddr *dst)
{
	cm_addr s, d;
	if (src)
		s = make_addr(src, nullptr);
	if (dst)
		d = make_addr(dst, nullptr);
	info_names n;
	set_names(s, d, &n);
	return n;
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

int msg_names(const info_request &r, port_namer *out)
{
	endpoints where;
	if (int ret = resolve(r.node, r.service, r.flags, r.hints, &where))
		return ret;
	std::vector<cm_addr> addrs;
	if (!where.src.valid() || where.src.device.empty())
		addrs = device_addrs();
	uint32_t want_family = AF_UNSPEC;
	if (r.hints && r.hints->addr_format == FI_SOCKADDR_IN)
		want_family = AF_INET;
	else if (r.hints && r.hints->addr_format == FI_SOCKADDR_IN6)
		want_family = AF_INET6;
	*out = [where, addrs, want_family](const port_desc &port, info_names *n) {
		if (!where.device.empty() && where.device != port.device)
			return false;
		cm_addr src = where.src;
		if (!src.valid() || src.device.empty()) {
			/* the device's own address (the port asked for, if any) */
			uint16_t port_be = 0;
			if (src.valid())
				port_be =
				    reinterpret_cast<struct sockaddr_in *>(&src.addr)->sin_port;
			auto it = std::find_if(addrs.begin(), addrs.end(), [&](const cm_addr &a) {
				return a.device == port.device && (want_family == AF_UNSPEC ||
				                                   a.addr.ss_family == want_family);
			});
			if (it == addrs.end()) {
				FI_INFO(&prov, FI_LOG_CORE,
				        "%s has no IP address: no MSG endpoint\n",
				        port.device.c_str());
				return false;
			}
			src = *it;
			set_port(&src.addr, port_be);
		}
		set_names(src, where.dst, n);
		return true;
	};
	return 0;
}

} // namespace vwait
