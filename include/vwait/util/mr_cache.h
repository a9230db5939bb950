/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* util::mr_cache: a domain's cache of memory registrations, without verbs. The provider gives
 * it a register and a deregister callback (ibv_reg_mr / ibv_dereg_mr); tests give it fakes.
 *
 * Contract:
 *  - get(buf, len, access) rounds [buf, buf + len) out to pages. A cached registration whose
 *    range covers that and whose access is equal serves it (a hit: no callback, no system
 *    call). Otherwise (a miss) the rounded range is registered through the callback. Every
 *    get takes a reference that put() gives back.
 *  - A registration is kept only where the monitor watches its range (util/mem_monitor.h;
 *    a cache without a monitor is for tests, which call invalidate() themselves) and the
 *    bounds allow it: at most max_count registrations and max_bytes bytes are kept, the
 *    least recently used unreferenced ones deregistered first. A registration that is not
 *    kept is deregistered at its last put (registered == deregistered, as without a cache).
 *  - wait_for_repeat: the cache keeps (and watches) nothing until a miss that a registration
 *    released before it would have served, that is one whose range and access are within one
 *    of the last repeat_ring released registrations it did not keep for that reason alone.
 *    From that miss on (armed) it keeps as above. A process that registers each buffer once
 *    never keeps one, so it never starts the monitor's thread; one that registers a buffer
 *    again and again pays one more miss.
 *  - invalidate(start, len), and every range the monitor reports, takes the registrations
 *    overlapping it out of the cache before the next lookup: unreferenced ones are
 *    deregistered, referenced ones at their last put. Each get first waits out the
 *    monitor's read in progress and takes what it published (mem_monitor::sync, drain).
 *  - fork: in a child (process_id() differs from the creator's) usable() is false and the
 *    caller bypasses the cache; put() and the destructor there deregister nothing (the
 *    registrations belong to the parent, and deregistering through a context shared with it
 *    would take them from it).
 *  - The destructor deregisters every registration (none may still be referenced).
 *  - Lock: mu_ (lock_order.h: mr_cache, 76); the callbacks run under it, then the monitor's
 *    (78). */
#ifndef VWAIT_UTIL_MR_CACHE_H
#define VWAIT_UTIL_MR_CACHE_H

#include "vwait/util/thread_safety.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <sys/types.h>

namespace vwait::util
{

class mem_monitor;

struct mr_cache_ops {
	/* registers [start, start + len) with access: 0 and *handle, or -FI_E* */
	int (*reg)(void *ctx, uintptr_t start, size_t len, uint64_t access, void **handle) noexcept;
	void (*dereg)(void *ctx, void *handle) noexcept;
	void *ctx;
};

struct mr_cache_limits {
	size_t max_count;
	size_t max_bytes;
	bool wait_for_repeat = false;
};

struct mr_cache_stats {
	uint64_t hits, misses, not_kept, evicted, invalidated, flushes;
	uint64_t registered, deregistered;
	size_t count, bytes; /* kept now */
	bool armed;          /* keeping (always, without wait_for_repeat) */
};

class mr_cache
{
public:
	struct entry;
	/* wait_for_repeat: how many released ranges are remembered */
	static constexpr size_t repeat_ring = 16;

	/* mon: nullptr (tests) or acquired by the caller for the cache's lifetime */
	mr_cache(const mr_cache_ops &ops, const mr_cache_limits &limits, mem_monitor *mon) noexcept;
	~mr_cache();
	mr_cache(const mr_cache &) = delete;
	mr_cache &operator=(const mr_cache &) = delete;

	/* false in a child after fork: the caller registers without the cache */
	bool usable() const noexcept;

	/* 0 and *out (a reference), or the reg callback's -FI_E*, or -FI_ENOMEM */
	int get(const void *buf, size_t len, uint64_t access, entry **out) noexcept;
	void put(entry *e) noexcept;
	static void *handle(const entry *e) noexcept;
	/* the registered range of e */
	static uintptr_t start(const entry *e) noexcept;
	static size_t length(const entry *e) noexcept;

	void invalidate(uintptr_t start, size_t len) noexcept;
	mr_cache_stats stats() const noexcept;

private:
	void take_invalidations_locked() noexcept VWAIT_REQUIRES(mu_);
	void invalidate_locked(uintptr_t start, uintptr_t end) noexcept VWAIT_REQUIRES(mu_);
	void drop_all_locked() noexcept VWAIT_REQUIRES(mu_);
	void unkeep_locked(entry *e) noexcept VWAIT_REQUIRES(mu_);
	void evict_locked() noexcept VWAIT_REQUIRES(mu_);
	void destroy_locked(entry *e) noexcept VWAIT_REQUIRES(mu_);
	entry *find_locked(uintptr_t start, uintptr_t end, uint64_t access) noexcept
	    VWAIT_REQUIRES(mu_);
	void lru_unlink(entry *e) noexcept VWAIT_REQUIRES(mu_);
	void lru_push(entry *e) noexcept VWAIT_REQUIRES(mu_);
	bool repeats_locked(uintptr_t start, uintptr_t end, uint64_t access) const noexcept
	    VWAIT_REQUIRES(mu_);

	const mr_cache_ops ops_;
	const mr_cache_limits limits_;
	mem_monitor *const monitor_;
	const pid_t creator_;
	const uintptr_t page_;
	mutable mutex mu_{lock_level::mr_cache};
	/* the kept registrations by start address */
	std::multimap<uintptr_t, entry *> by_start_ VWAIT_GUARDED_BY(mu_);
	/* longest kept range since the map was last empty: bounds a lookup's scan */
	size_t max_len_ VWAIT_GUARDED_BY(mu_) = 0;
	/* unreferenced kept registrations, most recently used first */
	entry *lru_head_ VWAIT_GUARDED_BY(mu_) = nullptr;
	entry *lru_tail_ VWAIT_GUARDED_BY(mu_) = nullptr;
	/* wait_for_repeat, not yet armed: the last ranges released that were not kept */
	struct released {
		uintptr_t start, end;
		uint64_t access;
	};
	released released_[repeat_ring] VWAIT_GUARDED_BY(mu_) = {};
	size_t released_next_ VWAIT_GUARDED_BY(mu_) = 0;
	bool armed_ VWAIT_GUARDED_BY(mu_) = false;
	uint64_t cursor_ VWAIT_GUARDED_BY(mu_) = 0; /* the monitor's ring */
	mr_cache_stats stats_ VWAIT_GUARDED_BY(mu_) = {};
};

} // namespace vwait::util

#endif
