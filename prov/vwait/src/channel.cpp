/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* Completion channels: one per (device context, waiter), its fd a source of the waiter, its
 * events handed to the CQ that fired, its acks batched. See include/vwait/channel.h. */
#include "config.h"

#include "vwait/channel.h"
#include "vwait/util/fd.h"
#include "vwait/util/wait.h"
#include "vwait/vwait.h"

#include <poll.h>

#include <cerrno>
#include <cstring>

namespace vwait
{

int cq_events::arm() noexcept
{
	util::lock_guard<util::mutex> lock(mu_);
	if (armed_)
		return 0;
	if (int ret = verbs::positive_code(ibv_req_notify_cq(cq_, 0))) {
		FI_WARN(&prov, FI_LOG_CQ, "ibv_req_notify_cq: %s\n", fi_strerror(-ret));
		return ret;
	}
	armed_ = true;
	arms_++;
	return 0;
}

bool cq_events::armed() const noexcept
{
	util::lock_guard<util::mutex> lock(mu_);
	return armed_;
}

uint64_t cq_events::events() const noexcept
{
	util::lock_guard<util::mutex> lock(mu_);
	return events_;
}

uint64_t cq_events::arms() const noexcept
{
	util::lock_guard<util::mutex> lock(mu_);
	return arms_;
}

void cq_events::event_read() noexcept
{
	unsigned ack = 0;
	bool closing;
	{
		util::lock_guard<util::mutex> lock(mu_);
		armed_ = false; /* an event disarms the CQ: the next wait must arm it again */
		events_++;
		closing = closing_;
		if (closing) {
			ack = 1; /* a destroy may be waiting for exactly this ack */
		} else if (++unacked_ >= ack_batch) {
			ack = unacked_;
			unacked_ = 0;
		}
	}
	if (!closing)
		on_event();
	/* Last touch of the CQ: once acked, a pending ibv_destroy_cq may return and the
	 * object may be freed. */
	if (ack)
		ibv_ack_cq_events(cq_, ack);
}

void cq_events::begin_close() noexcept
{
	util::lock_guard<util::mutex> lock(mu_);
	closing_ = true;
}

void cq_events::ack_all() noexcept
{
	unsigned ack;
	{
		util::lock_guard<util::mutex> lock(mu_);
		ack = unacked_;
		unacked_ = 0;
	}
	if (ack && cq_)
		ibv_ack_cq_events(cq_, ack);
}

comp_channel::comp_channel(verbs::comp_channel_ptr ch, util::waiter *w) noexcept
    : ch_(std::move(ch)), waiter_(w)
{
}

int comp_channel::create(struct ibv_context *ctx, util::waiter *w,
                         std::shared_ptr<comp_channel> &out, async_fn async, void *async_arg,
                         std::shared_ptr<std::atomic<unsigned>> holders) noexcept
{
	if (!ctx) {
		FI_WARN(&prov, FI_LOG_CQ, "comp_channel: context is NULL\n");
		return -FI_EINVAL;
	}
	return guard([&] {
		verbs::comp_channel_ptr ch(ibv_create_comp_channel(ctx));
		if (!ch) {
			int ret = verbs::errno_code();
			FI_WARN(&prov, FI_LOG_CQ, "ibv_create_comp_channel(%s): %s\n",
			        ibv_get_device_name(ctx->device), fi_strerror(-ret));
			return ret;
		}
		if (int ret = util::set_nonblock(ch->fd)) {
			FI_WARN(&prov, FI_LOG_CQ, "completion channel fd %d: O_NONBLOCK: %s\n",
			        ch->fd, strerror(-ret));
			return ret;
		}
		std::shared_ptr<comp_channel> c(new comp_channel(std::move(ch), w));
		if (!w) {
			out = std::move(c);
			return 0;
		}
		if (int ret = w->add_source(c->ch_->fd, POLLIN, drain_source, c.get())) {
			FI_WARN(&prov, FI_LOG_CQ, "completion channel fd %d: add to waiter: %s\n",
			        c->ch_->fd, fi_strerror(-ret));
			return ret;
		}
		c->registered_ = true;
		if (async) {
			int ret = w->add_source(ctx->async_fd, POLLIN, async, async_arg);
			if (ret == 0) {
				c->async_fd_ = ctx->async_fd;
				if (holders) {
					holders->fetch_add(1, std::memory_order_relaxed);
					c->holders_ = std::move(holders);
				}
			} else if (ret != -FI_EALREADY)
				FI_WARN(&prov, FI_LOG_CQ,
				        "async fd %d: add to waiter: %s (async events are read "
				        "only while CQs are polled)\n",
				        ctx->async_fd, fi_strerror(-ret));
		}
		out = std::move(c);
		return 0;
	});
}

comp_channel::~comp_channel()
{
	/* The waiter stops calling drain() before the channel goes; every CQ of the channel is
	 * gone already (they hold the shared_ptr), so nothing is left to ack. */
	if (async_fd_ >= 0) {
		waiter_->remove_source(async_fd_);
		if (holders_)
			holders_->fetch_sub(1, std::memory_order_relaxed);
	}
	if (registered_)
		waiter_->remove_source(ch_->fd);
}

void comp_channel::drain_source(void *arg) noexcept
{
	static_cast<comp_channel *>(arg)->drain();
}

unsigned comp_channel::drain() noexcept
{
	const bool one = cqs_.load(std::memory_order_relaxed) <= 1;
	unsigned n = 0;
	for (;;) {
		struct ibv_cq *cq = nullptr;
		void *context = nullptr;
		if (ibv_get_cq_event(ch_.get(), &cq, &context) != 0) {
			if (errno != EAGAIN && errno != EINTR)
				FI_WARN_SPARSE(&prov, FI_LOG_CQ, "ibv_get_cq_event: %s\n",
				               strerror(errno));
			break;
		}
		n++;
		static_cast<cq_events *>(context)->event_read();
		if (one)
			break;
	}
	return n;
}

int channel_registry::get(util::waiter *w, std::shared_ptr<comp_channel> &out, bool shared) noexcept
{
	shared = shared || !w;
	return guard([&] {
		util::lock_guard<util::mutex> lock(mu_);
		auto it = shared ? channels_.find(w) : channels_.end();
		if (it != channels_.end()) {
			if (auto existing = it->second.lock()) {
				out = std::move(existing);
				return 0;
			}
		}
		std::shared_ptr<comp_channel> created;
		/* the async fd in a bounded number of waiters (see max_async_holders): the others
		 * read it when their CQs are polled, and any holder's wait reads it for them */
		const bool hold =
		    async_holders_->load(std::memory_order_relaxed) < max_async_holders;
		if (!hold && !async_note_) {
			async_note_ = true;
			FI_INFO(&prov, FI_LOG_CQ,
			        "%u waiters hold the async fd of %s: the next ones do not\n",
			        max_async_holders, ibv_get_device_name(ctx_->device));
		}
		if (int ret = comp_channel::create(ctx_, w, created, hold ? async_ : nullptr,
		                                   async_arg_, async_holders_))
			return ret;
		if (shared) {
			channels_[w] = created;
			/* forget channels that died, so the map follows the live ones */
			for (auto i = channels_.begin(); i != channels_.end();)
				i = i->second.expired() ? channels_.erase(i) : std::next(i);
		}
		out = std::move(created);
		return 0;
	});
}

} // namespace vwait
