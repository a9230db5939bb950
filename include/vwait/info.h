/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* fi_getinfo for vwait: infos built from the verbs devices and their active ports. By concern:
 * info_probe.cpp (devices, ports, the nic), info_addr.cpp (addresses and names), info_attr.cpp
 * (the endpoint types' attributes, the ports' limits and the hints) and info.cpp (the loop
 * over ports x types); info_template.h holds what they share. */
#ifndef VWAIT_INFO_H
#define VWAIT_INFO_H

#include <infiniband/verbs.h>
#include <rdma/fabric.h>

#include "vwait/nic.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

struct sockaddr;

namespace vwait
{

struct ud_name;

struct info_deleter {
	void operator()(struct fi_info *info) const noexcept { fi_freeinfo(info); }
};
/* An fi_info list, owned. */
using info_ptr = std::unique_ptr<struct fi_info, info_deleter>;

/* The send and receive queue depth an endpoint gets when neither the hints nor the info ask
 * for one (tx_attr->size, rx_attr->size). 255, not 256: rxe keeps one slot of a queue of n
 * work requests empty and rounds n + 1 up to a power of two, so 256 maps 512 slots and 255
 * maps 256 (a send slot is its 208-byte WQE plus the larger of 16 bytes per SGE and the
 * inline bytes, rounded up to a power of two: 512 bytes with 4 SGEs and 256 inline, so the
 * send queue of 256 maps 260 KiB, of 255 132 KiB); siw and mlx5 round n itself, where 255
 * and 256 cost the same (fi_vwait(7), "Memory"). With FI_VWAIT_KEEPALIVE_MS the send queue
 * asks one slot more, for the probe. */
constexpr size_t default_queue_size = 255;
static_assert((default_queue_size & (default_queue_size + 1)) == 0,
              "rxe maps a power of two of slots for n + 1: keep n + 1 one");

/* struct fi_provider::getinfo */
int getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
            const struct fi_info *hints, struct fi_info **info) noexcept;

/* What fi_getinfo checks before it looks at a device for an MSG endpoint: the API version,
 * the address format and the addresses in hints. 0, -FI_ENODATA (cannot be met) or -FI_EINVAL
 * (malformed). */
int check_hints(uint32_t version, const struct fi_info *hints) noexcept;

/* What vwait learned of one active port of one device. */
struct port_desc {
	std::string device;
	std::string fabric; /* "IB-0x<subnet prefix>", as upstream verbs names it */
	uint8_t port_num;
	struct ibv_device_attr dev_attr;
	struct ibv_port_attr port_attr;
	size_t max_inline;
	/* an iWARP device (siw, cxgb4, irdma in iWARP mode): RC only (no UD), no immediate data,
	 * connections through rdma_cm over TCP (FI_PROTO_IWARP) */
	bool iwarp = false;
};

/* Device probing (info_probe.cpp). The active ports of the verbs devices vwait may use; throws
 * std::bad_alloc. */
std::vector<port_desc> info_ports();
/* Forgets what info_ports() probed of the devices (the provider's cleanup). */
void forget_probes() noexcept;
/* The UD name of port (QPN 0: fi_getname gives the endpoint's); false if it has no GID. */
bool port_ud_name(const port_desc &port, ud_name *out);

/* fi_info->nic's device and link attributes of port (fi_verbs(7)): ids, firmware, the active MTU
 * in bytes, the speed in bits per second, the state, the kernel driver (from sysfs, rooted at
 * sysfs: "/sys" but in tests). */
nic_desc port_nic_desc(const port_desc &port, const std::string &sysfs);
/* The one MTU conversion of the tree: bytes of a verbs MTU, 0 for a value that is none. */
size_t link_mtu_bytes(enum ibv_mtu mtu) noexcept;
uint64_t link_speed_bps(uint8_t active_speed, uint8_t active_width) noexcept; /* 0: unknown */

/* The fi_info fi_getinfo gives for an MSG endpoint of port under hints (which passed
 * check_hints), with src / dst (either may be NULL) as its addresses; NULL when the hints
 * cannot be met on that port. Throws std::bad_alloc. Exposed for test/fuzz: port may be made
 * up, no device is opened. */
struct fi_info *port_info(uint32_t version, const port_desc &port, const struct fi_info *hints,
                          const struct sockaddr *src, const struct sockaddr *dst);
/* The same for a DGRAM endpoint of port, named src (and dst, if not NULL). */
struct fi_info *dgram_port_info(uint32_t version, const port_desc &port,
                                const struct fi_info *hints, const ud_name &src,
                                const ud_name *dst);

} // namespace vwait

#endif
