/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* The vwait counter: the util layer's counter (values, every wait object, wait sets, poll
 * sets, the fid_cntr shim) fed by the verbs CQs of the endpoints it is bound to.
 *
 * Counting happens where work completions are translated (vwait::translate): each queue's
 * wr_ring carries the counters its endpoint bound for that direction, and every completion of
 * that kind adds 1 to the value (success) or to the error value (failure), whether or not it
 * also makes a CQ entry (FI_SELECTIVE_COMPLETION, fi_inject: a work request of a direction
 * with a counter is always signalled, see ep.h post_tx_locked).
 *
 * Progress: a counter is fed by the verbs CQs of the endpoint directions it is bound to (a
 * CQ the application bound, or the endpoint's internal CQ when the application bound a
 * counter but no CQ on that direction; see ep.h). fi_cntr_read / readerr / wait and poll
 * sets call progress(), which polls those CQs (what a CQ polls goes to its own ring or, for
 * an internal CQ, nowhere: counting is the only effect). A CQ whose software ring is full
 * stops polling until the application reads it, so a counter that shares a CQ with the
 * application's completions moves only as far as that CQ is read.
 *
 * Blocking: the completion channel of every feeding CQ is a (shared, refcounted) source of
 * the counter's waiter, and the counter listens to each CQ's channel events (wake()).
 * Before it blocks, a fi_cntr_wait arms every feeding CQ (ibv_req_notify_cq) and polls once
 * more; the next completion raises a channel event, the waiter drains it, and the wait
 * re-checks. No timer is involved. */
#ifndef VWAIT_CNTR_H
#define VWAIT_CNTR_H

#include "vwait/channel.h"
#include "vwait/util/cntr.h"
#include "vwait/util/held.h"
#include "vwait/util/thread_safety.h"

#include <rdma/fi_domain.h>

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>

namespace vwait
{

class cq_driver;
class verbs_cq;
class domain;

class verbs_cntr final : public util::sw_cntr
{
public:
	verbs_cntr(domain *dom, const struct fi_cntr_attr &attr);
	~verbs_cntr() override;

	domain *parent() const noexcept { return domain_.get(); }

	/* An endpoint enabled with this counter on a direction fed by q: poll q in progress(),
	 * wait on its channel. Counted per endpoint direction, so add/remove pair up. 0 or a
	 * negative FI_E* code (then nothing was added). */
	int add_feed(verbs_cq *q) noexcept;
	/* The endpoint closed: the reverse of add_feed (q must outlive this call). */
	void remove_feed(verbs_cq *q) noexcept;

	/* The counters a verbs CQ's events must reach are polled, not notified by the CQ's own
	 * waiter: poll sets and wait sets check them on every pass (trywait arms the CQs). */
	bool self_notifying() const noexcept override { return false; }

protected:
	void progress() noexcept override;
	/* Arms every feeding CQ, then polls once more: -FI_EAGAIN when the value or the error
	 * value moved meanwhile (the caller must not block), 0, or a negative FI_E* code. */
	int arm() noexcept override;

private:
	struct feed {
		size_t refs = 0;
		/* the CQ's channel, held as a source of our waiter (NULL: FI_WAIT_NONE or
		 * FI_WAIT_YIELD, whose waits only poll) */
		std::shared_ptr<comp_channel> channel;
	};
	/* the channel of q as a source of our waiter, and us as a listener of q's events */
	int hold_channel(verbs_cq *q, feed &f) noexcept;
	void drop_channel(verbs_cq *q, feed &f) noexcept;

	util::held<domain> domain_;
	util::mutex feeds_mu_{lock_level::cntr_feeds};
	/* what the counter does to a feeding CQ: poll it, arm it */
	std::map<cq_driver *, feed> feeds_;
};

/* The vwait counter behind a fid handed to fi_ep_bind: nullptr for anything else. */
/* struct fi_ops_domain::cntr_open */
int cntr_open(struct fid_domain *domain, struct fi_cntr_attr *attr, struct fid_cntr **cntr,
              void *context) noexcept;

} // namespace vwait

#endif
