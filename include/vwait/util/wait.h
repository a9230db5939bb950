/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* util::waiter: one wait object of kind FI_WAIT_FD, FI_WAIT_POLLFD, FI_WAIT_MUTEX_COND or
 * FI_WAIT_YIELD (FI_WAIT_UNSPEC means FI_WAIT_FD). The same class serves wait sets
 * (fi_wait_open, through util::wait_open) and the private wait object of a CQ / counter / EQ
 * opened with its own wait_obj (through waitable::open_wait).
 *
 * What it holds:
 *  - members: the waitables attached to it, and a ready list of those that reported
 *    notify()/wake() (cost of a check follows the members with events, not the member count);
 *  - fd sources: fds that a member (later: a verbs completion channel, an rdma_cm channel)
 *    adds with a drain callback. When a source is readable the waiter calls drain(arg)
 *    (non-blocking, from whichever thread is waiting or trying); drain reads the fd and calls
 *    notify()/wake() on the members that fired (or waiter::notify with the member), so
 *    readiness is O(1), not a scan;
 *  - its public wait object: FD: one epoll fd holding a private eventfd and every source;
 *    POLLFD: that eventfd plus every source as a struct pollfd array whose change_index
 *    moves whenever the set changes; MUTEX_COND: a pthread mutex + cond broadcast on every
 *    notify, plus a helper thread that polls the sources and drains them, started once
 *    FI_GETWAIT has handed the mutex and cond out (the application may then wait on the
 *    cond itself) and the waiter has a source, joined at close. Before that, vwait's own
 *    blocking calls poll the fds as for FD (no thread switch per wakeup); YIELD: nothing
 *    (progress + sched_yield).
 *
 * Blocking: one loop for every blocking call (wait_for below), whose phases the waiter calls
 * itself: peek (the object's poll_now(), then what the call consumes: no arming, no system
 * call) and trywait (the object's arm_now(), then what the call consumes once more; only then
 * does it sleep on the fds). The object supplies only what its call consumes: the CQ's
 * threshold read, the counter's >=, the EQ's queue read. How long a call stays in the peek
 * phase before its first trywait is the waiter's wait_policy (wait_policy.h), given at
 * creation: block (never), fixed (spin_us), adaptive (learnt per waiter). A call that finds
 * work in the peek phase never arms. YIELD has no trywait phase (nothing sleeps on fds): it
 * peeks, then peeks and sched_yield()s, until the deadline.
 *
 * No lost wakeups: every notify bumps a sequence number before it signals; a blocking thread
 * samples the sequence, drains, checks its predicate, and blocks only while the sequence is
 * unchanged. Only one thread at a time blocks on the fds (the "leader", or the helper thread);
 * the others sleep on their own thread's signal, raised only by whoever takes them off the
 * list of sleepers, so no thread ever resets a signal another thread is about to block on.
 * One wakeup per event: a notify of a member wakes one thread waiting for that member (an
 * sread on that CQ; the leader only when no other waits for it), not every sleeper, and the
 * leadership passes to exactly one sleeper when its holder returns (the private part below).
 *
 * Thread safety: every public function may be called from any thread. drain callbacks must be
 * thread safe, non-blocking, and must not add/remove sources of the same waiter.
 */
#ifndef VWAIT_UTIL_WAIT_H
#define VWAIT_UTIL_WAIT_H

#include "vwait/util/fdset.h"
#include "vwait/util/helper_thread.h"
#include "vwait/util/ready_list.h"
#include "vwait/util/signal.h"
#include "vwait/util/thread_safety.h"
#include "vwait/util/wait_policy.h"
#include "vwait/util/waitable.h"

#include <rdma/fabric.h>
#include <rdma/fi_eq.h>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <new>
#include <type_traits>
#include <unordered_set>
#include <utility>
#include <vector>

namespace vwait::util
{

/* One deadline computed at entry: timeout_ms < 0 means forever (time_point::max()). */
clock::time_point deadline_after(int timeout_ms) noexcept;

/* Blocking in this process. The first time one of its threads may sleep (a blocking call past
 * its poll phase, FI_WAIT_YIELD's yielding included, on a waiter that counts: see
 * waiter::set_counts_as_blocking), starts a wait of its own (fi_trywait) or
 * takes a wait object to sleep on (FI_GETWAIT), note_blocking() runs the hook set here, once
 * per process, before that thread sleeps. A provider that needs a thread only for sleepers
 * starts it there: vwait's EQ thread, so that a process that only spins never has a second
 * thread (glibc takes slower paths for good once one has existed). The hook may be called
 * from any thread, with no util lock held. */
using blocking_hook = void (*)() noexcept;
void set_blocking_hook(blocking_hook fn) noexcept;
/* true once note_blocking() has run in this process */
bool blocking_seen() noexcept;
void note_blocking() noexcept;

/* What one blocking call consumes (see waiter::wait_for): a reference, for the length of the
 * call, to the caller's callable; true ends the call (it read what it waited for, or gives
 * up). Called with no waiter lock held, possibly from several threads at once. */
class consume_fn
{
public:
	template <typename F, typename = std::enable_if_t<
	                          !std::is_same_v<std::remove_cv_t<std::remove_reference_t<F>>,
	                                          consume_fn>>>
	consume_fn(F &&f) noexcept // NOLINT(google-explicit-constructor): a lambda converts
	    : fn(&invoke<std::remove_reference_t<F>>),
	      arg(const_cast<void *>(static_cast<const void *>(&f)))
	{
	}
	/* the call: fn(arg) */
	bool (*const fn)(void *) noexcept;
	void *const arg;

private:
	template <typename F>
	static bool invoke(void *f) noexcept
	{
		return (*static_cast<F *>(f))();
	}
};

/* N slots of T (value-initialized), filled round-robin, that exist once allocate() made them:
 * an empty range before. What a waiter keeps only for sets larger than it peeks whole
 * (waiter::recent). */
template <typename T, size_t N>
class lazy_slots
{
public:
	/* true once the slots exist (false: no memory) */
	bool allocate() noexcept
	{
		if (!p_)
			p_.reset(new (std::nothrow) block());
		return p_ != nullptr;
	}
	bool allocated() const noexcept { return p_ != nullptr; }
	T *begin() noexcept { return p_ ? p_->slots.data() : nullptr; }
	T *end() noexcept { return p_ ? p_->slots.data() + N : nullptr; }
	static constexpr size_t size() noexcept { return N; }
	/* only once allocated */
	T &operator[](size_t i) noexcept { return p_->slots[i]; }
	/* only once allocated: the slot after the one the previous call gave (any thread) */
	T &next_slot() noexcept
	{
		return p_->slots[p_->next.fetch_add(1, std::memory_order_relaxed) % N];
	}

private:
	struct block {
		std::array<T, N> slots{};
		std::atomic<size_t> next{0};
	};
	std::unique_ptr<block> p_;
};

/* A T that exists once make() made it, from any thread: concurrent first calls make one each
 * and keep the one that was published first (the others are freed before they are seen), so
 * get() never sees a T in the making. Freed with its owner. What a waiter keeps only once it
 * is blocked on (waiter::parts). */
template <typename T>
class lazy_object
{
public:
	lazy_object() noexcept = default;
	lazy_object(const lazy_object &) = delete;
	lazy_object &operator=(const lazy_object &) = delete;
	~lazy_object() { delete p_.load(std::memory_order_acquire); }
	/* the T, or nullptr before the first make() */
	T *get() const noexcept { return p_.load(std::memory_order_acquire); }
	/* the T, made from args if there is none yet; nullptr: no memory */
	template <typename... A>
	T *make(A &&...args) noexcept
	{
		T *p = get();
		if (__builtin_expect(p != nullptr, 1))
			return p;
		return make_slow(std::forward<A>(args)...);
	}

private:
	template <typename... A>
	__attribute__((noinline)) T *make_slow(A &&...args) noexcept
	{
		T *made = new (std::nothrow) T(std::forward<A>(args)...);
		if (!made)
			return nullptr;
		T *seen = nullptr;
		if (p_.compare_exchange_strong(seen, made, std::memory_order_acq_rel,
		                               std::memory_order_acquire))
			return made;
		delete made; /* another thread's came first */
		return seen;
	}

	std::atomic<T *> p_{nullptr};
};

/* Who a notify of the object wakes while a call blocks on it (wait_for): one sleeper per
 * notify (an sread on a CQ: one completion is for one reader), or every one (a counter's
 * change and an EQ's event concern whoever waits). */
enum class wakes { one, all };

namespace detail
{
/* The members of a waiter: a hash set from the second member on; until then the one member
 * alone (a private waiter has one member only: no table, 104 bytes of each FD CQ). Not thread
 * safe (the waiter's members_mu). */
class member_set
{
public:
	bool contains(const waitable *w) const noexcept
	{
		return many_ ? many_->count(const_cast<waitable *>(w)) != 0 : w && one_ == w;
	}
	size_t size() const noexcept { return many_ ? many_->size() : one_ ? 1 : 0; }
	bool empty() const noexcept { return size() == 0; }
	/* may throw std::bad_alloc (then nothing changed) */
	void insert(waitable *w)
	{
		if (!many_ && (!one_ || one_ == w)) {
			one_ = w;
			return;
		}
		if (!many_) {
			auto set = std::make_unique<std::unordered_set<waitable *>>();
			set->insert(one_);
			many_ = std::move(set);
			one_ = nullptr;
		}
		many_->insert(w);
	}
	/* false when w is no member */
	bool erase(waitable *w) noexcept
	{
		if (many_)
			return many_->erase(w) != 0;
		if (!w || one_ != w)
			return false;
		one_ = nullptr;
		return true;
	}
	/* true once f(member) said true (f is called for the members until then) */
	template <typename F>
	bool any(F &&f) const
	{
		if (!many_)
			return one_ && f(one_);
		for (waitable *w : *many_)
			if (f(w))
				return true;
		return false;
	}

private:
	waitable *one_ = nullptr;
	std::unique_ptr<std::unordered_set<waitable *>> many_;
};

/* an fd source of a waiter */
struct source {
	int fd;
	drain_fn drain;
	void *arg;
	unsigned refs; /* hold_source users; add_source makes 1 */
};
} // namespace detail

/* What the sleeps of a waiter's blocking calls came to, since it was made (relaxed counters,
 * for tests and benchmarks: waiter::counts()). A wakeup is a thread returning from a sleep
 * (poll on its fds or its own signal, or the FI_WAIT_MUTEX_COND cond) before its deadline. */
struct wake_counts {
	uint64_t sleeps = 0;   /* a thread went to sleep */
	uint64_t wakeups = 0;  /* a sleep ended before its deadline (whatever ended it) */
	uint64_t empty = 0;    /* wakeups after which the caller's poll found nothing */
	uint64_t handoffs = 0; /* wakeups that only made a sleeper the new leader */
	uint64_t calib = 0;    /* wakeups by the wait policy's calibration timer alone */
	uint64_t timeouts = 0; /* sleeps that ended at their deadline */
	/* Why a blocking call armed (its first arm; FD, POLLFD and MUTEX_COND waits): the
	 * policy gave it no spin, or it spun its whole budget. */
	uint64_t arm_no_spin = 0, arm_budget = 0;
	/* Calls that slept, by their whole length (from the call to the work found): < 100 us,
	 * < 1 ms, longer. Short ones are sleeps that spinning would have saved. */
	uint64_t slept_100us = 0, slept_1ms = 0, slept_longer = 0;

	/* the counts of this minus those of before (what a window of a run came to) */
	wake_counts since(const wake_counts &before) const noexcept;
};

namespace detail
{
/* a waiter's counters behind wake_counts (waiter::counts()) */
struct wait_stats {
	std::atomic<uint64_t> sleeps{0}, wakeups{0}, empty{0}, handoffs{0}, calib{0}, timeouts{0},
	    arm_no_spin{0}, arm_budget{0}, slept_100us{0}, slept_1ms{0}, slept_longer{0};
};
} // namespace detail
class waiter final : public listener
{
public:
	/* A waiter of kind wait_obj (an enum fi_wait_obj value as int; UNSPEC -> FD) whose
	 * blocking calls follow policy. NONE, SET or an unknown value: -FI_EINVAL with one
	 * warning line through prov. Otherwise 0 or -FI_ENOMEM / -FI_EMFILE ... */
	static int create(const struct fi_provider *prov, int wait_obj,
	                  std::unique_ptr<waiter> &out, wait_policy policy = {}) noexcept;
	~waiter();

	/* The kind (never UNSPEC: FD, POLLFD, MUTEX_COND or YIELD). */
	enum fi_wait_obj kind() const noexcept;
	const struct fi_provider *provider() const noexcept;
	/* Its wait policy and what the adaptive policy has learnt so far. */
	const spin_learner &learner() const noexcept;
	/* false: a sleep in wait_until does not count as the process blocking (note_blocking).
	 * For the private waiter of an object whose sleeper needs no provider thread: it drains
	 * its own fd sources on waking (an EQ in fi_eq_sread, its rdma_cm channel). Default true;
	 * set before the waiter is used. */
	void set_counts_as_blocking(bool on) noexcept;

	/* ---- members ---- */
	/* 0, or -FI_EALREADY when w is already a member. The new member starts on the ready
	 * list (it may already hold events). */
	int attach(waitable *w) noexcept;
	/* 0, or -FI_ENOENT when w is not a member. */
	int detach(waitable *w) noexcept;
	size_t member_count() const noexcept;

	/* ---- fd sources ---- */
	/* Watch raw_fd for events (POLLIN usually); when it polls with any of them (or an error)
	 * call drain(arg). The caller keeps owning raw_fd and removes it before closing it.
	 * 0, -FI_EINVAL (fd < 0, no drain), -FI_EALREADY (fd already a source). */
	int add_source(int raw_fd, short events, drain_fn drain, void *arg) noexcept;
	/* 0 or -FI_ENOENT. When it returns, drain(arg) of that source is not running and will
	 * not be called again. */
	int remove_source(int raw_fd) noexcept;
	/* Shared sources: several users (a CQ's waiter and the counters it feeds) may hold the
	 * same fd with the same drain; it stays a source until the last drop_source. hold_source
	 * of an fd added with another drain/arg: -FI_EALREADY. drop_source: 0 or -FI_ENOENT. */
	int hold_source(int raw_fd, short events, drain_fn drain, void *arg) noexcept;
	int drop_source(int raw_fd) noexcept;

	/* ---- signalling (listener) ---- */
	void notify(waitable *w, bool wake) noexcept override;
	void forget(waitable *w) noexcept override;
	/* A wake that names no member (e.g. a member that found its event while draining). */
	void wake() noexcept;

	/* ---- blocking ---- */
	/* The blocking call of w (its sread / cntr_wait / eq_sread, w a member of this waiter or
	 * the object it belongs to). The waiter calls the phases: peek = w.poll_now(), then
	 * consume(); while the policy's budget lasts it peeks again (spinning); then trywait =
	 * w.arm_now() (arm the source below, bring in what came before the arming), then
	 * consume() once more; false: sleeping is safe: block until a notify/wake, a readable
	 * source or the deadline, drain what was readable, peek again. 0 once consume() says
	 * true, -FI_ETIMEDOUT at the deadline, or the error of an arm_now() that failed (other
	 * than -FI_EAGAIN, which means "look"). Spurious wakeups neither shorten nor lengthen
	 * the deadline. how: who a notify of w wakes (wakes::one: one sleeper per notify, the
	 * leader only when no other waits for w; the call passes w's work on when it returns).
	 */
	int wait_for(waitable &w, clock::time_point deadline, consume_fn consume,
	             wakes how = wakes::all) noexcept
	{
		if (peek_phase(&w, &consume))
			return 0;
		return run(deadline, &w, &consume, how == wakes::one ? &w : nullptr);
	}
	/* For a caller with nothing below to poll or arm (tests, benchmarks): pred is the
	 * whole call, peek and trywait alike. */
	int wait_until(clock::time_point deadline, consume_fn pred) noexcept
	{
		if (peek_phase(nullptr, &pred))
			return 0;
		return run(deadline, nullptr, &pred, nullptr);
	}
	/* fi_wait: 0 once a member is ready or any wake()/notify() arrived since the previous
	 * fi_wait / fi_trywait consumed one; -FI_ETIMEDOUT at the deadline; timeout_ms < 0 means
	 * forever. Its poll phase costs what is active, not what exists: in a set of more than
	 * 16 members it looks only at the members that reported something and at the 32 that
	 * most recently had something, and arms (once) the members that joined and those that
	 * went idle (wait_block.cpp, peek_ready). */
	int wait(int timeout_ms) noexcept;
	/* fi_trywait on this wait object: resets its public signal, drains the readable sources,
	 * then -FI_EAGAIN if a wake arrived since the last consumer or a member on the ready list
	 * answers trywait() != 0; 0 when blocking on the public wait object is safe. */
	int trywait() noexcept;

	/* FI_GETWAIT: FD -> (int *) the epoll fd; POLLFD -> (struct fi_wait_pollfd *) with nfds
	 * in/out, -FI_ETOOSMALL when short, nfds = 0 the cheap change_index probe; MUTEX_COND ->
	 * (struct fi_mutex_cond *); YIELD -> -FI_ENODATA (nothing to block on).
	 * FI_GETWAITOBJ -> (enum fi_wait_obj *) kind(). Other commands: -FI_ENOSYS. NULL arg:
	 * -FI_EINVAL. */
	int control(int command, void *arg) noexcept;

	/* What its blocking calls' sleeps came to so far (see wake_counts). */
	wake_counts counts() const noexcept;

private:
	struct call;
	waiter(const struct fi_provider *prov, enum fi_wait_obj kind, wait_policy policy);
	int open() noexcept;
	/* detach; unregister: also leave w's listeners (not when w is closing: forget) */
	int drop_member(waitable *w, bool unregister) noexcept;
	void drain_ready() noexcept;

	/* The blocking loop (wait_block.cpp), once the caller's first peek found nothing. w
	 * nullptr: consume is the whole call (wait_until), or, consume nullptr too, fi_wait on
	 * the members (peek_ready, then any_ready). target: the member whose notify wakes one
	 * sleeper (wakes::one), nullptr for anything.
	 * Work found by the first peek: the call does not wait, and teaches the policy nothing.
	 * Counted as a short wait, such a call (a send completion found at once, between two
	 * long waits for the peer) would keep an adaptive waiter spinning through every long
	 * wait. It is no blocking call either (no leadership, nothing to pass on). */
	int run(clock::time_point deadline, waitable *w, const consume_fn *consume,
	        waitable *target) noexcept;
	/* its two phases: peek (what is there, without arming and without a system call) and
	 * trywait (arm, then look again; false: sleeping is safe) */
	bool peek_phase(waitable *w, const consume_fn *consume) noexcept
	{
		if (!consume)
			return peek_ready();
		if (w)
			w->poll_now();
		return consume->fn(consume->arg);
	}
	bool trywait_phase(call &c) noexcept;
	/* fi_wait's two phases: peek_ready looks (no arming, no system call), any_ready
	 * trywaits the members (arms them) */
	bool peek_ready() noexcept;
	bool peek_batch(const std::vector<waitable *> &batch, size_t nfresh) noexcept;
	bool any_ready() noexcept;
	int trywait_members() noexcept;

	/* fi_wait's poll phase looks at every member of a set this small */
	static constexpr size_t peek_all_max = 16;
	/* in a larger set, at most this many members stay on the ready list unarmed (the ones
	 * most recently reported: a stream of completions on each is read by peeking) */
	static constexpr size_t peek_keep = 32;

	const struct fi_provider *const prov_;
	const enum fi_wait_obj kind_;
	epoll_set ep;              /* FD: pub + sources (beside kind_: no padding hole; pahole) */
	const wait_policy policy_; /* its blocking calls' (blocking_state::learner) */

	/* members: shared while calling into them, exclusive to attach/detach */
	mutable shared_mutex members_mu{lock_level::wait_members};
	detail::member_set members;
	std::vector<waitable *> polled; /* members that are not self_notifying() */
	ready_list ready;
	/* the last peek_keep distinct members that fi_wait's poll phase found with something:
	 * peeked on every pass of a large set whether armed or not, as a small set peeks all
	 * its members, so that a few active members are found by peeking, not through their
	 * channel's event (written under members_mu shared, cleared under it exclusive). Made
	 * by attach() under members_mu exclusive when the set first grows past peek_all_max,
	 * the only sets that use them: not in the waiter of a CQ of its own (256 bytes of each
	 * FI_WAIT_FD CQ); an empty range before. */
	lazy_slots<std::atomic<waitable *>, peek_keep> recent;
	void remember(waitable *w) noexcept;

	/* sources: shared while draining, exclusive to remove */
	shared_mutex sources_mu{lock_level::wait_sources};
	std::list<detail::source> sources;
	pollfd_set source_fds; /* tags: source * */
	std::atomic<size_t> nsources{0};
	/* a new value on every add/remove, unique across waiters (under sources_mu, exclusive) */
	uint64_t sources_gen = 0;

	/* signalling (pub and pending are with the small members at the end) */
	std::atomic<uint64_t> seq{0};

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
	 * runs, blocking threads wait on cv for seq to move (the helper polls the sources).
	 * mu, cv and the list are in blocking_state (below), made by the first blocking call. */
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
	/* MUTEX_COND helper thread: needed only once the application holds the mutex and cond
	 * (FI_GETWAIT) and may wait on them itself; started then (or at the first source after
	 * that), joined at close. Until then a blocking thread polls the fds as FD does. The
	 * thread and its signal are made by the first start_helper() (under mu, before helper_on
	 * is set; never freed before the waiter): no other waiter holds them (120 bytes). */
	struct helper_parts {
		helper_thread thread;
		signal sig; /* the helper's own wakeup (the leader's is its thread's) */
	};
	/* What only a waiter that something blocks on holds: the wait policy's learner, the
	 * counts of its sleeps, the sleepers' lock and list, MUTEX_COND's cond and helper. An FD
	 * CQ that is read with fi_cq_read, or waited for through fi_trywait and the application's
	 * own epoll or poll, never needs them (about 560 bytes of each such CQ). Made
	 * by the first blocking call whose first look found nothing (run), or at creation for
	 * MUTEX_COND (FI_GETWAIT hands out its mutex and cond, and every notify takes the mutex);
	 * freed with the waiter. Whoever sees nsleeping > 0 finds them made: a thread makes them
	 * before it counts itself in nsleeping. */
	struct blocking_state {
		explicit blocking_state(const wait_policy &p) noexcept : learner(p) {}
		spin_learner learner;     /* how long a blocking call polls before it arms */
		detail::wait_stats stats; /* waiter::counts() */
		mutex mu{lock_level::wait_block};
		std::condition_variable cv;
		sleeper *sleep_head = nullptr, *sleep_tail = nullptr; /* guarded by mu */
		bool leader = false;                                  /* guarded by mu */
		/* MUTEX_COND: FI_GETWAIT handed out the mutex and cond; the helper must end */
		std::atomic<bool> helper_wanted{false}, helper_stop{false};
		std::atomic<int> followers{0}; /* MUTEX_COND with its helper: threads on cv */
		std::unique_ptr<helper_parts> helper;
	};
	mutable lazy_object<blocking_state> blocking_;
	/* blocking_'s, where it exists: in a blocking call (call::bs), under its mu, where
	 * nsleeping > 0 or helper_on was seen, in a MUTEX_COND waiter */
	blocking_state &bs() const noexcept { return *blocking_.get(); }
	/* one blocking call (run), as block() and notify() see it */
	/* one sleep of the blocking loop, as the wait policy sees it: a calibration timer due
	 * `calib` into it (zero: none; set by the caller), and what the sleep was (set by block) */
	struct sleep_note {
		clock::duration calib{};
		clock::time_point woke_at{}; /* when poll() returned */
		bool event = false;          /* an fd other than the calibration timer ended it */
		bool timer_only = false;     /* only the calibration timer ended it */
		clock::duration late{};      /* then: how long after its expiry */
	};
	struct call {
		waiter *self;
		blocking_state &bs;
		waitable *w;               /* whose phases run calls; nullptr: none */
		const consume_fn *consume; /* nullptr: fi_wait */
		waitable *target;
		bool leading = false; /* holds the leadership */
		bool owes = false;    /* was woken for work, or read its member's event itself */
		int err = 0;          /* the error of a failed arm_now() */
		/* for the policy: what it decided, when the call began, its last sleep (how long
		 * its arming took, when it began), whether it armed (once counted) and came back
		 * from a sleep since its last look */
		wait_call decision{};
		clock::time_point start{}, slept_from{};
		clock::duration arm{};
		sleep_note note{};
		bool armed = false, woke = false;
	};
	/* the blocking call the calling thread is in (wait_block.cpp), nullptr outside one */
	static thread_local call *current_call;
	/* the small members last, so that no padding hole is left (pahole) */
	signal pub; /* FD / POLLFD: the application's signal */
	std::atomic<int> nsleeping{0};
	std::atomic<bool> pending{false};   /* a wake() not yet consumed by fi_wait/fi_trywait */
	std::atomic<bool> helper_on{false}; /* blocking_state::helper runs */
	std::atomic<bool> counts_as_blocking_{true}; /* set_counts_as_blocking */

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

	bool block(uint64_t s, clock::time_point deadline, sleep_note &note, call &c) noexcept;
	bool spin(call &c, clock::time_point until, clock::time_point *found_at) noexcept;
	bool arm_and_sleep(call &c, uint64_t s, clock::time_point deadline, clock::time_point now,
	                   bool *readable) noexcept;
	void found(call &c, clock::time_point now) noexcept;
	bool sleep(sleeper &me, clock::time_point deadline, sleep_note &note) noexcept;
	int drain_polled_tags() noexcept;
	void drain_polled() noexcept;
	bool drain_owed() noexcept;
	void helper_main() noexcept;
};

/* fi_wait_open for a fabric: a wait set of attr->wait_obj. flags != 0, FI_WAIT_NONE,
 * FI_WAIT_SET, NULL attr/out: -FI_EINVAL with one warning line. fi_close while members are
 * attached: -FI_EBUSY. on_close (optional) runs after a successful fi_close (the fabric drops
 * its reference there). policy: how its fi_wait (and its members' blocking calls) spin. */
int wait_open(const struct fi_provider *prov, struct fi_wait_attr *attr, struct fid_wait **out,
              std::function<void()> on_close = {}, wait_policy policy = {}) noexcept;

/* The waiter behind a vwait wait set fid (fi_control ctl_get_waiter): 0, -FI_EINVAL (NULL),
 * -FI_ENOSYS (not a vwait wait set). */
int get_waiter(struct fid *fid, waiter **out) noexcept;

} // namespace vwait::util

#endif
