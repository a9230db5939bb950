/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* util::held<T>: a reference to an object that must outlive its holder (an endpoint's domain,
 * CQs, EQ and counters; a CQ's domain; an EQ's fabric): hold() when it is taken, unhold() when
 * the holder lets go or is destroyed, so that fi_close of the held object answers -FI_EBUSY
 * meanwhile. Move-only, like std::unique_ptr, but it owns a count, not the object. As members,
 * they let go in reverse order of declaration: the member order is the teardown order. */
#ifndef VWAIT_UTIL_HELD_H
#define VWAIT_UTIL_HELD_H

#include <utility>

namespace vwait::util
{

template <typename T>
class held
{
public:
	held() noexcept = default;
	explicit held(T *p) noexcept : p_(p)
	{
		if (p_)
			p_->hold();
	}
	held(held &&o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
	held &operator=(held &&o) noexcept
	{
		if (this != &o) {
			reset();
			p_ = std::exchange(o.p_, nullptr);
		}
		return *this;
	}
	held(const held &) = delete;
	held &operator=(const held &) = delete;
	~held() { reset(); }

	/* Lets go of the current object (if any), then holds p (if not NULL). */
	void reset(T *p = nullptr) noexcept
	{
		if (p)
			p->hold();
		if (p_)
			p_->unhold();
		p_ = p;
	}

	/* Reads as the pointer it holds (it owns a count, not the object: handing the pointer on
	 * gives nothing away). */
	T *get() const noexcept { return p_; }
	operator T *() const noexcept { return p_; }
	T *operator->() const noexcept { return p_; }
	T &operator*() const noexcept { return *p_; }

private:
	T *p_ = nullptr;
};

} // namespace vwait::util

#endif
