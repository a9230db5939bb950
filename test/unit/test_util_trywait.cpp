/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* util::trywait: fi_trywait over CQs, counters, EQs and wait sets; bad inputs and mixed wait
 * object types; the trywait-then-select() loop of fi_poll(3)'s example with a producer
 * thread, over a software queue and over an eventfd standing in for a completion channel. */
#include "test_util_common.h"

#include "vwait/util/trywait.h"
#include "vwait/util/wait.h"

#include <rdma/fi_eq.h>

#include <memory>
#include <poll.h>
#include <sys/select.h>
#include <thread>
#include <vector>

using namespace vwait_test;

namespace
{

struct state {
	std::unique_ptr<fake_object> cq, cntr, eq, other;
	struct fid_wait *set = nullptr;
	fake_channel ch;
	std::vector<std::thread> threads;
};

int setup(void **st)
{
	auto *s = new state();
	s->cq = std::make_unique<fake_object>(FI_CLASS_CQ);
	s->cntr = std::make_unique<fake_object>(FI_CLASS_CNTR);
	s->eq = std::make_unique<fake_object>(FI_CLASS_EQ);
	s->other = std::make_unique<fake_object>(FI_CLASS_CQ);
	*st = s;
	return 0;
}

int teardown(void **st)
{
	auto *s = static_cast<state *>(*st);
	for (auto &t : s->threads)
		t.join();
	s->cq.reset();
	s->cntr.reset();
	s->eq.reset();
	s->other.reset();
	int ret = s->set ? fi_close(&s->set->fid) : 0;
	delete s;
	return ret;
}

state &S(void **st)
{
	return *static_cast<state *>(*st);
}

int try_fids(std::vector<struct fid *> fids)
{
	return vwait::util::trywait(&test_prov, fids.data(), static_cast<int>(fids.size()));
}

void test_bad_inputs(void **st)
{
	state &s = S(st);
	stderr_capture cap;
	cap.start();
	int ret = vwait::util::trywait(&test_prov, nullptr, 1);
	std::string log = cap.stop();
	assert_int_equal(ret, -FI_EINVAL);
	assert_true(contains(log, "count 1"));

	struct fid *one[1] = {s.cq->fid()};
	cap.start();
	ret = vwait::util::trywait(&test_prov, one, 0);
	log = cap.stop();
	assert_int_equal(ret, -FI_EINVAL);
	assert_true(contains(log, "count 0"));

	/* FI_WAIT_NONE: nothing to wait on */
	assert_int_equal(s.cq->open_wait(&test_prov, FI_WAIT_NONE, nullptr), 0);
	cap.start();
	ret = try_fids({s.cq->fid()});
	log = cap.stop();
	assert_int_equal(ret, -FI_EINVAL);
	assert_true(contains(log, "FI_WAIT_NONE"));

	/* NULL entry, an MR-class fid, a foreign CQ, a foreign wait set */
	assert_int_equal(s.cntr->open_wait(&test_prov, FI_WAIT_FD, nullptr), 0);
	cap.start();
	ret = try_fids({s.cntr->fid(), nullptr});
	log = cap.stop();
	assert_int_equal(ret, -FI_EINVAL);
	assert_true(contains(log, "fids[1] is NULL"));

	struct fi_ops other_ops = {};
	other_ops.size = sizeof(other_ops);
	other_ops.control = [](struct fid *, int, void *) noexcept { return -FI_ENOSYS; };
	struct fid mr = {FI_CLASS_MR, nullptr, &other_ops};
	cap.start();
	ret = try_fids({&mr});
	log = cap.stop();
	assert_int_equal(ret, -FI_EINVAL);
	assert_true(contains(log, "not a CQ, counter, EQ or wait set"));

	struct fid foreign_cq = {FI_CLASS_CQ, nullptr, &other_ops};
	cap.start();
	ret = try_fids({&foreign_cq});
	log = cap.stop();
	assert_int_equal(ret, -FI_EINVAL);
	assert_true(contains(log, "not a vwait object"));

	struct fid foreign_set = {FI_CLASS_WAIT, nullptr, &other_ops};
	cap.start();
	ret = try_fids({&foreign_set});
	log = cap.stop();
	assert_int_equal(ret, -FI_EINVAL);
	assert_true(contains(log, "not a vwait wait set"));
}

/* fids whose wait objects differ in type are refused */
void test_mixed_types(void **st)
{
	state &s = S(st);
	assert_int_equal(s.cq->open_wait(&test_prov, FI_WAIT_FD, nullptr), 0);
	assert_int_equal(s.other->open_wait(&test_prov, FI_WAIT_POLLFD, nullptr), 0);
	stderr_capture cap;
	cap.start();
	int ret = try_fids({s.cq->fid(), s.other->fid()});
	std::string log = cap.stop();
	assert_int_equal(ret, -FI_EINVAL);
	assert_true(contains(log, "one type per call"));

	struct fi_wait_attr attr = {FI_WAIT_MUTEX_COND, 0};
	assert_int_equal(vwait::util::wait_open(&test_prov, &attr, &s.set), 0);
	cap.start();
	ret = try_fids({s.cq->fid(), &s.set->fid});
	log = cap.stop();
	assert_int_equal(ret, -FI_EINVAL);
	/* the same types pass */
	assert_int_equal(try_fids({s.other->fid()}), 0);
}

/* A mix of a CQ, a counter, an EQ with private FD waiters and a wait set. */
void test_mix(void **st)
{
	state &s = S(st);
	struct fi_wait_attr attr = {FI_WAIT_FD, 0};
	assert_int_equal(vwait::util::wait_open(&test_prov, &attr, &s.set), 0);
	assert_int_equal(s.cq->open_wait(&test_prov, FI_WAIT_FD, nullptr), 0);
	assert_int_equal(s.cntr->open_wait(&test_prov, FI_WAIT_FD, nullptr), 0);
	assert_int_equal(s.eq->open_wait(&test_prov, FI_WAIT_UNSPEC, nullptr), 0);
	assert_int_equal(s.other->open_wait(&test_prov, FI_WAIT_SET, s.set), 0);
	std::vector<struct fid *> all = {s.cq->fid(), s.cntr->fid(), s.eq->fid(), &s.set->fid};
	assert_int_equal(try_fids(all), 0);

	s.cq->write();
	assert_int_equal(try_fids(all), -FI_EAGAIN);
	assert_true(s.cq->read());
	assert_int_equal(try_fids(all), 0);

	s.eq->write();
	assert_int_equal(try_fids(all), -FI_EAGAIN);
	assert_true(s.eq->read());
	assert_int_equal(try_fids(all), 0);

	/* a counter change is reported once (nothing stays queued) */
	s.cntr->add();
	assert_int_equal(try_fids(all), -FI_EAGAIN);
	assert_int_equal(try_fids(all), 0);

	/* a wait-set member: the set covers it */
	s.other->write();
	assert_int_equal(try_fids(all), -FI_EAGAIN);
	/* the member itself may be passed too */
	assert_int_equal(try_fids({s.other->fid()}), -FI_EAGAIN);
	assert_true(s.other->read());
	assert_int_equal(try_fids(all), 0);
	assert_int_equal(try_fids({s.other->fid()}), 0);
	s.other->close_wait();
}

/* Whether any of fds polls readable now. */
bool any_readable(struct pollfd *fds, size_t nfds)
{
	return ::poll(fds, nfds, 0) > 0;
}

/* fi_poll(3): fi_control(FI_GETWAIT) for the fd, then loop { if fi_trywait == 0: select();
 * read everything }. A producer writes N entries at intervals; every entry must be read and
 * no wakeup may be lost. A lost one is told apart without a clock: when a select() times out
 * although an entry whose write (or channel event) has returned is unread, and the fd is still
 * not readable, the wakeup is lost for good. Such stalls are counted and must be 0; a timeout
 * with nothing sent (a producer kept off its CPU) is only printed. */
void run_select_loop(state &s, bool through_channel)
{
	const int total = 200;
	fake_object *cq = s.cq.get();
	assert_int_equal(cq->open_wait(&test_prov, FI_WAIT_FD, nullptr), 0);
	int fd = -1;
	assert_int_equal(fi_control(cq->fid(), FI_GETWAIT, &fd), 0);
	fake_channel *ch = &s.ch;
	if (through_channel) {
		ch->target = cq;
		assert_int_equal(
		    cq->wait_object()->add_source(ch->efd.get(), POLLIN, fake_channel::drain, ch),
		    0);
	}
	auto sent = std::make_shared<std::atomic<int>>(0); /* writes or events that returned */
	s.threads.emplace_back([=] {
		for (int i = 0; i < total; ++i) {
			/* gaps in which the consumer may block in select() (or not, when it runs
			 * late: then it finds the entry at fi_trywait) */
			std::this_thread::sleep_for(std::chrono::microseconds(500 + (i % 7) * 300));
			if (through_channel)
				ch->fire();
			else
				cq->write();
			sent->fetch_add(1);
		}
	});
	int got = 0, selects = 0, eagain = 0, timeouts = 0, stalls = 0;
	struct fid *fids[1] = {cq->fid()};
	/* gives up after 4 * late_ms with no entry sent or read: a step takes milliseconds, and
	 * a thread on a loaded host may be kept off its CPU for seconds */
	progress_bound bound(std::chrono::milliseconds(4 * late_ms));
	while (got < total && bound.ok(sent->load() + got)) {
		int ret = vwait::util::trywait(&test_prov, fids, 1);
		if (ret == 0) {
			fd_set fds;
			FD_ZERO(&fds);
			FD_SET(fd, &fds);
			/* how long to block before looking whether the wakeup was lost: a wakeup
			 * takes microseconds, and the look is exact whatever this is */
			struct timeval tv = {1, 0};
			++selects;
			if (select(fd + 1, &fds, nullptr, nullptr, &tv) == 0) {
				++timeouts;
				struct pollfd p = {fd, POLLIN, 0};
				if (sent->load() > got && !any_readable(&p, 1))
					++stalls;
			}
		} else {
			assert_int_equal(ret, -FI_EAGAIN);
			++eagain;
		}
		while (cq->read())
			++got;
	}
	print_message("select loop (%s): %d entries, %d selects, %d -FI_EAGAIN, %d select "
	              "timeouts, %d stalls\n",
	              through_channel ? "eventfd channel" : "software queue", got, selects, eagain,
	              timeouts, stalls);
	assert_int_equal(got, total);
	assert_int_equal(stalls, 0);
	if (through_channel)
		assert_int_equal(cq->wait_object()->remove_source(ch->efd.get()), 0);
}

void test_select_loop(void **st)
{
	run_select_loop(S(st), false);
}

void test_select_loop_channel(void **st)
{
	run_select_loop(S(st), true);
}

/* POLLFD: the same loop with poll(2) over the array, refreshed when change_index moves. */
void test_poll_loop_pollfd(void **st)
{
	state &s = S(st);
	const int total = 200;
	fake_object *cq = s.cq.get();
	assert_int_equal(cq->open_wait(&test_prov, FI_WAIT_POLLFD, nullptr), 0);
	fake_channel *ch = &s.ch;
	ch->target = cq;
	auto sent = std::make_shared<std::atomic<int>>(0); /* writes or events that returned */
	s.threads.emplace_back([=] {
		for (int i = 0; i < total; ++i) {
			/* gaps in which the consumer may block in poll(2), or not */
			std::this_thread::sleep_for(std::chrono::microseconds(700));
			if (i == total / 2)
				cq->wait_object()->add_source(ch->efd.get(), POLLIN,
				                              fake_channel::drain, ch);
			if (i > total / 2)
				ch->fire();
			else
				cq->write();
			sent->fetch_add(1);
		}
	});
	struct pollfd fds[8];
	struct fi_wait_pollfd pfd = {0, 8, fds};
	assert_int_equal(fi_control(cq->fid(), FI_GETWAIT, &pfd), 0);
	uint64_t cached = pfd.change_index;
	size_t nfds = pfd.nfds;
	int got = 0, refreshes = 0, timeouts = 0, stalls = 0;
	struct fid *fids[1] = {cq->fid()};
	/* gives up after 4 * late_ms with no entry sent or read: a step takes milliseconds, and
	 * a thread on a loaded host may be kept off its CPU for seconds */
	progress_bound bound(std::chrono::milliseconds(4 * late_ms));
	while (got < total && bound.ok(sent->load() + got)) {
		struct fi_wait_pollfd probe = {0, 0, nullptr};
		fi_control(cq->fid(), FI_GETWAIT, &probe);
		if (probe.change_index != cached) {
			pfd = {0, 8, fds};
			assert_int_equal(fi_control(cq->fid(), FI_GETWAIT, &pfd), 0);
			cached = pfd.change_index;
			nfds = pfd.nfds;
			++refreshes;
		}
		/* the timeout as in run_select_loop: a lost wakeup is an unread entry whose write
		 * returned while none of the fds polled is readable */
		if (vwait::util::trywait(&test_prov, fids, 1) == 0 &&
		    ::poll(fds, nfds, 1000) == 0) {
			++timeouts;
			if (sent->load() > got && !any_readable(fds, nfds))
				++stalls;
		}
		while (cq->read())
			++got;
	}
	print_message("POLLFD poll loop: %d entries, %d refreshes, %d poll timeouts, %d stalls\n",
	              got, refreshes, timeouts, stalls);
	assert_int_equal(got, total);
	assert_int_equal(stalls, 0);
	assert_int_equal(refreshes, 1);
	for (auto &t : s.threads)
		t.join();
	s.threads.clear();
	assert_int_equal(cq->wait_object()->remove_source(ch->efd.get()), 0);
}

} // namespace

int main(void)
{
	init_logging();
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_bad_inputs, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_mixed_types, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_mix, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_select_loop, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_select_loop_channel, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_poll_loop_pollfd, setup, teardown),
	};
	return cmocka_run_group_tests_name("util_trywait", tests, nullptr, nullptr);
}
