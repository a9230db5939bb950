/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* The vwait counter: util::sw_cntr fed by the verbs CQs of the endpoints bound to it. See
 * include/vwait/cntr.h. */
#include "config.h"

#include "vwait/cntr.h"
#include "vwait/cq.h"
#include "vwait/domain.h"
#include "vwait/eq.h"
#include "vwait/util/wait.h"
#include "vwait/vwait.h"

#include <poll.h>

#include <memory>

namespace vwait
{

verbs_cntr::verbs_cntr(domain *dom, const struct fi_cntr_attr &attr)
    : util::sw_cntr(&prov, attr), domain_(dom)
{
	set_wait_policy(get_params().wait);
}

verbs_cntr::~verbs_cntr() = default;

int verbs_cntr::add_feed(verbs_cq *q) noexcept
{
	util::lock_guard<util::mutex> lock(feeds_mu_);
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

/* Under feeds_mu_. The counter hears of q's completion events (wake()), and its waiter, if it
 * blocks on fds, watches q's channel: whichever thread drains it, every CQ and counter that
 * waits for that channel's events is told. */
int verbs_cntr::hold_channel(verbs_cq *q, feed &f) noexcept
{
	int ret = guard([&] {
		q->add_event_listener(this);
		return 0;
	});
	if (ret)
		return ret;
	util::waiter *w = wait_object();
	const std::shared_ptr<comp_channel> &ch = q->channel();
	if (!w || !ch || w->kind() == FI_WAIT_YIELD)
		return 0;
	ret = w->hold_source(ch->fd(), POLLIN, comp_channel::drain_source, ch.get());
	if (ret) {
		FI_WARN(&prov, FI_LOG_CNTR, "counter: completion channel fd %d as a source: %s\n",
		        ch->fd(), fi_strerror(-ret));
		q->remove_event_listener(this);
		return ret;
	}
	f.channel = ch;
	return 0;
}

/* Under feeds_mu_. */
void verbs_cntr::drop_channel(verbs_cq *q, feed &f) noexcept
{
	q->remove_event_listener(this);
	if (f.channel) {
		wait_object()->drop_source(f.channel->fd());
		f.channel.reset();
	}
}

void verbs_cntr::remove_feed(verbs_cq *q) noexcept
{
	util::lock_guard<util::mutex> lock(feeds_mu_);
	auto it = feeds_.find(q);
	if (it == feeds_.end() || --it->second.refs)
		return;
	drop_channel(q, it->second);
	feeds_.erase(it);
}

void verbs_cntr::progress() noexcept
{
	{
		util::lock_guard<util::mutex> lock(feeds_mu_);
		for (auto &f : feeds_)
			f.first->progress();
	}
	control_progress_if_due(); /* a spinning reader's share of control progress (eq.h) */
}

int verbs_cntr::arm() noexcept
{
	const uint64_t before = poll_cookie();
	{
		util::lock_guard<util::mutex> lock(feeds_mu_);
		/* only the CQs whose channel our waiter watches: a YIELD wait just polls */
		for (auto &f : feeds_) {
			if (!f.second.channel)
				continue;
			if (int ret = f.first->arm())
				return ret;
		}
		/* what completed before the arming raised no event: look once more */
		for (auto &f : feeds_)
			f.first->progress();
	}
	return poll_cookie() != before ? -FI_EAGAIN : 0;
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
		return util::cntr_install(std::make_unique<verbs_cntr>(dom, *attr), out, context);
	});
}

} // namespace vwait
