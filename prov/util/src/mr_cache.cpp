/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* util::mr_cache: see util/mr_cache.h for the contract. */
#include "config.h"

#include "vwait/util/mem_monitor.h"
#include "vwait/util/mr_cache.h"

#include <rdma/fi_errno.h>

#include <unistd.h>

namespace vwait::util
{

struct mr_cache::entry {
	uintptr_t start, end;
	uint64_t access;
	void *handle;
	unsigned refs;
	bool kept;    /* in by_start_ (and, unreferenced, on the LRU list) */
	bool waiting; /* not kept only because the cache is not armed yet */
	std::multimap<uintptr_t, entry *>::iterator at;
	entry *prev, *next; /* the LRU list */
};

mr_cache::mr_cache(const mr_cache_ops &ops, const mr_cache_limits &limits,
                   mem_monitor *mon) noexcept
    : ops_(ops), limits_(limits), monitor_(mon), creator_(process_id()),
      page_(static_cast<uintptr_t>(sysconf(_SC_PAGESIZE)))
{
	lock_guard<mutex> lock(mu_);
	armed_ = !limits_.wait_for_repeat;
	if (monitor_)
		cursor_ = monitor_->head();
}

mr_cache::~mr_cache()
{
	lock_guard<mutex> lock(mu_);
	drop_all_locked();
}

bool mr_cache::usable() const noexcept
{
	return process_id() == creator_;
}

void *mr_cache::handle(const entry *e) noexcept
{
	return e->handle;
}

uintptr_t mr_cache::start(const entry *e) noexcept
{
	return e->start;
}

size_t mr_cache::length(const entry *e) noexcept
{
	return e->end - e->start;
}

void mr_cache::lru_unlink(entry *e) noexcept
{
	(e->prev ? e->prev->next : lru_head_) = e->next;
	(e->next ? e->next->prev : lru_tail_) = e->prev;
	e->prev = e->next = nullptr;
}

void mr_cache::lru_push(entry *e) noexcept
{
	e->prev = nullptr;
	e->next = lru_head_;
	(lru_head_ ? lru_head_->prev : lru_tail_) = e;
	lru_head_ = e;
}

void mr_cache::destroy_locked(entry *e) noexcept
{
	/* in a child after fork the registration is the parent's */
	if (usable()) {
		ops_.dereg(ops_.ctx, e->handle);
		stats_.deregistered++;
	}
	delete e;
}

/* out of the map; unreferenced, deregistered now, else at its last put */
void mr_cache::unkeep_locked(entry *e) noexcept
{
	by_start_.erase(e->at);
	e->kept = false;
	stats_.count--;
	stats_.bytes -= e->end - e->start;
	if (by_start_.empty())
		max_len_ = 0;
	if (e->refs == 0) {
		lru_unlink(e);
		destroy_locked(e);
	}
}

void mr_cache::drop_all_locked() noexcept
{
	while (!by_start_.empty())
		unkeep_locked(by_start_.begin()->second);
}

void mr_cache::evict_locked() noexcept
{
	while ((stats_.count > limits_.max_count || stats_.bytes > limits_.max_bytes) &&
	       lru_tail_) {
		stats_.evicted++;
		unkeep_locked(lru_tail_);
	}
}

void mr_cache::invalidate_locked(uintptr_t start, uintptr_t end) noexcept
{
	const uintptr_t from = start > max_len_ ? start - max_len_ : 0;
	for (auto it = by_start_.lower_bound(from); it != by_start_.end() && it->first < end;) {
		entry *e = it->second;
		++it;
		if (e->end > start) {
			stats_.invalidated++;
			unkeep_locked(e);
		}
	}
}

void mr_cache::take_invalidations_locked() noexcept
{
	if (!monitor_)
		return;
	monitor_->sync();
	if (monitor_->head() == cursor_)
		return;
	const bool whole = monitor_->drain(
	    &cursor_, [this](uintptr_t s, uintptr_t e)
	                  VWAIT_NO_THREAD_SAFETY_ANALYSIS { invalidate_locked(s, e); });
	if (!whole) {
		/* records lost: nothing kept can be trusted */
		stats_.flushes++;
		drop_all_locked();
	}
}

bool mr_cache::repeats_locked(uintptr_t start, uintptr_t end, uint64_t access) const noexcept
{
	for (const released &r : released_)
		if (r.end && r.start <= start && end <= r.end && r.access == access)
			return true;
	return false;
}

mr_cache::entry *mr_cache::find_locked(uintptr_t start, uintptr_t end, uint64_t access) noexcept
{
	auto it = by_start_.upper_bound(start);
	while (it != by_start_.begin()) {
		--it;
		entry *e = it->second;
		if (e->start + max_len_ < start)
			break;
		if (e->end >= end && e->access == access)
			return e;
	}
	return nullptr;
}

int mr_cache::get(const void *buf, size_t len, uint64_t access, entry **out) noexcept
{
	const uintptr_t addr = reinterpret_cast<uintptr_t>(buf);
	const uintptr_t start = addr & ~(page_ - 1);
	const uintptr_t end = (addr + (len ? len : 1) + page_ - 1) & ~(page_ - 1);
	*out = nullptr;
	lock_guard<mutex> lock(mu_);
	take_invalidations_locked();
	if (entry *e = find_locked(start, end, access)) {
		if (e->refs++ == 0)
			lru_unlink(e);
		stats_.hits++;
		*out = e;
		return 0;
	}
	stats_.misses++;
	if (!armed_ && repeats_locked(start, end, access))
		armed_ = true;
	void *handle = nullptr;
	if (int ret = ops_.reg(ops_.ctx, start, end - start, access, &handle))
		return ret;
	stats_.registered++;
	entry *e = new (std::nothrow)
	    entry{start, end, access, handle, 1, false, false, {}, nullptr, nullptr};
	if (!e) {
		ops_.dereg(ops_.ctx, handle);
		stats_.deregistered++;
		return -FI_ENOMEM;
	}
	/* kept only where the bounds allow it and the monitor watches the pages, which the
	 * registration has made present */
	bool keep = limits_.max_count > 0 && end - start <= limits_.max_bytes;
	if (keep && !armed_) {
		e->waiting = true;
		keep = false;
	}
	if (keep && monitor_ && monitor_->watch(start, end - start) != 0)
		keep = false;
	if (keep) {
		try {
			e->at = by_start_.emplace(start, e);
			e->kept = true;
		} catch (...) {
			keep = false;
		}
	}
	if (keep) {
		stats_.count++;
		stats_.bytes += end - start;
		if (end - start > max_len_)
			max_len_ = end - start;
		evict_locked();
	} else {
		stats_.not_kept++;
	}
	*out = e;
	return 0;
}

void mr_cache::put(entry *e) noexcept
{
	if (!e)
		return;
	lock_guard<mutex> lock(mu_);
	if (--e->refs)
		return;
	if (!e->kept) {
		if (e->waiting && !armed_) {
			released_[released_next_] = {e->start, e->end, e->access};
			released_next_ = (released_next_ + 1) % repeat_ring;
		}
		destroy_locked(e);
		return;
	}
	lru_push(e);
	evict_locked();
}

void mr_cache::invalidate(uintptr_t start, size_t len) noexcept
{
	lock_guard<mutex> lock(mu_);
	invalidate_locked(start, start + len);
}

mr_cache_stats mr_cache::stats() const noexcept
{
	lock_guard<mutex> lock(mu_);
	mr_cache_stats st = stats_;
	st.armed = armed_;
	return st;
}

} // namespace vwait::util
