/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* Completion channels as wait objects, the central mechanism (fi_vwait(7), "Completion channels").
 *
 * One ibv_comp_channel serves every CQ of one device context that is bound to the same waiter
 * (a wait set, or a CQ's private wait object). Its fd, non-blocking, is a source of that
 * waiter: when it polls readable the waiter calls drain(), which reads the pending CQ events
 * without blocking. Each event names the CQ that fired (its cq_context is the CQ's
 * cq_events), so readiness is O(1), not a scan: the CQ is told through on_event() and
 * marks itself ready on its waiter.
 *
 * Acks are batched: a CQ acknowledges its events every ack_batch events and all of them
 * before ibv_destroy_cq (which blocks until every event read has been acked). */
#ifndef VWAIT_CHANNEL_H
#define VWAIT_CHANNEL_H

#include "vwait/util/thread_safety.h"
#include "vwait/verbs.h"

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

namespace vwait
{

namespace util
{
class waiter;
}

/* What a CQ that waits on a channel gives the channel: the cq_context of its ibv_cq. */
class cq_events
{
public:
	/* Acks are sent every ack_batch events (ibv_ack_cq_events takes a lock: do it rarely). */
	static constexpr unsigned ack_batch = 64;

	cq_events() noexcept = default;
	cq_events(const cq_events &) = delete;
	cq_events &operator=(const cq_events &) = delete;

	/* The hardware CQ these events belong to; set once, right after ibv_create_cq. */
	void attach(struct ibv_cq *cq) noexcept { cq_ = cq; }

	/* Arms the CQ for its next completion unless it is armed already:
	 * 0, or a negative FI_E* code from ibv_req_notify_cq. */
	int arm() noexcept;
	/* true while armed and no event has arrived since. */
	bool armed() const noexcept;
	/* Events read from the channel for this CQ so far (tests, statistics). */
	uint64_t events() const noexcept;
	/* ibv_req_notify_cq calls made for this CQ so far (statistics). */
	uint64_t arms() const noexcept;

	/* Acks every event read so far; then nothing of this CQ is left unacked unless another
	 * thread is draining right now. Call before ibv_destroy_cq, after begin_close(). */
	void ack_all() noexcept;
	/* From now on drain() acks this CQ's events at once (no batching), so that an
	 * ibv_destroy_cq waiting for them cannot wait forever. */
	void begin_close() noexcept;

protected:
	/* Called by drain() for every event of this CQ, from the draining thread, with no lock
	 * of the channel held: the CQ marks itself ready (util::waitable::notify). Must not
	 * block and must not destroy the CQ. */
	virtual void on_event() noexcept = 0;
	virtual ~cq_events() = default;

private:
	friend class comp_channel;
	/* drain() got an event for this CQ: count it, ack when the batch is full or closing. */
	void event_read() noexcept;

	struct ibv_cq *cq_ = nullptr;
	mutable util::mutex mu_{lock_level::cq_events};
	unsigned unacked_ VWAIT_GUARDED_BY(mu_) = 0;
	uint64_t events_ VWAIT_GUARDED_BY(mu_) = 0;
	uint64_t arms_ VWAIT_GUARDED_BY(mu_) = 0;
	bool armed_ VWAIT_GUARDED_BY(mu_) = false;
	bool closing_ VWAIT_GUARDED_BY(mu_) = false;
};

/* One completion channel of one device context, registered as a source of one waiter, or of
 * none: the CQs that have no waiter to block on (FI_WAIT_NONE, FI_WAIT_YIELD) share the
 * domain's unregistered channel, which poll sets and counters drain (util::event_source). */
class comp_channel
{
public:
	/* What reads the device's async fd (domain::async_source), and its argument. */
	using async_fn = void (*)(void *arg) noexcept;

	/* A channel on ctx whose fd is a source of w (w may be NULL: no waiter): 0, or a
	 * negative FI_E* code. With async and a waiter, ctx's async fd becomes a source of w
	 * too (async(async_arg) reads it without blocking), so that an async event (a CQ
	 * overrun, a fatal device error) ends a blocked wait; a waiter that has it already
	 * from another channel of the same context keeps that one. holders (may be NULL)
	 * counts the channels that added the async fd, while they live. */
	static int create(struct ibv_context *ctx, util::waiter *w,
	                  std::shared_ptr<comp_channel> &out, async_fn async = nullptr,
	                  void *async_arg = nullptr,
	                  std::shared_ptr<std::atomic<unsigned>> holders = nullptr) noexcept;
	~comp_channel();
	comp_channel(const comp_channel &) = delete;
	comp_channel &operator=(const comp_channel &) = delete;

	struct ibv_comp_channel *get() const noexcept { return ch_.get(); }
	int fd() const noexcept { return ch_->fd; }
	util::waiter *waiter() const noexcept { return waiter_; }

	/* A CQ starts / stops using this channel (ibv_create_cq with it / ibv_destroy_cq). */
	void cq_added() noexcept { cqs_.fetch_add(1, std::memory_order_relaxed); }
	void cq_removed() noexcept { cqs_.fetch_sub(1, std::memory_order_relaxed); }

	/* Reads the pending CQ events without blocking and hands each to its CQ. Returns the
	 * number of events read. With one CQ on the channel there is at most one event
	 * pending (a CQ is armed again only after its event was read), so one read does it;
	 * with several it reads until the channel is empty. Safe from several threads. */
	unsigned drain() noexcept;
	/* drain() as a util::drain_fn (arg: the channel). */
	static void drain_source(void *arg) noexcept;

private:
	comp_channel(verbs::comp_channel_ptr ch, util::waiter *w) noexcept;

	verbs::comp_channel_ptr ch_;
	util::waiter *waiter_;
	bool registered_ = false;
	std::atomic<unsigned> cqs_{0};
	int async_fd_ = -1; /* ctx's async fd when this channel added it to waiter_ */
	std::shared_ptr<std::atomic<unsigned>> holders_; /* counts this channel while async_fd_ */
};

/* The channels of one device context, one per waiter: what a domain keeps so that every CQ it
 * opens on the same waiter shares one channel. Thread safe.
 *
 * At most max_async_holders of its waiters hold the context's async fd at once. The kernel
 * counts, for each file, the epoll sets it is in through every level of nesting and refuses
 * (EINVAL) an EPOLL_CTL_ADD past 1000 direct ones, 500 through one more epoll set, 100
 * through two: had every FI_WAIT_FD CQ's epoll fd held the one async fd, an application
 * could not put the 501st such CQ into its own epoll set. */
class channel_registry
{
public:
	static constexpr unsigned max_async_holders = 8;

	/* async, async_arg: see comp_channel::create */
	explicit channel_registry(struct ibv_context *ctx, comp_channel::async_fn async = nullptr,
	                          void *async_arg = nullptr) noexcept
	    : ctx_(ctx), async_(async), async_arg_(async_arg)
	{
	}

	/* The channel of waiter w (created at first use; w NULL: the channel of the CQs with
	 * no waiter): 0, or a negative FI_E* code. The channel lives while any CQ holds the
	 * shared_ptr. shared false: w is one CQ's own waiter, which no other CQ will ask for:
	 * a new channel that the registry does not keep (no entry to look up, sweep or hold,
	 * 64 bytes of each FD CQ). */
	int get(util::waiter *w, std::shared_ptr<comp_channel> &out, bool shared = true) noexcept;

private:
	struct ibv_context *ctx_;
	comp_channel::async_fn async_;
	void *async_arg_;
	std::shared_ptr<std::atomic<unsigned>> async_holders_ =
	    std::make_shared<std::atomic<unsigned>>(0);
	util::mutex mu_{lock_level::channels};
	bool async_note_ VWAIT_GUARDED_BY(mu_) = false;
	std::map<util::waiter *, std::weak_ptr<comp_channel>> channels_ VWAIT_GUARDED_BY(mu_);
};

} // namespace vwait

#endif
