/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* Shared by the util-layer unit tests: a test provider to log through, a fake waitable that
 * stands in for a CQ / counter / EQ (with a real fid whose control slot answers
 * ctl_get_waitable), an eventfd standing in for a completion channel, stderr capture to check
 * warning lines, a clock, and the cmocka fixture of the cq / cntr / eq tests. */
#ifndef VWAIT_TEST_UTIL_COMMON_H
#define VWAIT_TEST_UTIL_COMMON_H

#include "vwait/util/fd.h"
#include "vwait/util/wait.h"
#include "vwait/util/waitable.h"

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/providers/fi_prov.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <sys/eventfd.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "vwait_cmocka.h"

namespace vwait_test
{

inline struct fi_provider test_prov = {
    .version = FI_VERSION(0, 1),
    .fi_version = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION),
    .context = {},
    .name = "vwait-util-test",
    .getinfo = nullptr,
    .fabric = nullptr,
    .cleanup = nullptr,
};

/* libfabric reads FI_LOG_LEVEL when it initialises (first fi_getinfo): warnings on stderr. */
inline void init_logging()
{
	setenv("FI_LOG_LEVEL", "warn", 1);
	setenv("FI_PROVIDER", "vwait-util-test-none", 1);
	struct fi_info *info = nullptr;
	fi_getinfo(FI_VERSION(1, 5), nullptr, nullptr, 0, nullptr, &info);
	fi_freeinfo(info);
}

/* Captures what is written to stderr between start() and stop(). */
class stderr_capture
{
public:
	void start()
	{
		fflush(stderr);
		saved_ = dup(2);
		file_ = tmpfile();
		dup2(fileno(file_), 2);
	}
	std::string stop()
	{
		fflush(stderr);
		dup2(saved_, 2);
		close(saved_);
		std::string out;
		rewind(file_);
		char buf[512];
		size_t n;
		while ((n = fread(buf, 1, sizeof(buf), file_)) > 0)
			out.append(buf, n);
		fclose(file_);
		return out;
	}

private:
	int saved_ = -1;
	FILE *file_ = nullptr;
};

/* A software queue of "entries" (CQ/EQ) or a counter value (counter). */
class fake_object : public vwait::util::waitable
{
public:
	explicit fake_object(size_t fclass, void *context = nullptr)
	{
		ops_.size = sizeof(ops_);
		ops_.control = control;
		h_.fid.fclass = fclass;
		h_.fid.context = context ? context : this;
		h_.fid.ops = &ops_;
		h_.self = this;
	}
	~fake_object() override { close_wait(); }

	struct fid *fid() noexcept { return &h_.fid; }

	/* producer side */
	void write(int n = 1)
	{
		entries.fetch_add(n);
		notify();
	}
	void add(uint64_t n = 1)
	{
		value.fetch_add(n);
		generation.fetch_add(1);
		wake();
	}
	/* consumer side */
	bool read()
	{
		int e = entries.load();
		while (e > 0)
			if (entries.compare_exchange_weak(e, e - 1))
				return true;
		return false;
	}

	bool ready() noexcept override
	{
		readies.fetch_add(1, std::memory_order_relaxed);
		return entries.load() > 0;
	}
	int trywait() noexcept override
	{
		trywaits.fetch_add(1);
		return entries.load() > 0 ? -FI_EAGAIN : 0;
	}
	void *poll_context() const noexcept override { return h_.fid.context; }
	bool poll_ready(uint64_t &cookie) noexcept override
	{
		if (h_.fid.fclass != FI_CLASS_CNTR)
			return ready();
		uint64_t g = generation.load();
		if (g == cookie)
			return false;
		cookie = g;
		return true;
	}
	uint64_t poll_cookie() const noexcept override { return generation.load(); }
	bool self_notifying() const noexcept override { return notifying; }
	/* the phases of a blocking call on it (waiter::wait_for), counted */
	void poll_now() noexcept override { polls.fetch_add(1, std::memory_order_relaxed); }
	int arm_now() noexcept override
	{
		arms.fetch_add(1, std::memory_order_relaxed);
		return 0;
	}

	std::atomic<int> entries{0};
	std::atomic<uint64_t> value{0};
	std::atomic<uint64_t> generation{0};
	std::atomic<int> trywaits{0};
	std::atomic<long> readies{0}; /* ready() calls: what a scan would show */
	std::atomic<long> polls{0};   /* poll_now() calls: peek phases */
	std::atomic<long> arms{0};    /* arm_now() calls: trywait phases */
	bool notifying = true;

private:
	static int control(struct fid *f, int command, void *arg) noexcept
	{
		auto *self = reinterpret_cast<holder *>(f)->self;
		return self->answer_control(command, arg);
	}
	/* fid first, then a pointer back (the fid_box shape) */
	struct holder {
		struct fid fid;
		fake_object *self;
	};
	holder h_ = {};
	struct fi_ops ops_ = {};
};

/* An eventfd standing in for a completion channel: write() is the hardware event; drain reads
 * it and queues one entry per event on the object it names (O(1) readiness). */
struct fake_channel {
	vwait::util::fd efd = vwait::util::fd::eventfd_nonblock();
	fake_object *target = nullptr;
	std::atomic<int> drains{0};

	void fire(uint64_t n = 1)
	{
		ssize_t r = ::write(efd.get(), &n, sizeof(n));
		(void)r;
	}
	static void drain(void *arg) noexcept
	{
		auto *ch = static_cast<fake_channel *>(arg);
		uint64_t v = 0;
		if (::read(ch->efd.get(), &v, sizeof(v)) == sizeof(v) && v) {
			ch->drains.fetch_add(1);
			ch->target->write(static_cast<int>(v));
		}
	}
};

/* How late a thread may run on a loaded host, for the upper bounds on wall time of the tests
 * that share this header: such a bound catches a hang or a wakeup that only a later timer
 * delivers, never a slow host, so it is several seconds; the return codes tell a wakeup from a
 * timeout, and lower bounds (never early) stay exact. */
constexpr long late_ms = 5000;
constexpr double late_s = late_ms / 1000.0;

/* The upper bound on the wall time of a step that should take expected_ms (a timeout's length,
 * or 0 for a wakeup that another thread's event causes): ten times that and at least late_ms.
 * On a 2-CPU host running the three test builds beside two busy loops, a bare poll() loop with
 * no vwait code in it returned up to 3 s after its descriptor became ready: a floor of 1 s
 * fails there for nothing. A lost wakeup is caught all the same: by the return code (a
 * timeout), by the waiter's counts, or by a wait that never ends. */
constexpr long bound_ms(long expected_ms)
{
	return expected_ms * 10 > late_ms ? expected_ms * 10 : late_ms;
}

/* When an event was raised in another thread (a signal, a write, an add): the call it ends
 * must return after it (not early) and within bound_ms(0) of it (woken, not lost). Measured
 * from the event, not from the call's start, so that a trigger thread that a loaded host runs
 * late does not count against the waiter. */
class event_time
{
public:
	void mark() noexcept { ns_.store(now_ns()); }
	bool marked() const noexcept { return ns_.load() != 0; }
	/* ms from the mark to now; -1 before any mark */
	long ms_since_mark() const noexcept
	{
		const long long t = ns_.load();
		return t ? static_cast<long>((now_ns() - t) / 1000000) : -1;
	}

private:
	static long long now_ns() noexcept
	{
		return static_cast<long long>(
		    std::chrono::duration_cast<std::chrono::nanoseconds>(
		        std::chrono::steady_clock::now().time_since_epoch())
		        .count());
	}
	std::atomic<long long> ns_{0};
};

/* Lets calls made in other threads reach their sleep before the test raises what should end
 * them: returns once n more threads sleep on w than when c0 was taken (the waiter counts each
 * sleep, and each end of one as a wakeup or a timeout, so their difference is how many sleep
 * now). FI_WAIT_YIELD waits yield instead of sleeping: 50 ms then. Nothing is asserted on it:
 * what the test checks holds whether the calls slept yet or not; the wait only makes the
 * sleeping case the usual one without a fixed delay. It gives up after late_ms, for a call
 * that found its work without sleeping. */
inline void let_it_sleep(const vwait::util::waiter *w, const vwait::util::wake_counts &c0,
                         uint64_t n = 1)
{
	using steady = std::chrono::steady_clock;
	const bool yields = w->kind() == FI_WAIT_YIELD;
	const auto end = steady::now() + std::chrono::milliseconds(yields ? 50 : late_ms);
	while (steady::now() < end) {
		const vwait::util::wake_counts c = w->counts().since(c0);
		if (!yields && c.sleeps >= n + c.wakeups + c.timeouts)
			return;
		std::this_thread::sleep_for(std::chrono::microseconds(100));
	}
}

/* Ends a loop that has stopped making progress: ok(count) is false once count has not moved
 * for idle. The loop's total time is the host's and is not bounded. */
class progress_bound
{
public:
	explicit progress_bound(std::chrono::milliseconds idle) : idle_(idle) {}
	bool ok(long count)
	{
		auto now = std::chrono::steady_clock::now();
		if (count != last_) {
			last_ = count;
			since_ = now;
		}
		return now - since_ < idle_;
	}

private:
	std::chrono::milliseconds idle_;
	long last_ = -1;
	std::chrono::steady_clock::time_point since_ = std::chrono::steady_clock::now();
};

inline double seconds_since(std::chrono::steady_clock::time_point t0)
{
	return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

inline bool contains(const std::string &s, const char *what)
{
	return s.find(what) != std::string::npos;
}

inline long ms_since(std::chrono::steady_clock::time_point t0)
{
	return static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(
	                             std::chrono::steady_clock::now() - t0)
	                             .count());
}

/* Puts a value outside its enum into an attr field, as a buggy application would (without
 * an out-of-range enum conversion in the test itself). */
template <typename E>
void set_raw(E &field, int v)
{
	static_assert(sizeof(E) == sizeof(int), "an enum of int size");
	std::memcpy(&field, &v, sizeof(v));
}

/* Runs fn with stderr captured: it must return want and write exactly one warning line, which
 * names the bad argument (needle). */
template <typename F>
void expect_warning(F &&fn, long want, const char *needle)
{
	stderr_capture cap;
	cap.start();
	long ret = static_cast<long>(fn());
	std::string log = cap.stop();
	long lines = static_cast<long>(std::count(log.begin(), log.end(), '\n'));
	if (ret != want || lines != 1 || log.find(needle) == std::string::npos)
		fail_msg("expected %ld and one warning naming \"%s\"; got %ld and %ld lines:\n%s",
		         want, needle, ret, lines, log.c_str());
}

/* The cmocka fixture of the cq / cntr / eq tests (cmocka_unit_test_setup_teardown(fn, setup,
 * teardown)), with the helpers above, for `using namespace vwait_test::fixture;`: what a test
 * owns lives in its state, so that teardown joins the threads and closes the objects even
 * after a failed assert. */
namespace fixture
{

using vwait_test::bound_ms;
using vwait_test::event_time;
using vwait_test::expect_warning;
using vwait_test::late_ms;
using vwait_test::let_it_sleep;
using vwait_test::ms_since;
using vwait_test::set_raw;
using vwait_test::test_prov;

struct state {
	struct fid_cq *cq = nullptr;
	struct fid_cq *cq2 = nullptr;
	struct fid_cntr *cntr = nullptr;
	struct fid_cntr *other = nullptr;
	struct fid_eq *eq = nullptr;
	struct fid_wait *set = nullptr;
	struct fid_poll *pollset = nullptr;
	std::vector<struct fid_cq *> cqs; /* more CQs (members of set), closed before it */
	std::vector<std::thread> threads;
};

inline int setup(void **st)
{
	*st = new state;
	return 0;
}

/* Joins the threads, then closes the poll set before its members and the wait set after
 * them. */
inline int teardown(void **st)
{
	auto *s = static_cast<state *>(*st);
	for (auto &t : s->threads)
		if (t.joinable())
			t.join();
	for (struct fid_cq *cq : s->cqs)
		fi_close(&cq->fid);
	for (struct fid *f :
	     {s->pollset ? &s->pollset->fid : nullptr, s->cq ? &s->cq->fid : nullptr,
	      s->cq2 ? &s->cq2->fid : nullptr, s->cntr ? &s->cntr->fid : nullptr,
	      s->other ? &s->other->fid : nullptr, s->eq ? &s->eq->fid : nullptr,
	      s->set ? &s->set->fid : nullptr})
		if (f)
			fi_close(f);
	delete s;
	return 0;
}

inline state &st_of(void **st)
{
	return *static_cast<state *>(*st);
}

} // namespace fixture

} // namespace vwait_test

#endif
