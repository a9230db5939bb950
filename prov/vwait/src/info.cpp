/* fi_getinfo: one info per verbs device, active port and endpoint type. */
#include "config.h"

#include "vwait/info.h"
#include "vwait/verbs.h"
#include "vwait/vwait.h"

#include <rdma/fi_endpoint.h>

#include <arpa/inet.h>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace vwait {

namespace {

struct info_deleter {
	void operator()(struct fi_info *info) const noexcept { fi_freeinfo(info); }
};
using info_ptr = std::unique_ptr<struct fi_info, info_deleter>;

/* What vwait learned of one active port of one device. */
struct port_desc {
	std::string device;
	std::string fabric; /* "IB-0x<subnet prefix>", as upstream verbs names it */
	uint8_t port_num;
	struct ibv_device_attr dev_attr;
	struct ibv_port_attr port_attr;
};

std::vector<port_desc> active_ports()
{
	std::vector<port_desc> ports;
	int count = 0;
	verbs::device_list list = verbs::get_device_list(&count);
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
		verbs::context ctx(ibv_open_device(list[i]));
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
			ports.push_back(port_desc{name, fabric, p, dev_attr, port_attr});
		}
	}
	if (ports.empty())
		FI_INFO(&prov, FI_LOG_CORE, "no verbs device has an active port\n");
	return ports;
}

char *dup(const std::string &s)
{
	char *p = strdup(s.c_str());
	if (!p)
		throw std::bad_alloc();
	return p;
}

info_ptr msg_info(const port_desc &port)
{
	info_ptr info(fi_allocinfo());
	if (!info)
		throw std::bad_alloc();
	info->caps = FI_MSG | FI_SEND | FI_RECV;
	info->mode = 0;
	info->addr_format = FI_SOCKADDR_IN;
	info->tx_attr->caps = FI_MSG | FI_SEND;
	info->tx_attr->op_flags = 0;
	info->tx_attr->msg_order = FI_ORDER_SAS;
	info->tx_attr->size = static_cast<size_t>(port.dev_attr.max_qp_wr);
	info->tx_attr->iov_limit = static_cast<size_t>(port.dev_attr.max_sge);
	info->rx_attr->caps = FI_MSG | FI_RECV;
	info->rx_attr->msg_order = FI_ORDER_SAS;
	info->rx_attr->size = static_cast<size_t>(port.dev_attr.max_qp_wr);
	info->rx_attr->iov_limit = static_cast<size_t>(port.dev_attr.max_sge);
	info->ep_attr->type = FI_EP_MSG;
	info->ep_attr->protocol = FI_PROTO_RDMA_CM_IB_RC;
	info->ep_attr->protocol_version = 1;
	info->ep_attr->max_msg_size = port.port_attr.max_msg_sz;
	info->domain_attr->name = dup(port.device);
	info->domain_attr->threading = FI_THREAD_SAFE;
	info->domain_attr->control_progress = FI_PROGRESS_AUTO;
	info->domain_attr->data_progress = FI_PROGRESS_AUTO;
	info->domain_attr->resource_mgmt = FI_RM_ENABLED;
	info->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
				     FI_MR_PROV_KEY;
	info->domain_attr->cq_cnt = static_cast<size_t>(port.dev_attr.max_cq);
	info->domain_attr->ep_cnt = static_cast<size_t>(port.dev_attr.max_qp);
	info->domain_attr->cq_data_size = sizeof(uint32_t);
	info->fabric_attr->name = dup(port.fabric);
	info->fabric_attr->prov_version = prov.version;
	info->fabric_attr->api_version = api_version;
	return info;
}

bool matches(const struct fi_info *info, const struct fi_info *hints)
{
	if (!hints)
		return true;
	if ((hints->caps & info->caps) != hints->caps)
		return false;
	if (hints->ep_attr && hints->ep_attr->type != FI_EP_UNSPEC &&
	    hints->ep_attr->type != info->ep_attr->type)
		return false;
	if (hints->addr_format != FI_FORMAT_UNSPEC && hints->addr_format != info->addr_format)
		return false;
	if (hints->domain_attr && hints->domain_attr->name &&
	    strcmp(hints->domain_attr->name, info->domain_attr->name) != 0)
		return false;
	if (hints->fabric_attr && hints->fabric_attr->name &&
	    strcmp(hints->fabric_attr->name, info->fabric_attr->name) != 0)
		return false;
	return true;
}

} // namespace

int getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
	    const struct fi_info *hints, struct fi_info **info) noexcept
{
	(void)node;
	(void)service;
	(void)flags;
	*info = nullptr;
	if (version < min_api_version) {
		FI_INFO(&prov, FI_LOG_CORE, "API version %u.%u is older than 1.5\n",
			FI_MAJOR(version), FI_MINOR(version));
		return -FI_ENODATA;
	}
	return guarded([&] {
		info_ptr head; /* owns the whole list until it is handed out */
		struct fi_info *last = nullptr;
		for (const port_desc &port : active_ports()) {
			info_ptr one = msg_info(port);
			if (!matches(one.get(), hints))
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
