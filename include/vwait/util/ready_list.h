/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* util::ready_list: the members of a waiter or poll set that reported an event, each at most
 * once, in report order. push() is what waitable::notify() reaches: O(1), no allocation
 * (capacity is reserved when a member is added). One leaf mutex. */
#ifndef VWAIT_UTIL_READY_LIST_H
#define VWAIT_UTIL_READY_LIST_H

#include <mutex>
#include <unordered_map>
#include <vector>

namespace vwait::util
{

class waitable;

class ready_list
{
public:
	/* Registers a member, queued (it may hold events already). May throw std::bad_alloc. */
	void add(waitable *w);
	/* Unregisters a member and drops it from the list. */
	void remove(waitable *w) noexcept;
	/* Queues a registered member unless it is queued already; unknown members are ignored. */
	void push(waitable *w) noexcept;
	/* Moves every queued member to the end of out (clearing their queued marks). */
	void take(std::vector<waitable *> &out);
	bool empty() const noexcept;
	size_t members() const noexcept;

private:
	mutable std::mutex mu_; /* lock_order.h: level 94 */
	std::unordered_map<waitable *, bool> queued_;
	std::vector<waitable *> list_;
};

} // namespace vwait::util

#endif
