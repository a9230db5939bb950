/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* util::ready_list: the members of a waiter or poll set that reported an event, each at most
 * once, in report order. push() is what waitable::notify() reaches: O(1), no allocation
 * (capacity is reserved when a member is added). One leaf mutex.
 *
 * A member may also be added "fresh": kept on a list of its own (take_with_fresh), apart from the
 * reported ones, so that a waiter can arm the members that joined it once, without looking
 * at them again on every pass. */
#ifndef VWAIT_UTIL_READY_LIST_H
#define VWAIT_UTIL_READY_LIST_H

#include "vwait/util/thread_safety.h"

#include <mutex>
#include <unordered_map>
#include <vector>

namespace vwait::util
{

class waitable;

class ready_list
{
public:
	/* Registers a member, queued (it may hold events already), or, fresh, on the fresh list
	 * instead. May throw std::bad_alloc. */
	void add(waitable *w, bool fresh = false);
	/* Unregisters a member and drops it from both lists. */
	void remove(waitable *w) noexcept;
	/* Queues a registered member unless it is queued already; unknown members are ignored. */
	void push(waitable *w) noexcept;
	/* Moves every queued member to the end of out (clearing their queued marks). */
	void take(std::vector<waitable *> &out);
	/* take(), the members of the fresh list first: how many of those. */
	size_t take_with_fresh(std::vector<waitable *> &out);
	bool empty() const noexcept;
	size_t members() const noexcept;

private:
	mutable mutex mu_{lock_level::ready};
	enum : unsigned char { on_list = 1, on_fresh = 2 };
	std::unordered_map<waitable *, unsigned char> queued_; /* on_list | on_fresh */
	std::vector<waitable *> list_;
	std::vector<waitable *> fresh_;
};

} // namespace vwait::util

#endif
