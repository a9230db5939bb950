/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* The wait objects vwait supports per object kind (rdma/fi_ext_vwait.h): the one table, the
 * wait policy in force, its text in the fid_nic (fi_info -v) and fi_vwait_wait_ops.query. */
#include "config.h"

#include "vwait/nic.h"
#include "vwait/policy_stats.h"
#include "vwait/vwait.h"

#include <cinttypes>
#include <cstddef>

namespace vwait
{

/* No padding in the structure: copies of it (fi_dupinfo of the nic's prov_attr, tests) are
 * compared byte by byte, and padding would hold whatever the stack held (a field added after
 * wake_us as a uint32_t left 4 bytes of it, caught only on Debian 13). */
static_assert(offsetof(struct fi_vwait_wait_attr, wake_us) + sizeof(uint32_t) ==
                  sizeof(struct fi_vwait_wait_attr),
              "fi_vwait_wait_attr has padding");

namespace
{

constexpr uint64_t bit(enum fi_wait_obj w)
{
	return FI_VWAIT_WAIT_BIT(w);
}

/* What vwait supports today. Each line changes with the code that makes it true. */
constexpr uint64_t every_object_wait = bit(FI_WAIT_NONE) | bit(FI_WAIT_UNSPEC) | bit(FI_WAIT_SET) |
                                       bit(FI_WAIT_FD) | bit(FI_WAIT_MUTEX_COND) |
                                       bit(FI_WAIT_YIELD) | bit(FI_WAIT_POLLFD);
constexpr uint64_t every_wait_set_wait = bit(FI_WAIT_UNSPEC) | bit(FI_WAIT_FD) |
                                         bit(FI_WAIT_MUTEX_COND) | bit(FI_WAIT_YIELD) |
                                         bit(FI_WAIT_POLLFD);
const struct fi_vwait_wait_attr support = {
    .version = FI_VWAIT_WAIT_ATTR_VERSION,
    .kinds = FI_VWAIT_KIND_MAX,
    .wait_objs =
        {
            /* FI_VWAIT_KIND_CQ: util::sw_cq over an ibv_cq on a completion channel */
            every_object_wait,
            /* FI_VWAIT_KIND_CNTR: util::sw_cntr fed by verbs CQs, waiting on their channels */
            every_object_wait,
            /* FI_VWAIT_KIND_EQ: util::sw_eq with the rdma_cm channel as a source of its
               waiter */
            every_object_wait,
            /* FI_VWAIT_KIND_WAIT_SET: util::wait_open */
            every_wait_set_wait,
        },
    .features = FI_VWAIT_FEAT_WAIT_SET | FI_VWAIT_FEAT_POLL_SET | FI_VWAIT_FEAT_TRYWAIT,
    .unspec_is = FI_WAIT_FD,
    .wait_policy = FI_VWAIT_POLICY_ADAPTIVE, /* wait_support() fills in the parameters */
    .spin_us = 0,
    .wake_us = 0,
};

const char *const kind_names[FI_VWAIT_KIND_MAX] = {"cq", "cntr", "eq", "wait_set"};

struct wait_name {
	enum fi_wait_obj obj;
	const char *name;
};
const wait_name wait_names[] = {
    {FI_WAIT_NONE, "FI_WAIT_NONE"},
    {FI_WAIT_UNSPEC, "FI_WAIT_UNSPEC"},
    {FI_WAIT_SET, "FI_WAIT_SET"},
    {FI_WAIT_FD, "FI_WAIT_FD"},
    {FI_WAIT_MUTEX_COND, "FI_WAIT_MUTEX_COND"},
    {FI_WAIT_YIELD, "FI_WAIT_YIELD"},
    {FI_WAIT_POLLFD, "FI_WAIT_POLLFD"},
};

int query_wait(struct fid *fid, struct fi_vwait_wait_attr *attr) noexcept
{
	(void)fid;
	if (!attr) {
		FI_WARN(&prov, FI_LOG_CORE, "fi_vwait_wait_ops.query: attr is NULL\n");
		return -FI_EINVAL;
	}
	*attr = wait_support();
	return FI_SUCCESS;
}

} // namespace

struct fi_vwait_wait_ops wait_ops = {
    .size = sizeof(struct fi_vwait_wait_ops),
    .query = query_wait,
};

struct fi_vwait_policy_stats policy_stats() noexcept;

namespace
{
int query_policy_stats(struct fid *fid, struct fi_vwait_policy_stats *stats) noexcept
{
	(void)fid;
	if (!stats) {
		FI_WARN(&prov, FI_LOG_CORE, "fi_vwait_policy_stats_ops.query: stats is NULL\n");
		return -FI_EINVAL;
	}
	*stats = policy_stats();
	return FI_SUCCESS;
}
} // namespace

struct fi_vwait_policy_stats_ops policy_stats_ops = {
    .size = sizeof(struct fi_vwait_policy_stats_ops),
    .query = query_policy_stats,
};

struct fi_vwait_wait_attr wait_support() noexcept
{
	struct fi_vwait_wait_attr attr = support;
	const util::wait_policy &p = get_params().wait;
	switch (p.kind) {
	case util::wait_policy_kind::adaptive:
		attr.wait_policy = FI_VWAIT_POLICY_ADAPTIVE;
		break;
	case util::wait_policy_kind::block:
		attr.wait_policy = FI_VWAIT_POLICY_BLOCK;
		break;
	case util::wait_policy_kind::fixed:
		attr.wait_policy = FI_VWAIT_POLICY_FIXED;
		break;
	}
	attr.spin_us = p.spin_us;
	const util::wake_stats &process = util::process_wake_stats();
	const uint64_t w = process.cost_ns();
	attr.wake_us = static_cast<uint32_t>((w + 999) / 1000);
	return attr;
}

struct fi_vwait_policy_stats policy_stats() noexcept
{
	const util::policy_decisions &d = util::process_decisions();
	const util::wake_stats &process = util::process_wake_stats();
	constexpr auto relaxed = std::memory_order_relaxed;
	return {d.spun.load(relaxed),        d.probes.load(relaxed),
	        d.armed_long.load(relaxed),  d.judged_short.load(relaxed),
	        d.judged_long.load(relaxed), process.cost_ns(),
	        process.path_ns(),           process.wake_ns()};
}

void log_policy_stats() noexcept
{
	const struct fi_vwait_policy_stats s = policy_stats();
	if (s.spun + s.probes + s.armed_long == 0)
		return;
	FI_INFO(&prov, FI_LOG_CORE,
	        "wait policy: waits spun %" PRIu64 ", probes %" PRIu64 ", armed %" PRIu64
	        "; judged short %" PRIu64 ", long %" PRIu64 "; W %" PRIu64 " ns (path %" PRIu64
	        ", wake-up %" PRIu64 ")\n",
	        s.spun, s.probes, s.armed_long, s.judged_short, s.judged_long, s.wake_cost_ns,
	        s.path_ns, s.wake_ns);
}

void wait_support_tostr(const struct fi_vwait_wait_attr &attr, char *buf, size_t len) noexcept
{
	nic_append(buf, len, "\t\tvwait_wait_objects:\n");
	for (unsigned k = 0; k < FI_VWAIT_KIND_MAX && k < attr.kinds; k++) {
		nic_append(buf, len, "\t\t\t%s:", kind_names[k]);
		const char *sep = " ";
		for (const wait_name &w : wait_names)
			if (attr.wait_objs[k] & bit(w.obj)) {
				nic_append(buf, len, "%s%s", sep, w.name);
				sep = ", ";
			}
		if (attr.wait_objs[k] == 0)
			nic_append(buf, len, " (not supported)");
		nic_append(buf, len, "\n");
	}
	nic_append(buf, len, "\t\t\tfeatures:%s%s%s%s\n",
	           attr.features & FI_VWAIT_FEAT_WAIT_SET ? " wait_set" : "",
	           attr.features & FI_VWAIT_FEAT_POLL_SET ? " poll_set" : "",
	           attr.features & FI_VWAIT_FEAT_TRYWAIT ? " trywait" : "",
	           attr.features ? "" : " (none)");
	for (const wait_name &w : wait_names)
		if (w.obj == attr.unspec_is)
			nic_append(buf, len, "\t\t\tFI_WAIT_UNSPEC is: %s\n", w.name);
	static const char *const policies[] = {"adaptive", "block", "fixed"};
	if (attr.version >= 2) {
		const char *policy = attr.wait_policy < 3 ? policies[attr.wait_policy] : "unknown";
		if (attr.wait_policy == FI_VWAIT_POLICY_BLOCK)
			nic_append(buf, len, "\t\t\twait_policy: block\n");
		else
			nic_append(buf, len, "\t\t\twait_policy: %s, spin up to %" PRIu32 " us\n",
			           policy, attr.spin_us);
	}
	if (attr.version >= 3 && attr.wait_policy == FI_VWAIT_POLICY_ADAPTIVE) {
		/* the attr was filled at fi_getinfo; what the process measured since counts too */
		uint32_t w = attr.wake_us;
		if (!w)
			w = static_cast<uint32_t>((util::process_wake_stats().cost_ns() + 999) /
			                          1000);
		if (w)
			nic_append(buf, len,
			           "\t\t\twake_up_cost: %" PRIu32
			           " us (adaptive polls up to that plus the sleep path)\n",
			           w);
		else
			nic_append(
			    buf, len,
			    "\t\t\twake_up_cost: not measured yet (learnt from this process's "
			    "first sleeps)\n");
	}
}

} // namespace vwait
