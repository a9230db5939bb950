/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* The verbs owners' failure line (verbs.h): a deleter that cannot destroy says so. And siw's
 * mmap key plug (verbs.h: siw_key_plug). */
#include "config.h"

#include "vwait/util/thread_safety.h"
#include "vwait/verbs.h"
#include "vwait/vwait.h"

#include <cerrno>
#include <utility>
#include <vector>

namespace vwait::verbs
{

void destroy_failed(const char *call, int code) noexcept
{
	FI_WARN(&prov, FI_LOG_CORE, "%s: %s\n", call, fi_strerror(-code));
}

namespace
{
/* siw's CQE is 32 bytes: 32768 of them and the control word span 257 pages, past page 144
 * from any page below it. */
constexpr int plug_entries = 32768;

/* The plugs' lock: taken with no other lock held (domain_open). */
util::mutex plugs_mu{lock_level::alone};
} // namespace

std::shared_ptr<struct ibv_cq> siw_key_plug(struct ibv_context *ctx) noexcept
{
	util::lock_guard<util::mutex> lock(plugs_mu);
	try {
		/* the plugs, by context: made at the first siw domain, not at load, and destroyed
		 * at exit or unload (weak references only: a domain holds its plug; a global
		 * allocated at load and never freed was a leak to LeakSanitizer each time
		 * libfabric unloaded the plugin) */
		static std::vector<std::pair<struct ibv_context *, std::weak_ptr<struct ibv_cq>>>
		    plugs;
		std::weak_ptr<struct ibv_cq> *slot = nullptr;
		for (auto &p : plugs)
			if (p.first == ctx)
				slot = &p.second;
		if (!slot) {
			plugs.emplace_back(ctx, std::weak_ptr<struct ibv_cq>());
			slot = &plugs.back().second;
		}
		if (std::shared_ptr<struct ibv_cq> plug = slot->lock())
			return plug;
		errno = 0;
		cq_ptr cq(ibv_create_cq(ctx, plug_entries, nullptr, nullptr, 0));
		if (!cq) {
			FI_WARN(
			    &prov, FI_LOG_DOMAIN,
			    "%s: the mmap key plug (a CQ of %d entries) failed: %s; past 144 pages "
			    "of queues in this process, CQ and QP creation may fail "
			    "(fi_vwait(7))\n",
			    ibv_get_device_name(ctx->device), plug_entries,
			    fi_strerror(-create_code()));
			return nullptr;
		}
		std::shared_ptr<struct ibv_cq> plug(cq.release(), cq_deleter());
		*slot = plug;
		return plug;
	} catch (...) {
		FI_WARN(&prov, FI_LOG_DOMAIN, "%s: no memory for the mmap key plug\n",
		        ibv_get_device_name(ctx->device));
		return nullptr;
	}
}

} // namespace vwait::verbs
