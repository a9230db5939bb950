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

void ready_list::add(waitable *w, bool fresh)
{
	lock_guard<mutex> lock(mu_);
	if (queued_.bucket_count() < 2) /* once: never rehash (nor shrink) on the wake path */
		queued_.reserve(1); /* see waiter::attach: 2 buckets, not 13, for a first member */
	list_.reserve(queued_.size() + 1);
	fresh_.reserve(queued_.size() + 1);
	auto [it, inserted] = queued_.emplace(w, fresh ? on_fresh : on_list);
	if (!inserted)
		return;
	(fresh ? fresh_ : list_).push_back(w);
	(void)it;
}

void ready_list::remove(waitable *w) noexcept
{
	lock_guard<mutex> lock(mu_);
	auto it = queued_.find(w);
	if (it == queued_.end())
		return;
	if (it->second & on_list)
		list_.erase(std::find(list_.begin(), list_.end(), w));
	if (it->second & on_fresh)
		fresh_.erase(std::find(fresh_.begin(), fresh_.end(), w));
	queued_.erase(it);
}

void ready_list::push(waitable *w) noexcept
{
	lock_guard<mutex> lock(mu_);
	auto it = queued_.find(w);
	if (it == queued_.end() || (it->second & on_list))
		return;
	it->second |= on_list;
	list_.push_back(w); /* capacity >= members: never reallocates */
}

void ready_list::take(std::vector<waitable *> &out)
{
	lock_guard<mutex> lock(mu_);
	out.insert(out.end(), list_.begin(), list_.end());
	for (waitable *w : list_)
		queued_.find(w)->second &= static_cast<unsigned char>(~on_list);
	list_.clear();
}

size_t ready_list::take_with_fresh(std::vector<waitable *> &out)
{
	lock_guard<mutex> lock(mu_);
	const size_t nfresh = fresh_.size();
	out.reserve(out.size() + nfresh + list_.size());
	out.insert(out.end(), fresh_.begin(), fresh_.end());
	for (waitable *w : fresh_)
		queued_.find(w)->second &= static_cast<unsigned char>(~on_fresh);
	fresh_.clear();
	out.insert(out.end(), list_.begin(), list_.end());
	for (waitable *w : list_)
		queued_.find(w)->second &= static_cast<unsigned char>(~on_list);
	list_.clear();
	return nfresh;
}

bool ready_list::empty() const noexcept
{
	lock_guard<mutex> lock(mu_);
	return list_.empty();
}

size_t ready_list::members() const noexcept
{
	lock_guard<mutex> lock(mu_);
	return queued_.size();
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
