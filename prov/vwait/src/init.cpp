/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* vwait provider entry point: fi_prov_ini, parameters, cleanup. */
#include "config.h"

#include "vwait/eq.h"
#include "vwait/fabric.h"
#include "vwait/info.h"
#include "vwait/util/helper_thread.h"
#include "vwait/util/mem_monitor.h"
#include "vwait/util/wait.h"
#include "vwait/vwait.h"

#include <cstdlib>
#include <strings.h>

namespace vwait
{

namespace
{

params the_params;

/* An integer parameter of at least min: *out (its default) is kept when it is unset, or below
 * min (one warning line naming it, its value and what is used). */
void int_param(const char *name, const char *env, int min, int *out) noexcept
{
	int v = 0;
	if (fi_param_get_int(&prov, name, &v) != FI_SUCCESS)
		return;
	if (v >= min)
		*out = v;
	else
		FI_WARN(&prov, FI_LOG_CORE, "%s=%d is %s; using %d\n", env, v,
		        min > 0 ? "not positive" : "negative", *out);
}

void read_params() noexcept
{
	fi_param_define(&prov, "device", FI_PARAM_STRING,
	                "Use only the verbs device of this name (for example rxe0); "
	                "default: every device with an active port.");
	fi_param_define(&prov, "cm_timeout", FI_PARAM_INT,
	                "Milliseconds rdma_cm may take to resolve an address or a route, and a "
	                "DGRAM fi_getinfo(node, service) to learn the name of the endpoint there "
	                "(default: %d).",
	                the_params.cm_timeout_ms);
	fi_param_define(&prov, "keepalive_ms", FI_PARAM_INT,
	                "Dead-peer detection: every this many milliseconds, a zero-byte RDMA "
	                "write probes each connected endpoint, so that a peer that went silent "
	                "(node down, link cut) turns into error completions of what is posted "
	                "and FI_SHUTDOWN within 2 x (period + RC retry budget); 0 (default): off.");
	fi_param_define(&prov, "shutdown_hold_ms", FI_PARAM_INT,
	                "When a peer disconnects, FI_SHUTDOWN waits until the completions that "
	                "had arrived before the disconnect have been read from the endpoint's "
	                "CQs, at most this many milliseconds (default: %d); 0: it never waits.",
	                the_params.shutdown_hold_ms);

	fi_param_define(&prov, "flow_ctrl", FI_PARAM_BOOL,
	                "Offer ofi_rxm credit-based flow control on MSG endpoints, as upstream "
	                "verbs does: a send that would find no receive posted at the peer is held "
	                "back (-FI_EAGAIN) until the peer grants credits, which iWARP needs (no "
	                "receiver-not-ready retry); 0: ofi_rxm runs without it (default: 1).");
	fi_param_define(&prov, "mr_cache", FI_PARAM_BOOL,
	                "Keep each domain's memory registrations in a cache, so that a buffer "
	                "registered again (ofi_rxm's rendezvous and RMA for an application that "
	                "passes no descriptors) costs a lookup, not ibv_reg_mr + ibv_dereg_mr. "
	                "A userfaultfd monitor takes a range out of the cache before its memory "
	                "can be reused; where userfaultfd is refused, or FI_MR_CACHE_MONITOR="
	                "disabled or FI_MR_CACHE_MAX_COUNT=0, there is no cache (fi_info -v says "
	                "why). It keeps registrations from the first buffer registered again: a "
	                "process that registers each buffer once keeps none and starts no "
	                "thread. Bounds: FI_MR_CACHE_MAX_COUNT, FI_MR_CACHE_MAX_SIZE. Default: %d "
	                "(%s).",
	                params::mr_cache_default ? 1 : 0,
	                params::mr_cache_default ? "on" : "off; 1 turns it on");
	fi_param_define(&prov, "wait_policy", FI_PARAM_STRING,
	                "How blocking calls (fi_cq_sread, fi_cntr_wait, fi_eq_sread, fi_wait) "
	                "wait: adaptive (spin up to twice the measured wake-up cost, at most "
	                "FI_VWAIT_SPIN_US, while recent waits were shorter than it and CPUs "
	                "are not short, else arm and sleep), block (never spin), or fixed (spin "
	                "FI_VWAIT_SPIN_US, then arm and sleep). Default: adaptive.");
	fi_param_define(&prov, "spin_us", FI_PARAM_INT,
	                "Microseconds a blocking call may poll before it arms and sleeps: the "
	                "cap of adaptive, whose budget is twice the measured wake-up cost "
	                "(default: %u), the spin of fixed (%u when unset); at most %u.",
	                util::default_adaptive_cap_us, util::default_spin_us, util::max_spin_us);

	int flow_ctrl = 1;
	if (fi_param_get_bool(&prov, "flow_ctrl", &flow_ctrl) == FI_SUCCESS)
		the_params.flow_ctrl = flow_ctrl != 0;

	int mr_cache = the_params.mr_cache;
	if (fi_param_get_bool(&prov, "mr_cache", &mr_cache) == FI_SUCCESS)
		the_params.mr_cache = mr_cache != 0;
	/* libfabric's own knobs, where this libfabric defines them (its core, prov NULL) */
	size_t count = 0, size = 0;
	if (fi_param_get_size_t(nullptr, "mr_cache_max_count", &count) == FI_SUCCESS)
		the_params.mr_cache_max_count = count;
	if (fi_param_get_size_t(nullptr, "mr_cache_max_size", &size) == FI_SUCCESS)
		the_params.mr_cache_max_size = size;
	char *monitor = nullptr;
	if (fi_param_get_str(nullptr, "mr_cache_monitor", &monitor) == FI_SUCCESS && monitor)
		the_params.mr_cache_monitor_disabled = strcasecmp(monitor, "disabled") == 0;

	char *device = nullptr;
	if (fi_param_get_str(&prov, "device", &device) == FI_SUCCESS && device)
		the_params.device = device;
	int_param("keepalive_ms", "FI_VWAIT_KEEPALIVE_MS", 0, &the_params.keepalive_ms);
	int_param("shutdown_hold_ms", "FI_VWAIT_SHUTDOWN_HOLD_MS", 0, &the_params.shutdown_hold_ms);
	int_param("cm_timeout", "FI_VWAIT_CM_TIMEOUT", 1, &the_params.cm_timeout_ms);
	char *policy = nullptr;
	if (fi_param_get_str(&prov, "wait_policy", &policy) == FI_SUCCESS && policy &&
	    !util::parse_wait_policy(policy, &the_params.wait.kind))
		FI_WARN(&prov, FI_LOG_CORE,
		        "FI_VWAIT_WAIT_POLICY=%s is not adaptive, block or fixed; using %s\n",
		        policy, util::wait_policy_name(the_params.wait.kind));
	/* the default follows the policy: adaptive's is a cap on 2x the measured wake-up cost */
	the_params.wait.spin_us = the_params.wait.kind == util::wait_policy_kind::adaptive
	                              ? util::default_adaptive_cap_us
	                              : util::default_spin_us;
	int spin = 0;
	if (fi_param_get_int(&prov, "spin_us", &spin) == FI_SUCCESS) {
		if (spin < 0)
			FI_WARN(&prov, FI_LOG_CORE, "FI_VWAIT_SPIN_US=%d is negative; using %u\n",
			        spin, the_params.wait.spin_us);
		else if (static_cast<unsigned>(spin) > util::max_spin_us) {
			FI_WARN(&prov, FI_LOG_CORE, "FI_VWAIT_SPIN_US=%d is above %u; using %u\n",
			        spin, util::max_spin_us, util::max_spin_us);
			the_params.wait.spin_us = util::max_spin_us;
		} else {
			the_params.wait.spin_us = static_cast<unsigned>(spin);
		}
	}
}

/* libfabric calls this once, at fi_fini, before it unloads the plugin: the threads of objects
 * the application never closed stop here (util/helper_thread.h), and the registration caches'
 * memory monitor closes its userfaultfd (util/mem_monitor.h). Beyond them, vwait keeps no
 * global state but the parameters, what info_ports() probed of the devices, the blocking hook
 * and the list of open EQs (eq.cpp, linked through the EQs). */
void cleanup() noexcept
{
	util::set_blocking_hook(nullptr);
	util::mem_monitor::instance().shutdown();
	util::helper_thread::stop_all();
	forget_probes();
	the_params = params{};
}

} // namespace

const params &get_params() noexcept
{
	return the_params;
}

struct fi_provider prov = {
    .version = FI_VERSION(0, 1),
    .fi_version = build_api_version, /* fi_prov_ini: pick_api_version(fi_version()) */
    .context = {},
    .name = prov_name,
    .getinfo = getinfo,
    .fabric = fabric_open,
    .cleanup = cleanup,
};

} // namespace vwait

extern "C" {

FI_EXT_INI
{
	vwait::prov.fi_version = vwait::pick_api_version(fi_version());
	vwait::read_params();
	/* the EQ threads start when a thread of the process first may sleep (eq.h) */
	vwait::util::set_blocking_hook(&vwait::verbs_eq::start_threads);
	return &vwait::prov;
}

} // extern "C"
