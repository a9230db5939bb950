/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* util::helper_thread: the provider's threads, listed so that the provider's cleanup can stop
 * them before libfabric unloads the plugin (include/vwait/util/helper_thread.h). */
#include "config.h"

#include "vwait/util/helper_thread.h"
#include "vwait/util/thread_safety.h"

#include <rdma/fi_errno.h>

#include <cstdio>
#include <pthread.h>

namespace vwait::util
{

namespace
{

/* The helpers of the process, an intrusive list: constant-initialized, no allocation and no
 * destructor, so that neither the cleanup at fi_fini nor the plugin's unloading has anything
 * to build or free. */
mutex registry_mu{lock_level::threads}; /* guards the list and every prev_ / next_ */
helper_thread *registry_head = nullptr;

} // namespace

void helper_thread::enlist() noexcept
{
	lock_guard<mutex> lock(registry_mu);
	if (listed_)
		return;
	prev_ = nullptr;
	next_ = registry_head;
	if (registry_head)
		registry_head->prev_ = this;
	registry_head = this;
	listed_ = true;
}

void helper_thread::delist_locked() noexcept
{
	if (!listed_)
		return;
	if (prev_)
		prev_->next_ = next_;
	else
		registry_head = next_;
	if (next_)
		next_->prev_ = prev_;
	prev_ = next_ = nullptr;
	listed_ = false;
}

void helper_thread::delist() noexcept
{
	lock_guard<mutex> lock(registry_mu);
	delist_locked();
}

void helper_thread::name_self(const char *name) noexcept
{
	char n[16];
	snprintf(n, sizeof(n), "%s", name);
	/* a name is only a help: a failure is no error */
	pthread_setname_np(pthread_self(), n);
}

int helper_thread::start(const char *name, std::function<void()> body,
                         std::function<void()> stop_request) noexcept
{
	try {
		/* listed before it runs: a stop_all in between finds no thread and delists it,
		 * which only matters at exit */
		enlist();
		lock_guard<mutex> lock(mu_);
		if (thread_.joinable())
			return 0;
		stop_request_ = std::move(stop_request);
		thread_ = std::thread([name, b = std::move(body)] {
			name_self(name);
			b();
		});
		return 0;
	} catch (...) {
		delist();
		return -FI_EAGAIN;
	}
}

void helper_thread::join_locked() noexcept
{
	if (!thread_.joinable())
		return;
	if (stop_request_)
		stop_request_();
	/* exit() on the helper itself (a library's crash handler runs it there, and fi_fini's
	 * stop_all follows): no thread can join itself, and it ends with the process anyway */
	if (thread_.get_id() == std::this_thread::get_id()) {
		thread_.detach();
		return;
	}
	thread_.join();
}

void helper_thread::stop() noexcept
{
	/* after delist, a stop_all has either joined this thread already or will not see it */
	delist();
	lock_guard<mutex> lock(mu_);
	join_locked();
}

bool helper_thread::running() noexcept
{
	lock_guard<mutex> lock(mu_);
	return thread_.joinable();
}

void helper_thread::stop_all() noexcept
{
	lock_guard<mutex> lock(registry_mu);
	while (helper_thread *h = registry_head) {
		{
			lock_guard<mutex> hl(h->mu_);
			h->join_locked();
		}
		h->delist_locked();
	}
}

size_t helper_thread::count() noexcept
{
	lock_guard<mutex> lock(registry_mu);
	size_t n = 0;
	for (helper_thread *h = registry_head; h; h = h->next_) {
		lock_guard<mutex> hl(h->mu_);
		n += h->thread_.joinable() ? 1 : 0;
	}
	return n;
}

} // namespace vwait::util
