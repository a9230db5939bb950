/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* util::helper_thread: one of the provider's own threads (an EQ's control progress, a
 * FI_WAIT_MUTEX_COND waiter's helper, a DGRAM endpoint's name service).
 *
 * Why a class: libfabric's fi_fini, run at exit, calls the provider's cleanup and then
 * unloads the plugin, and with it libstdc++ when the application is C. An application that
 * exits without closing an object would leave that object's thread to return into unmapped
 * code (SIGSEGV at exit: a keepalive tick, a held FI_SHUTDOWN, a late CM event). Every
 * helper_thread is listed process-wide, and the cleanup stops and joins them all (stop_all).
 *
 * Contract:
 *  - start(name, body, stop_request) runs body on a new thread that first names itself name
 *    (at most 15 characters: what top -H, ps -L and gdb show; every name begins with
 *    "vwait-"). The thread names itself: naming it from the starter, on a thread that may not
 *    have run yet, crashed TSan's runtime now and then.
 *    stop_request, called from another thread, must make body return soon (it writes an
 *    eventfd that body polls). At most one thread at a time: start on a running helper
 *    returns 0 and starts nothing.
 *  - stop() calls stop_request and joins; nothing when no thread runs. The owner calls it
 *    before it frees what body uses (the destructor calls it too). Safe against a concurrent
 *    stop_all: when stop() returns, the thread has been joined, by one or the other.
 *  - stop_all() stops every running helper of the process. After it, the owners' objects
 *    stay valid and their stop() does nothing. Run on a helper itself (exit() from a crash
 *    handler on that thread), it detaches that one instead of joining it.
 *  - Locks (lock_order.h): the registry (97), then one helper's own mutex (99). stop_all
 *    joins under both: a body never starts or stops a helper_thread.
 */
#ifndef VWAIT_UTIL_HELPER_THREAD_H
#define VWAIT_UTIL_HELPER_THREAD_H

#include "vwait/util/thread_safety.h"

#include <functional>
#include <mutex>
#include <thread>

namespace vwait::util
{

class helper_thread
{
public:
	helper_thread() noexcept = default;
	helper_thread(const helper_thread &) = delete;
	helper_thread &operator=(const helper_thread &) = delete;
	~helper_thread() { stop(); }

	/* 0, or -FI_EAGAIN when no thread could be started (no memory, no thread). */
	int start(const char *name, std::function<void()> body,
	          std::function<void()> stop_request) noexcept;
	void stop() noexcept;
	bool running() noexcept;

	/* The provider's cleanup: every helper thread of the process, stopped and joined. */
	static void stop_all() noexcept;
	/* How many helper threads run now (tests, benchmarks). */
	static size_t count() noexcept;
	/* Names the calling thread (the first 15 characters of name): the helpers and the
	 * registration cache's reader, so that a user can tell the provider's threads apart. */
	static void name_self(const char *name) noexcept;

private:
	void join_locked() noexcept;
	void enlist() noexcept;
	void delist() noexcept;
	void delist_locked() noexcept;

	mutex mu_{lock_level::thread}; /* guards thread_ and stop_request_ */
	std::thread thread_;
	std::function<void()> stop_request_;
	/* the process-wide list (helper_thread.cpp), under its mutex (level 97) */
	helper_thread *prev_ = nullptr, *next_ = nullptr;
	bool listed_ = false;
};

} // namespace vwait::util

#endif
