/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* util::waitable: the listener list (waiters, wait sets, poll sets), the wait-object set-up
 * from open attributes, and the ready list that waiters and poll sets share. */
#include "vwait/util/waitable.h"

#include "vwait/util/ready_list.h"
#include "vwait/util/wait.h"

#include <rdma/fi_errno.h>
#include <rdma/providers/fi_log.h>

#include <algorithm>

namespace vwait::util
{

/* ------------------------------------------------------------------ ready_list */

void ready_list::make_table()
{
	auto t = std::make_unique<table>();
	t->queued.reserve(2); /* see waiter::attach: a few buckets, not 13 */
	t->list.reserve(2);
	t->fresh.reserve(2);
	if (one_) {
		t->queued.emplace(one_, one_marks_);
		if (one_marks_ & on_fresh)
			t->fresh.push_back(one_);
		if (one_marks_ & on_list)
			t->list.push_back(one_);
	}
	many_ = std::move(t);
	one_ = nullptr;
	one_marks_ = 0;
}

void ready_list::add(waitable *w, bool fresh)
{
	lock_guard<fast_mutex> lock(mu_);
	const unsigned char mark = fresh ? on_fresh : on_list;
	if (!many_) {
		if (!one_) {
			one_ = w;
			one_marks_ = mark;
			return;
		}
		if (one_ == w)
			return;
		make_table();
	}
	table &t = *many_;
	if (t.queued.bucket_count() < 2) /* once: never rehash (nor shrink) on the wake path */
		t.queued.reserve(1);
	t.list.reserve(t.queued.size() + 1);
	t.fresh.reserve(t.queued.size() + 1);
	auto [it, inserted] = t.queued.emplace(w, mark);
	if (!inserted)
		return;
	(fresh ? t.fresh : t.list).push_back(w);
	(void)it;
}

void ready_list::remove(waitable *w) noexcept
{
	lock_guard<fast_mutex> lock(mu_);
	if (!many_) {
		if (one_ == w) {
			one_ = nullptr;
			one_marks_ = 0;
		}
		return;
	}
	table &t = *many_;
	auto it = t.queued.find(w);
	if (it == t.queued.end())
		return;
	if (it->second & on_list)
		t.list.erase(std::find(t.list.begin(), t.list.end(), w));
	if (it->second & on_fresh)
		t.fresh.erase(std::find(t.fresh.begin(), t.fresh.end(), w));
	t.queued.erase(it);
}

void ready_list::push(waitable *w) noexcept
{
	lock_guard<fast_mutex> lock(mu_);
	if (!many_) {
		if (one_ == w)
			one_marks_ |= on_list;
		return;
	}
	table &t = *many_;
	auto it = t.queued.find(w);
	if (it == t.queued.end() || (it->second & on_list))
		return;
	it->second |= on_list;
	t.list.push_back(w); /* capacity >= members: never reallocates */
}

void ready_list::take(std::vector<waitable *> &out)
{
	lock_guard<fast_mutex> lock(mu_);
	if (!many_) {
		if (one_marks_ & on_list) {
			out.push_back(one_);
			one_marks_ &= static_cast<unsigned char>(~on_list);
		}
		return;
	}
	table &t = *many_;
	out.insert(out.end(), t.list.begin(), t.list.end());
	for (waitable *w : t.list)
		t.queued.find(w)->second &= static_cast<unsigned char>(~on_list);
	t.list.clear();
}

size_t ready_list::take_with_fresh(std::vector<waitable *> &out)
{
	lock_guard<fast_mutex> lock(mu_);
	if (!many_) {
		out.reserve(out.size() + 2);
		const size_t nfresh = (one_marks_ & on_fresh) ? 1 : 0;
		if (nfresh)
			out.push_back(one_);
		if (one_marks_ & on_list)
			out.push_back(one_);
		one_marks_ = 0;
		return nfresh;
	}
	table &t = *many_;
	const size_t nfresh = t.fresh.size();
	out.reserve(out.size() + nfresh + t.list.size());
	out.insert(out.end(), t.fresh.begin(), t.fresh.end());
	for (waitable *w : t.fresh)
		t.queued.find(w)->second &= static_cast<unsigned char>(~on_fresh);
	t.fresh.clear();
	out.insert(out.end(), t.list.begin(), t.list.end());
	for (waitable *w : t.list)
		t.queued.find(w)->second &= static_cast<unsigned char>(~on_list);
	t.list.clear();
	return nfresh;
}

bool ready_list::empty() const noexcept
{
	lock_guard<fast_mutex> lock(mu_);
	return many_ ? many_->list.empty() : !(one_marks_ & on_list);
}

size_t ready_list::members() const noexcept
{
	lock_guard<fast_mutex> lock(mu_);
	return many_ ? many_->queued.size() : (one_ ? 1 : 0);
}

/* ------------------------------------------------------------------ waitable */

waitable::waitable() noexcept = default;

waitable::~waitable()
{
	close_wait();
}

void waitable::report(bool wake) noexcept
{
	lock_guard<mutex> lock(listeners_mu_);
	for (listener *l : listeners_)
		l->notify(this, wake);
}

void waitable::add_listener(listener *l)
{
	lock_guard<mutex> lock(listeners_mu_);
	listeners_.push_back(l);
}

void waitable::remove_listener(listener *l) noexcept
{
	lock_guard<mutex> lock(listeners_mu_);
	auto it = std::find(listeners_.begin(), listeners_.end(), l);
	if (it != listeners_.end())
		listeners_.erase(it);
}

int waitable::open_wait(const struct fi_provider *prov, int wait_obj,
                        struct fid_wait *wait_set) noexcept
{
	if (waiter_) {
		FI_WARN(prov, FI_LOG_CORE, "wait object already set up (wait_obj %d)\n", wait_obj);
		return -FI_EINVAL;
	}
	switch (wait_obj) {
	case FI_WAIT_NONE:
		return 0;
	case FI_WAIT_SET: {
		waiter *set = nullptr;
		int ret = wait_set ? get_waiter(&wait_set->fid, &set) : -FI_EINVAL;
		if (ret) {
			FI_WARN(prov, FI_LOG_CORE, "wait_obj FI_WAIT_SET: wait_set %p is %s\n",
			        (void *)wait_set, wait_set ? "not a vwait wait set" : "NULL");
			return -FI_EINVAL;
		}
		ret = set->attach(this);
		if (ret)
			return ret;
		waiter_ = set;
		return 0;
	}
	case FI_WAIT_UNSPEC:
	case FI_WAIT_FD:
	case FI_WAIT_POLLFD:
	case FI_WAIT_MUTEX_COND:
	case FI_WAIT_YIELD: {
		std::unique_ptr<waiter> w;
		int ret = waiter::create(prov, wait_obj, w, policy_);
		if (ret)
			return ret;
		ret = w->attach(this);
		if (ret)
			return ret;
		own_ = std::move(w);
		waiter_ = own_.get();
		return 0;
	}
	default:
		FI_WARN(prov, FI_LOG_CORE, "wait_obj %d is not a known wait object\n", wait_obj);
		return -FI_EINVAL;
	}
}

enum fi_wait_obj waitable::wait_obj() const noexcept
{
	if (!waiter_)
		return FI_WAIT_NONE;
	return own_ ? own_->kind() : FI_WAIT_SET;
}

void waitable::close_wait() noexcept
{
	std::vector<listener *> gone;
	{
		lock_guard<mutex> lock(listeners_mu_);
		gone.swap(listeners_);
	}
	/* No lock held here: forget() waits for calls the listener is making into us. */
	for (listener *l : gone)
		l->forget(this);
	waiter_ = nullptr;
	own_.reset();
}

bool waitable::in_poll_set() const noexcept
{
	lock_guard<mutex> lock(listeners_mu_);
	for (listener *l : listeners_)
		if (l != static_cast<listener *>(waiter_))
			return true;
	return false;
}

int waitable::answer_control(int command, void *arg) noexcept
{
	switch (command) {
	case ctl_get_waitable:
		if (!arg)
			return -FI_EINVAL;
		*static_cast<waitable **>(arg) = this;
		return 0;
	case FI_GETWAIT:
	case FI_GETWAITOBJ:
		if (!waiter_)
			return -FI_ENODATA;
		return waiter_->control(command, arg);
	default:
		return -FI_ENOSYS;
	}
}

int get_waitable(struct fid *fid, waitable **out) noexcept
{
	if (!fid || !out)
		return -FI_EINVAL;
	if (!fid->ops || fid->ops->size < offsetof(struct fi_ops, control) + sizeof(void *) ||
	    !fid->ops->control)
		return -FI_ENOSYS;
	waitable *w = nullptr;
	int ret = fid->ops->control(fid, ctl_get_waitable, &w);
	if (ret || !w)
		return -FI_ENOSYS;
	*out = w;
	return 0;
}

} // namespace vwait::util
