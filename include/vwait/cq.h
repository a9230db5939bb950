/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* The vwait completion queue over an ibv_cq. Translation of a work completion into a
 * completion record (translate()) is kept apart from the queueing of records, so that a
 * software queue with wait objects can take the records later. */
#ifndef VWAIT_CQ_H
#define VWAIT_CQ_H

#include "vwait/channel.h"
#include "vwait/util/cq.h"
#include "vwait/util/fast_mutex.h"
#include "vwait/util/fid.h"
#include "vwait/util/held.h"
#include "vwait/verbs.h"
#include "vwait/wr_ring.h"

#include <rdma/fi_eq.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

namespace vwait
{

class domain;

/* One completion, independent of the CQ format it will be written in. */
/* Trivial on purpose: the poll path keeps arrays of them on the stack, which must cost nothing
 * to declare (translate() writes every field). */
struct completion {
	void *context;
	uint64_t flags;
	size_t len;
	uint64_t data;
	int err;        /* positive FI_E* value; 0: success */
	int prov_errno; /* vendor_err */
	int status;     /* enum ibv_wc_status */
	uint64_t src;   /* a datagram's sender (wr_ring::source), else FI_ADDR_NOTAVAIL */
	size_t olen;    /* FI_ETRUNC: the bytes that did not fit */
};

/* A work completion as a completion record; false when nothing is to be reported (a
 * successful unsignalled operation, or one of an endpoint that has closed). Returns the slot
 * to its ring in every case, and counts it on the ring's counter of its kind (success or
 * error, reported or not) unless the endpoint has closed. */
bool translate(const struct ibv_wc &wc, completion *out) noexcept;

/* The FI_E* value for a work completion status. */
int wc_status_error(enum ibv_wc_status status) noexcept;

/* What drives a verbs CQ from outside it: the counters it feeds (their progress and their
 * blocking waits), the CM (a disconnect's unread marks) and an endpoint that closes. */
class cq_driver
{
public:
	/* Poll the hardware CQ now: its work completions go to its ring (and are counted). */
	virtual void progress() noexcept = 0;
	/* Ask for an event on the next completion: 0 or a negative FI_E* code. */
	virtual int arm() noexcept = 0;
	/* Returns once no thread is inside progress() (translate()) any more: an endpoint that
	 * marked its rings closed calls it before its counters may go. */
	virtual void sync() noexcept = 0;

protected:
	~cq_driver() = default;
};

/* The vwait CQ: the util layer's software CQ (formats, error entries, every wait object, wait
 * sets, poll sets, sread, signal) fed from an ibv_cq. progress() moves work completions into
 * the software ring, in order, never more than it has room for. A CQ with a wait object gets
 * its ibv_cq on the completion channel of its waiter (one per device and waiter, shared with
 * the other CQs of that waiter); arm() asks for the next completion event, and an event
 * marks the CQ ready on its waiter and poll sets (on_event -> notify). */
class verbs_cq final : public util::sw_cq, public cq_events, public cq_driver
{
public:
	verbs_cq(domain *dom, const struct fi_cq_attr &attr, size_t size);
	~verbs_cq() override;

	/* After util::cq_install set up the wait object: the channel (if any) and the ibv_cq.
	 * 0 or a negative FI_E* code. */
	int create_hw() noexcept;

	struct ibv_cq *hw() const noexcept { return hw_.get(); }
	domain *parent() const noexcept { return domain_.get(); }

	/* An endpoint bound to this CQ closed: keep its ring until its late completions are
	 * polled (or this CQ closes). */
	void adopt(std::shared_ptr<wr_ring> ring);
	/* The device will complete nothing more of ring, a send queue fed to this CQ, whatever
	 * is still posted there (siw, once this side disconnected: rc_ep::shutdown): once the
	 * hardware CQ holds nothing more, progress() completes those work requests as flushed,
	 * in posting order, and keeps doing so for what is posted after, until the endpoint
	 * closes. Wakes the CQ's waiters (no device event will). May throw std::bad_alloc. */
	void flush_in_software(std::shared_ptr<wr_ring> ring);
	/* An endpoint's internal CQ (counters but no CQ on a direction): progress() translates
	 * (and so counts) every work completion and queues nothing. Before create_hw(). */
	void make_sink() noexcept { sink_ = true; }
	/* cq_driver (progress() and arm() serve sw_cq too) */
	void progress() noexcept override;
	int arm() noexcept override;
	void sync() noexcept override { util::lock_guard<util::fast_mutex> lock(progress_mutex_); }
	/* fi_close's first step; an endpoint closing its internal CQ calls it too */
	void close_begin() noexcept override;
	/* The device reported IBV_EVENT_CQ_ERR for this CQ; true the first time. */
	bool set_overrun() noexcept { return !overrun_.exchange(true, std::memory_order_acq_rel); }

	/* The CQ behind an ibv_cq's cq_context. */
	static verbs_cq *from_context(void *cq_context) noexcept
	{
		return static_cast<verbs_cq *>(static_cast<cq_events *>(cq_context));
	}

	/* Its waiter learns of its completions by itself when the waiter blocks on fds (FD,
	 * POLLFD, MUTEX_COND: the channel is one of the waiter's sources). A YIELD waiter never
	 * looks at fds: it polls the CQ on every pass. */
	bool self_notifying() const noexcept override { return waiter_drains_; }
	/* Poll sets (and counters) drain the CQ's channel themselves: every verbs CQ has one. */
	bool events_from(util::event_source &out) const noexcept override;
	/* fi_poll: entries queued, or progress found some; when empty, armed first, so that
	 * the next completion puts it back on the poll set's ready list. */
	bool poll_ready(uint64_t &cookie) noexcept override;
	/* Others that want to hear of this CQ's completion events (a counter it feeds): on each
	 * event, after the CQ's own notify(), w->wake() is called from the draining thread.
	 * remove_event_listener returns once no wake() of w is running or will follow. */
	void add_event_listener(util::waitable *w);
	void remove_event_listener(util::waitable *w) noexcept;
	/* The channel its ibv_cq reports to (never NULL after create_hw). */
	const std::shared_ptr<comp_channel> &channel() const noexcept { return channel_; }

protected:
	std::string describe_error(int prov_errno, const void *err_data) const override;
	void on_event() noexcept override;
	direct_read read_direct(void *buf, size_t count, fi_addr_t *src) noexcept override;

private:
	void report_overrun() noexcept VWAIT_REQUIRES(progress_mutex_);
	void queue(const completion *c, size_t n) noexcept VWAIT_REQUIRES(progress_mutex_);
	int poll_wc(struct ibv_wc *wc, size_t max) noexcept VWAIT_REQUIRES(progress_mutex_);
	ssize_t hand_over(struct ibv_wc *wc, int polled, void *buf, size_t count,
	                  fi_addr_t *src) noexcept VWAIT_REQUIRES(progress_mutex_);
	void queue_tail(completion first, const struct ibv_wc *rest, int n) noexcept
	    VWAIT_REQUIRES(progress_mutex_);
	void flush_stranded() noexcept VWAIT_REQUIRES(progress_mutex_);

	util::held<domain> domain_;
	std::shared_ptr<comp_channel> channel_; /* before hw_: the CQ goes first */
	verbs::cq_ptr hw_;
	/* keeps completions in order across threads */
	util::fast_mutex progress_mutex_{lock_level::cq_progress};
	/* the cold path's lists, one lock: rings of closed endpoints (taken under
	 * progress_mutex_ at close) and the counters fed by this CQ's events (their wake() runs
	 * under it) */
	util::mutex cold_mutex_{lock_level::cq_cold};
	std::vector<std::shared_ptr<wr_ring>> orphans_ VWAIT_GUARDED_BY(cold_mutex_);
	/* rings whose device completes no more (flush_in_software); stranded_due_: non-empty */
	std::vector<std::shared_ptr<wr_ring>> stranded_ VWAIT_GUARDED_BY(cold_mutex_);
	std::atomic<bool> stranded_due_{false};
	std::atomic<bool> overrun_{false};
	bool overrun_reported_ VWAIT_GUARDED_BY(progress_mutex_) = false;
	unsigned idle_polls_ VWAIT_GUARDED_BY(progress_mutex_) = 0;
	bool waiter_drains_ = false; /* its waiter polls the channel fd (see self_notifying) */
	std::vector<util::waitable *> event_listeners_ VWAIT_GUARDED_BY(cold_mutex_);
	bool sink_ = false;
};

/* The vwait CQ behind a fid handed to fi_ep_bind: nullptr for anything else (a CQ of another
 * provider, a util CQ, not a CQ at all). */
/* struct fi_ops_domain::cq_open */
int cq_open(struct fid_domain *domain, struct fi_cq_attr *attr, struct fid_cq **cq,
            void *context) noexcept;

} // namespace vwait

#endif
