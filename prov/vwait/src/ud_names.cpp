/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* DGRAM names on IP ports (ud_names.h): the answerer of an enabled endpoint, and the query
 * that fi_getinfo(node, service) sends. One datagram each way: the query is the 8 bytes of
 * query_magic, the answer answer_magic and the 32-byte ud_name. And DGRAM's names function
 * for fi_getinfo (info_template.h): each port named by its UD name (fi_addr_ib_ud://...). */
#include "config.h"

#include "vwait/info_template.h"
#include "vwait/ud_names.h"
#include "vwait/util/guard.h"
#include "vwait/vwait.h"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>

namespace vwait
{

namespace
{

constexpr char query_magic[8] = {'v', 'w', 'a', 'i', 't', 'U', 'D', '?'};
constexpr char answer_magic[8] = {'v', 'w', 'a', 'i', 't', 'U', 'D', '='};
constexpr int query_interval_ms = 100;

struct answer {
	char magic[8];
	ud_name name;
};
static_assert(sizeof(answer) == 40, "answer: magic and name, no padding");

/* A UDP socket bound to port on every address: IPv6 with IPv4 mapped when the host has IPv6,
 * else IPv4. */
int bind_any(uint16_t port, util::fd *out) noexcept
{
	util::fd s(socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0));
	if (s) {
		int off = 0;
		setsockopt(s.get(), IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
		struct sockaddr_in6 a = {};
		a.sin6_family = AF_INET6;
		a.sin6_addr = in6addr_any;
		a.sin6_port = htons(port);
		if (bind(s.get(), reinterpret_cast<struct sockaddr *>(&a), sizeof(a)) != 0)
			return -errno;
	} else {
		s.reset(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
		if (!s)
			return -errno;
		struct sockaddr_in a = {};
		a.sin_family = AF_INET;
		a.sin_addr.s_addr = htonl(INADDR_ANY);
		a.sin_port = htons(port);
		if (bind(s.get(), reinterpret_cast<struct sockaddr *>(&a), sizeof(a)) != 0)
			return -errno;
	}
	*out = std::move(s);
	return 0;
}

using clock_type = std::chrono::steady_clock;

int ms_left(clock_type::time_point end) noexcept
{
	auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - clock_type::now());
	return left.count() > 0 ? static_cast<int>(left.count()) : 0;
}

/* Query s (connected to the answerer) until an answer comes or end passes. */
bool ask(int s, clock_type::time_point end, ud_name *out) noexcept
{
	while (clock_type::now() < end) {
		auto round_end =
		    std::min(end, clock_type::now() + std::chrono::milliseconds(query_interval_ms));
		/* an error (ECONNREFUSED: nobody on the port yet) waits for the next round */
		bool failed = send(s, query_magic, sizeof(query_magic), 0) < 0;
		int wait_ms;
		while ((wait_ms = ms_left(round_end)) > 0) {
			if (failed) {
				poll(nullptr, 0, wait_ms);
				break;
			}
			struct pollfd p = {s, POLLIN, 0};
			if (poll(&p, 1, wait_ms) <= 0)
				continue;
			answer a;
			ssize_t n = recv(s, &a, sizeof(a), MSG_DONTWAIT);
			if (n == static_cast<ssize_t>(sizeof(a)) &&
			    memcmp(a.magic, answer_magic, sizeof(a.magic)) == 0) {
				*out = a.name;
				return true;
			}
			failed = n < 0 && errno != EAGAIN && errno != EINTR;
		}
	}
	return false;
}

} // namespace

int ud_name_service::start(const ud_name &name) noexcept
{
	stop();
	name_ = name;
	int ret = bind_any(name.service, &sock_);
	if (ret)
		return ret;
	stop_ = util::fd::eventfd_nonblock(&ret);
	if (ret) {
		sock_.reset();
		return ret;
	}
	ret = thread_.start(
	    "vwait-names", [this] { serve(); }, [this] { eventfd_write(stop_.get(), 1); });
	if (ret) {
		FI_WARN(&prov, FI_LOG_EP_CTRL, "DGRAM name service: cannot start its thread\n");
		sock_.reset();
		stop_.reset();
	}
	return ret;
}

void ud_name_service::stop() noexcept
{
	thread_.stop();
	sock_.reset();
	stop_.reset();
}

void ud_name_service::serve() noexcept
{
	answer a;
	memcpy(a.magic, answer_magic, sizeof(a.magic));
	a.name = name_;
	for (;;) {
		struct pollfd p[2] = {{sock_.get(), POLLIN, 0}, {stop_.get(), POLLIN, 0}};
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			FI_WARN(&prov, FI_LOG_EP_CTRL, "DGRAM name service on port %u: poll: %s\n",
			        name_.service, strerror(errno));
			return;
		}
		if (p[1].revents)
			return;
		char q[sizeof(query_magic)];
		struct sockaddr_storage from;
		socklen_t fromlen = sizeof(from);
		ssize_t n = recvfrom(sock_.get(), q, sizeof(q), MSG_DONTWAIT,
		                     reinterpret_cast<struct sockaddr *>(&from), &fromlen);
		if (n == static_cast<ssize_t>(sizeof(q)) && memcmp(q, query_magic, sizeof(q)) == 0)
			sendto(sock_.get(), &a, sizeof(a), MSG_DONTWAIT,
			       reinterpret_cast<struct sockaddr *>(&from), fromlen);
	}
}

int ud_name_resolve(const char *node, const char *service, int timeout_ms, ud_name *out) noexcept
{
	if (!node || !service)
		return -FI_ENODATA;
	struct addrinfo hints = {};
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_DGRAM;
	struct addrinfo *res = nullptr;
	int ret = getaddrinfo(node, service, &hints, &res);
	if (ret) {
		FI_INFO(&prov, FI_LOG_CORE, "DGRAM: getaddrinfo(%s, %s): %s\n", node, service,
		        gai_strerror(ret));
		return -FI_ENODATA;
	}
	auto end = clock_type::now() + std::chrono::milliseconds(timeout_ms);
	bool found = false;
	for (struct addrinfo *ai = res; ai && !found; ai = ai->ai_next) {
		util::fd s(socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
		if (!s || connect(s.get(), ai->ai_addr, ai->ai_addrlen) != 0)
			continue;
		found = ask(s.get(), end, out);
	}
	freeaddrinfo(res);
	if (!found) {
		FI_INFO(&prov, FI_LOG_CORE,
		        "DGRAM: no endpoint answered for %s:%s within %d ms: no DGRAM info\n", node,
		        service, timeout_ms);
		return -FI_ENODATA;
	}
	return 0;
}

int dgram_names(const info_request &r, port_namer *out)
{
	const struct fi_info *hints = r.hints;
	ud_name src_hint = {}, dst = {};
	bool have_src = false, have_dst = false;
	std::string src_device; /* an IP address given as the source: its device's ports only */
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
	if (r.node) {
		ud_name n;
		if (ud_name_parse(r.node, &n)) {
			if (r.flags & FI_SOURCE) {
				src_hint = n;
				have_src = true;
			} else {
				dst = n;
				have_dst = true;
			}
		} else if (r.flags & FI_SOURCE) {
			/* a host address: the UD port of the device that holds it, or none (a
			 * device without UD, iWARP, must not lend its address to another's) */
			src_device = address_device(r.node);
			if (src_device.empty()) {
				FI_INFO(
				    &prov, FI_LOG_CORE,
				    "DGRAM: source \"%s\" is on no RDMA device: no DGRAM info\n",
				    r.node);
				return -FI_ENODATA;
			}
		} else {
			/* an address and a service: ask the endpoint there for its name
			 * (ud_names.h), only when the hints ask for DGRAM alone */
			if (!r.alone || !r.service) {
				FI_INFO(&prov, FI_LOG_CORE,
				        "DGRAM: node \"%s\" is no fi_addr_ib_ud:// name%s: no "
				        "DGRAM info\n",
				        r.node,
				        r.alone ? " and no service is given"
				                : " (FI_EP_DGRAM not asked for)");
				return -FI_ENODATA;
			}
			int ret =
			    ud_name_resolve(r.node, r.service, get_params().cm_timeout_ms, &dst);
			if (ret)
				return ret;
			have_dst = true;
		}
	}
	uint16_t svc = have_src ? src_hint.service : 0;
	if (r.service && (r.flags & FI_SOURCE))
		svc = static_cast<uint16_t>(strtoul(r.service, nullptr, 10));
	*out = [=](const port_desc &port, info_names *n) {
		ud_name src;
		if (!src_device.empty() && port.device != src_device)
			return false;
		if (!port_ud_name(port, &src))
			return false;
		if (have_src && memcmp(src.gid, src_hint.gid, sizeof(src.gid)) != 0)
			return false;
		src.service = svc;
		n->format = FI_ADDR_IB_UD;
		n->src.set(&src, sizeof(src));
		if (have_dst)
			n->dst.set(&dst, sizeof(dst));
		return true;
	};
	return 0;
}

} // namespace vwait
