/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* The run-time lock order check (include/vwait/util/lock_check.h): in a lock-check build, a
 * lock taken out of the order of lock_order.h aborts and names both levels; takes in the
 * order, try_locks and cv waits pass. Each case runs in a child process, its stderr read
 * back. Without the check (a release build) the abort cases skip and the others still run. */
#include "vwait/util/fast_mutex.h"
#include "vwait/util/thread_safety.h"

#include "vwait_cmocka.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <string>

namespace
{
namespace level = vwait::lock_level;
using vwait::util::cv_lock;
using vwait::util::fast_mutex;
using vwait::util::lock_guard;
using vwait::util::mutex;
using vwait::util::shared_lock;
using vwait::util::shared_mutex;

struct outcome {
	int status = 0;
	std::string err;
};

/* Runs body in a child with its stderr on a pipe; the child exits 0 when body returns. */
template <class F>
outcome in_child(F body)
{
	int p[2];
	assert_int_equal(pipe(p), 0);
	fflush(stderr);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(p[0]);
		dup2(p[1], 2);
		/* abort() ends the child, whatever handler cmocka or a sanitizer runtime set */
		signal(SIGABRT, SIG_DFL);
		body();
		_exit(0);
	}
	close(p[1]);
	outcome o;
	char buf[512];
	ssize_t n;
	while ((n = read(p[0], buf, sizeof(buf))) > 0)
		o.err.append(buf, static_cast<size_t>(n));
	close(p[0]);
	assert_int_equal(waitpid(pid, &o.status, 0), pid);
	return o;
}

void expect_passes(const outcome &o)
{
	if (!WIFEXITED(o.status) || WEXITSTATUS(o.status) != 0)
		fail_msg("child status %#x, stderr: %s", o.status, o.err.c_str());
}

/* the child aborted and its message names the lock taken and the one held, in that order */
void expect_abort(const outcome &o, const char *taken, const char *held)
{
	if (!WIFSIGNALED(o.status) || WTERMSIG(o.status) != SIGABRT)
		fail_msg("child status %#x, not SIGABRT; stderr: %s", o.status, o.err.c_str());
	std::string want = std::string("taking ") + taken + " while holding " + held;
	if (o.err.find(want) == std::string::npos)
		fail_msg("stderr lacks \"%s\": %s", want.c_str(), o.err.c_str());
}

void needs_check()
{
	if (!vwait::util::lock_check::enabled)
		skip(); /* a build without --enable-lock-check: no check to see */
}

/* Outermost first, every kind of lock, released out of nesting order, then again. */
void test_in_order_passes(void **)
{
	expect_passes(in_child([] {
		mutex ep{level::endpoint};
		shared_mutex sources{level::wait_sources};
		fast_mutex progress{level::cq_progress};
		mutex queue{level::sw_queue};
		for (int round = 0; round < 2; round++) {
			ep.lock();
			sources.lock_shared();
			progress.lock();
			ep.unlock(); /* not the innermost */
			{
				lock_guard<mutex> q(queue);
			}
			progress.unlock();
			sources.unlock_shared();
		}
		{
			lock_guard<shared_mutex> exclusive(sources);
			lock_guard<mutex> q(queue);
		}
	}));
}

/* A lock of level `taken` taken while one of level `held` is: the child aborts, naming both. */
template <class Held, class Taken>
void expect_pair_aborts(int held, int taken, const char *held_name, const char *taken_name)
{
	expect_abort(in_child([held, taken] {
		             Held h{held};
		             Taken t{taken};
		             lock_guard<Held> a(h);
		             lock_guard<Taken> b(t);
	             }),
	             taken_name, held_name);
}

void test_out_of_order_aborts(void **)
{
	needs_check();
	expect_pair_aborts<mutex, mutex>(level::cntr_feeds, level::endpoint, "20 (cntr_feeds)",
	                                 "10 (endpoint)");
	/* the polling path's fast_mutex, a shared_mutex taken exclusive */
	expect_pair_aborts<fast_mutex, fast_mutex>(level::cq_progress, level::rx_post,
	                                           "60 (cq_progress)", "52 (rx_post)");
	expect_pair_aborts<mutex, shared_mutex>(level::channels, level::wait_members,
	                                        "30 (channels)", "12 (wait_members)");
	/* two locks of one level are never held together */
	expect_pair_aborts<mutex, mutex>(level::sw_queue, level::sw_queue, "80 (sw_queue)",
	                                 "80 (sw_queue)");
	/* a lock of level alone is taken with nothing else held */
	expect_pair_aborts<mutex, mutex>(level::endpoint, level::alone, "10 (endpoint)",
	                                 "100 (alone)");
}

/* Rule 5: a shared_mutex taken again, shared, by a thread that holds it. */
void test_shared_again_aborts(void **)
{
	needs_check();
	expect_abort(in_child([] {
		             shared_mutex members{level::wait_members};
		             shared_lock a(members);
		             shared_lock b(members);
	             }),
	             "12 (wait_members)", "12 (wait_members)");
}

/* A try_lock never waits: out of order it passes, and what it holds counts afterwards. */
void test_try_lock_out_of_order_passes(void **)
{
	expect_passes(in_child([] {
		mutex progress{level::eq_progress};
		mutex registry{level::eq_registry};
		lock_guard<mutex> a(progress);
		if (!registry.try_lock())
			_exit(2);
		registry.unlock();
	}));
	if (!vwait::util::lock_check::enabled)
		return;
	expect_abort(in_child([] {
		             mutex async{level::async_events};
		             mutex orphans{level::cq_cold};
		             if (!async.try_lock())
			             _exit(2);
		             lock_guard<mutex> b(orphans);
	             }),
	             "62 (cq_cold)", "70 (async_events)");
}

/* A cv wait through cv_lock: unlocked and locked again mid-scope, and released at its end. */
void test_cv_lock_passes(void **)
{
	expect_passes(in_child([] {
		mutex mu{level::wait_block};
		std::condition_variable cv;
		{
			cv_lock lock(mu);
			cv.wait_for(lock, std::chrono::milliseconds(1));
			lock.unlock();
			lock.lock();
		}
		mutex ep{level::endpoint}; /* nothing held any more */
		lock_guard<mutex> a(ep);
		lock_guard<mutex> b(mu);
	}));
}

} // namespace

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_in_order_passes),
	    cmocka_unit_test(test_out_of_order_aborts),
	    cmocka_unit_test(test_shared_again_aborts),
	    cmocka_unit_test(test_try_lock_out_of_order_passes),
	    cmocka_unit_test(test_cv_lock_passes),
	};
	return cmocka_run_group_tests_name("util_lock", tests, nullptr, nullptr);
}
