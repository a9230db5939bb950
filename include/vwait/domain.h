/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* The vwait domain: one rdma_cm device context and one protection domain; and its memory
 * regions. */
#ifndef VWAIT_DOMAIN_H
#define VWAIT_DOMAIN_H

#include "vwait/channel.h"
#include "vwait/fabric.h"
#include "vwait/flow_ctrl.h"
#include "vwait/util/fid.h"
#include "vwait/util/held.h"
#include "vwait/util/mr_cache.h"
#include "vwait/util/thread_safety.h"
#include "vwait/verbs.h"

#include <rdma/fi_domain.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

namespace vwait
{

class domain
{
public:
	domain(fabric *fab, verbs::cm_devices_ptr devices, struct ibv_context *ctx,
	       verbs::pd_ptr pd, const struct ibv_device_attr &attr, uint32_t api_version);
	~domain();
	domain(const domain &) = delete;
	domain &operator=(const domain &) = delete;

	void hold() noexcept { refs_.fetch_add(1, std::memory_order_relaxed); }
	void unhold() noexcept { refs_.fetch_sub(1, std::memory_order_release); }
	bool busy() const noexcept { return refs_.load(std::memory_order_acquire) != 0; }

	struct ibv_context *context() const noexcept { return ctx_; }
	struct ibv_pd *pd() const noexcept { return pd_.get(); }
	const struct ibv_device_attr &device_attr() const noexcept { return attr_; }
	uint32_t api_version() const noexcept { return api_version_; }
	const char *name() const noexcept { return ibv_get_device_name(ctx_->device); }
	fabric *parent() const noexcept { return fabric_.get(); }

	/* Reads the device's asynchronous events without blocking: a CQ overrun
	 * (IBV_EVENT_CQ_ERR) is handed to that CQ, which is woken; a fatal device error or a
	 * port going down is a warning line; the rest are logged at info level. Called by a
	 * waiter whose sources include the async fd (async_source: every waiter that has a
	 * completion channel of this domain) and, now and then, by an idle CQ poll. */
	void poll_async_events() noexcept;
	static void async_source(void *arg) noexcept
	{
		static_cast<domain *>(arg)->poll_async_events();
	}
	/* An idle CQ poll's share: poll_async_events() at most once per async_poll_interval for
	 * the whole domain (a reader spinning through a busy stream reaches its 4096th empty
	 * poll every millisecond or two, and a read(2) each time was most of its system calls). */
	void poll_async_events_now_and_then() noexcept;
	static constexpr std::chrono::milliseconds async_poll_interval{100};

	/* ofi_rxm's credit message sender (flow_ctrl.h: set_send_handler), nullptr until set */
	void set_credit_sender(credit_send_fn fn) noexcept
	{
		credit_sender_.store(fn, std::memory_order_release);
	}
	credit_send_fn credit_sender() const noexcept
	{
		return credit_sender_.load(std::memory_order_acquire);
	}

	/* The completion channels of this device context, one per waiter. */
	channel_registry &channels() noexcept { return channels_; }

	/* The registration cache (mr.cpp), nullptr when there is none (mr_cache_status). */
	util::mr_cache *mr_cache() const noexcept { return mr_cache_.get(); }

private:
	util::held<fabric> fabric_;
	verbs::cm_devices_ptr devices_; /* keeps ctx_ alive */
	struct ibv_context *ctx_;
	verbs::pd_ptr pd_;
	struct ibv_device_attr attr_;
	uint32_t api_version_;
	util::mutex async_mutex_{lock_level::async_events}; /* try_lock only */
	/* steady_clock time (ns) before which poll_async_events_now_and_then does nothing */
	std::atomic<int64_t> async_poll_next_ns_{0};
	channel_registry channels_;
	std::atomic<int> refs_{0};
	std::atomic<credit_send_fn> credit_sender_{nullptr};
	/* siw: the context's mmap key plug (verbs::siw_key_plug), released before ctx_ */
	std::shared_ptr<struct ibv_cq> siw_plug_;
	/* last: its registrations go before the protection domain (~domain) */
	std::unique_ptr<util::mr_cache> mr_cache_;
};

using domain_box = util::fid_box<struct fid_domain, domain>;

inline domain *domain_of(struct fid_domain *fid) noexcept
{
	return domain_box::of(fid)->obj;
}

/* fid as a vwait domain, or NULL when it is none (another class, another provider) */
domain *vwait_domain(struct fid *fid) noexcept;

/* struct fi_ops_fabric::domain */
int domain_open(struct fid_fabric *fabric, struct fi_info *info, struct fid_domain **domain,
                void *context) noexcept;

/* struct fi_ops_mr (mr.cpp) */
int mr_reg(struct fid *fid, const void *buf, size_t len, uint64_t access, uint64_t offset,
           uint64_t requested_key, uint64_t flags, struct fid_mr **mr, void *context) noexcept;
int mr_regv(struct fid *fid, const struct iovec *iov, size_t count, uint64_t access,
            uint64_t offset, uint64_t requested_key, uint64_t flags, struct fid_mr **mr,
            void *context) noexcept;
int mr_regattr(struct fid *fid, const struct fi_mr_attr *attr, uint64_t flags,
               struct fid_mr **mr) noexcept;

/* Whether domains keep a registration cache: true, or false with *reason (static text) saying
 * why not (the parameter, libfabric's knobs, or the memory monitor refused). A refused monitor
 * is a warning once per process. */
bool mr_cache_status(const char **reason) noexcept;
/* A new domain's cache, registering on its protection domain, or nullptr when there is none
 * (mr.cpp). */
std::unique_ptr<util::mr_cache> mr_cache_open(domain *dom) noexcept;
/* The cache's figures as one info line at the domain's close; the cache released. */
void mr_cache_close(const char *domain_name, std::unique_ptr<util::mr_cache> cache) noexcept;

/* The local key behind a descriptor that fi_mr_desc handed out. */
inline uint32_t mr_lkey(void *desc) noexcept
{
	return static_cast<struct ibv_mr *>(desc)->lkey;
}

} // namespace vwait

#endif
