/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* util::poll_set: fi_poll_open / fi_poll_add / fi_poll_del / fi_poll / fi_close through the
 * fid_poll it hands out: bad inputs, CQ and counter semantics, count bounds and fairness,
 * members closing, concurrent pollers, and the cost with 1, 64 and 1024 members of which one
 * is active (a ready list, not a scan). */
#include "test_util_common.h"

#include "vwait/fi_deprecated.h"
#include "vwait/util/poll.h"

#include <rdma/fi_domain.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace vwait_test;

namespace
{

struct state {
	struct fid_poll *ps = nullptr;
	std::vector<std::unique_ptr<fake_object>> objs;
	std::vector<std::thread> threads;
};

int setup(void **st)
{
	auto *s = new state();
	*st = s;
	return vwait::util::poll_open(&test_prov, nullptr, &s->ps);
}

int teardown(void **st)
{
	auto *s = static_cast<state *>(*st);
	for (auto &t : s->threads)
		t.join();
	s->objs.clear(); /* each leaves the poll set as it closes */
	int ret = s->ps ? fi_close(&s->ps->fid) : 0;
	delete s;
	return ret;
}

state &S(void **st)
{
	return *static_cast<state *>(*st);
}

fake_object *make(state &s, size_t fclass, intptr_t ctx)
{
	s.objs.push_back(std::make_unique<fake_object>(fclass, reinterpret_cast<void *>(ctx)));
	return s.objs.back().get();
}

void test_open_bad(void **)
{
	struct fid_poll *ps = nullptr;
	stderr_capture cap;
	cap.start();
	int ret = vwait::util::poll_open(&test_prov, nullptr, nullptr);
	std::string log = cap.stop();
	assert_int_equal(ret, -FI_EINVAL);
	assert_true(contains(log, "pollset is NULL"));

	struct fi_poll_attr attr = {0x4};
	cap.start();
	ret = vwait::util::poll_open(&test_prov, &attr, &ps);
	log = cap.stop();
	assert_int_equal(ret, -FI_EINVAL);
	assert_true(contains(log, "flags 0x4"));
	assert_null(ps);

	attr.flags = 0;
	assert_int_equal(vwait::util::poll_open(&test_prov, &attr, &ps), 0);
	assert_int_equal(fi_close(&ps->fid), 0);
}

void test_add_del_bad(void **st)
{
	state &s = S(st);
	stderr_capture cap;

	fake_object *eq = make(s, FI_CLASS_EQ, 1);
	cap.start();
	int ret = fi_sets::poll_add(s.ps, eq->fid(), 0);
	std::string log = cap.stop();
	assert_int_equal(ret, -FI_EINVAL);
	assert_true(contains(log, "is a EQ"));

	cap.start();
	ret = fi_sets::poll_add(s.ps, nullptr, 0);
	log = cap.stop();
	assert_int_equal(ret, -FI_EINVAL);
	assert_true(contains(log, "event_fid is NULL"));

	/* a CQ of some other provider: its control slot does not know ctl_get_waitable */
	struct fi_ops other_ops = {};
	other_ops.size = sizeof(other_ops);
	other_ops.control = [](struct fid *, int, void *) noexcept { return -FI_ENOSYS; };
	struct fid foreign = {FI_CLASS_CQ, nullptr, &other_ops};
	cap.start();
	ret = fi_sets::poll_add(s.ps, &foreign, 0);
	log = cap.stop();
	assert_int_equal(ret, -FI_EINVAL);
	assert_true(contains(log, "not a vwait CQ"));

	fake_object *cq = make(s, FI_CLASS_CQ, 2);
	cap.start();
	ret = fi_sets::poll_del(s.ps, cq->fid(), 0);
	log = cap.stop();
	assert_int_equal(ret, -FI_EINVAL);
	assert_true(contains(log, "not a member"));

	assert_int_equal(fi_sets::poll_add(s.ps, cq->fid(), 0), 0);
	cap.start();
	ret = fi_sets::poll_add(s.ps, cq->fid(), 0);
	log = cap.stop();
	assert_int_equal(ret, -FI_EALREADY);
	assert_true(contains(log, "already a member"));

	cap.start();
	ret = fi_close(&s.ps->fid);
	log = cap.stop();
	assert_int_equal(ret, -FI_EBUSY);
	assert_true(contains(log, "still added"));

	void *ctx[2];
	cap.start();
	ret = fi_sets::poll(s.ps, nullptr, 2);
	log = cap.stop();
	assert_int_equal(ret, -FI_EINVAL);
	assert_true(contains(log, "count"));
	assert_int_equal(fi_sets::poll(s.ps, ctx, -1), -FI_EINVAL);
	assert_int_equal(fi_sets::poll(s.ps, ctx, 0), 0);

	assert_true(cq->in_poll_set());
	assert_int_equal(fi_sets::poll_del(s.ps, cq->fid(), 0), 0);
	assert_false(cq->in_poll_set());
	assert_int_equal(fi_close(&s.ps->fid), 0);
	s.ps = nullptr;
}

void test_cq_semantics(void **st)
{
	state &s = S(st);
	fake_object *cq = make(s, FI_CLASS_CQ, 0x10);
	assert_int_equal(fi_sets::poll_add(s.ps, cq->fid(), 0), 0);
	void *ctx[4] = {};
	assert_int_equal(fi_sets::poll(s.ps, ctx, 4), 0);
	cq->write(2);
	assert_int_equal(fi_sets::poll(s.ps, ctx, 4), 1);
	assert_ptr_equal(ctx[0], reinterpret_cast<void *>(0x10));
	/* not read empty: reported again */
	assert_int_equal(fi_sets::poll(s.ps, ctx, 4), 1);
	assert_true(cq->read());
	assert_int_equal(fi_sets::poll(s.ps, ctx, 4), 1);
	assert_true(cq->read());
	assert_int_equal(fi_sets::poll(s.ps, ctx, 4), 0);
	assert_int_equal(fi_sets::poll(s.ps, ctx, 4), 0);
	/* entries present before fi_poll_add are reported */
	fake_object *cq2 = make(s, FI_CLASS_CQ, 0x20);
	cq2->write();
	assert_int_equal(fi_sets::poll_add(s.ps, cq2->fid(), 0), 0);
	assert_int_equal(fi_sets::poll(s.ps, ctx, 4), 1);
	assert_ptr_equal(ctx[0], reinterpret_cast<void *>(0x20));
	assert_true(cq2->read());
}

void test_counter_semantics(void **st)
{
	state &s = S(st);
	fake_object *cntr = make(s, FI_CLASS_CNTR, 0x30);
	cntr->add(5); /* before fi_poll_add: not a change since the member joined */
	assert_int_equal(fi_sets::poll_add(s.ps, cntr->fid(), 0), 0);
	void *ctx[4] = {};
	assert_int_equal(fi_sets::poll(s.ps, ctx, 4), 0);
	cntr->add();
	assert_int_equal(fi_sets::poll(s.ps, ctx, 4), 1);
	assert_ptr_equal(ctx[0], reinterpret_cast<void *>(0x30));
	/* reported once per change */
	assert_int_equal(fi_sets::poll(s.ps, ctx, 4), 0);
	cntr->add();
	cntr->add();
	assert_int_equal(fi_sets::poll(s.ps, ctx, 4), 1);
	assert_int_equal(fi_sets::poll(s.ps, ctx, 4), 0);
}

/* count bounds the array; what does not fit is reported by the next calls, nobody starves */
void test_count_and_fairness(void **st)
{
	state &s = S(st);
	std::vector<fake_object *> cqs;
	for (intptr_t i = 1; i <= 5; ++i) {
		cqs.push_back(make(s, FI_CLASS_CQ, i));
		assert_int_equal(fi_sets::poll_add(s.ps, cqs.back()->fid(), 0), 0);
		cqs.back()->write(100); /* never read empty in this test */
	}
	std::vector<int> seen(6, 0);
	void *ctx[2];
	for (int round = 0; round < 10; ++round) {
		int n = fi_sets::poll(s.ps, ctx, 2);
		assert_int_equal(n, 2);
		for (int i = 0; i < n; ++i)
			seen[static_cast<size_t>(reinterpret_cast<intptr_t>(ctx[i]))]++;
	}
	for (int i = 1; i <= 5; ++i) {
		print_message("member %d reported %d times in 10 fi_poll(count 2)\n", i,
		              seen[static_cast<size_t>(i)]);
		assert_int_equal(seen[static_cast<size_t>(i)], 4);
	}
}

/* A member that closes leaves the poll set (close_wait), the set can then close. */
void test_member_close(void **st)
{
	state &s = S(st);
	fake_object *cq = make(s, FI_CLASS_CQ, 1);
	fake_object *cntr = make(s, FI_CLASS_CNTR, 2);
	assert_int_equal(cq->open_wait(&test_prov, FI_WAIT_FD, nullptr), 0);
	assert_int_equal(fi_sets::poll_add(s.ps, cq->fid(), 0), 0);
	assert_int_equal(fi_sets::poll_add(s.ps, cntr->fid(), 0), 0);
	cq->write();
	assert_true(cq->in_poll_set());
	cq->close_wait();
	assert_false(cq->in_poll_set());
	void *ctx[4];
	assert_int_equal(fi_sets::poll(s.ps, ctx, 4), 0);
	assert_int_equal(fi_close(&s.ps->fid), -FI_EBUSY);
	s.objs.clear();
	assert_int_equal(fi_close(&s.ps->fid), 0);
	s.ps = nullptr;
}

/* Members that must be polled (not self_notifying) are checked on every fi_poll. */
void test_polled_member(void **st)
{
	state &s = S(st);
	fake_object *cq = make(s, FI_CLASS_CQ, 7);
	cq->notifying = false;
	assert_int_equal(fi_sets::poll_add(s.ps, cq->fid(), 0), 0);
	void *ctx[2];
	assert_int_equal(fi_sets::poll(s.ps, ctx, 2), 0);
	cq->entries = 1; /* "hardware" completion: no notify */
	assert_int_equal(fi_sets::poll(s.ps, ctx, 2), 1);
	assert_ptr_equal(ctx[0], reinterpret_cast<void *>(7));
	assert_true(cq->read());
	assert_int_equal(fi_sets::poll(s.ps, ctx, 2), 0);

	/* several polled members and a short array: they take turns */
	fake_object *more[2] = {make(s, FI_CLASS_CQ, 8), make(s, FI_CLASS_CQ, 9)};
	for (auto *m : more) {
		m->notifying = false;
		assert_int_equal(fi_sets::poll_add(s.ps, m->fid(), 0), 0);
		m->entries = 5;
	}
	cq->entries = 5;
	int seen[10] = {};
	for (int i = 0; i < 6; ++i) {
		assert_int_equal(fi_sets::poll(s.ps, ctx, 1), 1);
		seen[reinterpret_cast<intptr_t>(ctx[0])]++;
	}
	assert_int_equal(seen[7], 2);
	assert_int_equal(seen[8], 2);
	assert_int_equal(seen[9], 2);
}

/* Writers and pollers at once: every entry written is read by a poller that was told about
 * its CQ by fi_poll (nothing is lost, nothing is read twice). */
void test_concurrent(void **st)
{
	state &s = S(st);
	const int ncq = 16, per_writer = 20000, writers = 2;
	std::vector<fake_object *> cqs;
	for (intptr_t i = 0; i < ncq; ++i) {
		cqs.push_back(make(s, FI_CLASS_CQ, i + 1)); /* context: index + 1 */
		assert_int_equal(fi_sets::poll_add(s.ps, cqs.back()->fid(), 0), 0);
	}
	std::atomic<long> got{0};
	const long total = static_cast<long>(writers) * per_writer;
	struct fid_poll *ps = s.ps;
	for (int w = 0; w < writers; ++w)
		s.threads.emplace_back([&, w] {
			for (int i = 0; i < per_writer; ++i)
				cqs[static_cast<size_t>((i * 7 + w) % ncq)]->write();
		});
	auto poller = [&] {
		void *ctx[4];
		/* gives up after 4 * late_ms with no entry read: a read takes microseconds, and a
		 * thread on a loaded host may be kept off its CPU for seconds */
		progress_bound bound(std::chrono::milliseconds(4 * late_ms));
		while (got.load() < total && bound.ok(got.load())) {
			int n = fi_sets::poll(ps, ctx, 4);
			for (int i = 0; i < n; ++i)
				while (
				    cqs[static_cast<size_t>(reinterpret_cast<intptr_t>(ctx[i]) - 1)]
				        ->read())
					got.fetch_add(1);
		}
	};
	std::thread p1(poller), p2(poller);
	p1.join();
	p2.join();
	for (auto &t : s.threads)
		t.join();
	s.threads.clear();
	assert_int_equal(got.load(), total);
	void *ctx[4];
	assert_int_equal(fi_sets::poll(ps, ctx, 4), 0);
}

/* fi_poll with N members of which one is active: how many members it looks at per call
 * (a scan would look at N), asserted; its time per call is printed, not asserted (it is the
 * host's, and the count already tells a ready list from a scan). */
struct poll_cost {
	double ns;
	double looked_at;
};

poll_cost measure_poll(state &s, int members)
{
	std::vector<fake_object *> cqs;
	for (int i = 0; i < members; ++i) {
		cqs.push_back(make(s, FI_CLASS_CQ, i + 1));
		assert_int_equal(fi_sets::poll_add(s.ps, cqs.back()->fid(), 0), 0);
	}
	void *ctx[8];
	while (fi_sets::poll(s.ps, ctx, 8) > 0) /* members start queued: settle */
		;
	fake_object *active = cqs[static_cast<size_t>(members / 2)];
	active->write(1);
	const int iters = 20000;
	for (auto *c : cqs)
		c->readies = 0;
	auto t0 = std::chrono::steady_clock::now();
	for (int i = 0; i < iters; ++i) {
		if (fi_sets::poll(s.ps, ctx, 8) != 1 || ctx[0] != active->poll_context())
			fail_msg("fi_poll did not report the active member");
	}
	double ns = seconds_since(t0) * 1e9 / iters;
	long looked = 0;
	for (auto *c : cqs)
		looked += c->readies.load();
	for (auto *c : cqs)
		assert_int_equal(fi_sets::poll_del(s.ps, c->fid(), 0), 0);
	s.objs.clear();
	return {ns, static_cast<double>(looked) / iters};
}

void test_cost_follows_active(void **st)
{
	state &s = S(st);
	poll_cost c1 = measure_poll(s, 1);
	poll_cost c64 = measure_poll(s, 64);
	poll_cost c1024 = measure_poll(s, 1024);
	print_message("fi_poll, one active member: 1 member %.0f ns (%.2f members looked at per "
	              "call), 64 members %.0f ns (%.2f), 1024 members %.0f ns (%.2f)\n",
	              c1.ns, c1.looked_at, c64.ns, c64.looked_at, c1024.ns, c1024.looked_at);
	/* one member looked at per call, whatever the member count (a scan of 1024 members
	 * would show 1024 here) */
	assert_true(c1.looked_at <= 1.0);
	assert_true(c64.looked_at <= 1.0);
	assert_true(c1024.looked_at <= 1.0);
}

/* Members whose events arrive on a shared fd that nobody but the poll set drains (verbs CQs
 * on a completion channel, waitable::events_from): an eventfd plus the list of members that
 * fired. Such a member is armed when found empty and must be armed before it fires. */
struct shared_channel {
	vwait::util::fd efd = vwait::util::fd::eventfd_nonblock();
	std::mutex mu;
	std::vector<fake_object *> fired;
	std::atomic<int> drains{0};

	void fire(fake_object *o)
	{
		{
			std::lock_guard<std::mutex> lock(mu);
			fired.push_back(o);
		}
		uint64_t one = 1;
		ssize_t r = ::write(efd.get(), &one, sizeof(one));
		(void)r;
	}
	static void drain(void *arg) noexcept
	{
		auto *ch = static_cast<shared_channel *>(arg);
		uint64_t v = 0;
		if (::read(ch->efd.get(), &v, sizeof(v)) != sizeof(v))
			return;
		ch->drains.fetch_add(1);
		std::vector<fake_object *> now;
		{
			std::lock_guard<std::mutex> lock(ch->mu);
			now.swap(ch->fired);
		}
		for (fake_object *o : now)
			o->write(1);
	}
};

class evented_object : public fake_object
{
public:
	evented_object(shared_channel *ch, void *ctx) : fake_object(FI_CLASS_CQ, ctx), ch_(ch)
	{
		notifying = false; /* its own waiter would not hear of it: only the channel tells */
	}
	bool events_from(vwait::util::event_source &out) const noexcept override
	{
		out.fd = ch_->efd.get();
		out.drain = shared_channel::drain;
		out.arg = ch_;
		return true;
	}
	bool poll_ready(uint64_t &) noexcept override
	{
		if (ready())
			return true;
		armed = true;
		arms.fetch_add(1);
		return false;
	}
	std::atomic<bool> armed{false};
	std::atomic<int> arms{0};

private:
	shared_channel *ch_;
};

/* A poll set of 1024 members on one shared channel: each is looked at and armed once, then only
 * the ones whose events the channel brings; the channel's fd is drained by fi_poll itself. */
void test_evented_members(void **st)
{
	state &s = S(st);
	shared_channel ch;
	std::vector<std::unique_ptr<evented_object>> objs;
	for (int i = 0; i < 1024; ++i) {
		objs.push_back(std::make_unique<evented_object>(
		    &ch, reinterpret_cast<void *>(static_cast<intptr_t>(i + 1))));
		assert_int_equal(fi_sets::poll_add(s.ps, objs.back()->fid(), 0), 0);
	}
	void *ctx[8];
	assert_int_equal(fi_sets::poll(s.ps, ctx, 8), 0); /* everyone looked at once, armed */
	long looked = 0;
	for (auto &o : objs) {
		assert_true(o->armed.load());
		assert_int_equal(o->arms.load(), 1);
		looked += o->readies.exchange(0);
	}
	assert_int_equal(looked, 1024);
	for (int i = 0; i < 100; ++i) /* idle: nobody looked at */
		assert_int_equal(fi_sets::poll(s.ps, ctx, 8), 0);
	for (auto &o : objs)
		assert_int_equal(o->readies.load(), 0);

	for (int round = 0; round < 1000; ++round) {
		evented_object *a = objs[static_cast<size_t>(round * 7 % 1024)].get();
		evented_object *b = objs[static_cast<size_t>(round * 13 % 1024 + 1) % 1024].get();
		ch.fire(a);
		if (b != a)
			ch.fire(b);
		int n = fi_sets::poll(s.ps, ctx, 8);
		assert_int_equal(n, b != a ? 2 : 1);
		for (int k = 0; k < n; ++k)
			assert_true(ctx[k] == a->poll_context() || ctx[k] == b->poll_context());
		assert_true(a->read());
		if (b != a)
			assert_true(b->read());
		/* reported members stay queued until found empty (and armed again) */
		assert_int_equal(fi_sets::poll(s.ps, ctx, 8), 0);
	}
	looked = 0;
	for (auto &o : objs)
		looked += o->readies.load();
	print_message("evented members: 1000 rounds of 1-2 events among 1024 members: %ld looks "
	              "(a scan would be %d), %d drains of the shared fd\n",
	              looked, 2 * 1000 * 1024, ch.drains.load());
	/* each round: the fired ones looked at when reported and when found empty */
	assert_true(looked <= 4 * 1000);
	for (auto &o : objs)
		assert_int_equal(fi_sets::poll_del(s.ps, o->fid(), 0), 0);
}

} // namespace

int main(void)
{
	init_logging();
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_open_bad),
	    cmocka_unit_test_setup_teardown(test_add_del_bad, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_cq_semantics, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_counter_semantics, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_count_and_fairness, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_member_close, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_polled_member, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_concurrent, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_cost_follows_active, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_evented_members, setup, teardown),
	};
	return cmocka_run_group_tests_name("util_poll", tests, nullptr, nullptr);
}
