/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* Clang's thread-safety analysis (-Wthread-safety): which lock guards which member, checked
 * at compile time. configure turns the warning on whenever the compiler has it (clang); the
 * CI's clang build (the fuzz stage) has warnings as errors, so a member marked
 * VWAIT_GUARDED_BY(m) touched without m held fails that build. With GCC the macros are empty.
 *
 * The locks that take part are the annotated ones: util::fast_mutex (the polling path's) and
 * util::mutex (a std::mutex that says it is a lock), held through util::lock_guard.
 * std::lock_guard and std::unique_lock are not annotated in libstdc++: a lock taken through
 * them is unknown to the analysis. lock_order.h says which locks are annotated. */
#ifndef VWAIT_UTIL_THREAD_SAFETY_H
#define VWAIT_UTIL_THREAD_SAFETY_H

#include <mutex>

#if defined(__clang__)
#define VWAIT_TSA(x) __attribute__((x))
#else
#define VWAIT_TSA(x)
#endif

#define VWAIT_CAPABILITY(name) VWAIT_TSA(capability(name))
#define VWAIT_SCOPED_CAPABILITY VWAIT_TSA(scoped_lockable)
#define VWAIT_GUARDED_BY(m) VWAIT_TSA(guarded_by(m))
#define VWAIT_PT_GUARDED_BY(m) VWAIT_TSA(pt_guarded_by(m))
#define VWAIT_REQUIRES(...) VWAIT_TSA(requires_capability(__VA_ARGS__))
#define VWAIT_EXCLUDES(...) VWAIT_TSA(locks_excluded(__VA_ARGS__))
#define VWAIT_ACQUIRE(...) VWAIT_TSA(acquire_capability(__VA_ARGS__))
#define VWAIT_RELEASE(...) VWAIT_TSA(release_capability(__VA_ARGS__))
#define VWAIT_TRY_ACQUIRE(...) VWAIT_TSA(try_acquire_capability(__VA_ARGS__))
#define VWAIT_NO_THREAD_SAFETY_ANALYSIS VWAIT_TSA(no_thread_safety_analysis)

namespace vwait::util
{

/* std::mutex, annotated: a BasicLockable and Lockable like it. */
class VWAIT_CAPABILITY("mutex") mutex
{
public:
	void lock() VWAIT_ACQUIRE() { m_.lock(); }
	bool try_lock() VWAIT_TRY_ACQUIRE(true) { return m_.try_lock(); }
	void unlock() VWAIT_RELEASE() { m_.unlock(); }

private:
	std::mutex m_;
};

/* std::lock_guard, annotated: holds m from here to the end of the scope. */
template <class Mutex>
class VWAIT_SCOPED_CAPABILITY lock_guard
{
public:
	explicit lock_guard(Mutex &m) VWAIT_ACQUIRE(m) : m_(m) { m_.lock(); }
	~lock_guard() VWAIT_RELEASE() { m_.unlock(); }
	lock_guard(const lock_guard &) = delete;
	lock_guard &operator=(const lock_guard &) = delete;

private:
	Mutex &m_;
};

} // namespace vwait::util

#endif
