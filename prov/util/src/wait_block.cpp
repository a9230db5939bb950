/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* util::waiter's blocking protocol: one loop for every blocking call (fi_cq_sread,
 * fi_cntr_wait, fi_eq_sread, fi_wait) in two phases that the waiter calls, peek (look, no
 * arming, no system call) and trywait (the fi_trywait contract: arm, look again, only then
 * sleep on the fds), the time spent peeking set by the waiter's wait policy; one leader
 * blocks on the fds while the other sleepers wait on their own signal; fi_wait and
 * fi_trywait; the FI_WAIT_MUTEX_COND helper thread. */
#include "wait_impl.h"

#include <rdma/fi_errno.h>
#include <rdma/providers/fi_log.h>

#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <sched.h>
#include <utility>

namespace vwait::util
{

namespace
{

/* poll(2) until deadline (max(): forever), with a timeout rounded up to whole milliseconds
 * so that a wait never ends early. */
int poll_until(struct pollfd *fds, size_t n, clock::time_point deadline) noexcept
{
	int timeout = -1;
	if (deadline != clock::time_point::max()) {
		auto left = deadline - clock::now();
		if (left <= clock::duration::zero()) {
			timeout = 0;
		} else {
			auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
			timeout = ms > 1000000 ? 1000000 : static_cast<int>(ms);
		}
	}
	int ret = ::poll(fds, n, timeout);
	if (ret < 0)
		return errno == EINTR ? 0 : -errno;
	return ret;
}

} // namespace

namespace
{
/* What the leader's poll() found readable, kept by the thread that polled (another thread
 * may be the leader by the time it drains): the sources' tags and the generation they are
 * valid for. */
struct polled_sources {
	std::vector<void *> tags;
	uint64_t gen = 0;
	/* the call that polled them returned without reading them (nobody else slept): the
	 * thread's next arming of that waiter reads them first (drain_owed) */
	bool owed = false;
};
thread_local polled_sources polled_by_me;

/* The adaptive policy's calibration timer (wait_policy.h): one timerfd per thread that
 * leads a sleep, made at its first calibration, closed at thread exit. timerfd, not poll's
 * timeout: a timerfd's expiry takes no timer slack, so its lateness is the wake-up alone. */
thread_local fd calib_timer;
thread_local bool calib_timer_failed = false;

int calib_timer_fd() noexcept
{
	if (!calib_timer && !calib_timer_failed) {
		calib_timer.reset(::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC));
		calib_timer_failed = !calib_timer;
	}
	return calib_timer.get();
}

} // namespace

/* One sleep of a listed sleeper: on its signal, the sources when it leads, and the
 * calibration timer when the policy asks for one. true when a source was readable
 * (drain_polled reads it). */
bool waiter::sleep(sleeper &me, clock::time_point deadline, sleep_note &note) noexcept
{
	thread_local std::vector<struct pollfd> fds;
	thread_local std::vector<void *> tags;
	detail::wait_stats &stats = bs().stats; /* in a blocking call: made */
	bool woke = false;
	uint64_t gen = 0;
	fds.clear();
	tags.clear();
	try {
		/* no signal of its own (no eventfd left): a short sleep, then look again */
		fds.push_back({me.sig ? me.sig->fd() : -1, POLLIN, 0});
		tags.push_back(nullptr);
		if (me.leads && nsources.load()) {
			std::shared_lock<util::shared_mutex> lock(sources_mu);
			source_fds.snapshot(fds, tags);
			gen = sources_gen;
		}
		/* the calibration timer, last (not a source: its tag is never drained) */
		clock::time_point expiry{};
		const int t = note.calib > clock::duration::zero() ? calib_timer_fd() : -1;
		if (t >= 0) {
			expiry = clock::now() + note.calib;
			if (expiry < deadline && set_timer_at(t, expiry)) {
				fds.push_back({t, POLLIN, 0});
				tags.push_back(nullptr);
			} else {
				expiry = clock::time_point{};
			}
		}
		clock::time_point until = deadline;
		if (!me.sig)
			until = std::min(deadline, clock::now() + std::chrono::milliseconds(1));
		/* a timer already due before this thread sleeps would time a system call, not a
		 * wake-up: no calibration this sleep (a due that short follows waits so short that
		 * they are spun through whatever W is) */
		if (expiry != clock::time_point{} && clock::now() >= expiry) {
			fds.pop_back();
			tags.pop_back();
			expiry = clock::time_point{};
		}
		bump(stats.sleeps);
		woke = poll_until(fds.data(), fds.size(), until) > 0;
		note.woke_at = clock::now();
		bump(woke ? stats.wakeups : stats.timeouts);
		me.sig_ready = fds[0].revents != 0;
		if (woke && expiry != clock::time_point{}) {
			const struct pollfd tp = fds.back();
			fds.pop_back();
			tags.pop_back();
			bool other = false;
			for (const struct pollfd &p : fds)
				other = other || p.revents != 0;
			if (tp.revents && !other) {
				bump(stats.calib);
				note.timer_only = true;
				note.late = note.woke_at - expiry;
				woke = false;
			}
		} else if (expiry != clock::time_point{}) {
			fds.pop_back();
			tags.pop_back();
		}
		note.event = woke;
	} catch (const std::bad_alloc &) {
		/* cannot build the array: back off briefly rather than spin */
		struct pollfd p = {me.sig ? me.sig->fd() : -1, POLLIN, 0};
		::poll(&p, 1, 1);
		me.sig_ready = p.revents != 0;
		return false;
	}
	if (!woke)
		return false;
	polled_by_me.tags.clear();
	polled_by_me.gen = gen;
	polled_by_me.owed = false;
	try {
		for (size_t i = 1; i < fds.size(); ++i)
			if (fds[i].revents)
				polled_by_me.tags.push_back(tags[i]);
	} catch (const std::bad_alloc &) {
		polled_by_me.gen = ~uint64_t{0}; /* drain_polled looks at all of them */
	}
	return !polled_by_me.tags.empty() || polled_by_me.gen == ~uint64_t{0};
}

/* The sources this thread's last poll() found readable, drained if they are this waiter's
 * sources as they are now (sources_gen is unique across waiters): how many, or -1 when they
 * are not (another waiter's, or the sources changed). Settles what a call left owed. */
int waiter::drain_polled_tags() noexcept
{
	polled_by_me.owed = false;
	std::shared_lock<util::shared_mutex> lock(sources_mu);
	if (polled_by_me.gen != sources_gen)
		return -1;
	for (void *tag : polled_by_me.tags) {
		auto *src = static_cast<detail::source *>(tag);
		src->drain(src->arg);
	}
	return static_cast<int>(polled_by_me.tags.size());
}

/* The sources this thread's poll() found readable: drain exactly those (no second poll),
 * unless the sources changed meanwhile, then look at all of them. */
void waiter::drain_polled() noexcept
{
	if (drain_polled_tags() < 0)
		drain_ready();
}

/* What this thread's last poll() found and its call left unread: read before the thread arms
 * again, or the event would end the next poll() at once (an arm, a poll and a pass more per
 * sleep); if the sources changed, the poll still sees what is left. true when it read some. */
bool waiter::drain_owed() noexcept
{
	return drain_polled_tags() > 0;
}

thread_local waiter::call *waiter::current_call = nullptr;

void waiter::link(sleeper *s) noexcept
{
	blocking_state &b = bs();
	s->prev = b.sleep_tail;
	s->next = nullptr;
	(b.sleep_tail ? b.sleep_tail->next : b.sleep_head) = s;
	b.sleep_tail = s;
}

void waiter::unlink(sleeper *s) noexcept
{
	blocking_state &b = bs();
	(s->prev ? s->prev->next : b.sleep_head) = s->next;
	(s->next ? s->next->prev : b.sleep_tail) = s->prev;
	s->prev = s->next = nullptr;
	nsleeping.fetch_sub(1);
}

void waiter::take(sleeper *s, bool handoff, raises &r) noexcept
{
	unlink(s);
	signal *sig = s->sig; /* a thread's signal outlives the thread (thread_signal) */
	s->handoff = handoff;
	/* the last touch of *s: a sleeper that sees it may return (its sleeper goes) */
	s->woken.store(true, std::memory_order_release);
	if (sig)
		r.add(sig);
}

waiter::sleeper *waiter::first_for(const waitable *w) noexcept
{
	sleeper *lead = nullptr;
	for (sleeper *s = bs().sleep_head; s; s = s->next) {
		if (s->target != w)
			continue;
		if (!s->leads)
			return s;
		lead = s;
	}
	return lead;
}

void waiter::take_for(const waitable *w, bool all, call *from_call, raises &r) noexcept
{
	for (sleeper *s = bs().sleep_head; s;) {
		sleeper *next = s->next;
		if (!s->target || (all && (!w || s->target == w)))
			take(s, false, r);
		s = next;
	}
	if (all)
		return;
	/* the calling thread waits for w itself and looks again before it sleeps (seq
	 * moved): it reads w, and passes what it leaves on when it returns (leave) */
	if (from_call && from_call->target == w) {
		from_call->owes = true;
		return;
	}
	if (sleeper *s = first_for(w))
		take(s, false, r);
}

void waiter::leave(call &c) noexcept
{
	/* its member still has something and another thread sleeps waiting for it */
	const bool pass = c.owes && c.target && nsleeping.load() > 0 && c.target->peek();
	if (!c.leading && !pass)
		return;
	raises r;
	std::lock_guard<util::mutex> lock(c.bs.mu);
	sleeper *next = pass ? first_for(c.target) : nullptr;
	if (c.leading) {
		c.bs.leader = false;
		c.leading = false;
		/* exactly one sleeper leads next (the one the work goes to, if any) */
		if (!next && nsources.load() > 0)
			next = c.bs.sleep_head;
		if (next)
			take(next, nsources.load() > 0, r);
	} else if (next) {
		take(next, false, r);
	}
}

/* true when this thread polled the fds and a source was readable (drain_polled reads it) */
bool waiter::block(uint64_t s, clock::time_point deadline, sleep_note &note, call &c) noexcept
{
	if (kind_ == FI_WAIT_YIELD) {
		sched_yield();
		return false;
	}
	sleeper me;
	me.target = c.target;
	me.sig = thread_signal();
	blocking_state &b = c.bs;
	cv_lock lock(b.mu);
	if (kind_ == FI_WAIT_MUTEX_COND && helper_on.load()) {
		/* The helper thread polls the sources and turns their events into notify(),
		 * which broadcasts the cond. */
		if (c.leading) {
			b.leader = false;
			c.leading = false;
		}
		b.followers.fetch_add(1);
		while (seq.load() == s && clock::now() < deadline) {
			bump(b.stats.sleeps);
			if (deadline == clock::time_point::max())
				b.cv.wait(lock);
			else
				b.cv.wait_until(lock, deadline);
			bump(clock::now() < deadline ? b.stats.wakeups : b.stats.timeouts);
		}
		b.followers.fetch_sub(1);
		return false;
	}
	/* listed before it looks at seq: a notify bumps seq before it looks at nsleeping */
	nsleeping.fetch_add(1);
	if (seq.load() != s) {
		nsleeping.fetch_sub(1);
		return false;
	}
	if (nsources.load() > 0) {
		if (!b.leader)
			b.leader = c.leading = true;
	} else if (c.leading) {
		b.leader = c.leading = false; /* nothing left to poll */
	}
	me.leads = c.leading;
	link(&me);
	lock.unlock();
	const bool readable = sleep(me, deadline, note);
	/* Taken off the list (the usual end of a sleep: its signal raised): the taker is done
	 * with it, no mu to take. Otherwise take mu to leave the list. */
	bool woken = me.woken.load(std::memory_order_acquire);
	if (!woken) {
		lock.lock();
		woken = me.woken.load(std::memory_order_relaxed);
		if (!woken)
			unlink(&me);
		lock.unlock();
	}
	if (me.sig && woken && !me.sig_ready) {
		/* taken while its sleep ended for another reason: the taker raises the signal
		 * right after it releases mu; wait for that raise, so that none is left for this
		 * thread's next sleep */
		struct pollfd p = {me.sig->fd(), POLLIN, 0};
		while (::poll(&p, 1, -1) < 0 && errno == EINTR) {
		}
	}
	if (me.sig && (woken || me.sig_ready))
		me.sig->reset();
	if (woken) {
		c.owes = true;
		if (me.handoff)
			bump(b.stats.handoffs);
	}
	return readable;
}

namespace
{
/* the spin reads the clock once per this many polls, so that a poll is what a pass mostly
 * costs and a spinning fi_cq_sread polls at the pace of a fi_cq_read loop */
constexpr unsigned clock_every = 8;

} // namespace

/* The trywait phase: arm, then look again; false: sleeping is safe. */
bool waiter::trywait_phase(call &c) noexcept
{
	if (!c.consume)
		return any_ready();
	if (c.w) {
		const int ret = c.w->arm_now();
		if (ret && ret != -FI_EAGAIN) {
			c.err = ret; /* cannot arm: the call ends with the error */
			return true;
		}
	}
	return c.consume->fn(c.consume->arg);
}

int waiter::wait(int timeout_ms) noexcept
{
	const clock::time_point deadline = deadline_after(timeout_ms);
	return peek_phase(nullptr, nullptr) ? 0 : run(deadline, nullptr, nullptr, nullptr);
}

/* The peek phase until `until`: true when it found the work, at *found_at (the spin's last
 * clock read, fewer than clock_every polls ago: one clock read less on the way out). No pause:
 * a pass polls a queue that a device or another thread writes (about a hundred instructions),
 * not a load-compare on one cache line, so a pause gives a sibling hyperthread little, and a
 * fi_cq_read loop, the spin this one must match, has none. Under an emulator a pause leaves
 * the translated code, which costs more than a poll. */
bool waiter::spin(call &c, clock::time_point until, clock::time_point *found_at) noexcept
{
	*found_at = c.start;
	for (unsigned polls = 1;; polls++) {
		if (peek_phase(c.w, c.consume))
			return true;
		if (polls % clock_every == 0 && (*found_at = clock::now()) >= until)
			return false;
	}
}

/* The call found its work (or was signalled) at `now`: what it teaches the policy. */
void waiter::found(call &c, clock::time_point now) noexcept
{
	detail::wait_stats &stats = c.bs.stats;
	if (c.decision.slept)
		bump(now - c.start < std::chrono::microseconds(100) ? stats.slept_100us
		     : now - c.start < std::chrono::milliseconds(1) ? stats.slept_1ms
		                                                    : stats.slept_longer);
	if (c.note.event)
		c.bs.learner.slept(c.arm, c.note.woke_at - c.slept_from, now - c.note.woke_at);
	c.bs.learner.end(c.decision, now - c.start, true);
}

/* Arm, look again, and sleep if nothing turned up: true when the look found the work (the
 * call ends, with c.err). */
bool waiter::arm_and_sleep(call &c, uint64_t s, clock::time_point deadline, clock::time_point now,
                           bool *readable) noexcept
{
	if (!c.armed) {
		c.armed = true;
		bump(c.decision.budget == clock::duration::zero() ? c.bs.stats.arm_no_spin
		                                                  : c.bs.stats.arm_budget);
	}
	c.note = sleep_note{};
	if (trywait_phase(c))
		return true;
	c.slept_from = clock::now();
	c.arm = c.slept_from - now;
	c.note.calib = c.bs.learner.calibration();
	*readable = block(s, deadline, c.note, c);
	c.woke = true;
	c.decision.slept = c.decision.slept || c.note.woke_at != clock::time_point{};
	if (c.note.timer_only)
		c.bs.learner.timer_woke(c.note.late);
	return false;
}

int waiter::run(clock::time_point deadline, waitable *w, const consume_fn *consume,
                waitable *target) noexcept
{
	/* the caller's first peek found nothing: from here on the waiter is blocked on */
	blocking_state *b = blocking_.make(policy_);
	if (!b)
		return -FI_ENOMEM;
	call c{this, *b, w, consume, target};
	struct in_call { /* the thread's blocking call while it lasts (take_for looks) */
		call &c;
		call *outer = current_call;
		~in_call() { current_call = outer, c.self->leave(c); }
	} scope{c};
	current_call = &c;
	c.start = clock::now();
	c.decision = b->learner.begin();
	clock::time_point at;
	if (c.decision.budget > clock::duration::zero() && deadline > c.start &&
	    spin(c, std::min(deadline, c.start + c.decision.budget), &at)) {
		found(c, at);
		return 0;
	}
	/* FD / POLLFD: what the leader's poll() found readable is drained after a look (a verbs
	 * CQ polls its queue itself); an event left in a source ends the next poll() at once,
	 * never lost. MUTEX_COND with its helper thread: the helper drains. */
	for (bool readable = false;;) {
		const uint64_t s = seq.load();
		if (peek_phase(w, consume)) {
			/* read before its event: drain it, or the next leader wakes at once for it;
			 * with nobody asleep, this thread's next arming reads it (drain_owed) */
			if (readable && nsleeping.load() > 0)
				drain_polled();
			else if (readable)
				polled_by_me.owed = true;
			found(c, clock::now());
			return 0;
		}
		const clock::time_point now = clock::now();
		if (std::exchange(c.woke, false) && now < deadline)
			bump(b->stats.empty);
		if (std::exchange(readable, false)) {
			drain_polled();
			continue;
		}
		if (now >= deadline) {
			b->learner.end(c.decision, now - c.start, false);
			return -FI_ETIMEDOUT;
		}
		if (counts_as_blocking_.load(std::memory_order_relaxed))
			note_blocking();
		if (kind_ == FI_WAIT_YIELD) {
			drain_ready(); /* nothing sleeps on fds: the sources are read every pass */
			sched_yield();
		} else if (!(polled_by_me.owed && drain_owed()) &&
		           arm_and_sleep(c, s, deadline, now, &readable)) {
			found(c, clock::now());
			return c.err;
		}
	}
}

/* fi_wait's peek phase: a wake not yet consumed, or a member with something to report, seen
 * through peek() (no arming, no system call). A small set is looked at whole (a verbs CQ's
 * completion reaches the ready list only through a channel event, which needs arming and a
 * read); a large one only through its ready list and its polled members, so that a pass costs
 * what is active, not what exists:
 *  - the members that joined since the last pass are armed here, once, through trywait() (so
 *    that a set whose waits all find their work in this phase, and never reach the trywait
 *    phase, which arms, does not look at its idle members on every pass);
 *  - the ready list holds the members that reported something and were not armed since: the
 *    most recent peek_keep of them stay there unarmed (a stream of completions on them is
 *    found by peeking, with no arm and no system call); older ones are armed and leave the
 *    list until their next event (one arm for each member that went idle);
 *  - when none of those has something, the recent ones (the last peek_keep members found
 *    with something) are peeked, armed or not, as a small set peeks every member: a few
 *    active members are found by peeking, not through their channel's event and a
 *    trywait phase that arms them. */
bool waiter::peek_ready() noexcept
{
	if (pending.exchange(false))
		return true;
	std::shared_lock<util::shared_mutex> lock(members_mu);
	if (members.size() <= peek_all_max)
		return members.any([](waitable *w) { return w->peek(); });
	for (waitable *w : polled)
		if (w->peek())
			return true;
	thread_local std::vector<waitable *> batch;
	batch.clear();
	try {
		/* the fresh ones count as older than any reported one */
		const size_t nfresh = ready.take_with_fresh(batch);
		if (peek_batch(batch, nfresh))
			return true;
	} catch (const std::bad_alloc &) {
		for (waitable *w : batch)
			ready.push(w); /* the trywait phase looks at them */
	}
	for (auto &slot : recent)
		if (waitable *w = slot.load(std::memory_order_relaxed))
			if (w->peek())
				return true;
	return false;
}

/* members_mu held shared: w had something; one of the recent ones from now on */
void waiter::remember(waitable *w) noexcept
{
	for (auto &slot : recent)
		if (slot.load(std::memory_order_relaxed) == w)
			return;
	recent.next_slot().store(w, std::memory_order_relaxed);
}

/* peek_ready's pass over batch (members_mu held shared): its first nfresh members, and all but
 * the last peek_keep of the others, are trywait()ed (armed when empty); the rest peek()ed until
 * one has something. Those not armed go back on the ready list. */
bool waiter::peek_batch(const std::vector<waitable *> &batch, size_t nfresh) noexcept
{
	const size_t n = batch.size();
	const size_t old = std::max(nfresh, n > peek_keep ? n - peek_keep : 0);
	bool found = false;
	for (size_t i = 0; i < n; ++i) {
		waitable *w = batch[i];
		if (i < old) {
			/* armed when empty: its next event puts it back */
			if (w->trywait() == 0)
				continue;
			found = true;
			remember(w);
		} else if (!found && w->peek()) {
			found = true;
			remember(w);
		}
		ready.push(w);
	}
	return found;
}

/* The members that may hold something (the fresh ones, the ready list, then the polled ones),
 * trywait()ed until one answers non-zero: that answer (-FI_EAGAIN: it has something), or 0
 * when every one is empty and armed. trywait, not ready(): a member found empty is armed
 * before the caller blocks (a verbs CQ asks for its next completion event), so it may leave
 * the ready list: its next event puts it back. */
int waiter::trywait_members() noexcept
{
	thread_local std::vector<waitable *> batch;
	std::shared_lock<util::shared_mutex> lock(members_mu);
	batch.clear();
	try {
		ready.take_with_fresh(batch);
	} catch (const std::bad_alloc &) {
		for (waitable *w : batch)
			ready.push(w);
		return -FI_EAGAIN; /* cannot tell: a spurious wakeup is allowed, a lost one is not
		                    */
	}
	int ret = 0;
	for (waitable *w : batch) {
		if (ret) {
			ready.push(w);
			continue;
		}
		int r = w->trywait();
		if (r) {
			ret = r;
			ready.push(w);
		}
	}
	for (size_t i = 0; !ret && i < polled.size(); ++i)
		ret = polled[i]->trywait();
	return ret;
}

/* fi_wait's trywait phase: a wake not yet consumed, or a member that is not empty (the empty
 * ones are armed). */
bool waiter::any_ready() noexcept
{
	return pending.exchange(false) || trywait_members() != 0;
}

int waiter::trywait() noexcept
{
	note_blocking();
	if (kind_ == FI_WAIT_FD || kind_ == FI_WAIT_POLLFD)
		pub.reset();
	drain_ready();
	if (pending.exchange(false))
		return -FI_EAGAIN;
	return trywait_members();
}

int waiter::start_helper() noexcept
{
	blocking_state &b = bs(); /* MUTEX_COND: made at creation */
	std::lock_guard<util::mutex> lock(b.mu);
	std::unique_ptr<helper_parts> &helper = b.helper;
	if (!helper)
		helper.reset(new (std::nothrow) helper_parts);
	if (!helper)
		return -FI_ENOMEM;
	if (helper->thread.running())
		return 0;
	signal &hsig = helper->sig;
	if (!hsig.is_open()) {
		int ret = hsig.open();
		if (ret) {
			FI_WARN(prov_, FI_LOG_CORE,
			        "FI_WAIT_MUTEX_COND helper: cannot open its signal: %s\n",
			        fi_strerror(-ret));
			return ret;
		}
	}
	int ret = helper->thread.start(
	    "vwait-wait", [this] { helper_main(); },
	    [this] {
		    bs().helper_stop.store(true);
		    bs().helper->sig.raise();
	    });
	if (ret) {
		FI_WARN(prov_, FI_LOG_CORE, "cannot start the FI_WAIT_MUTEX_COND helper thread\n");
		return ret;
	}
	helper_on.store(true);
	return 0;
}

void waiter::stop_helper() noexcept
{
	if (blocking_state *b = blocking_.get(); b && b->helper)
		b->helper->thread.stop();
}

/* MUTEX_COND: nobody blocks on the fds but this thread; it drains them, and the drains'
 * notify() broadcasts the cond. */
void waiter::helper_main() noexcept
{
	std::vector<struct pollfd> fds;
	std::vector<void *> tags;
	blocking_state &b = bs();     /* MUTEX_COND: made at creation */
	signal &hsig = b.helper->sig; /* made before this thread started */
	while (!b.helper_stop.load()) {
		hsig.reset();
		if (b.helper_stop.load())
			break;
		fds.clear();
		tags.clear();
		try {
			fds.push_back({hsig.fd(), POLLIN, 0});
			tags.push_back(nullptr);
			std::shared_lock<util::shared_mutex> lock(sources_mu);
			source_fds.snapshot(fds, tags);
		} catch (const std::bad_alloc &) {
			fds.resize(1);
		}
		if (::poll(fds.data(), fds.size(), -1) > 0)
			drain_ready();
	}
}

} // namespace vwait::util
