/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* util::ready_list: the members of a waiter or poll set that reported an event, each at most
 * once, in report order. push() is what waitable::notify() reaches: O(1), no allocation
 * (capacity is reserved when a member is added). One leaf mutex. While it has had only one
 * member (the private waiter of a CQ, counter or EQ) that member and its marks are all it
 * holds: the table of members and the two lists are made when a second one joins (200
 * bytes of each FI_WAIT_FD CQ).
 *
 * A member may also be added "fresh": kept on a list of its own (take_with_fresh), apart from the
 * reported ones, so that a waiter can arm the members that joined it once, without looking
 * at them again on every pass. */
#ifndef VWAIT_UTIL_READY_LIST_H
#define VWAIT_UTIL_READY_LIST_H

#include "vwait/util/fast_mutex.h"
#include "vwait/util/thread_safety.h"

#include <memory>
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
	enum : unsigned char { on_list = 1, on_fresh = 2 };
	/* from the second member on */
	struct table {
		std::unordered_map<waitable *, unsigned char> queued; /* on_list | on_fresh */
		std::vector<waitable *> list;
		std::vector<waitable *> fresh;
	};
	/* under mu_: one_ and its marks into a new table (may throw: then nothing changed) */
	void make_table();

	mutable fast_mutex mu_{lock_level::ready}; /* 4 bytes, not 40: one in every waiter */
	unsigned char one_marks_ = 0;              /* one_'s: on_list | on_fresh */
	waitable *one_ = nullptr;                  /* the member, while there is no table */
	std::unique_ptr<table> many_;
};

} // namespace vwait::util

#endif
