/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* util::sw_cntr, the software counter: values and error values, fi_cntr_wait (threshold,
 * -FI_ETIMEDOUT, -FI_EAVAIL), several waiters at different thresholds, every wait object
 * standalone and in a wait set, poll sets, bad input, many threads adding. */
#include "vwait/fi_deprecated.h"
#include "vwait/util/cntr.h"
#include "vwait/util/poll.h"
#include "vwait/util/trywait.h"
#include "vwait/util/wait.h"

#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>

#include "test_util_common.h"
#include "vwait_cmocka.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace
{

using namespace vwait;
using steady = std::chrono::steady_clock;

using namespace vwait_test::fixture;

struct fid_cntr *open_cntr(state &s, enum fi_wait_obj w, struct fid_cntr **where = nullptr)
{
	struct fi_cntr_attr a = {};
	a.events = FI_CNTR_EVENTS_COMP;
	a.wait_obj = w;
	if (w == FI_WAIT_SET) {
		if (!s.set) {
			struct fi_wait_attr wa = {};
			wa.wait_obj = FI_WAIT_FD;
			assert_int_equal(util::wait_open(&test_prov, &wa, &s.set), 0);
		}
		a.wait_set = s.set;
	}
	struct fid_cntr **out = where ? where : &s.cntr;
	assert_int_equal(util::cntr_open(&test_prov, &a, out, &s), 0);
	assert_non_null(util::object_of<util::sw_cntr>(&(*out)->fid));
	return *out;
}

void close_all(state &s)
{
	for (auto &t : s.threads)
		t.join();
	s.threads.clear();
	if (s.cntr)
		assert_int_equal(fi_close(&s.cntr->fid), 0);
	s.cntr = nullptr;
	if (s.other)
		assert_int_equal(fi_close(&s.other->fid), 0);
	s.other = nullptr;
	if (s.set)
		assert_int_equal(fi_close(&s.set->fid), 0);
	s.set = nullptr;
}

void values(void **st)
{
	state &s = st_of(st);
	struct fid_cntr *c = open_cntr(s, FI_WAIT_NONE);
	assert_int_equal(fi_cntr_read(c), 0);
	assert_int_equal(fi_cntr_readerr(c), 0);
	assert_int_equal(fi_cntr_add(c, 5), 0);
	assert_int_equal(fi_cntr_add(c, 7), 0);
	assert_int_equal(fi_cntr_read(c), 12);
	assert_int_equal(fi_cntr_adderr(c, 2), 0);
	assert_int_equal(fi_cntr_readerr(c), 2);
	assert_int_equal(fi_cntr_set(c, 100), 0);
	assert_int_equal(fi_cntr_read(c), 100);
	assert_int_equal(fi_cntr_seterr(c, 0), 0);
	assert_int_equal(fi_cntr_readerr(c), 0);
	assert_int_equal(fi_cntr_read(c), 100);
	uint64_t flags = 0;
	uint64_t in = FI_TRANSMIT;
	assert_int_equal(fi_control(&c->fid, FI_SETOPSFLAG, &in), 0);
	assert_int_equal(fi_control(&c->fid, FI_GETOPSFLAG, &flags), 0);
	assert_int_equal(flags, FI_TRANSMIT);
}

void bad_input(void **st)
{
	state &s = st_of(st);
	struct fid_cntr *c = nullptr;
	assert_int_equal(util::cntr_open(&test_prov, nullptr, &c, nullptr), -FI_EINVAL);
	struct fi_cntr_attr a = {};
	assert_int_equal(util::cntr_open(&test_prov, &a, nullptr, nullptr), -FI_EINVAL);
	set_raw(a.events, 3);
	assert_int_equal(util::cntr_open(&test_prov, &a, &c, nullptr), -FI_ENOSYS);
	a = {};
	a.flags = 1;
	assert_int_equal(util::cntr_open(&test_prov, &a, &c, nullptr), -FI_EINVAL);
	a = {};
	set_raw(a.wait_obj, 42);
	assert_int_equal(util::cntr_open(&test_prov, &a, &c, nullptr), -FI_EINVAL);
	a = {};
	a.wait_obj = FI_WAIT_SET;
	assert_int_equal(util::cntr_open(&test_prov, &a, &c, nullptr), -FI_EINVAL);
	assert_null(c);

	c = open_cntr(s, FI_WAIT_NONE);
	assert_int_equal(fi_cntr_wait(c, 1, 0), -FI_EINVAL);
	assert_int_equal(fi_control(&c->fid, FI_GETOPSFLAG, nullptr), -FI_EINVAL);
	assert_int_equal(fi_control(&c->fid, 4242, nullptr), -FI_ENOSYS);
	enum fi_wait_obj obj = FI_WAIT_FD;
	assert_int_equal(fi_control(&c->fid, FI_GETWAITOBJ, &obj), -FI_ENODATA);
	util::sw_cntr *o = util::object_of<util::sw_cntr>(&c->fid);
	o->hold();
	assert_int_equal(fi_close(&c->fid), -FI_EBUSY);
	o->unhold();
}

const util::waiter *waiter_of(struct fid_cntr *c)
{
	return util::object_of<util::sw_cntr>(&c->fid)->wait_object();
}

/* For each wait object: reached -> 0 at once, a 200 ms timeout -> -FI_ETIMEDOUT at the
 * deadline (never before), an add from another thread ends an infinite wait, an error ends it
 * with -FI_EAVAIL, each after the event and within bound_ms(0) of it. */
void each_wait_object(void **st)
{
	state &s = st_of(st);
	for (enum fi_wait_obj w : {FI_WAIT_UNSPEC, FI_WAIT_FD, FI_WAIT_POLLFD, FI_WAIT_MUTEX_COND,
	                           FI_WAIT_YIELD, FI_WAIT_SET}) {
		struct fid_cntr *c = open_cntr(s, w);
		assert_int_equal(fi_cntr_add(c, 3), 0);
		assert_int_equal(fi_cntr_wait(c, 3, 0), 0);

		auto t0 = steady::now();
		assert_int_equal(fi_cntr_wait(c, 4, 200), -FI_ETIMEDOUT);
		long ms = ms_since(t0);
		print_message("wait_obj %d: cntr_wait(200 ms) timed out after %ld ms\n", w, ms);
		assert_true(ms >= 200 && ms < bound_ms(200));

		const util::waiter *waiter = waiter_of(c);
		event_time added;
		util::wake_counts c0 = waiter->counts();
		s.threads.emplace_back([c, waiter, c0, &added] {
			let_it_sleep(waiter, c0);
			added.mark();
			fi_cntr_add(c, 1);
		});
		assert_int_equal(fi_cntr_wait(c, 4, -1), 0);
		ms = added.ms_since_mark();
		assert_true(ms >= 0 && ms < bound_ms(0));
		s.threads.back().join();
		s.threads.clear();

		event_time erred;
		c0 = waiter->counts();
		s.threads.emplace_back([c, waiter, c0, &erred] {
			let_it_sleep(waiter, c0);
			erred.mark();
			fi_cntr_adderr(c, 1);
		});
		assert_int_equal(fi_cntr_wait(c, 100, -1), -FI_EAVAIL);
		ms = erred.ms_since_mark();
		assert_true(ms >= 0 && ms < bound_ms(0));
		assert_int_equal(fi_cntr_readerr(c), 1);
		close_all(s);
	}
}

/* The extension points as the verbs counter uses them: fi_cntr_wait calls progress(), and
 * before it blocks arm(), which may find a change that came before the arming (-FI_EAGAIN:
 * the wait re-checks instead of blocking) or fail (the wait returns the error). */
class armed_cntr final : public util::sw_cntr
{
public:
	using util::sw_cntr::sw_cntr;
	std::atomic<int> arms{0};
	std::atomic<int> progresses{0};
	std::atomic<int> fail{0};

protected:
	void progress() noexcept override { progresses++; }
	int arm() noexcept override
	{
		if (fail)
			return fail;
		if (arms++ == 0) {
			add(1); /* what the last poll after arming finds */
			return -FI_EAGAIN;
		}
		return 0;
	}
};

void arm_before_block(void **st)
{
	state &s = st_of(st);
	struct fi_cntr_attr a = {};
	a.events = FI_CNTR_EVENTS_COMP;
	a.wait_obj = FI_WAIT_FD;
	auto obj = std::make_unique<armed_cntr>(&test_prov, a);
	armed_cntr *k = obj.get();
	assert_int_equal(util::cntr_install(std::move(obj), &s.cntr, &s), 0);
	/* deadlines past the bound: what the arming found (or failed with) ends each call,
	 * within bound_ms(0), never the deadline */
	auto t0 = steady::now();
	assert_int_equal(fi_cntr_wait(s.cntr, 1, 2 * bound_ms(0)), 0);
	assert_true(ms_since(t0) < bound_ms(0));
	assert_int_equal(k->arms.load(), 1);
	assert_true(k->progresses.load() >= 1);
	t0 = steady::now();
	assert_int_equal(fi_cntr_wait(s.cntr, 2, 50), -FI_ETIMEDOUT);
	const long ms = ms_since(t0);
	assert_true(ms >= 50 && ms < bound_ms(50));
	assert_true(k->arms.load() >= 2);
	k->fail = -FI_EIO;
	t0 = steady::now();
	assert_int_equal(fi_cntr_wait(s.cntr, 2, 2 * bound_ms(0)), -FI_EIO);
	assert_true(ms_since(t0) < bound_ms(0));
	k->fail = 0;
}

/* The deadline is kept: changes that never reach the threshold (spurious wakeups for the
 * waiter, an add each time it falls asleep) neither end nor extend it; -FI_ETIMEDOUT at the
 * deadline, never before, and the waiter counts the wakeups it slept through. */
void wait_deadline_kept(void **st)
{
	state &s = st_of(st);
	struct fid_cntr *c = open_cntr(s, FI_WAIT_FD);
	const util::waiter *w = waiter_of(c);
	/* 300 ms: room for several wakes of the sleeping call; not early is exact at any length */
	constexpr long deadline = 300;
	/* a waker that never ran while the call slept proves nothing: try again (three runs of
	 * 300 ms in which a runnable thread never gets a CPU is a stopped host, not a slow one) */
	uint64_t woken = 0;
	for (int attempt = 0; attempt < 3 && woken == 0; attempt++) {
		std::atomic<bool> stop{false};
		const util::wake_counts c0 = w->counts();
		s.threads.emplace_back([c, w, &stop, seen = c0.sleeps]() mutable {
			while (!stop.load()) {
				const uint64_t now = w->counts().sleeps;
				if (now > seen) {
					seen = now;
					fi_cntr_add(c, 1);
				}
				std::this_thread::sleep_for(std::chrono::milliseconds(5));
			}
		});
		auto t0 = steady::now();
		int ret = fi_cntr_wait(c, 1000000, deadline);
		long ms = ms_since(t0);
		stop = true;
		for (auto &t : s.threads) /* it reads stop: join before this frame ends */
			t.join();
		s.threads.clear();
		const util::wake_counts d = w->counts().since(c0);
		woken = d.wakeups - d.calib;
		print_message("cntr_wait(%ld ms) with an add at each sleep: %d after %ld ms; %llu "
		              "sleeps, %llu wakeups\n",
		              deadline, ret, ms, static_cast<unsigned long long>(d.sleeps),
		              static_cast<unsigned long long>(woken));
		assert_int_equal(ret, -FI_ETIMEDOUT);
		assert_true(ms >= deadline && ms < bound_ms(deadline));
	}
	assert_true(woken > 0);
	assert_true(fi_cntr_read(c) >= woken);
	assert_int_equal(fi_cntr_readerr(c), 0); /* unchanged by a timeout */
}

/* Three waiters at thresholds 100, 200, 300 while a thread adds 1 at a time: each returns 0
 * once its threshold is reached, none is lost. */
void several_waiters(void **st)
{
	state &s = st_of(st);
	for (enum fi_wait_obj w : {FI_WAIT_FD, FI_WAIT_MUTEX_COND, FI_WAIT_YIELD}) {
		struct fid_cntr *c = open_cntr(s, w);
		std::atomic<int> ok{0};
		std::atomic<uint64_t> seen_at[3] = {};
		for (int i = 0; i < 3; i++)
			s.threads.emplace_back([c, i, &ok, &seen_at] {
				uint64_t t = 100 * static_cast<uint64_t>(i + 1);
				/* 10 s for 300 adds of about 10 ms in all: a deadline only a
				 * lost wakeup meets */
				if (fi_cntr_wait(c, t, 10000) == 0)
					ok++;
				seen_at[i] = fi_cntr_read(c);
			});
		std::this_thread::sleep_for(std::chrono::milliseconds(50));
		for (int i = 0; i < 300; i++) {
			fi_cntr_add(c, 1);
			if (i % 10 == 0)
				std::this_thread::sleep_for(std::chrono::microseconds(200));
		}
		for (auto &t : s.threads)
			t.join();
		s.threads.clear();
		assert_int_equal(ok.load(), 3);
		for (int i = 0; i < 3; i++)
			assert_true(seen_at[i].load() >= 100 * static_cast<uint64_t>(i + 1));
		close_all(s);
	}
}

/* 4 threads add 25000 times each while 2 threads wait for the total: nothing is lost. */
void many_threads(void **st)
{
	state &s = st_of(st);
	struct fid_cntr *c = open_cntr(s, FI_WAIT_FD);
	constexpr int adders = 4, per_adder = 25000;
	std::atomic<int> ok{0};
	auto t0 = steady::now();
	for (int i = 0; i < 2; i++)
		s.threads.emplace_back([c, &ok] {
			int ret;
			/* an error change ends a wait with -FI_EAVAIL: wait again; 20 s for
			 * 10^5 adds of about 20 ms in all: only a lost wakeup meets it */
			do
				ret = fi_cntr_wait(c, adders * per_adder, 20000);
			while (ret == -FI_EAVAIL);
			if (ret == 0)
				ok++;
		});
	for (int i = 0; i < adders; i++)
		s.threads.emplace_back([c] {
			for (int k = 0; k < per_adder; k++) {
				fi_cntr_add(c, 1);
				if (k % 1000 == 0)
					fi_cntr_adderr(c, 1);
			}
		});
	for (auto &t : s.threads)
		t.join();
	s.threads.clear();
	print_message("4 x 25000 adds with 2 waiters: %ld ms\n", ms_since(t0));
	assert_int_equal(fi_cntr_read(c), adders * per_adder);
	assert_int_equal(fi_cntr_readerr(c), adders * (per_adder / 1000));
	assert_int_equal(ok.load(), 2);
}

void getwait(void **st)
{
	state &s = st_of(st);
	struct fid_cntr *c = open_cntr(s, FI_WAIT_FD);
	int fd = -1;
	assert_int_equal(fi_control(&c->fid, FI_GETWAIT, &fd), 0);
	assert_true(fd >= 0);
	enum fi_wait_obj obj;
	assert_int_equal(fi_control(&c->fid, FI_GETWAITOBJ, &obj), 0);
	assert_int_equal(obj, FI_WAIT_FD);
	struct fid *fids[1] = {&c->fid};
	assert_int_equal(util::trywait(&test_prov, fids, 1), 0);
	fi_cntr_add(c, 1);
	assert_int_equal(util::trywait(&test_prov, fids, 1), -FI_EAGAIN);
	close_all(s);

	c = open_cntr(s, FI_WAIT_MUTEX_COND);
	struct fi_mutex_cond mc = {};
	assert_int_equal(fi_control(&c->fid, FI_GETWAIT, &mc), 0);
	assert_non_null(mc.cond);
	close_all(s);
}

/* Counters in a wait set: fi_wait returns when one changes. */
void wait_set(void **st)
{
	state &s = st_of(st);
	struct fid_cntr *a = open_cntr(s, FI_WAIT_SET);
	struct fid_cntr *b = open_cntr(s, FI_WAIT_SET, &s.other);
	struct fid *fids[3] = {&a->fid, &b->fid, &s.set->fid};
	assert_int_equal(util::trywait(&test_prov, fids, 3), 0);
	util::waiter *w = nullptr;
	assert_int_equal(util::get_waiter(&s.set->fid, &w), 0);
	event_time added;
	const util::wake_counts c0 = w->counts();
	s.threads.emplace_back([b, w, c0, &added] {
		let_it_sleep(w, c0);
		added.mark();
		fi_cntr_add(b, 2);
	});
	/* a deadline past the bound: 0 within the bound of the add, it was the add */
	assert_int_equal(fi_sets::wait(s.set, 2 * bound_ms(0)), 0);
	const long ms = added.ms_since_mark();
	assert_true(ms >= 0 && ms < bound_ms(0));
	assert_int_equal(fi_cntr_read(b), 2);
	/* the counter's own wait, through the set */
	assert_int_equal(fi_cntr_wait(b, 2, 100), 0);
	close_all(s);
}

/* A poll set reports a counter whose value or error value changed since the last fi_poll. */
void poll_set(void **st)
{
	state &s = st_of(st);
	struct fid_cntr *a = open_cntr(s, FI_WAIT_NONE);
	struct fid_cntr *b = open_cntr(s, FI_WAIT_NONE, &s.other);
	assert_int_equal(util::poll_open(&test_prov, nullptr, &s.pollset), 0);
	assert_int_equal(fi_sets::poll_add(s.pollset, &a->fid, 0), 0);
	assert_int_equal(fi_sets::poll_add(s.pollset, &b->fid, 0), 0);
	void *ctx[4] = {};
	assert_int_equal(fi_sets::poll(s.pollset, ctx, 4), 0);
	fi_cntr_add(a, 1);
	assert_int_equal(fi_sets::poll(s.pollset, ctx, 4), 1);
	assert_ptr_equal(ctx[0], &s);
	assert_int_equal(fi_sets::poll(s.pollset, ctx, 4), 0); /* no change since */
	fi_cntr_adderr(b, 1);
	assert_int_equal(fi_sets::poll(s.pollset, ctx, 4), 1);
	fi_cntr_set(a, 1); /* a set is a change too */
	fi_cntr_add(b, 1);
	assert_int_equal(fi_sets::poll(s.pollset, ctx, 4), 2);
	assert_int_equal(fi_close(&a->fid), -FI_EBUSY);
	assert_int_equal(fi_sets::poll_del(s.pollset, &a->fid, 0), 0);
	assert_int_equal(fi_sets::poll_del(s.pollset, &b->fid, 0), 0);
}

void bad_input_warnings(void **st)
{
	state &s = st_of(st);
	struct fid_cntr *c = nullptr;
	struct fi_cntr_attr a = {};
	expect_warning([&] { return util::cntr_open(&test_prov, nullptr, &c, nullptr); },
	               -FI_EINVAL, "attr is NULL");
	set_raw(a.events, 3);
	expect_warning([&] { return util::cntr_open(&test_prov, &a, &c, nullptr); }, -FI_ENOSYS,
	               "attr->events 3");
	a = {};
	a.flags = 2;
	expect_warning([&] { return util::cntr_open(&test_prov, &a, &c, nullptr); }, -FI_EINVAL,
	               "attr->flags 0x2");
	a = {};
	set_raw(a.wait_obj, 42);
	expect_warning([&] { return util::cntr_open(&test_prov, &a, &c, nullptr); }, -FI_EINVAL,
	               "attr->wait_obj 42");
	assert_null(c);
	c = open_cntr(s, FI_WAIT_NONE);
	expect_warning([&] { return fi_cntr_wait(c, 1, 0); }, -FI_EINVAL, "FI_WAIT_NONE");
	expect_warning([&] { return fi_control(&c->fid, FI_SETOPSFLAG, nullptr); }, -FI_EINVAL,
	               "FI_SETOPSFLAG");
	expect_warning([&] { return fi_control(&c->fid, 4242, nullptr); }, -FI_ENOSYS, "4242");
}

} // namespace

int main()
{
	vwait_test::init_logging();
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(values, setup, teardown),
	    cmocka_unit_test_setup_teardown(bad_input, setup, teardown),
	    cmocka_unit_test_setup_teardown(bad_input_warnings, setup, teardown),
	    cmocka_unit_test_setup_teardown(each_wait_object, setup, teardown),
	    cmocka_unit_test_setup_teardown(arm_before_block, setup, teardown),
	    cmocka_unit_test_setup_teardown(wait_deadline_kept, setup, teardown),
	    cmocka_unit_test_setup_teardown(several_waiters, setup, teardown),
	    cmocka_unit_test_setup_teardown(many_threads, setup, teardown),
	    cmocka_unit_test_setup_teardown(getwait, setup, teardown),
	    cmocka_unit_test_setup_teardown(wait_set, setup, teardown),
	    cmocka_unit_test_setup_teardown(poll_set, setup, teardown),
	};
	return cmocka_run_group_tests(tests, nullptr, nullptr);
}
