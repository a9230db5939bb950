/* The vwait counter: util::cntr fed by the verbs CQs of the endpoints bound to it. See
 * include/vwait/cntr.h. */
#include "config.h"

#include "vwait/cntr.h"
#include "vwait/cq.h"
#include "vwait/domain.h"
#include "vwait/util/wait.h"
#include "vwait/vwait.h"

#include <poll.h>

#include <memory>

namespace vwait
{

cntr::cntr(domain *dom, const struct fi_cntr_attr &attr) : util::cntr(&prov, attr), domain_(dom)
{
	domain_->hold();
}

cntr::~cntr()
{
	domain_->release();
}

int cntr::add_feed(cq *q) noexcept
{
	std::lock_guard<std::mutex> lock(feeds_mu_);
	return guard([&] {
		auto it = feeds_.find(q);
		if (it != feeds_.end()) {
			it->second.refs++;
			return 0;
		}
		auto added = feeds_.emplace(q, feed{}).first;
		added->second.refs = 1;
		if (int ret = hold_channel(q, added->second)) {
			feeds_.erase(added);
			return ret;
		}
		return 0;
	});
}

int cntr::hold_channel(cq *q, feed &f) noexcept
{
	(void)q;
	f.fd = -1;
	return 0;
}

void cntr::drop_channel(cq *q, feed &f) noexcept
{
	(void)q;
	f.fd = -1;
}

void cntr::remove_feed(cq *q) noexcept
{
	std::lock_guard<std::mutex> lock(feeds_mu_);
	auto it = feeds_.find(q);
	if (it == feeds_.end() || --it->second.refs)
		return;
	drop_channel(q, it->second);
	feeds_.erase(it);
}

void cntr::progress() noexcept
{
	std::lock_guard<std::mutex> lock(feeds_mu_);
	for (auto &f : feeds_)
		f.first->drive();
}

int cntr::arm() noexcept
{
	const uint64_t before = poll_cookie();
	{
		std::lock_guard<std::mutex> lock(feeds_mu_);
		for (auto &f : feeds_) {
			if (int ret = f.first->arm_events())
				return ret;
		}
		/* what completed before the arming raised no event: look once more */
		for (auto &f : feeds_)
			f.first->drive();
	}
	return poll_cookie() != before ? -FI_EAGAIN : 0;
}

cntr *verbs_cntr_of(struct fid *fid) noexcept
{
	if (!fid || fid->fclass != FI_CLASS_CNTR)
		return nullptr;
	util::waitable *w = nullptr;
	if (util::get_waitable(fid, &w) != 0 || !w)
		return nullptr;
	return dynamic_cast<cntr *>(w);
}

int cntr_open(struct fid_domain *domain_fid, struct fi_cntr_attr *attr, struct fid_cntr **out,
              void *context) noexcept
{
	if (!domain_fid || !out) {
		FI_WARN(&prov, FI_LOG_CNTR, "fi_cntr_open: %s is NULL\n",
		        !domain_fid ? "domain" : "cntr");
		return -FI_EINVAL;
	}
	*out = nullptr;
	if (int ret = util::cntr_check_attr(&prov, attr))
		return ret;
	domain *dom = domain_of(domain_fid);
	return guard([&] {
		return util::cntr_install(std::make_unique<cntr>(dom, *attr), out, context);
	});
}

} // namespace vwait
