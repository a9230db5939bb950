/* util::waiter: one wait object (FD, POLLFD, MUTEX_COND, YIELD) with members, fd sources and
 * the blocking protocol; and the fid_wait shim of wait sets (fi_wait_open). */
#include "vwait/util/wait.h"

#include "vwait/util/fdset.h"
#include "vwait/util/fid.h"
#include "vwait/util/ready_list.h"
#include "vwait/util/signal.h"

#include <rdma/fi_errno.h>
#include <rdma/providers/fi_log.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <list>
#include <mutex>
#include <poll.h>
#include <sched.h>
#include <shared_mutex>
#include <thread>
#include <unordered_set>

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

struct source {
	int fd;
	drain_fn drain;
	void *arg;
	unsigned refs; /* hold_source users; add_source makes 1 */
};

} // namespace

class waiter::impl
{
public:
	impl(const struct fi_provider *prov_, enum fi_wait_obj kind_) : prov(prov_), kind(kind_) {}
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
	int wait_until(clock::time_point deadline, bool (*pred)(void *) noexcept,
	               void *arg) noexcept;
	bool any_ready() noexcept;
	int trywait() noexcept;
	int control(int command, void *arg) noexcept;

	const struct fi_provider *const prov;
	const enum fi_wait_obj kind;

	/* members: shared while calling into them, exclusive to attach/detach */
	mutable std::shared_mutex members_mu;
	std::unordered_set<waitable *> members;
	std::vector<waitable *> polled; /* members that are not self_notifying() */
	ready_list ready;

	/* sources: shared while draining, exclusive to remove */
	std::shared_mutex sources_mu;
	std::list<source> sources;
	pollfd_set source_fds; /* tags: source * */
	std::atomic<size_t> nsources{0};
	uint64_t sources_gen = 0; /* moves on every add/remove (under sources_mu, exclusive) */

	/* signalling */
	std::atomic<uint64_t> seq{0};
	std::atomic<bool> pending{false}; /* a wake() not yet consumed by fi_wait/fi_trywait */
	signal pub;                       /* FD / POLLFD: the application's signal */
	signal priv;                      /* the blocking thread's signal (leader or helper) */
	epoll_set ep;                     /* FD: pub + sources */

	/* blocking: one leader polls the fds, followers wait on cv for seq to move; for
	 * MUTEX_COND, mu/cv are the object handed out by FI_GETWAIT. */
	std::mutex mu;
	std::condition_variable cv;
	bool leader = false; /* guarded by mu */
	std::atomic<bool> leader_blocked{false};
	std::atomic<int> followers{0};
	std::vector<struct pollfd> leader_fds; /* owned by the current leader */
	std::vector<void *> leader_tags;

	/* MUTEX_COND helper thread: needed only once the application holds the mutex and cond
	 * (FI_GETWAIT) and may wait on them itself; started then (or at the first source after
	 * that), joined at close. Until then a blocking thread polls the fds as FD does. */
	std::thread helper;
	std::atomic<bool> helper_on{false};
	std::atomic<bool> helper_wanted{false};
	std::atomic<bool> helper_stop{false};
	signal hsig; /* the helper's own wakeup (priv belongs to the leader) */

private:
	bool block(uint64_t s, clock::time_point deadline) noexcept;
	bool block_as_leader(uint64_t s, clock::time_point deadline) noexcept;
	void drain_polled() noexcept;
	void helper_main() noexcept;
	void stop_helper() noexcept;
	int start_helper() noexcept;
	void wake_blocker() noexcept;
};

int waiter::impl::open() noexcept
{
	int ret = priv.open();
	if (ret)
		return ret;
	if (kind == FI_WAIT_FD || kind == FI_WAIT_POLLFD) {
		ret = pub.open();
		if (ret)
			return ret;
	}
	if (kind == FI_WAIT_FD) {
		ret = ep.open();
		if (!ret)
			ret = ep.add(pub.fd(), POLLIN);
		if (ret)
			return ret;
	}
	return 0;
}

int waiter::impl::attach(waitable *w, listener *self) noexcept
{
	if (!w)
		return -FI_EINVAL;
	std::unique_lock<std::shared_mutex> lock(members_mu);
	if (members.count(w))
		return -FI_EALREADY;
	try {
		members.insert(w);
		try {
			if (!w->self_notifying())
				polled.push_back(w);
			ready.add(w);
			w->add_listener(self);
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
	notify(w, false);
	return 0;
}

int waiter::impl::detach(waitable *w, listener *self, bool unregister) noexcept
{
	std::unique_lock<std::shared_mutex> lock(members_mu);
	if (!members.erase(w))
		return -FI_ENOENT;
	if (unregister)
		w->remove_listener(self);
	ready.remove(w);
	polled.erase(std::remove(polled.begin(), polled.end(), w), polled.end());
	return 0;
}

void waiter::impl::wake_blocker() noexcept
{
	/* The leader or the helper (MUTEX_COND) re-reads the sources. */
	priv.raise();
	if (helper_on.load())
		hsig.raise();
}

int waiter::impl::add_source(int raw_fd, short events, drain_fn drain, void *arg) noexcept
{
	if (raw_fd < 0 || !drain) {
		FI_WARN(prov, FI_LOG_CORE, "wait source: fd %d / drain %s is invalid\n", raw_fd,
		        drain ? "set" : "NULL");
		return -FI_EINVAL;
	}
	std::unique_lock<std::shared_mutex> lock(sources_mu);
	for (const auto &s : sources)
		if (s.fd == raw_fd)
			return -FI_EALREADY;
	try {
		sources.push_back({raw_fd, drain, arg, 1});
	} catch (const std::bad_alloc &) {
		return -FI_ENOMEM;
	}
	int ret = source_fds.add(raw_fd, events, &sources.back());
	if (!ret && kind == FI_WAIT_FD) {
		ret = ep.add(raw_fd, events);
		if (ret)
			source_fds.del(raw_fd);
	}
	if (ret) {
		sources.pop_back();
		return ret;
	}
	nsources.fetch_add(1);
	sources_gen++;
	lock.unlock();
	if (kind == FI_WAIT_MUTEX_COND && helper_wanted.load()) {
		ret = start_helper();
		if (ret) {
			remove_source(raw_fd);
			return ret;
		}
	}
	wake_blocker();
	/* POLLFD: the application's set changed (change_index moved): make it look. */
	if (kind == FI_WAIT_POLLFD)
		pub.raise();
	return 0;
}

int waiter::impl::remove_source(int raw_fd) noexcept
{
	std::unique_lock<std::shared_mutex> lock(sources_mu);
	auto it = sources.begin();
	while (it != sources.end() && it->fd != raw_fd)
		++it;
	if (it == sources.end())
		return -FI_ENOENT;
	if (kind == FI_WAIT_FD)
		ep.del(raw_fd);
	source_fds.del(raw_fd);
	sources.erase(it);
	nsources.fetch_sub(1);
	sources_gen++;
	lock.unlock();
	wake_blocker();
	return 0;
}

int waiter::impl::hold_source(int raw_fd, short events, drain_fn drain, void *arg) noexcept
{
	{
		std::unique_lock<std::shared_mutex> lock(sources_mu);
		for (auto &s : sources) {
			if (s.fd != raw_fd)
				continue;
			if (s.drain != drain || s.arg != arg) {
				FI_WARN(
				    prov, FI_LOG_CORE,
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

int waiter::impl::drop_source(int raw_fd) noexcept
{
	{
		std::unique_lock<std::shared_mutex> lock(sources_mu);
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
void waiter::impl::drain_ready() noexcept
{
	if (nsources.load() == 0)
		return;
	thread_local std::vector<struct pollfd> fds;
	thread_local std::vector<void *> tags;
	std::shared_lock<std::shared_mutex> lock(sources_mu);
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

void waiter::impl::notify(waitable *w, bool wake) noexcept
{
	if (w)
		ready.push(w);
	if (wake)
		pending.store(true);
	seq.fetch_add(1);
	switch (kind) {
	case FI_WAIT_FD:
	case FI_WAIT_POLLFD:
		pub.raise();
		if (leader_blocked.load())
			priv.raise();
		break;
	case FI_WAIT_MUTEX_COND: {
		/* The application may wait on this cond with its own predicate. */
		{
			std::lock_guard<std::mutex> lock(mu);
		}
		cv.notify_all();
		if (leader_blocked.load())
			priv.raise();
		return;
	}
	default:
		break;
	}
	if (followers.load() > 0) {
		{
			std::lock_guard<std::mutex> lock(mu);
		}
		cv.notify_all();
	}
}

namespace
{
/* What the leader's poll() found readable, kept by the thread that polled (another thread
 * may be the leader by the time it drains): the sources' tags and the generation they are
 * valid for. */
struct polled_sources {
	std::vector<void *> tags;
	uint64_t gen = 0;
};
thread_local polled_sources polled_by_me;
} // namespace

bool waiter::impl::block_as_leader(uint64_t s, clock::time_point deadline) noexcept
{
	/* Only the leader resets priv, so no other thread can eat a raise meant for it. */
	priv.reset();
	leader_blocked.store(true);
	bool woke = false;
	uint64_t gen = 0;
	if (seq.load() == s) {
		leader_fds.clear();
		leader_tags.clear();
		try {
			leader_fds.push_back({priv.fd(), POLLIN, 0});
			leader_tags.push_back(nullptr);
			if (nsources.load()) {
				std::shared_lock<std::shared_mutex> lock(sources_mu);
				source_fds.snapshot(leader_fds, leader_tags);
				gen = sources_gen;
			}
			woke = poll_until(leader_fds.data(), leader_fds.size(), deadline) > 0;
		} catch (const std::bad_alloc &) {
			/* cannot build the array: back off briefly rather than spin */
			struct pollfd p = {priv.fd(), POLLIN, 0};
			::poll(&p, 1, 1);
		}
	}
	leader_blocked.store(false);
	if (!woke)
		return false;
	polled_by_me.tags.clear();
	polled_by_me.gen = gen;
	try {
		for (size_t i = 1; i < leader_fds.size(); ++i)
			if (leader_fds[i].revents)
				polled_by_me.tags.push_back(leader_tags[i]);
	} catch (const std::bad_alloc &) {
		polled_by_me.gen = ~uint64_t{0}; /* drain_polled looks at all of them */
	}
	return !polled_by_me.tags.empty() || polled_by_me.gen == ~uint64_t{0};
}

/* The sources this thread's poll() found readable: drain exactly those (no second poll),
 * unless the sources changed meanwhile, then look at all of them. */
void waiter::impl::drain_polled() noexcept
{
	{
		std::shared_lock<std::shared_mutex> lock(sources_mu);
		if (polled_by_me.gen == sources_gen) {
			for (void *tag : polled_by_me.tags) {
				auto *src = static_cast<source *>(tag);
				src->drain(src->arg);
			}
			return;
		}
	}
	drain_ready();
}

/* true when this thread polled the fds and a source was readable (drain_polled reads it) */
bool waiter::impl::block(uint64_t s, clock::time_point deadline) noexcept
{
	if (kind == FI_WAIT_YIELD) {
		sched_yield();
		return false;
	}
	std::unique_lock<std::mutex> lock(mu);
	if (kind == FI_WAIT_MUTEX_COND && helper_on.load()) {
		/* The helper thread turns fd events into notify(). */
		followers.fetch_add(1);
		while (seq.load() == s && clock::now() < deadline) {
			if (deadline == clock::time_point::max())
				cv.wait(lock);
			else
				cv.wait_until(lock, deadline);
		}
		followers.fetch_sub(1);
		return false;
	}
	while (leader) {
		followers.fetch_add(1);
		bool moved = seq.load() != s;
		if (!moved) {
			if (deadline == clock::time_point::max())
				cv.wait(lock);
			else
				cv.wait_until(lock, deadline);
		}
		followers.fetch_sub(1);
		if (moved || seq.load() != s || clock::now() >= deadline)
			return false;
	}
	leader = true;
	lock.unlock();
	bool readable = block_as_leader(s, deadline);
	lock.lock();
	leader = false;
	bool handoff = followers.load() > 0;
	lock.unlock();
	if (handoff)
		cv.notify_all();
	return readable;
}

int waiter::impl::wait_until(clock::time_point deadline, bool (*pred)(void *) noexcept,
                             void *arg) noexcept
{
	bool readable = false;
	for (;;) {
		/* FD / POLLFD: what the leader's poll() found readable is drained after the
		 * predicate had a look (a verbs CQ polls its hardware queue itself: the wakeup
		 * costs no read of the event first); an event left in a source is never lost,
		 * since a readable source ends the next poll() at once. MUTEX_COND with its
		 * helper thread: the helper drains. YIELD never polls the fds: it drains on every
		 * pass. */
		if (kind == FI_WAIT_YIELD)
			drain_ready();
		uint64_t s = seq.load();
		if (pred(arg))
			return 0;
		if (readable) {
			readable = false;
			drain_polled();
			continue;
		}
		if (clock::now() >= deadline)
			return -FI_ETIMEDOUT;
		readable = block(s, deadline);
	}
}

/* fi_wait's predicate: a wake not yet consumed, or a member on the ready list that is ready. */
bool waiter::impl::any_ready() noexcept
{
	if (pending.exchange(false))
		return true;
	thread_local std::vector<waitable *> batch;
	std::shared_lock<std::shared_mutex> lock(members_mu);
	batch.clear();
	try {
		ready.take(batch);
	} catch (const std::bad_alloc &) {
		return true; /* cannot tell: a spurious wakeup is allowed, a lost one is not */
	}
	bool found = false;
	for (waitable *w : batch) {
		if (found) {
			ready.push(w);
			continue;
		}
		/* trywait, not ready(): a member found empty is armed before the caller
		 * blocks (a verbs CQ asks for its next completion event), so it may leave
		 * the ready list: its next event puts it back */
		if (w->trywait() != 0) {
			found = true;
			ready.push(w);
		}
	}
	for (size_t i = 0; !found && i < polled.size(); ++i)
		found = polled[i]->trywait() != 0;
	return found;
}

int waiter::impl::trywait() noexcept
{
	if (kind == FI_WAIT_FD || kind == FI_WAIT_POLLFD)
		pub.reset();
	drain_ready();
	if (pending.exchange(false))
		return -FI_EAGAIN;
	thread_local std::vector<waitable *> batch;
	std::shared_lock<std::shared_mutex> lock(members_mu);
	batch.clear();
	try {
		ready.take(batch);
	} catch (const std::bad_alloc &) {
		return -FI_EAGAIN;
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

int waiter::impl::control(int command, void *arg) noexcept
{
	if (!arg) {
		FI_WARN(prov, FI_LOG_CORE, "fi_control(%d) on a %s wait object: arg is NULL\n",
		        command, kind_name(kind));
		return -FI_EINVAL;
	}
	switch (command) {
	case FI_GETWAITOBJ:
		*static_cast<enum fi_wait_obj *>(arg) = kind;
		return 0;
	case FI_GETWAIT:
		switch (kind) {
		case FI_WAIT_FD:
			*static_cast<int *>(arg) = ep.fd();
			return 0;
		case FI_WAIT_POLLFD: {
			struct pollfd self = {pub.fd(), POLLIN, 0};
			return source_fds.get(static_cast<struct fi_wait_pollfd *>(arg), &self, 1);
		}
		case FI_WAIT_MUTEX_COND: {
			/* the application may now wait on the cond: fd events must reach it */
			helper_wanted.store(true);
			if (nsources.load() > 0) {
				int ret = start_helper();
				if (ret)
					return ret;
			}
			auto *mc = static_cast<struct fi_mutex_cond *>(arg);
			mc->mutex = mu.native_handle();
			mc->cond = cv.native_handle();
			return 0;
		}
		default:
			return -FI_ENODATA; /* FI_WAIT_YIELD: nothing to block on */
		}
	default:
		return -FI_ENOSYS;
	}
}

int waiter::impl::start_helper() noexcept
{
	std::lock_guard<std::mutex> lock(mu);
	if (helper.joinable())
		return 0;
	if (!hsig.is_open()) {
		int ret = hsig.open();
		if (ret) {
			FI_WARN(prov, FI_LOG_CORE,
			        "FI_WAIT_MUTEX_COND helper: cannot open its signal: %s\n",
			        fi_strerror(-ret));
			return ret;
		}
	}
	try {
		helper = std::thread([this] { helper_main(); });
		helper_on.store(true);
	} catch (...) {
		FI_WARN(prov, FI_LOG_CORE, "cannot start the FI_WAIT_MUTEX_COND helper thread\n");
		return -FI_EAGAIN;
	}
	return 0;
}

void waiter::impl::stop_helper() noexcept
{
	if (!helper.joinable())
		return;
	helper_stop.store(true);
	hsig.raise();
	helper.join();
}

/* MUTEX_COND: nobody blocks on the fds but this thread; it drains them, and the drains'
 * notify() broadcasts the cond. */
void waiter::impl::helper_main() noexcept
{
	std::vector<struct pollfd> fds;
	std::vector<void *> tags;
	while (!helper_stop.load()) {
		hsig.reset();
		if (helper_stop.load())
			break;
		fds.clear();
		tags.clear();
		try {
			fds.push_back({hsig.fd(), POLLIN, 0});
			tags.push_back(nullptr);
			std::shared_lock<std::shared_mutex> lock(sources_mu);
			source_fds.snapshot(fds, tags);
		} catch (const std::bad_alloc &) {
			fds.resize(1);
		}
		if (::poll(fds.data(), fds.size(), -1) > 0)
			drain_ready();
	}
}

/* ------------------------------------------------------------------ waiter */

waiter::waiter(std::unique_ptr<impl> p) noexcept : p_(std::move(p)) {}

waiter::~waiter()
{
	std::vector<waitable *> left;
	{
		std::shared_lock<std::shared_mutex> lock(p_->members_mu);
		left.assign(p_->members.begin(), p_->members.end());
	}
	for (waitable *w : left)
		p_->detach(w, this, true);
}

int waiter::create(const struct fi_provider *prov, int wait_obj,
                   std::unique_ptr<waiter> &out) noexcept
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
		auto p = std::make_unique<impl>(prov, kind);
		int ret = p->open();
		if (ret) {
			FI_WARN(prov, FI_LOG_CORE, "cannot create a %s wait object: %s\n",
			        kind_name(kind), fi_strerror(-ret));
			return ret;
		}
		out.reset(new waiter(std::move(p)));
		return 0;
	} catch (const std::bad_alloc &) {
		return -FI_ENOMEM;
	} catch (...) {
		return -FI_EOTHER;
	}
}

enum fi_wait_obj waiter::kind() const noexcept
{
	return p_->kind;
}
const struct fi_provider *waiter::provider() const noexcept
{
	return p_->prov;
}
int waiter::attach(waitable *w) noexcept
{
	return p_->attach(w, this);
}
int waiter::detach(waitable *w) noexcept
{
	return p_->detach(w, this, true);
}
size_t waiter::member_count() const noexcept
{
	std::shared_lock<std::shared_mutex> lock(p_->members_mu);
	return p_->members.size();
}
int waiter::add_source(int raw_fd, short events, drain_fn drain, void *arg) noexcept
{
	return p_->add_source(raw_fd, events, drain, arg);
}
int waiter::remove_source(int raw_fd) noexcept
{
	return p_->remove_source(raw_fd);
}
int waiter::hold_source(int raw_fd, short events, drain_fn drain, void *arg) noexcept
{
	return p_->hold_source(raw_fd, events, drain, arg);
}
int waiter::drop_source(int raw_fd) noexcept
{
	return p_->drop_source(raw_fd);
}
void waiter::notify(waitable *w, bool wake) noexcept
{
	p_->notify(w, wake);
}
void waiter::forget(waitable *w) noexcept
{
	p_->detach(w, this, false);
}
void waiter::wake() noexcept
{
	p_->notify(nullptr, true);
}
int waiter::wait_until_impl(clock::time_point deadline, bool (*pred)(void *) noexcept,
                            void *arg) noexcept
{
	return p_->wait_until(deadline, pred, arg);
}
int waiter::wait(int timeout_ms) noexcept
{
	impl *p = p_.get();
	return p->wait_until(
	    deadline_after(timeout_ms),
	    [](void *a) noexcept { return static_cast<impl *>(a)->any_ready(); }, p);
}
int waiter::trywait() noexcept
{
	return p_->trywait();
}
int waiter::control(int command, void *arg) noexcept
{
	return p_->control(command, arg);
}

/* ------------------------------------------------------------------ wait set shim */

namespace
{

struct wait_set {
	std::unique_ptr<waiter> w;
	std::function<void()> on_close;
};

using wait_box = fid_box<struct fid_wait, wait_set>;

int wait_set_close(struct fid *fid) noexcept
{
	auto *box = reinterpret_cast<wait_box *>(fid);
	size_t n = box->obj->w->member_count();
	if (n) {
		FI_WARN(box->obj->w->provider(), FI_LOG_CORE,
		        "fi_close(wait set): %zu object(s) still bound\n", n);
		return -FI_EBUSY;
	}
	auto on_close = std::move(box->obj->on_close);
	delete box->obj;
	delete box;
	if (on_close)
		on_close();
	return 0;
}

int wait_set_control(struct fid *fid, int command, void *arg) noexcept
{
	auto *box = reinterpret_cast<wait_box *>(fid);
	if (command == ctl_get_waiter) {
		if (!arg)
			return -FI_EINVAL;
		*static_cast<waiter **>(arg) = box->obj->w.get();
		return 0;
	}
	return box->obj->w->control(command, arg);
}

int wait_set_wait(struct fid_wait *fid, int timeout) noexcept
{
	return owner<wait_set>(fid)->w->wait(timeout);
}

int wait_set_bind(struct fid *, struct fid *, uint64_t) noexcept
{
	return -FI_ENOSYS;
}
int wait_set_ops_open(struct fid *, const char *, uint64_t, void **, void *) noexcept
{
	return -FI_ENOSYS;
}

struct fi_ops wait_set_fi_ops = {
    .size = sizeof(struct fi_ops),
    .close = wait_set_close,
    .bind = wait_set_bind,
    .control = wait_set_control,
    .ops_open = wait_set_ops_open,
    .tostr = nullptr,
    .ops_set = nullptr,
};

struct fi_ops_wait wait_set_ops = {
    .size = sizeof(struct fi_ops_wait),
    .wait = wait_set_wait,
};

} // namespace

int wait_open(const struct fi_provider *prov, struct fi_wait_attr *attr, struct fid_wait **out,
              std::function<void()> on_close) noexcept
{
	if (!attr || !out) {
		FI_WARN(prov, FI_LOG_CORE, "fi_wait_open: %s is NULL\n",
		        !attr ? "attr" : "waitset");
		return -FI_EINVAL;
	}
	*out = nullptr;
	if (attr->flags) {
		FI_WARN(prov, FI_LOG_CORE, "fi_wait_open: attr->flags 0x%llx must be 0\n",
		        (unsigned long long)attr->flags);
		return -FI_EINVAL;
	}
	/* as int: an out-of-range value from the application must not be loaded as the enum */
	int wait_obj;
	static_assert(sizeof(wait_obj) == sizeof(attr->wait_obj), "enum fi_wait_obj is an int");
	std::memcpy(&wait_obj, &attr->wait_obj, sizeof(wait_obj));
	if (wait_obj == FI_WAIT_NONE || wait_obj == FI_WAIT_SET) {
		FI_WARN(prov, FI_LOG_CORE,
		        "fi_wait_open: attr->wait_obj %s is not a wait set kind\n",
		        kind_name(wait_obj));
		return -FI_EINVAL;
	}
	try {
		auto set = std::make_unique<wait_set>();
		int ret = waiter::create(prov, wait_obj, set->w);
		if (ret)
			return ret;
		set->on_close = std::move(on_close);
		auto box = std::make_unique<wait_box>();
		box->fid.fid.fclass = FI_CLASS_WAIT;
		box->fid.fid.context = nullptr;
		box->fid.fid.ops = &wait_set_fi_ops;
		box->fid.ops = &wait_set_ops;
		box->obj = set.release();
		*out = &box.release()->fid;
		return 0;
	} catch (const std::bad_alloc &) {
		return -FI_ENOMEM;
	} catch (...) {
		return -FI_EOTHER;
	}
}

int get_waiter(struct fid *fid, waiter **out) noexcept
{
	if (!fid || !out)
		return -FI_EINVAL;
	if (fid->fclass != FI_CLASS_WAIT || fid->ops != &wait_set_fi_ops)
		return -FI_ENOSYS;
	*out = reinterpret_cast<wait_box *>(fid)->obj->w.get();
	return 0;
}

} // namespace vwait::util
