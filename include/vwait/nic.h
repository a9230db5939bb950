/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* fi_info->nic for vwait infos: device, bus and link attributes plus the wait objects vwait
 * supports per object kind (rdma/fi_ext_vwait.h), printed by fi_tostr (fi_info -v). */
#ifndef VWAIT_NIC_H
#define VWAIT_NIC_H

#include <rdma/fabric.h>
#include <rdma/fi_ext_vwait.h>

#include "vwait/policy_stats.h"

#include <cstddef>
#include <string>

namespace vwait
{

/* The one table of what vwait supports, with the wait policy in force (the parameters); the
 * man page and fi_getinfo are checked against it. */
struct fi_vwait_wait_attr wait_support() noexcept;

/* Appends the wait-object table in the fid_nic tostr format to buf (capacity len, bytes from
 * strlen(buf) on), one "kind: FI_WAIT_X, FI_WAIT_Y" line per kind. */
void wait_support_tostr(const struct fi_vwait_wait_attr &attr, char *buf, size_t len) noexcept;

/* Appends "vwait_mr_cache: on (monitor, bounds)" or "off (reason)" in the same format
 * (mr.cpp). */
void mr_cache_tostr(char *buf, size_t len) noexcept;

/* snprintf that appends at strlen(buf) and never writes past buf + len (the tostr slots). */
__attribute__((format(printf, 3, 4))) void nic_append(char *buf, size_t len, const char *fmt,
                                                      ...) noexcept;

/* struct fi_vwait_wait_ops, for fi_open_ops on fabrics and domains. */
extern struct fi_vwait_wait_ops wait_ops;
/* struct fi_vwait_policy_stats_ops (vwait/policy_stats.h, not installed), and the same
 * counts in the debug log */
extern struct fi_vwait_policy_stats_ops policy_stats_ops;
void log_policy_stats() noexcept;

struct nic_desc {
	std::string device;       /* ibv_get_device_name */
	std::string driver;       /* the verbs driver (rxe, mlx5, ...) */
	std::string firmware;     /* ibv_device_attr::fw_ver */
	uint32_t vendor_id = 0;   /* ibv_device_attr::vendor_id */
	uint32_t vendor_part = 0; /* ibv_device_attr::vendor_part_id */
	uint32_t hw_ver = 0;      /* ibv_device_attr::hw_ver */
	std::string address;      /* the port's address, as text */
	size_t mtu = 0;           /* bytes */
	size_t speed = 0;         /* bits per second */
	bool up = false;
	std::string network_type; /* "InfiniBand" or "Ethernet" */
};

/* A fid_nic allocated as libfabric frees and copies them (malloc / strdup); nullptr on ENOMEM. */
struct fid_nic *nic_create(const nic_desc &desc) noexcept;

} // namespace vwait

#endif
