/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* Clang's thread-safety analysis (-Wthread-safety): which lock guards which member, checked
 * at compile time. configure turns the warning on whenever the compiler has it (clang); the
 * CI's clang build (the fuzz stage) has warnings as errors, so a member marked
 * VWAIT_GUARDED_BY(m) touched without m held fails that build. With GCC the macros are empty.
 *
 * Every mutex of vwait is one of the annotated types: util::fast_mutex (the polling path's),
 * util::mutex (a std::mutex that says it is a lock) and util::shared_mutex, each constructed
 * with its level in lock_order.h, which lock_check.h checks at run time in a lock-check
 * build. Held through util::lock_guard and util::shared_lock, the analysis sees them;
 * std::lock_guard / unique_lock / shared_lock over them (a cv wait, an unlock mid-scope) are
 * not annotated in libstdc++, so what such a guard holds is checked at run time only. */
#ifndef VWAIT_UTIL_THREAD_SAFETY_H
#define VWAIT_UTIL_THREAD_SAFETY_H

#include "vwait/util/lock_check.h"

#include <mutex>
#include <shared_mutex>

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
#define VWAIT_ACQUIRE_SHARED(...) VWAIT_TSA(acquire_shared_capability(__VA_ARGS__))
#define VWAIT_RELEASE(...) VWAIT_TSA(release_capability(__VA_ARGS__))
#define VWAIT_RELEASE_SHARED(...) VWAIT_TSA(release_shared_capability(__VA_ARGS__))
#define VWAIT_RELEASE_GENERIC(...) VWAIT_TSA(release_generic_capability(__VA_ARGS__))
#define VWAIT_TRY_ACQUIRE(...) VWAIT_TSA(try_acquire_capability(__VA_ARGS__))
#define VWAIT_TRY_ACQUIRE_SHARED(...) VWAIT_TSA(try_acquire_shared_capability(__VA_ARGS__))
#define VWAIT_NO_THREAD_SAFETY_ANALYSIS VWAIT_TSA(no_thread_safety_analysis)

namespace vwait::util
{

/* What a lock-check build keeps in each mutex: its level (lock_order.h). Empty otherwise. */
class lock_level_of
{
public:
#ifdef VWAIT_LOCK_CHECK
	constexpr explicit lock_level_of(int level) noexcept : level_(level) {}
	int level() const noexcept
	{
		return level_;
	}

private:
	int level_;
#else
	constexpr explicit lock_level_of(int) noexcept {}
	static constexpr int level() noexcept
	{
		return 0;
	}
#endif
};

/* A std mutex M, annotated and with its level: the BasicLockable and Lockable side of
 * util::mutex and util::shared_mutex. */
template <class M>
class VWAIT_CAPABILITY("mutex") leveled_mutex : lock_level_of
{
public:
	constexpr explicit leveled_mutex(int level) noexcept : lock_level_of(level) {}
	leveled_mutex(const leveled_mutex &) = delete;
	leveled_mutex &operator=(const leveled_mutex &) = delete;

	void lock() VWAIT_ACQUIRE() { lock_check::take(level(), m_); }
	bool try_lock() VWAIT_TRY_ACQUIRE(true) { return lock_check::try_take(level(), m_); }
	void unlock() VWAIT_RELEASE() { lock_check::give(level(), m_); }

protected:
	using lock_level_of::level;
	M m_;
};

/* std::mutex, annotated and with its level. */
class VWAIT_CAPABILITY("mutex") mutex : public leveled_mutex<std::mutex>
{
public:
	using leveled_mutex::leveled_mutex;
	/* the std::mutex itself, for a std::condition_variable (cv_lock) and FI_GETWAIT's
	 * pthread_mutex_t: a take through it is not checked */
	std::mutex &native() noexcept { return m_; }
	std::mutex::native_handle_type native_handle() { return m_.native_handle(); }
};

/* std::shared_mutex, annotated and with its level. A thread never takes it again, shared or
 * not, while it holds it (lock_order.h, rule 5): the level check catches that too. */
class VWAIT_CAPABILITY("shared_mutex") shared_mutex : public leveled_mutex<std::shared_mutex>
{
public:
	using leveled_mutex::leveled_mutex;
	void lock_shared() VWAIT_ACQUIRE_SHARED() { lock_check::take(level(), shared_side{m_}); }
	bool try_lock_shared() VWAIT_TRY_ACQUIRE_SHARED(true)
	{
		return lock_check::try_take(level(), shared_side{m_});
	}
	void unlock_shared() VWAIT_RELEASE_SHARED() { lock_check::give(level(), shared_side{m_}); }

private:
	/* the shared side of a std::shared_mutex as a BasicLockable */
	struct shared_side {
		std::shared_mutex &m;
		void lock() { m.lock_shared(); }
		bool try_lock() { return m.try_lock_shared(); }
		void unlock() { m.unlock_shared(); }
	};
};

/* A guard of a scope: neither copied nor assigned. */
class scope_guard
{
public:
	scope_guard() = default;
	scope_guard(const scope_guard &) = delete;
	scope_guard &operator=(const scope_guard &) = delete;
};

/* std::lock_guard, annotated: holds m from here to the end of the scope. */
template <class Mutex>
class VWAIT_SCOPED_CAPABILITY lock_guard : scope_guard
{
public:
	explicit lock_guard(Mutex &m) VWAIT_ACQUIRE(m) : m_(m) { m_.lock(); }
	~lock_guard() VWAIT_RELEASE() { m_.unlock(); }

private:
	Mutex &m_;
};

/* std::shared_lock for a util::shared_mutex, annotated: holds m shared to the end of the
 * scope. */
class VWAIT_SCOPED_CAPABILITY shared_lock : scope_guard
{
	shared_mutex &m_;

public:
	explicit shared_lock(shared_mutex &m) VWAIT_ACQUIRE_SHARED(m) : m_(m) { m_.lock_shared(); }
	~shared_lock() VWAIT_RELEASE() { m_.unlock_shared(); }
};

/* A std::unique_lock<std::mutex> over a util::mutex's std::mutex, for a
 * std::condition_variable: taken and released through the util::mutex (so checked), and
 * passed to cv.wait as the std::unique_lock it is. While the cv waits, the level stays on
 * the thread's stack: the thread takes nothing meanwhile. */
class cv_lock : public std::unique_lock<std::mutex>, scope_guard
{
public:
	explicit cv_lock(util::mutex &m) VWAIT_NO_THREAD_SAFETY_ANALYSIS : m_(m) { lock(); }
	~cv_lock() VWAIT_NO_THREAD_SAFETY_ANALYSIS
	{
		if (owns_lock())
			unlock();
	}

	void lock() VWAIT_NO_THREAD_SAFETY_ANALYSIS
	{
		m_.lock();
		std::unique_lock<std::mutex>::operator=(
		    std::unique_lock<std::mutex>(m_.native(), std::adopt_lock));
	}
	void unlock() VWAIT_NO_THREAD_SAFETY_ANALYSIS
	{
		release();
		m_.unlock();
	}

private:
	util::mutex &m_;
};

} // namespace vwait::util

#endif
