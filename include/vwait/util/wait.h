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
 * Blocking: one loop for every blocking call, in two phases (wait_until below): poll (read
 * what is there: no arming, no system call) and prepare (the fi_trywait contract: arm the
 * sources below, look again, and only then sleep on the fds). How long a call stays in the
 * poll phase before its first prepare is the waiter's wait_policy (wait_policy.h), given at
 * creation: block (never), fixed (spin_us), adaptive (learnt per waiter). A call that finds
 * work in the poll phase never arms. YIELD has no prepare phase (nothing sleeps on fds): it
 * polls, then polls and sched_yield()s, until the deadline.
 *
 * No lost wakeups: every notify bumps a sequence number before it signals; a blocking thread
 * samples the sequence, drains, checks its predicate, and blocks only while the sequence is
 * unchanged. Only one thread at a time blocks on the fds (the "leader", or the helper thread);
 * the others sleep on their own thread's signal, raised only by whoever takes them off the
 * list of sleepers, so no thread ever resets a signal another thread is about to block on.
 * One wakeup per event: a notify of a member wakes one thread waiting for that member (an
 * sread on that CQ; the leader only when no other waits for it), not every sleeper, and the
 * leadership passes to exactly one sleeper when its holder returns (wait_impl.h).
 *
 * Thread safety: every public function may be called from any thread. drain callbacks must be
 * thread safe, non-blocking, and must not add/remove sources of the same waiter.
 */
#ifndef VWAIT_UTIL_WAIT_H
#define VWAIT_UTIL_WAIT_H

#include "vwait/util/wait_policy.h"
#include "vwait/util/waitable.h"

#include <rdma/fabric.h>
#include <rdma/fi_eq.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

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

/* One phase of a blocking call (see waiter::wait_until): true ends the wait. */
using phase_fn = bool (*)(void *arg) noexcept;

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
};
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
	/* The blocking loop of an object's own sread / cntr_wait / eq_sread:
	 *   poll()    reads what is there without arming anything and without a system call;
	 *             true ends the wait (0);
	 *   prepare() the trywait contract: arms the sources below so that their next event
	 *             reaches the waiter, then looks once more; true ends the wait (0), false
	 *             means sleeping is safe.
	 * The loop: poll(); while the policy's budget lasts, poll() again (spinning); then
	 * { prepare(); block until a notify/wake, a readable source or the deadline; drain what
	 * was readable; poll() } until one of them says true, or -FI_ETIMEDOUT at the
	 * deadline. Spurious wakeups neither shorten nor lengthen the deadline. Both are called
	 * with no waiter lock held, possibly from several threads at once. */
	/* target: the member the call waits for (an sread on that CQ), nullptr for anything: a
	 * notify of a member wakes one sleeper waiting for it, and every sleeper waiting for
	 * anything (see wait_impl.h). */
	template <typename Poll, typename Prepare>
	int wait_until(clock::time_point deadline, Poll &&poll, Prepare &&prepare,
	               waitable *target = nullptr) noexcept
	{
		struct phases {
			std::remove_reference_t<Poll> *poll;
			std::remove_reference_t<Prepare> *prepare;
		} ph{&poll, &prepare};
		return wait_until_impl(
		    deadline,
		    [](void *p) noexcept -> bool { return (*static_cast<phases *>(p)->poll)(); },
		    [](void *p) noexcept -> bool { return (*static_cast<phases *>(p)->prepare)(); },
		    &ph, target);
	}
	/* For an object with nothing to arm: pred serves as both phases. */
	template <typename Pred>
	int wait_until(clock::time_point deadline, Pred &&pred) noexcept
	{
		return wait_until(deadline, pred, pred);
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

	class impl;

private:
	explicit waiter(std::unique_ptr<impl> p) noexcept;
	int wait_until_impl(clock::time_point deadline, phase_fn poll, phase_fn prepare, void *arg,
	                    waitable *target) noexcept;
	std::unique_ptr<impl> p_;
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
