/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* The inside of util::waiter, shared by its three files: wait.cpp (members, sources,
 * signalling, FI_GETWAIT), wait_block.cpp (the blocking protocol: the poll and prepare
 * phases under the wait policy, the leader and its followers, fi_wait / fi_trywait, the
 * FI_WAIT_MUTEX_COND helper thread) and wait_set.cpp (the fid_wait shim of wait sets).
 * Not installed; nothing outside prov/util/src includes it. */
#ifndef VWAIT_UTIL_WAIT_IMPL_H
#define VWAIT_UTIL_WAIT_IMPL_H

#include "vwait/util/fdset.h"
#include "vwait/util/helper_thread.h"
#include "vwait/util/ready_list.h"
#include "vwait/util/signal.h"
#include "vwait/util/thread_safety.h"
#include "vwait/util/wait.h"
#include "vwait/util/wait_policy.h"

#include <poll.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <list>
#include <mutex>
#include <shared_mutex>
#include <unordered_set>
#include <vector>

namespace vwait::util
{

/* The signal of the calling thread, that wakes it while it leads a blocking wait (nullptr when
 * no eventfd can be opened). One per thread that ever blocks, reused by later threads when
 * it ends, closed only at unload or exit: a notifier may still raise it after its thread
 * moved on (a spurious wakeup, which every waiter allows). */
signal *thread_signal() noexcept;

/* The name of an enum fi_wait_obj value, for log lines. */
const char *kind_name(int k) noexcept;

namespace detail
{
struct source {
	int fd;
	drain_fn drain;
	void *arg;
	unsigned refs; /* hold_source users; add_source makes 1 */
};

} // namespace detail

class waiter::impl
{
public:
	impl(const struct fi_provider *prov_, enum fi_wait_obj kind_, wait_policy policy)
	    : prov(prov_), kind(kind_), learner(policy)
	{
	}
	~impl() { stop_helper(); }

	int open() noexcept;

	/* members */
	int attach(waitable *w, listener *self) noexcept;
	int detach(waitable *w, listener *self, bool unregister) noexcept;

	/* sources */
	int add_source(int raw_fd, short events, drain_fn drain, void *arg) noexcept;
	int remove_source(int raw_fd) noexcept;
	int hold_source(int raw_fd, short events, drain_fn drain, void *arg) noexcept;
	int drop_source(int raw_fd) noexcept;
	void drain_ready() noexcept;

	void notify(waitable *w, bool wake) noexcept;
	/* the blocking loop (wait_block.cpp) */
	int wait_until(clock::time_point deadline, phase_fn poll, phase_fn prepare,
	               void *arg) noexcept;
	/* fi_wait's two phases: peek_ready looks (no arming, no system call), any_ready
	 * trywaits the members (arms them) */
	bool peek_ready() noexcept;
	bool peek_batch(const std::vector<waitable *> &batch, size_t nfresh) noexcept;
	bool any_ready() noexcept;
	int trywait_members() noexcept;
	int trywait() noexcept;
	int control(int command, void *arg) noexcept;

	/* fi_wait's poll phase looks at every member of a set this small */
	static constexpr size_t peek_all_max = 16;
	/* in a larger set, at most this many members stay on the ready list unarmed (the ones
	 * most recently reported: a stream of completions on each is read by peeking) */
	static constexpr size_t peek_keep = 32;

	const struct fi_provider *const prov;
	const enum fi_wait_obj kind;
	spin_learner learner; /* how long a blocking call polls before it arms */

	/* members: shared while calling into them, exclusive to attach/detach */
	mutable shared_mutex members_mu{lock_level::wait_members};
	std::unordered_set<waitable *> members;
	std::vector<waitable *> polled; /* members that are not self_notifying() */
	ready_list ready;
	/* the last peek_keep distinct members that fi_wait's poll phase found with something:
	 * peeked on every pass of a large set whether armed or not, as a small set peeks all
	 * its members, so that a few active members are found by peeking, not through their
	 * channel's event (written under members_mu shared, cleared under it exclusive) */
	std::array<std::atomic<waitable *>, peek_keep> recent{};
	std::atomic<size_t> recent_next{0};
	void remember(waitable *w) noexcept;

	/* sources: shared while draining, exclusive to remove */
	shared_mutex sources_mu{lock_level::wait_sources};
	std::list<detail::source> sources;
	pollfd_set source_fds; /* tags: source * */
	std::atomic<size_t> nsources{0};
	uint64_t sources_gen = 0; /* moves on every add/remove (under sources_mu, exclusive) */

	/* signalling */
	std::atomic<uint64_t> seq{0};
	std::atomic<bool> pending{false}; /* a wake() not yet consumed by fi_wait/fi_trywait */
	signal pub;                       /* FD / POLLFD: the application's signal */
	/* the signal of the thread that blocks on the fds (the leader): its own, one per
	 * thread that ever leads, not one per waiter (thread_signal()) */
	std::atomic<signal *> leader_sig{nullptr};
	epoll_set ep; /* FD: pub + sources */

	/* blocking: one leader polls the fds, followers wait on cv for seq to move; for
	 * MUTEX_COND, mu/cv are the object handed out by FI_GETWAIT. */
	mutex mu{lock_level::wait_block};
	std::condition_variable cv;
	bool leader = false; /* guarded by mu */
	std::atomic<bool> leader_blocked{false};
	std::atomic<int> followers{0};
	std::vector<struct pollfd> leader_fds; /* owned by the current leader */
	std::vector<void *> leader_tags;

	/* MUTEX_COND helper thread: needed only once the application holds the mutex and cond
	 * (FI_GETWAIT) and may wait on them itself; started then (or at the first source after
	 * that), joined at close. Until then a blocking thread polls the fds as FD does. */
	helper_thread helper;
	std::atomic<bool> helper_on{false};
	std::atomic<bool> helper_wanted{false};
	std::atomic<bool> counts_as_blocking{true}; /* waiter::set_counts_as_blocking */
	std::atomic<bool> helper_stop{false};
	signal hsig; /* the helper's own wakeup (the leader's is its thread's) */

	void wake_blocker() noexcept;
	void raise_leader() noexcept;
	int start_helper() noexcept;
	void stop_helper() noexcept;

private:
	/* one sleep of the blocking loop, as the wait policy sees it: a calibration timer due
	 * `calib` into it (zero: none; set by the caller), and what the sleep was (set by block) */
	struct sleep_note {
		clock::duration calib{};
		clock::time_point woke_at{}; /* when poll() returned */
		bool event = false;          /* an fd other than the calibration timer ended it */
		bool timer_only = false;     /* only the calibration timer ended it */
		clock::duration late{};      /* then: how long after its expiry */
	};
	bool block(uint64_t s, clock::time_point deadline, sleep_note &note) noexcept;
	bool block_as_leader(uint64_t s, clock::time_point deadline, sleep_note &note) noexcept;
	void drain_polled() noexcept;
	void helper_main() noexcept;
};

} // namespace vwait::util

#endif
