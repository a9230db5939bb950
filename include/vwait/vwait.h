/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* vwait provider: the provider object, its parameters and shared helpers. Internal header. */
#ifndef VWAIT_VWAIT_H
#define VWAIT_VWAIT_H

#include <rdma/fabric.h>
#include <rdma/providers/fi_log.h>
#include <rdma/providers/fi_prov.h>

#include "vwait/util/guard.h"
#include "vwait/util/lock_order.h"
#include "vwait/util/wait_policy.h"

#include <cstddef>
#include <cstdint>
#include <new>
#include <string>

namespace vwait
{

/* The provider as libfabric knows it; every log line goes through it. */
extern struct fi_provider prov;

constexpr const char *prov_name = "vwait";
/* The API version of the headers vwait is built against: the lowest fi_version it reports. */
constexpr uint32_t build_api_version = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION);
/* The newest API level vwait is tested against (Debian 13's libfabric 2.1, contrib/debian13):
 * the highest fi_version it reports, unless its headers are newer still. */
constexpr uint32_t max_api_version = FI_VERSION(2, 1);
/* The fi_version vwait reports to a running libfabric of API level running (fi_version()).
 * libfabric skips a provider whose fi_version is below what the application asks for, so a
 * build that is older than the running library follows it, up to max_api_version; every field
 * vwait fills is valid at each of these levels (fields added later stay as libfabric's
 * fi_allocinfo made them: zero), and fi_getinfo fills them for the version the application
 * asked for (api_version in fabric_attr, comp_order, mr_mode). */
constexpr uint32_t pick_api_version(uint32_t running)
{
	const uint32_t capped = running < max_api_version ? running : max_api_version;
	return capped > build_api_version ? capped : build_api_version;
}
/* The oldest API version an application may ask for (Open MPI 4.1 asks for 1.5). */
constexpr uint32_t min_api_version = FI_VERSION(1, 5);

/* Run-time parameters (fi_info -e lists them as FI_VWAIT_*), read once in fi_prov_ini. */
struct params {
	std::string device;       /* only this verbs device; empty: all */
	int cm_timeout_ms = 2000; /* rdma_resolve_addr / route; a DGRAM name query */
	/* FI_VWAIT_WAIT_POLICY, FI_VWAIT_SPIN_US (unset: default_adaptive_cap_us for adaptive,
	 * default_spin_us for fixed) */
	util::wait_policy wait{util::wait_policy_kind::adaptive, util::default_adaptive_cap_us};
	int keepalive_ms = 0; /* probe period of connected endpoints; 0: off (eq.cpp) */
	/* longest a disconnected endpoint's FI_SHUTDOWN waits for its unread completions; 0: it
	 * never waits (eq.cpp) */
	int shutdown_hold_ms = 1000;
	/* FI_VWAIT_FLOW_CTRL: ofi_rxm's credit-based flow control offered (flow_ctrl.h) */
	bool flow_ctrl = true;
	/* FI_VWAIT_MR_CACHE: the domain's registration cache (mr.cpp), when a monitor can be
	 * had; its bounds from libfabric's FI_MR_CACHE_MAX_COUNT / FI_MR_CACHE_MAX_SIZE, and
	 * FI_MR_CACHE_MONITOR=disabled turns it off */
	bool mr_cache = mr_cache_default;
	size_t mr_cache_max_count = 1024;
	size_t mr_cache_max_size = 0; /* 0: total memory / CPUs / 2, as libfabric's */
	bool mr_cache_monitor_disabled = false;
	static constexpr bool mr_cache_default = true;
};
const params &get_params() noexcept;

/* nothing throws across the ABI: see util::guard */
using util::guard;

} // namespace vwait

#endif
