/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* The vwait fabric: the root object; it opens domains, passive endpoints, EQs and wait sets,
 * and runs fi_trywait. */
#include "config.h"

#include "vwait/domain.h"
#include "vwait/ep.h"
#include "vwait/eq.h"
#include "vwait/fabric.h"
#include "vwait/nic.h"
#include "vwait/util/enosys.h"
#include "vwait/util/fid.h"
#include "vwait/util/trywait.h"
#include "vwait/util/wait.h"
#include "vwait/vwait.h"

#include <atomic>
#include <cstring>
#include <memory>
#include <string>

namespace vwait
{

/* fi_open_ops(FI_VWAIT_WAIT_OPS): the wait-object support table (rdma/fi_ext_vwait.h); and
 * FI_VWAIT_POLICY_STATS_OPS, the wait policy's counts (vwait/policy_stats.h, debug). */
int fabric_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops,
                    void *context) noexcept
{
	(void)fid;
	(void)context;
	if (!name || !ops) {
		FI_WARN(&prov, FI_LOG_FABRIC, "fi_open_ops: %s is NULL\n", !name ? "name" : "ops");
		return -FI_EINVAL;
	}
	const bool stats = strcmp(name, FI_VWAIT_POLICY_STATS_OPS) == 0;
	if (!stats && strcmp(name, FI_VWAIT_WAIT_OPS) != 0) {
		FI_INFO(&prov, FI_LOG_FABRIC, "fi_open_ops: no ops named \"%s\"\n", name);
		return -FI_ENOSYS;
	}
	if (flags) {
		FI_WARN(&prov, FI_LOG_FABRIC, "fi_open_ops(%s): flags 0x%llx must be 0\n", name,
		        static_cast<unsigned long long>(flags));
		return -FI_EINVAL;
	}
	*ops = stats ? static_cast<void *>(&policy_stats_ops) : static_cast<void *>(&wait_ops);
	return FI_SUCCESS;
}

namespace
{

int fabric_close(struct fid *fid) noexcept
{
	auto *box = fabric_box::of(fid);
	if (box->obj->busy()) {
		FI_WARN(&prov, FI_LOG_FABRIC, "fabric %s still has objects open\n",
		        box->obj->name().c_str());
		return -FI_EBUSY;
	}
	delete box->obj;
	delete box;
	log_policy_stats();
	return FI_SUCCESS;
}

struct fi_ops fabric_fi_ops = {
    .size = sizeof(struct fi_ops),
    .close = fabric_close,
    .bind = util::unsupported{},
    .control = util::unsupported{},
    .ops_open = fabric_ops_open,
    .tostr = util::unsupported{},
    .ops_set = util::unsupported{},
};

/* Wait sets hold the fabric open; fi_trywait runs over any mix of vwait waitables. */
int fabric_wait_open(struct fid_fabric *fid, struct fi_wait_attr *attr,
                     struct fid_wait **waitset) noexcept
{
	fabric *fab = fabric_box::of(fid)->obj;
	fab->hold();
	int ret = util::wait_open(
	    &prov, attr, waitset, [fab] { fab->unhold(); }, get_params().wait);
	if (ret)
		fab->unhold();
	return ret;
}

int fabric_trywait(struct fid_fabric *, struct fid **fids, int count) noexcept
{
	return util::trywait(&prov, fids, count);
}

struct fi_ops_fabric fabric_ops = {
    .size = sizeof(struct fi_ops_fabric),
    .domain = domain_open,
    .passive_ep = pep_open,
    .eq_open = eq_open,
    .wait_open = fabric_wait_open,
    .trywait = fabric_trywait,
};

} // namespace

int fabric_open(struct fi_fabric_attr *attr, struct fid_fabric **out, void *context) noexcept
{
	if (!attr || !out) {
		FI_WARN(&prov, FI_LOG_FABRIC, "fi_fabric: %s is NULL\n", !attr ? "attr" : "fabric");
		return -FI_EINVAL;
	}
	*out = nullptr;
	return guard([&] {
		auto obj = std::make_unique<fabric>(attr->name, attr->api_version);
		fabric_box::hand_out(obj, FI_CLASS_FABRIC, context, &fabric_fi_ops, out,
		                     [&](struct fid_fabric &f) {
			                     f.ops = &fabric_ops;
			                     f.api_version = attr->api_version;
		                     });
		return FI_SUCCESS;
	});
}

} // namespace vwait
