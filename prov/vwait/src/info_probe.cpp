/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* fi_getinfo's device probing: the active ports of the verbs devices with their limits (the
 * inline data an RC QP takes, found once per device), a port's UD name, and the nic
 * description of a port (ids, firmware, link MTU and speed, driver). */
#include "config.h"

#include "vwait/av.h"
#include "vwait/info.h"
#include "vwait/util/thread_safety.h"
#include "vwait/verbs.h"
#include "vwait/vwait.h"

#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <climits>
#include <cstdio>
#include <cstring>
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

} // namespace

std::vector<port_desc> info_ports()
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

void forget_probes() noexcept
{
	util::lock_guard<util::mutex> lock(inline_mutex);
	delete inline_known;
	inline_known = nullptr;
}

bool port_ud_name(const port_desc &port, ud_name *out)
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

} // namespace vwait
