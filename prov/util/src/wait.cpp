/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* util::waiter: its members, its fd sources, signalling (notify / wake), FI_GETWAIT, and
 * its creation. The blocking protocol is in wait_block.cpp, the wait-set fid in
 * wait_set.cpp; wait_impl.h holds what they share. */
#include "wait_impl.h"

#include "vwait/util/fid.h"

#include <rdma/fi_errno.h>
#include <rdma/providers/fi_log.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

namespace vwait::util
{

clock::time_point deadline_after(int timeout_ms) noexcept
{
	if (timeout_ms < 0)
		return clock::time_point::max();
	return clock::now() + std::chrono::milliseconds(timeout_ms);
}

namespace
{
std::atomic<blocking_hook> the_blocking_hook{nullptr};
std::atomic<bool> blocked_once{false};
std::atomic<uint64_t> sources_gens{0};

/* a value no waiter's sources_gen has had (a thread's polled sources name their set by it) */
uint64_t next_sources_gen() noexcept
{
	return sources_gens.fetch_add(1, std::memory_order_relaxed) + 1;
}
} // namespace

void set_blocking_hook(blocking_hook fn) noexcept
{
	the_blocking_hook.store(fn, std::memory_order_release);
}

bool blocking_seen() noexcept
{
	return blocked_once.load(std::memory_order_acquire);
}

void note_blocking() noexcept
{
	/* one exchange per process: later callers return at the load */
	if (blocked_once.load(std::memory_order_relaxed) ||
	    blocked_once.exchange(true, std::memory_order_acq_rel))
		return;
	if (blocking_hook fn = the_blocking_hook.load(std::memory_order_acquire))
		fn();
}

const char *kind_name(int k) noexcept
{
	switch (k) {
	case FI_WAIT_NONE:
		return "FI_WAIT_NONE";
	case FI_WAIT_UNSPEC:
		return "FI_WAIT_UNSPEC";
	case FI_WAIT_SET:
		return "FI_WAIT_SET";
	case FI_WAIT_FD:
		return "FI_WAIT_FD";
	case FI_WAIT_MUTEX_COND:
		return "FI_WAIT_MUTEX_COND";
	case FI_WAIT_YIELD:
		return "FI_WAIT_YIELD";
	case FI_WAIT_POLLFD:
		return "FI_WAIT_POLLFD";
	}
	return "unknown";
}

using detail::source;

namespace
{
/* Signals of threads that ended, for the next threads that block. Freed only when the
 * plugin is unloaded or the process exits (static destruction): by then no waiter is left to
 * raise them, and a leak checker finds nothing unreachable. A thread that ends after that
 * frees its own signal. */
struct spare_signal_pool {
	mutex mu{lock_level::alone};
	std::vector<signal *> sigs;
	bool closed = false;
	~spare_signal_pool()
	{
		std::lock_guard<util::mutex> lock(mu);
		for (signal *s : sigs)
			delete s;
		sigs.clear();
		sigs.shrink_to_fit();
		closed = true;
	}
};
spare_signal_pool spare_signals;

struct thread_signal_holder {
	signal *sig = nullptr;
	~thread_signal_holder()
	{
		if (!sig)
			return;
		std::lock_guard<util::mutex> lock(spare_signals.mu);
		if (spare_signals.closed) {
			delete sig;
			return;
		}
		try {
			spare_signals.sigs.push_back(sig);
		} catch (const std::bad_alloc &) {
			/* kept open, unused */
		}
	}
};
thread_local thread_signal_holder my_signal;
} // namespace

signal *thread_signal() noexcept
{
	if (my_signal.sig)
		return my_signal.sig;
	{
		std::lock_guard<util::mutex> lock(spare_signals.mu);
		if (!spare_signals.sigs.empty()) {
			my_signal.sig = spare_signals.sigs.back();
			spare_signals.sigs.pop_back();
			return my_signal.sig;
		}
	}
	auto *s = new (std::nothrow) signal;
	if (!s || s->open() != 0) {
		delete s;
		return nullptr;
	}
	my_signal.sig = s;
	return s;
}

int waiter::open() noexcept
{
	int ret = 0;
	if (kind_ == FI_WAIT_FD || kind_ == FI_WAIT_POLLFD) {
		ret = pub.open();
		if (ret)
			return ret;
	}
	if (kind_ == FI_WAIT_FD) {
		ret = ep.open();
		if (!ret)
			ret = ep.add(pub.fd(), POLLIN);
		if (ret)
			return ret;
	}
	/* MUTEX_COND: its mutex and cond exist from the start (notify takes the mutex) */
	if (kind_ == FI_WAIT_MUTEX_COND && !blocking_.make(policy_))
		return -FI_ENOMEM;
	return 0;
}

int waiter::attach(waitable *w) noexcept
{
	if (!w)
		return -FI_EINVAL;
	std::unique_lock<util::shared_mutex> lock(members_mu);
	if (members.contains(w))
		return -FI_EALREADY;
	/* a set larger than fi_wait peeks whole keeps its recent members (peek_ready) */
	if (members.size() >= peek_all_max && !recent.allocate())
		return -FI_ENOMEM;
	try {
		members.insert(w);
		try {
			if (!w->self_notifying())
				polled.push_back(w);
			ready.add(w, true); /* fresh: armed once by the next wait or trywait */
			w->add_listener(this);
		} catch (...) {
			ready.remove(w);
			polled.erase(std::remove(polled.begin(), polled.end(), w), polled.end());
			members.erase(w);
			throw;
		}
	} catch (const std::bad_alloc &) {
		return -FI_ENOMEM;
	}
	lock.unlock();
	notify(nullptr, false); /* a blocked wait looks at the new member */
	return 0;
}

int waiter::drop_member(waitable *w, bool unregister) noexcept
{
	std::unique_lock<util::shared_mutex> lock(members_mu);
	if (!members.erase(w))
		return -FI_ENOENT;
	if (unregister)
		w->remove_listener(this);
	ready.remove(w);
	polled.erase(std::remove(polled.begin(), polled.end(), w), polled.end());
	for (auto &slot : recent)
		if (slot.load(std::memory_order_relaxed) == w)
			slot.store(nullptr, std::memory_order_relaxed);
	return 0;
}

void waiter::wake_blocker() noexcept
{
	/* The leader (or, with none, a sleeper that will lead) re-reads the sources; the
	 * helper (MUTEX_COND) too. */
	if (nsleeping.load() > 0) {
		blocking_state &b = bs(); /* made before nsleeping moved */
		raises r;
		std::lock_guard<util::mutex> lock(b.mu);
		sleeper *s = b.sleep_head;
		while (s && !s->leads)
			s = s->next;
		if (s)
			take(s, false, r);
		else if (!b.leader && b.sleep_head && nsources.load() > 0)
			take(b.sleep_head, true, r);
	}
	if (helper_on.load())
		bs().helper->sig.raise(); /* helper made before helper_on was set */
}

int waiter::add_source(int raw_fd, short events, drain_fn drain, void *arg) noexcept
{
	if (raw_fd < 0 || !drain) {
		FI_WARN(prov_, FI_LOG_CORE, "wait source: fd %d / drain %s is invalid\n", raw_fd,
		        drain ? "set" : "NULL");
		return -FI_EINVAL;
	}
	std::unique_lock<util::shared_mutex> lock(sources_mu);
	for (const auto &s : sources)
		if (s.fd == raw_fd)
			return -FI_EALREADY;
	try {
		sources.push_back({raw_fd, drain, arg, 1});
	} catch (const std::bad_alloc &) {
		return -FI_ENOMEM;
	}
	int ret = source_fds.add(raw_fd, events, &sources.back());
	if (!ret && kind_ == FI_WAIT_FD) {
		ret = ep.add(raw_fd, events);
		if (ret)
			source_fds.del(raw_fd);
	}
	if (ret) {
		sources.pop_back();
		return ret;
	}
	nsources.fetch_add(1);
	sources_gen = next_sources_gen();
	lock.unlock();
	if (kind_ == FI_WAIT_MUTEX_COND && bs().helper_wanted.load()) { /* made at creation */
		ret = start_helper();
		if (ret) {
			remove_source(raw_fd);
			return ret;
		}
	}
	wake_blocker();
	/* POLLFD: the application's set changed (change_index moved): make it look. */
	if (kind_ == FI_WAIT_POLLFD)
		pub.raise();
	return 0;
}

int waiter::remove_source(int raw_fd) noexcept
{
	std::unique_lock<util::shared_mutex> lock(sources_mu);
	auto it = sources.begin();
	while (it != sources.end() && it->fd != raw_fd)
		++it;
	if (it == sources.end())
		return -FI_ENOENT;
	if (kind_ == FI_WAIT_FD)
		ep.del(raw_fd);
	source_fds.del(raw_fd);
	sources.erase(it);
	nsources.fetch_sub(1);
	sources_gen = next_sources_gen();
	lock.unlock();
	wake_blocker();
	return 0;
}

int waiter::hold_source(int raw_fd, short events, drain_fn drain, void *arg) noexcept
{
	{
		std::unique_lock<util::shared_mutex> lock(sources_mu);
		for (auto &s : sources) {
			if (s.fd != raw_fd)
				continue;
			if (s.drain != drain || s.arg != arg) {
				FI_WARN(
				    prov_, FI_LOG_CORE,
				    "wait source: fd %d is a source already, with another drain\n",
				    raw_fd);
				return -FI_EALREADY;
			}
			s.refs++;
			return 0;
		}
	}
	return add_source(raw_fd, events, drain, arg);
}

int waiter::drop_source(int raw_fd) noexcept
{
	{
		std::unique_lock<util::shared_mutex> lock(sources_mu);
		auto it = std::find_if(sources.begin(), sources.end(),
		                       [&](const source &s) { return s.fd == raw_fd; });
		if (it == sources.end())
			return -FI_ENOENT;
		if (--it->refs > 0)
			return 0;
	}
	/* the last user: the source goes (a concurrent hold_source of the same fd in between
	 * adds it again afterwards, which is harmless) */
	return remove_source(raw_fd);
}

/* Non-blocking: poll the sources once and run the drain of each readable one. */
void waiter::drain_ready() noexcept
{
	if (nsources.load() == 0)
		return;
	thread_local std::vector<struct pollfd> fds;
	thread_local std::vector<void *> tags;
	std::shared_lock<util::shared_mutex> lock(sources_mu);
	if (sources.size() == 1) {
		/* one source: its drain reads without blocking anyway, and a poll() first would
		 * be a second system call */
		const source &only = sources.front();
		only.drain(only.arg);
		return;
	}
	fds.clear();
	tags.clear();
	try {
		source_fds.snapshot(fds, tags);
	} catch (const std::bad_alloc &) {
		return;
	}
	int n = ::poll(fds.data(), fds.size(), 0);
	if (n <= 0)
		return;
	for (size_t i = 0; i < fds.size(); ++i) {
		if (!fds[i].revents)
			continue;
		auto *s = static_cast<source *>(tags[i]);
		s->drain(s->arg);
	}
}

void waiter::notify(waitable *w, bool wake) noexcept
{
	if (w)
		ready.push(w);
	if (wake)
		pending.store(true);
	seq.fetch_add(1);
	switch (kind_) {
	case FI_WAIT_FD:
	case FI_WAIT_POLLFD:
		pub.raise();
		break;
	case FI_WAIT_MUTEX_COND:
		/* The application may wait on this cond with its own predicate, and so do
		 * blocking calls once the helper thread runs. */
		{
			blocking_state &b = bs(); /* made at creation */
			{
				std::lock_guard<util::mutex> lock(b.mu);
			}
			b.cv.notify_all();
		}
		break;
	default:
		break;
	}
	/* after the seq bump: a sleeper registers, then looks at seq (block()) */
	if (nsleeping.load() > 0) {
		call *mine = current_call;
		raises r;
		std::lock_guard<util::mutex> lock(bs().mu); /* made before nsleeping moved */
		take_for(w, wake || !w, mine && mine->self == this ? mine : nullptr, r);
	}
}

int waiter::control(int command, void *arg) noexcept
{
	if (!arg) {
		FI_WARN(prov_, FI_LOG_CORE, "fi_control(%d) on a %s wait object: arg is NULL\n",
		        command, kind_name(kind_));
		return -FI_EINVAL;
	}
	switch (command) {
	case FI_GETWAITOBJ:
		*static_cast<enum fi_wait_obj *>(arg) = kind_;
		return 0;
	case FI_GETWAIT:
		note_blocking(); /* the application will sleep on what it takes */
		switch (kind_) {
		case FI_WAIT_FD:
			*static_cast<int *>(arg) = ep.fd();
			return 0;
		case FI_WAIT_POLLFD: {
			struct pollfd self = {pub.fd(), POLLIN, 0};
			return source_fds.get(static_cast<struct fi_wait_pollfd *>(arg), &self, 1);
		}
		case FI_WAIT_MUTEX_COND: {
			/* the application may now wait on the cond: fd events must reach it */
			bs().helper_wanted.store(true); /* made at creation */
			if (nsources.load() > 0) {
				int ret = start_helper();
				if (ret)
					return ret;
			}
			auto *mc = static_cast<struct fi_mutex_cond *>(arg);
			mc->mutex = bs().mu.native_handle(); /* made at creation */
			mc->cond = bs().cv.native_handle();
			return 0;
		}
		default:
			return -FI_ENODATA; /* FI_WAIT_YIELD: nothing to block on */
		}
	default:
		return -FI_ENOSYS;
	}
}

/* ------------------------------------------------------------------ waiter */

waiter::waiter(const struct fi_provider *prov, enum fi_wait_obj kind, wait_policy policy)
    : prov_(prov), kind_(kind), policy_(policy)
{
}

waiter::~waiter()
{
	std::vector<waitable *> left;
	{
		std::shared_lock<util::shared_mutex> lock(members_mu);
		members.any([&left](waitable *w) {
			left.push_back(w);
			return false;
		});
	}
	for (waitable *w : left)
		drop_member(w, true);
	stop_helper();
	/* statistics (make bench-scale's streaming section reads this line, FI_LOG_LEVEL=info) */
	const wake_counts n = counts();
	if (n.sleeps)
		FI_INFO(
		    prov_, FI_LOG_CORE,
		    "waiter %p closed: %llu sleeps, %llu wakeups (%llu empty, %llu hand-offs, %llu "
		    "calibration), %llu timeouts; "
		    "armed with no spin %llu, after the budget %llu; calls that "
		    "slept <100us %llu, <1ms %llu, longer %llu\n",
		    static_cast<void *>(this), static_cast<unsigned long long>(n.sleeps),
		    static_cast<unsigned long long>(n.wakeups),
		    static_cast<unsigned long long>(n.empty),
		    static_cast<unsigned long long>(n.handoffs),
		    static_cast<unsigned long long>(n.calib),
		    static_cast<unsigned long long>(n.timeouts),
		    static_cast<unsigned long long>(n.arm_no_spin),
		    static_cast<unsigned long long>(n.arm_budget),
		    static_cast<unsigned long long>(n.slept_100us),
		    static_cast<unsigned long long>(n.slept_1ms),
		    static_cast<unsigned long long>(n.slept_longer));
}

int waiter::create(const struct fi_provider *prov, int wait_obj, std::unique_ptr<waiter> &out,
                   wait_policy policy) noexcept
{
	enum fi_wait_obj kind = FI_WAIT_FD;
	switch (wait_obj) {
	case FI_WAIT_UNSPEC:
		kind = FI_WAIT_FD; /* vwait's choice, documented in wait.h */
		break;
	case FI_WAIT_FD:
	case FI_WAIT_POLLFD:
	case FI_WAIT_MUTEX_COND:
	case FI_WAIT_YIELD:
		kind = static_cast<enum fi_wait_obj>(wait_obj);
		break;
	default:
		FI_WARN(prov, FI_LOG_CORE, "wait_obj %s (%d) cannot make a wait object\n",
		        kind_name(wait_obj), wait_obj);
		return -FI_EINVAL;
	}
	try {
		std::unique_ptr<waiter> w(new waiter(prov, kind, policy));
		int ret = w->open();
		if (ret) {
			FI_WARN(prov, FI_LOG_CORE, "cannot create a %s wait object: %s\n",
			        kind_name(kind), fi_strerror(-ret));
			return ret;
		}
		out = std::move(w);
		return 0;
	} catch (const std::bad_alloc &) {
		return -FI_ENOMEM;
	} catch (...) {
		return -FI_EOTHER;
	}
}

enum fi_wait_obj waiter::kind() const noexcept
{
	return kind_;
}
const struct fi_provider *waiter::provider() const noexcept
{
	return prov_;
}
const spin_learner &waiter::learner() const noexcept
{
	if (blocking_state *b = blocking_.make(policy_))
		return b->learner;
	static const spin_learner none{wait_policy{}}; /* no memory: a learner of nothing */
	return none;
}
int waiter::detach(waitable *w) noexcept
{
	return drop_member(w, true);
}
size_t waiter::member_count() const noexcept
{
	std::shared_lock<util::shared_mutex> lock(members_mu);
	return members.size();
}
void waiter::forget(waitable *w) noexcept
{
	drop_member(w, false);
}
void waiter::wake() noexcept
{
	notify(nullptr, true);
}
void waiter::set_counts_as_blocking(bool on) noexcept
{
	counts_as_blocking_.store(on, std::memory_order_relaxed);
}

namespace
{
using stats_t = detail::wait_stats;
/* each count of wake_counts beside its counter in a waiter's stats */
struct count_field {
	uint64_t wake_counts::*out;
	std::atomic<uint64_t> stats_t::*in;
};
constexpr count_field count_fields[] = {{&wake_counts::sleeps, &stats_t::sleeps},
                                        {&wake_counts::wakeups, &stats_t::wakeups},
                                        {&wake_counts::empty, &stats_t::empty},
                                        {&wake_counts::handoffs, &stats_t::handoffs},
                                        {&wake_counts::calib, &stats_t::calib},
                                        {&wake_counts::timeouts, &stats_t::timeouts},
                                        {&wake_counts::arm_no_spin, &stats_t::arm_no_spin},
                                        {&wake_counts::arm_budget, &stats_t::arm_budget},
                                        {&wake_counts::slept_100us, &stats_t::slept_100us},
                                        {&wake_counts::slept_1ms, &stats_t::slept_1ms},
                                        {&wake_counts::slept_longer, &stats_t::slept_longer}};
} // namespace

wake_counts waiter::counts() const noexcept
{
	wake_counts out;
	const blocking_state *b = blocking_.get();
	if (!b)
		return out; /* nothing has blocked on it */
	for (const count_field &f : count_fields)
		out.*f.out = (b->stats.*f.in).load(std::memory_order_relaxed);
	return out;
}

wake_counts wake_counts::since(const wake_counts &before) const noexcept
{
	wake_counts d = *this;
	for (const count_field &f : count_fields)
		d.*f.out -= before.*f.out;
	return d;
}

} // namespace vwait::util
