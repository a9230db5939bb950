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
	int wait_until(clock::time_point deadline, phase_fn poll, phase_fn prepare, void *arg,
	               waitable *target) noexcept;
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
	epoll_set ep;                     /* FD: pub + sources */

	/* Blocking (wait_block.cpp). Every thread that sleeps in a blocking call is a sleeper:
	 * it sleeps on its own thread signal (thread_signal()), and one of them, the leader, on
	 * the sources too (only one thread at a time polls them, so that one event wakes one
	 * thread). A sleeper is woken by whoever takes it off the list, under mu, and raises its
	 * signal once mu is released: a notify of member w takes one sleeper waiting for w (sread
	 * on w; the leader last) and every sleeper waiting for anything (fi_wait, cntr / EQ waits);
	 * a wake, or a notify that names no member, takes every sleeper waiting for w or anything.
	 * The leadership is held from the first sleep of a call to its return (a leader that wakes
	 * and sleeps again keeps it), then handed to exactly one sleeper, raised for it. A
	 * thread that was taken off the list (or that read its own member's event) and returns
	 * while its member still has something and another sleeper waits for it, takes that one
	 * off the list: one wakeup passes the work on, none is lost.
	 * For MUTEX_COND, mu/cv are the object handed out by FI_GETWAIT; once its helper thread
	 * runs, blocking threads wait on cv for seq to move (the helper polls the sources). */
	struct sleeper {
		signal *sig = nullptr;            /* nullptr: no eventfd; sleeps 1 ms at a time */
		const waitable *target = nullptr; /* what its call waits for; nullptr: anything */
		bool leads = false;
		bool sig_ready = false; /* its signal was readable when its sleep ended */
		bool handoff = false;   /* taken off the list to lead */
		/* taken off the list (under mu; the taker's last touch of the sleeper; sig is
		 * raised after): a sleeper that sees it needs no mu to leave */
		std::atomic<bool> woken{false};
		sleeper *prev = nullptr, *next = nullptr;
	};
	/* one blocking call (wait_until), as block() and notify() see it */
	struct call {
		impl *self;
		waitable *target;
		bool leading = false; /* holds the leadership */
		bool owes = false;    /* was woken for work, or read its member's event itself */
	};
	mutex mu{lock_level::wait_block};
	std::condition_variable cv;
	bool leader = false;                                  /* guarded by mu */
	sleeper *sleep_head = nullptr, *sleep_tail = nullptr; /* guarded by mu */
	std::atomic<int> nsleeping{0};
	std::atomic<int> followers{0}; /* MUTEX_COND with its helper: threads waiting on cv */

	/* MUTEX_COND helper thread: needed only once the application holds the mutex and cond
	 * (FI_GETWAIT) and may wait on them itself; started then (or at the first source after
	 * that), joined at close. Until then a blocking thread polls the fds as FD does. */
	helper_thread helper;
	std::atomic<bool> helper_on{false};
	std::atomic<bool> helper_wanted{false};
	std::atomic<bool> counts_as_blocking{true}; /* waiter::set_counts_as_blocking */
	std::atomic<bool> helper_stop{false};
	signal hsig; /* the helper's own wakeup (the leader's is its thread's) */

	/* waiter::counts() */
	struct {
		std::atomic<uint64_t> sleeps{0}, wakeups{0}, empty{0}, handoffs{0}, calib{0},
		    timeouts{0};
	} stats;
	static void bump(std::atomic<uint64_t> &c) noexcept
	{
		c.fetch_add(1, std::memory_order_relaxed);
	}

	void wake_blocker() noexcept;
	/* The signals of the sleepers taken off the list under mu, raised when it goes out of
	 * scope: declared before the lock, so after mu is released (a thread woken while mu is
	 * still held runs straight into it). More than fit are raised at once. */
	struct raises {
		signal *sig[8];
		size_t n = 0;
		void add(signal *s) noexcept
		{
			if (n < sizeof(sig) / sizeof(sig[0]))
				sig[n++] = s;
			else
				s->raise();
		}
		~raises()
		{
			for (size_t i = 0; i < n; ++i)
				sig[i]->raise();
		}
	};
	/* under mu: put s on the list / take it off (unlink) / take it off to be raised */
	void link(sleeper *s) noexcept;
	void unlink(sleeper *s) noexcept;
	void take(sleeper *s, bool handoff, raises &r) noexcept;
	/* under mu: the sleepers a notify(w, wake) concerns (see above); from_call: the
	 * calling thread's own blocking call on this waiter, if any */
	void take_for(const waitable *w, bool all, call *from_call, raises &r) noexcept;
	/* under mu: one sleeper waiting for w (not the leader unless it is the only one) */
	sleeper *first_for(const waitable *w) noexcept;
	/* the end of a blocking call: hand the leadership on, pass its member's work on */
	void leave(call &c) noexcept;
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
	bool block(uint64_t s, clock::time_point deadline, sleep_note &note, call &c) noexcept;
	bool sleep(sleeper &me, clock::time_point deadline, sleep_note &note) noexcept;
	void drain_polled() noexcept;
	void helper_main() noexcept;
};

namespace detail
{
/* The blocking call the calling thread is in (wait_block.cpp), nullptr outside one. */
extern thread_local waiter::impl::call *current_call;
} // namespace detail

} // namespace vwait::util

#endif
