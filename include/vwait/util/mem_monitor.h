/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* util::mem_monitor: tells registration caches (util/mr_cache.h) which address ranges lost
 * the pages they had, through userfaultfd(2). One per process, shared by every cache.
 *
 * What it watches: a cache calls watch(range) after it registered the range (its pages pinned
 * and present). The kernel then reports, for that range, munmap (UFFD_EVENT_UNMAP, a MAP_FIXED
 * mapping over it, a brk shrink, mremap shrinking), mremap moving it (UFFD_EVENT_REMAP) and
 * madvise(MADV_DONTNEED / MADV_REMOVE) dropping its pages (UFFD_EVENT_REMOVE). Those events are
 * non-cooperative: the thread that unmaps is held in the kernel until the event is read. Only
 * private anonymous memory is watched (/proc/self/maps, read at each watch): the pages of a
 * tmpfs or memfd file (its private copies too) or of shared memory can change with no event
 * for this process (a truncation; another process's MADV_REMOVE), though uffd would watch
 * them. A range that is not private anonymous (EINVAL), or that the kernel refuses (another
 * uffd owns the mapping: EBUSY), is not watched, and the cache keeps no registration of it.
 *
 * The reader: one thread of the provider, started at the first watch(), reads the events and
 * appends the ranges to a ring of preallocated records. It takes no lock and allocates nothing
 * while handling events: the thread it holds in the kernel may own the cache's lock (the cache
 * deregisters under it, and ibv_dereg_mr can free() and trim memory) or a glibc arena lock.
 * All signals are blocked on it, and every call retries EINTR: a signal storm neither kills
 * nor stalls it.
 *
 * The ordering that keeps a cache from serving a stale page: the reader bumps epoch() to an
 * odd value before each read(2) and back to even after it has published what that read
 * returned. An munmap that returns to the application has had its event read, so the reader
 * was odd at that moment and becomes even only once the range is in the ring. sync() waits
 * out an odd epoch (until it changes, never for a second read); after it, drain() yields
 * every range whose unmapping returned before sync() began. Both are lock-free.
 *
 * Page faults: none where the kernel registers anonymous memory in write-protect mode (5.7
 * and newer): the monitor never write-protects a page, so a watched range raises its events
 * and no fault, whoever touches it (the process, or the kernel on its behalf). Only where that
 * mode is refused are ranges registered in missing mode, and then the following holds. After
 * MADV_DONTNEED a registered range has missing pages, and touching one raises
 * UFFD_EVENT_PAGEFAULT and holds the faulting thread. The reader unregisters a range
 * whose pages were dropped (before it publishes the event), and answers any fault that still
 * comes with UFFDIO_ZEROPAGE (what anonymous memory reads after MADV_DONTNEED), or, where that
 * is refused, by unregistering the page and waking the thread: no thread stays held.
 *
 * In missing mode, the uffd is opened without UFFD_USER_MODE_ONLY where the kernel allows it
 * (root, CAP_SYS_PTRACE, vm.unprivileged_userfaultfd=1): a fault the kernel itself takes on a
 * dropped page (read(2) into the buffer, ibv_reg_mr pinning it) is then answered too, where a
 * user-mode-only uffd would fail that call with EFAULT. Otherwise it is user-mode only, the
 * reader's unregistering of dropped ranges closing most of that window; status() says which.
 *
 * fork: the child closes its copies of the monitor's descriptors (an atfork handler), so it
 * can neither stop the parent's reader nor keep the parent's ranges registered; its
 * mappings are not registered (no UFFD_FEATURE_EVENT_FORK). process_id() is the pid kept by
 * that handler: a cache compares it to its creator's, without a system call.
 *
 * Lifetime: acquire() by each cache (the first opens the uffd), release() by each (the last
 * stops and joins the reader and closes the uffd, which unregisters every range). shutdown()
 * does the same at the provider's unload whatever the count. */
#ifndef VWAIT_UTIL_MEM_MONITOR_H
#define VWAIT_UTIL_MEM_MONITOR_H

#include "vwait/util/thread_safety.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <sys/types.h>
#include <thread>

struct fi_provider;

namespace vwait::util
{

/* This process's pid, kept by an atfork handler (no system call). */
pid_t process_id() noexcept;

class mem_monitor
{
public:
	/* The one monitor of the process. */
	static mem_monitor &instance() noexcept;

	/* Whether a monitor can be had here: 0, or -FI_E* with *reason a static text naming
	 * the refusal (userfaultfd(2) EPERM, ENOSYS, UFFDIO_API without the events). The
	 * answer of the first call is kept. */
	static int probe(const char **reason) noexcept;

	/* A cache starts or stops using the monitor. acquire: 0, or -FI_E* with *reason as
	 * probe's. */
	int acquire(const char **reason) noexcept;
	void release() noexcept;
	/* The provider's unload: the reader stopped and joined, the uffd closed. */
	void shutdown() noexcept;

	/* Registers [start, start + len) (page-aligned) with the uffd, starting the reader at
	 * the first: 0, or -FI_EBUSY (another uffd owns it), -FI_EINVAL (not all private
	 * anonymous memory, or memory uffd cannot watch), another -FI_E*. */
	int watch(uintptr_t start, size_t len) noexcept;

	/* Waits out a read in progress (see above). */
	void sync() const noexcept;

	/* The ring of invalidated ranges: records [*cursor, head) are handed to fn(start, end)
	 * and *cursor moves to head. false when records were overwritten before they were read
	 * (more than ring_size since the last drain): the caller drops everything it holds. */
	static constexpr size_t ring_size = 1024;
	template <class F>
	bool drain(uint64_t *cursor, F &&fn) const noexcept
	{
		const uint64_t head = head_.load(std::memory_order_acquire);
		bool whole = true;
		if (head - *cursor > ring_size) {
			whole = false;
			*cursor = head - ring_size;
		}
		for (uint64_t i = *cursor; i != head; i++) {
			uintptr_t s, e;
			if (!read_record(i, &s, &e)) {
				whole = false;
				continue;
			}
			fn(s, e);
		}
		*cursor = head;
		return whole;
	}
	uint64_t head() const noexcept { return head_.load(std::memory_order_acquire); }
	uint64_t epoch() const noexcept { return epoch_.load(std::memory_order_acquire); }

	/* What the reader saw (tests, the domain's closing log line). */
	struct counts {
		uint64_t events, faults, errors;
	};
	counts stats() const noexcept;
	/* whether the reader thread runs (it starts at the first watch()) */
	bool reading() const noexcept;
	/* "on (userfaultfd)" / "on (userfaultfd, user-mode only)": the mode of the open uffd,
	 * or of the probe. */
	static const char *mode() noexcept;
	/* whether ranges are registered in write-protect mode (never armed: no page fault),
	 * known from the first watch() */
	static bool faultless() noexcept;

	/* the atfork child handler's work (mem_monitor.cpp) */
	void forget_in_child() noexcept VWAIT_NO_THREAD_SAFETY_ANALYSIS;

private:
	mem_monitor() noexcept = default;
	void run() noexcept;
	void handle_fault(uintptr_t addr) noexcept;
	void publish(uintptr_t start, uintptr_t end) noexcept;
	bool read_record(uint64_t i, uintptr_t *start, uintptr_t *end) const noexcept;
	int start_reader_locked() noexcept VWAIT_REQUIRES(mu_);
	void stop_locked() noexcept VWAIT_REQUIRES(mu_);

	struct record {
		/* 2 * index + 2 once record index is complete, odd while it is written */
		std::atomic<uint64_t> seq{0};
		std::atomic<uintptr_t> start{0}, end{0};
	};

	mutable mutex mu_{lock_level::mem_monitor};
	int users_ VWAIT_GUARDED_BY(mu_) = 0;
	/* the descriptors are written under mu_ and read by the reader and watch() */
	std::atomic<int> uffd_{-1};
	std::atomic<int> stop_fd_{-1};
	std::thread reader_ VWAIT_GUARDED_BY(mu_);
	std::atomic<uint64_t> epoch_{0};
	std::atomic<uint64_t> head_{0};
	record ring_[ring_size];
	std::atomic<uint64_t> events_{0}, faults_{0}, errors_{0};
};

} // namespace vwait::util

#endif
