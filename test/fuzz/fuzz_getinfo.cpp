/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* libFuzzer target: what vwait parses of fi_getinfo's arguments. Hints of any content (caps,
 * mode, ep_type, protocol, addr_format, src/dest addresses of every family and length, names,
 * sizes, mr_mode, API versions), node/service strings and flags go through:
 *   - vwait::check_hints / check_sockaddr (the checks made before any device is looked at),
 *   - vwait::port_info for a made-up port (the hint matching and the fi_info built from it,
 *     which fi_getinfo runs per active port of a real device),
 *   - vwait::getinfo itself, one input in 16: on a host without RDMA devices it stops at the
 *     device list (-FI_ENODATA), so node/service reach rdma_getaddrinfo only in the VM.
 * Whatever comes back must be a negative FI_E* code or an fi_info that fi_freeinfo releases
 * (LeakSanitizer checks), and an fi_info must satisfy the hints it was built for. */
#include "config.h"

#include "fuzz_common.h"

#include "vwait/cm.h"
#include "vwait/fi_deprecated.h"
#include "vwait/info.h"
#include "vwait/vwait.h"

#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

namespace
{

using namespace vwait_fuzz;

/* An address of a family the input picks, then maybe truncated or padded: the buffer is
 * exactly *len bytes long, so a read past what the caller declared is an ASan report. */
void *fuzz_addr(FuzzedDataProvider &in, size_t *len)
{
	if (in.ConsumeBool()) {
		*len = in.ConsumeIntegralInRange<size_t>(0, 4) == 0 ? in.ConsumeIntegral<uint8_t>()
		                                                    : 0;
		return nullptr;
	}
	struct sockaddr_storage ss = {};
	size_t natural;
	switch (in.ConsumeIntegralInRange<int>(0, 3)) {
	case 0: {
		auto *sin = reinterpret_cast<struct sockaddr_in *>(&ss);
		sin->sin_family = AF_INET;
		sin->sin_port = in.ConsumeIntegral<uint16_t>();
		sin->sin_addr.s_addr =
		    in.ConsumeBool() ? htonl(INADDR_ANY) : in.ConsumeIntegral<uint32_t>();
		natural = sizeof(*sin);
		break;
	}
	case 1: {
		auto *sin6 = reinterpret_cast<struct sockaddr_in6 *>(&ss);
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = in.ConsumeIntegral<uint16_t>();
		in.ConsumeData(&sin6->sin6_addr, sizeof(sin6->sin6_addr));
		natural = sizeof(*sin6);
		break;
	}
	case 2: {
		/* any family (AF_IB, AF_UNIX, garbage) with any bytes */
		in.ConsumeData(&ss, sizeof(ss));
		natural = sizeof(ss);
		break;
	}
	default:
		natural = 0;
		break;
	}
	switch (in.ConsumeIntegralInRange<int>(0, 2)) {
	case 0:
		*len = natural;
		break;
	case 1:
		*len = in.ConsumeIntegralInRange<size_t>(0, sizeof(ss));
		break;
	default:
		*len = in.ConsumeIntegralInRange<size_t>(0, natural);
		break;
	}
	void *p = malloc(*len ? *len : 1);
	memcpy(p, &ss, *len);
	return p;
}

template <typename E>
void set_raw(E &field, int v)
{
	static_assert(sizeof(E) == sizeof(int), "an enum of int size");
	memcpy(&field, &v, sizeof(v));
}

int fuzz_enum(FuzzedDataProvider &in, std::initializer_list<const int> usual)
{
	return pick<int>(in, usual);
}

/* Hints as an application could fill them: every field from the input. */
struct fi_info *fuzz_hints(FuzzedDataProvider &in)
{
	struct fi_info *h = fi_allocinfo();
	if (!h)
		throw std::bad_alloc();
	h->caps = pick<uint64_t>(in, {0, FI_MSG, FI_MSG | FI_RMA, FI_RMA | FI_READ, FI_TAGGED,
	                              FI_MSG | FI_SEND | FI_RECV | FI_LOCAL_COMM | FI_REMOTE_COMM,
	                              FI_ATOMIC, FI_MULTICAST});
	h->mode = pick<uint64_t>(in, {0, FI_CONTEXT, FI_RX_CQ_DATA, fi_v1::local_mr, FI_CONTEXT2});
	h->addr_format = static_cast<uint32_t>(
	    fuzz_enum(in, {FI_FORMAT_UNSPEC, FI_SOCKADDR, FI_SOCKADDR_IN, FI_SOCKADDR_IN6,
	                   FI_SOCKADDR_IB, FI_ADDR_PSMX, FI_ADDR_STR, FI_ADDR_EFA}));
	h->src_addr = fuzz_addr(in, &h->src_addrlen);
	h->dest_addr = fuzz_addr(in, &h->dest_addrlen);
	if (in.ConsumeBool()) {
		h->ep_attr->type = static_cast<enum fi_ep_type>(0);
		set_raw(h->ep_attr->type, fuzz_enum(in, {FI_EP_UNSPEC, FI_EP_MSG, FI_EP_DGRAM,
		                                         FI_EP_RDM, FI_EP_SOCK_STREAM, -1, 1000}));
		h->ep_attr->protocol = pick<uint32_t>(in, {FI_PROTO_UNSPEC, FI_PROTO_RDMA_CM_IB_RC,
		                                           FI_PROTO_IWARP, FI_PROTO_SOCK_TCP});
		h->ep_attr->max_msg_size = pick<size_t>(in, {0, 1, 1ul << 31, SIZE_MAX});
		h->ep_attr->tx_ctx_cnt = pick<size_t>(in, {0, 1, 2, FI_SHARED_CONTEXT});
		h->ep_attr->rx_ctx_cnt = pick<size_t>(in, {0, 1, 2, FI_SHARED_CONTEXT});
	}
	if (in.ConsumeBool()) {
		h->tx_attr->caps = in.ConsumeIntegral<uint64_t>();
		h->tx_attr->op_flags = in.ConsumeIntegral<uint64_t>();
		h->tx_attr->size = pick<size_t>(in, {0, 1, 256, 1u << 20, SIZE_MAX});
		h->tx_attr->iov_limit = pick<size_t>(in, {0, 1, 4, 16, 17, SIZE_MAX});
		h->tx_attr->rma_iov_limit = pick<size_t>(in, {0, 1, 2});
		h->tx_attr->inject_size = pick<size_t>(in, {0, 64, 256, 4096, SIZE_MAX});
	}
	if (in.ConsumeBool()) {
		h->rx_attr->caps = in.ConsumeIntegral<uint64_t>();
		h->rx_attr->mode = pick<uint64_t>(in, {0, FI_RX_CQ_DATA});
		h->rx_attr->op_flags = in.ConsumeIntegral<uint64_t>();
		h->rx_attr->size = pick<size_t>(in, {0, 1, 256, SIZE_MAX});
		h->rx_attr->iov_limit = pick<size_t>(in, {0, 1, 4, SIZE_MAX});
	}
	if (in.ConsumeBool()) {
		opt_string name = string_or_null(in, 32);
		h->domain_attr->name = name.dup();
		set_raw(h->domain_attr->threading,
		        fuzz_enum(in, {FI_THREAD_UNSPEC, FI_THREAD_SAFE, FI_THREAD_DOMAIN, 99}));
		set_raw(h->domain_attr->control_progress,
		        fuzz_enum(in, {FI_PROGRESS_UNSPEC, FI_PROGRESS_AUTO, FI_PROGRESS_MANUAL}));
		set_raw(h->domain_attr->data_progress,
		        fuzz_enum(in, {FI_PROGRESS_UNSPEC, FI_PROGRESS_AUTO, FI_PROGRESS_MANUAL}));
		h->domain_attr->mr_mode =
		    fuzz_enum(in, {0, fi_v1::mr_basic, fi_v1::mr_scalable,
		                   FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY,
		                   FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
		                       FI_MR_PROV_KEY | FI_MR_ENDPOINT,
		                   -1});
		h->domain_attr->mr_key_size = pick<size_t>(in, {0, 4, 8});
		h->domain_attr->cq_data_size = pick<size_t>(in, {0, 4, 8});
	}
	if (in.ConsumeBool()) {
		h->fabric_attr->name = string_or_null(in, 32).dup();
		h->fabric_attr->prov_name = string_or_null(in, 32).dup();
		h->fabric_attr->api_version = in.ConsumeIntegral<uint32_t>();
	}
	return h;
}

/* A port as active_ports() would describe it, with limits from the input. */
vwait::port_desc fuzz_port(FuzzedDataProvider &in)
{
	vwait::port_desc p;
	p.device = in.ConsumeBool() ? "rxe0" : in.ConsumeRandomLengthString(16);
	p.fabric = in.ConsumeBool() ? "IB-0xfe80000000000000" : in.ConsumeRandomLengthString(24);
	p.port_num = 1;
	memset(&p.dev_attr, 0, sizeof(p.dev_attr));
	memset(&p.port_attr, 0, sizeof(p.port_attr));
	snprintf(p.dev_attr.fw_ver, sizeof(p.dev_attr.fw_ver), "%s",
	         in.ConsumeRandomLengthString(sizeof(p.dev_attr.fw_ver) * 2).c_str());
	p.dev_attr.max_qp_wr = in.ConsumeIntegral<int>();
	p.dev_attr.max_sge = in.ConsumeIntegral<int>();
	p.dev_attr.max_cq = in.ConsumeIntegral<int>();
	p.dev_attr.max_qp = in.ConsumeIntegral<int>();
	p.dev_attr.max_mr = in.ConsumeIntegral<int>();
	p.dev_attr.vendor_id = in.ConsumeIntegral<uint32_t>();
	p.port_attr.max_msg_sz = in.ConsumeIntegral<uint32_t>();
	p.port_attr.state = in.ConsumeBool() ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
	p.port_attr.link_layer =
	    in.ConsumeBool() ? IBV_LINK_LAYER_ETHERNET : IBV_LINK_LAYER_INFINIBAND;
	p.max_inline = in.ConsumeIntegralInRange<size_t>(0, 1024);
	return p;
}

/* What a returned info must respect whatever the hints were. */
void check_info(const struct fi_info *info, const struct fi_info *hints)
{
	if (!info->ep_attr || info->ep_attr->type != FI_EP_MSG || !info->domain_attr ||
	    !info->fabric_attr || !info->tx_attr || !info->rx_attr)
		abort();
	if (hints && hints->caps &&
	    (info->caps & ~(hints->caps | FI_LOCAL_COMM | FI_REMOTE_COMM | FI_SEND | FI_RECV |
	                    FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE)))
		abort();
	/* what fabtests' fi_getinfo_test asks: every ordering and domain cap the hints want */
	if (hints && hints->tx_attr &&
	    (info->tx_attr->msg_order & hints->tx_attr->msg_order) != hints->tx_attr->msg_order)
		abort();
	if (hints && hints->rx_attr &&
	    (info->rx_attr->msg_order & hints->rx_attr->msg_order) != hints->rx_attr->msg_order)
		abort();
	if (hints && hints->domain_attr &&
	    (info->domain_attr->caps & hints->domain_attr->caps) != hints->domain_attr->caps)
		abort();
	for (auto [addr, len] : {std::pair{info->src_addr, info->src_addrlen},
	                         std::pair{info->dest_addr, info->dest_addrlen}}) {
		if (addr && vwait::check_sockaddr(addr, len, info->addr_format, "info") != 0)
			abort();
	}
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	FuzzedDataProvider in(data, size);
	uint32_t version = pick<uint32_t>(
	    in, {FI_VERSION(1, 0), FI_VERSION(1, 4), FI_VERSION(1, 5), FI_VERSION(1, 17),
	         FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), FI_VERSION(2, 0), 0, UINT32_MAX});
	bool null_hints = in.ConsumeIntegralInRange<int>(0, 7) == 0;
	struct fi_info *hints = null_hints ? nullptr : fuzz_hints(in);
	opt_string node = string_or_null(in, 64);
	opt_string service = string_or_null(in, 16);
	uint64_t flags =
	    pick<uint64_t>(in, {0, FI_SOURCE, FI_NUMERICHOST, FI_SOURCE | FI_NUMERICHOST});
	bool whole = in.ConsumeIntegralInRange<int>(0, 15) == 0;
	vwait::port_desc port = fuzz_port(in);

	int ret = vwait::check_hints(version, hints);
	if (ret != 0 && ret != -FI_ENODATA && ret != -FI_EINVAL)
		abort();
	if (ret == 0) {
		const struct sockaddr *src =
		    hints ? static_cast<const struct sockaddr *>(hints->src_addr) : nullptr;
		const struct sockaddr *dst =
		    hints ? static_cast<const struct sockaddr *>(hints->dest_addr) : nullptr;
		try {
			struct fi_info *info = vwait::port_info(version, port, hints, src, dst);
			if (info) {
				check_info(info, hints);
				fi_freeinfo(info);
			}
		} catch (const std::bad_alloc &) {
		}
	}
	if (whole) {
		struct fi_info *info = reinterpret_cast<struct fi_info *>(uintptr_t{1});
		int r = vwait::getinfo(version, node.c_str(), service.c_str(), flags, hints, &info);
		if (r > 0 || (r == 0) != (info != nullptr))
			abort();
		if (info) {
			check_info(info, hints);
			fi_freeinfo(info);
		}
	}
	fi_freeinfo(hints);
	return 0;
}
