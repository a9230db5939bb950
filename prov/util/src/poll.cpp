/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* util::poll_set: fi_poll over CQs and counters, driven by a ready list so that its cost
 * follows the members with events, not the member count. */
#include "vwait/util/poll.h"

#include "vwait/util/enosys.h"
#include "vwait/util/fid.h"
#include "vwait/util/guard.h"
#include "vwait/util/ready_list.h"
#include "vwait/util/thread_safety.h"
#include "vwait/util/waitable.h"

#include <rdma/fi_errno.h>
#include <rdma/providers/fi_log.h>

#include <algorithm>
#include <mutex>
#include <poll.h>
#include <shared_mutex>
#include <unordered_map>
#include <vector>

namespace vwait::util
{

namespace
{

const char *class_name(size_t fclass) noexcept
{
	switch (fclass) {
	case FI_CLASS_CQ:
		return "CQ";
	case FI_CLASS_CNTR:
		return "counter";
	case FI_CLASS_EQ:
		return "EQ";
	case FI_CLASS_WAIT:
		return "wait set";
	case FI_CLASS_POLL:
		return "poll set";
	default:
		return "other";
	}
}

class poll_set final : public listener
{
public:
	poll_set(const struct fi_provider *prov, std::function<void()> on_close)
	    : prov_(prov), on_close_(std::move(on_close))
	{
	}
	~poll_set();

	int add(struct fid *fid) noexcept;
	int del(struct fid *fid) noexcept;
	int poll(void **context, int count) noexcept;
	size_t member_count() const noexcept;
	const struct fi_provider *provider() const noexcept { return prov_; }
	std::function<void()> take_on_close() noexcept { return std::move(on_close_); }

	void notify(waitable *w, bool wake) noexcept override;
	void forget(waitable *w) noexcept override;

private:
	int resolve(struct fid *fid, const char *call, waitable **out) const noexcept;
	bool check(waitable *w) noexcept;
	void drop(waitable *w) noexcept;
	void hold(const event_source &src);
	void unhold(int fd) noexcept;
	void drain_sources() noexcept;

	struct member {
		uint64_t cookie;
		int source_fd; /* events_from()'s fd, -1 for none */
		bool polled;   /* in polled_: checked on every fi_poll */
	};
	/* the fds the members' events arrive on (verbs completion channels), shared */
	struct held_source {
		event_source src;
		unsigned refs;
	};

	const struct fi_provider *prov_;
	std::function<void()> on_close_;
	/* shared while calling into members, exclusive to add/remove them */
	mutable shared_mutex members_mu_{lock_level::poll_members};
	std::unordered_map<waitable *, member> members_;
	std::vector<held_source> sources_;
	std::vector<struct pollfd> source_fds_; /* parallel to sources_ */
	std::vector<waitable *> polled_;        /* not self_notifying(), no events_from() */
	/* serialises the checks of polled_ members (their cookies) */
	mutex polled_mu_{lock_level::poll_polled};
	size_t polled_next_ = 0; /* guarded by polled_mu_ */
	ready_list ready_;
};

poll_set::~poll_set()
{
	std::vector<waitable *> left;
	{
		shared_lock lock(members_mu_);
		for (auto &m : members_)
			left.push_back(m.first);
	}
	for (waitable *w : left) {
		w->remove_listener(this);
		drop(w);
	}
}

int poll_set::resolve(struct fid *fid, const char *call, waitable **out) const noexcept
{
	if (!fid) {
		FI_WARN(prov_, FI_LOG_CORE, "%s: event_fid is NULL\n", call);
		return -FI_EINVAL;
	}
	if (fid->fclass != FI_CLASS_CQ && fid->fclass != FI_CLASS_CNTR) {
		FI_WARN(prov_, FI_LOG_CORE,
		        "%s: event_fid %p is a %s (class %zu): only CQs and counters\n", call,
		        (void *)fid, class_name(fid->fclass), fid->fclass);
		return -FI_EINVAL;
	}
	if (get_waitable(fid, out)) {
		FI_WARN(prov_, FI_LOG_CORE, "%s: event_fid %p is not a vwait %s\n", call,
		        (void *)fid, class_name(fid->fclass));
		return -FI_EINVAL;
	}
	return 0;
}

int poll_set::add(struct fid *fid) noexcept
{
	waitable *w = nullptr;
	int ret = resolve(fid, "fi_poll_add", &w);
	if (ret)
		return ret;
	lock_guard<shared_mutex> lock(members_mu_);
	if (members_.count(w)) {
		FI_WARN(prov_, FI_LOG_CORE, "fi_poll_add: event_fid %p is already a member\n",
		        (void *)fid);
		return -FI_EALREADY;
	}
	try {
		event_source src;
		const bool evented = w->events_from(src);
		const bool polled = !evented && !w->self_notifying();
		members_.emplace(w, member{w->poll_cookie(), evented ? src.fd : -1, polled});
		try {
			if (evented)
				hold(src);
			else if (polled)
				polled_.push_back(w);
			ready_.add(w);
			w->add_listener(this);
		} catch (...) {
			drop(w);
			throw;
		}
	} catch (const std::bad_alloc &) {
		return -FI_ENOMEM;
	}
	return 0;
}

/* Called with members_mu_ held exclusively (or from the destructor). */
void poll_set::drop(waitable *w) noexcept
{
	ready_.remove(w);
	polled_.erase(std::remove(polled_.begin(), polled_.end(), w), polled_.end());
	auto it = members_.find(w);
	if (it == members_.end())
		return;
	if (it->second.source_fd >= 0)
		unhold(it->second.source_fd);
	members_.erase(it);
}

/* members_mu_ held exclusively. May throw std::bad_alloc (add undoes the member). */
void poll_set::hold(const event_source &src)
{
	for (auto &h : sources_) {
		if (h.src.fd == src.fd) {
			h.refs++;
			return;
		}
	}
	source_fds_.reserve(sources_.size() + 1);
	sources_.push_back({src, 1});
	source_fds_.push_back({src.fd, POLLIN, 0});
}

/* members_mu_ held exclusively. */
void poll_set::unhold(int fd) noexcept
{
	for (size_t i = 0; i < sources_.size(); ++i) {
		if (sources_[i].src.fd != fd)
			continue;
		if (--sources_[i].refs == 0) {
			sources_.erase(sources_.begin() + static_cast<std::ptrdiff_t>(i));
			source_fds_.erase(source_fds_.begin() + static_cast<std::ptrdiff_t>(i));
		}
		return;
	}
}

/* members_mu_ held shared. Reads the members' pending events without blocking: each one
 * notifies its member, which puts it on the ready list. One system call for one source (its
 * drain reads, non-blocking), one poll() plus a read per readable one for several. */
void poll_set::drain_sources() noexcept
{
	if (sources_.empty())
		return;
	if (sources_.size() == 1) {
		sources_[0].src.drain(sources_[0].src.arg);
		return;
	}
	thread_local std::vector<struct pollfd> fds;
	try {
		fds.assign(source_fds_.begin(), source_fds_.end());
	} catch (const std::bad_alloc &) {
		for (auto &h : sources_)
			h.src.drain(h.src.arg);
		return;
	}
	if (::poll(fds.data(), fds.size(), 0) <= 0)
		return;
	for (size_t i = 0; i < fds.size(); ++i)
		if (fds[i].revents)
			sources_[i].src.drain(sources_[i].src.arg);
}

int poll_set::del(struct fid *fid) noexcept
{
	waitable *w = nullptr;
	int ret = resolve(fid, "fi_poll_del", &w);
	if (ret)
		return ret;
	lock_guard<shared_mutex> lock(members_mu_);
	if (!members_.count(w)) {
		FI_WARN(prov_, FI_LOG_CORE, "fi_poll_del: event_fid %p is not a member\n",
		        (void *)fid);
		return -FI_EINVAL;
	}
	w->remove_listener(this);
	drop(w);
	return 0;
}

void poll_set::forget(waitable *w) noexcept
{
	lock_guard<shared_mutex> lock(members_mu_);
	drop(w);
}

void poll_set::notify(waitable *w, bool) noexcept
{
	ready_.push(w);
}

size_t poll_set::member_count() const noexcept
{
	shared_lock lock(members_mu_);
	return members_.size();
}

/* members_mu_ held shared; w is held by this thread alone (taken off the ready list). */
bool poll_set::check(waitable *w) noexcept
{
	auto it = members_.find(w);
	if (it == members_.end())
		return false;
	return w->poll_ready(it->second.cookie);
}

int poll_set::poll(void **context, int count) noexcept
{
	if (!context || count < 0) {
		FI_WARN(prov_, FI_LOG_CORE, "fi_poll: context %p / count %d is invalid\n",
		        (void *)context, count);
		return -FI_EINVAL;
	}
	if (count == 0)
		return 0;
	thread_local std::vector<waitable *> batch;
	thread_local std::vector<waitable *> reported;
	shared_lock lock(members_mu_);
	drain_sources();
	batch.clear();
	reported.clear();
	try {
		ready_.take(batch);
		reported.reserve(batch.size());
	} catch (const std::bad_alloc &) {
		return -FI_ENOMEM;
	}
	int n = 0;
	for (waitable *w : batch) {
		auto it = members_.find(w);
		if (it == members_.end() || it->second.polled)
			continue; /* polled ones: checked below, under polled_mu_ (shared cookie) */
		if (n == count) {
			ready_.push(w); /* not looked at: stays queued */
			continue;
		}
		if (check(w)) {
			context[n++] = w->poll_context();
			reported.push_back(w);
		}
	}
	if (n < count && !polled_.empty()) {
		lock_guard<mutex> plock(polled_mu_);
		/* start where the previous call stopped: a short array starves no one */
		size_t np = polled_.size();
		for (size_t i = 0; i < np && n < count; ++i) {
			waitable *w = polled_[(polled_next_ + i) % np];
			if (check(w)) {
				context[n++] = w->poll_context();
				polled_next_ = (polled_next_ + i + 1) % np;
			}
		}
	}
	/* A reported member may still hold events (a CQ not read empty): queue it again, behind
	 * the ones not looked at, so that a short array does not starve anyone. */
	for (waitable *w : reported)
		ready_.push(w);
	return n;
}

/* ------------------------------------------------------------------ shim */

using poll_box = fid_box<struct fid_poll, poll_set>;

int poll_close(struct fid *fid) noexcept
{
	auto *box = poll_box::of(fid);
	size_t n = box->obj->member_count();
	if (n) {
		FI_WARN(box->obj->provider(), FI_LOG_CORE,
		        "fi_close(poll set): %zu CQ(s)/counter(s) still added\n", n);
		return -FI_EBUSY;
	}
	auto on_close = box->obj->take_on_close();
	delete box->obj;
	delete box;
	if (on_close)
		on_close();
	return 0;
}

int poll_poll(struct fid_poll *fid, void **context, int count) noexcept
{
	return poll_box::of(fid)->obj->poll(context, count);
}
int poll_add(struct fid_poll *fid, struct fid *event_fid, uint64_t) noexcept
{
	return poll_box::of(fid)->obj->add(event_fid);
}
int poll_del(struct fid_poll *fid, struct fid *event_fid, uint64_t) noexcept
{
	return poll_box::of(fid)->obj->del(event_fid);
}

struct fi_ops poll_fi_ops = fi_ops_with(poll_close);

struct fi_ops_poll poll_ops = {
    .size = sizeof(struct fi_ops_poll),
    .poll = poll_poll,
    .poll_add = poll_add,
    .poll_del = poll_del,
};

} // namespace

int poll_open(const struct fi_provider *prov, struct fi_poll_attr *attr, struct fid_poll **out,
              std::function<void()> on_close) noexcept
{
	if (!out) {
		FI_WARN(prov, FI_LOG_CORE, "fi_poll_open: pollset is NULL\n");
		return -FI_EINVAL;
	}
	*out = nullptr;
	if (attr && attr->flags) {
		FI_WARN(prov, FI_LOG_CORE, "fi_poll_open: attr->flags 0x%llx must be 0\n",
		        (unsigned long long)attr->flags);
		return -FI_EINVAL;
	}
	return guard([&] {
		auto set = std::make_unique<poll_set>(prov, std::move(on_close));
		poll_box::hand_out(set, FI_CLASS_POLL, nullptr, &poll_fi_ops, out,
		                   [](struct fid_poll &f) { f.ops = &poll_ops; });
		return 0;
	});
}

} // namespace vwait::util
