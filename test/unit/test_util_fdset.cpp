/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* util::epoll_set and util::pollfd_set: adds and removes at run time, change_index, the
 * FI_GETWAIT copy rules (nfds in/out, -FI_ETOOSMALL, the nfds = 0 probe), and thread safety. */
#include "test_util_common.h"

#include "vwait/util/fdset.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

using namespace vwait_test;
using vwait::util::fd;

namespace
{

struct state {
	vwait::util::epoll_set ep;
	vwait::util::pollfd_set ps;
	std::vector<fd> fds;
};

int setup(void **st)
{
	auto *s = new state();
	*st = s;
	for (int i = 0; i < 4; ++i) {
		s->fds.push_back(fd::eventfd_nonblock());
		if (!s->fds.back())
			return -1;
	}
	return s->ep.open();
}

int teardown(void **st)
{
	delete static_cast<state *>(*st);
	return 0;
}

state &S(void **st)
{
	return *static_cast<state *>(*st);
}

void fire(const fd &f)
{
	uint64_t one = 1;
	assert_int_equal(::write(f.get(), &one, sizeof(one)), sizeof(one));
}

void drain(const fd &f)
{
	uint64_t v;
	assert_int_equal(::read(f.get(), &v, sizeof(v)), sizeof(v));
}

void test_epoll(void **st)
{
	state &s = S(st);
	assert_true(s.ep.fd() >= 0);
	assert_int_equal(s.ep.wait(0), 0);
	assert_int_equal(s.ep.add(s.fds[0].get(), POLLIN), 0);
	assert_int_equal(s.ep.add(s.fds[0].get(), POLLIN), -EEXIST);
	assert_int_equal(s.ep.add(s.fds[1].get(), POLLIN), 0);
	assert_int_equal(s.ep.wait(0), 0);
	fire(s.fds[1]);
	assert_int_equal(s.ep.wait(0), 1);
	assert_int_equal(s.ep.wait(0), 1); /* level-triggered */
	drain(s.fds[1]);
	assert_int_equal(s.ep.wait(0), 0);
	/* removed fds no longer count */
	assert_int_equal(s.ep.del(s.fds[1].get()), 0);
	assert_int_equal(s.ep.del(s.fds[1].get()), -ENOENT);
	fire(s.fds[1]);
	assert_int_equal(s.ep.wait(0), 0);
	/* a timeout is honoured: never before its deadline (epoll_wait sleeps on the same
	 * monotonic clock); the upper bound only catches a wait that hangs, and is late_ms
	 * because a thread on a loaded host may run seconds late */
	auto t0 = std::chrono::steady_clock::now();
	assert_int_equal(s.ep.wait(100), 0);
	long ms = ms_since(t0);
	assert_true(ms >= 100 && ms < 100 + late_ms);
	/* and an event ends the wait: 1, not the 0 of its timeout. The writer does not know
	 * whether the wait has begun: if not, the fd is readable at once and the answer is the
	 * same. */
	const fd *f0 = &s.fds[0];
	std::thread t([f0] {
		std::this_thread::sleep_for(std::chrono::milliseconds(50));
		uint64_t one = 1;
		ssize_t r = ::write(f0->get(), &one, sizeof(one));
		(void)r;
	});
	t0 = std::chrono::steady_clock::now();
	/* woken in 50 ms, bounded by late_ms since a thread on a loaded host may run seconds
	 * late; the timeout, twice that, only ends a wait the event missed */
	int n = s.ep.wait(2 * late_ms);
	ms = ms_since(t0);
	t.join();
	assert_int_equal(n, 1);
	assert_true(ms < late_ms);
	assert_int_equal(s.ep.add(-1, POLLIN), -EBADF);
}

void test_pollfd_change_index(void **st)
{
	state &s = S(st);
	assert_int_equal(s.ps.size(), 0);
	uint64_t i0 = s.ps.change_index();
	int tag1 = 1, tag2 = 2;
	assert_int_equal(s.ps.add(s.fds[0].get(), POLLIN, &tag1), 0);
	uint64_t i1 = s.ps.change_index();
	assert_true(i1 != i0);
	assert_int_equal(s.ps.add(s.fds[0].get(), POLLIN, &tag1), -FI_EALREADY);
	assert_int_equal(s.ps.change_index(), i1); /* a refused add changes nothing */
	assert_int_equal(s.ps.add(s.fds[1].get(), POLLIN, &tag2), 0);
	uint64_t i2 = s.ps.change_index();
	assert_true(i2 != i1);
	assert_int_equal(s.ps.size(), 2);

	std::vector<struct pollfd> fds;
	std::vector<void *> tags;
	uint64_t idx = 0;
	s.ps.snapshot(fds, tags, &idx);
	assert_int_equal(idx, i2);
	assert_int_equal(fds.size(), 2);
	assert_int_equal(fds[1].fd, s.fds[1].get());
	assert_ptr_equal(tags[1], &tag2);

	assert_int_equal(s.ps.del(s.fds[0].get()), 0);
	assert_int_equal(s.ps.del(s.fds[0].get()), -FI_ENOENT);
	assert_true(s.ps.change_index() != i2);
	fds.clear();
	tags.clear();
	s.ps.snapshot(fds, tags);
	assert_int_equal(fds.size(), 1);
	assert_int_equal(fds[0].fd, s.fds[1].get());
	assert_ptr_equal(tags[0], &tag2);
}

void test_pollfd_get(void **st)
{
	state &s = S(st);
	struct pollfd prefix = {s.fds[3].get(), POLLIN, 0};
	struct fi_wait_pollfd out = {0, 0, nullptr};
	/* only the prefix: the probe still says 1 is needed */
	assert_int_equal(s.ps.get(&out, &prefix, 1), -FI_ETOOSMALL);
	assert_int_equal(out.nfds, 1);
	out = {0, 0, nullptr};
	assert_int_equal(s.ps.get(&out, nullptr, 0), 0); /* nothing needed at all */
	assert_int_equal(out.nfds, 0);

	assert_int_equal(s.ps.add(s.fds[0].get(), POLLIN, nullptr), 0);
	assert_int_equal(s.ps.add(s.fds[1].get(), POLLIN | POLLPRI, nullptr), 0);
	out = {0, 0, nullptr};
	assert_int_equal(s.ps.get(&out, &prefix, 1), -FI_ETOOSMALL);
	assert_int_equal(out.nfds, 3);
	assert_int_equal(out.change_index, s.ps.change_index());

	struct pollfd arr[3];
	out = {0, 2, arr};
	assert_int_equal(s.ps.get(&out, &prefix, 1), -FI_ETOOSMALL);
	assert_int_equal(out.nfds, 3);
	out = {0, 3, nullptr};
	assert_int_equal(s.ps.get(&out, &prefix, 1), -FI_EINVAL);
	assert_int_equal(s.ps.get(nullptr, &prefix, 1), -FI_EINVAL);
	for (auto &p : arr)
		p.revents = 77;
	out = {0, 3, arr};
	assert_int_equal(s.ps.get(&out, &prefix, 1), 0);
	assert_int_equal(out.nfds, 3);
	assert_int_equal(arr[0].fd, s.fds[3].get());
	assert_int_equal(arr[1].fd, s.fds[0].get());
	assert_int_equal(arr[2].fd, s.fds[1].get());
	assert_int_equal(arr[2].events, POLLIN | POLLPRI);
	for (auto &p : arr)
		assert_int_equal(p.revents, 0);
	/* the copy works with poll(2) */
	fire(s.fds[0]);
	assert_int_equal(::poll(arr, 3, 0), 1);
	assert_true(arr[1].revents & POLLIN);
}

/* adds and removes from several threads while another copies: every copy is consistent, and
 * every change moves change_index. No sleeps and no timing: the order that matters is made by
 * synchronisation. The writers start only once the reader has taken a copy, and each writer,
 * halfway through, waits until the reader has taken a copy after it got there, so at least two
 * copies overlap the writes however the threads are scheduled (a loaded host cannot starve the
 * reader out of the test). A copy holds at most the 4 fds, none twice, each with its tag, and
 * the change_index of successive copies never goes back. */
void test_pollfd_threads(void **st)
{
	state &s = S(st);
	std::atomic<bool> stop{false};
	std::atomic<long> copies{0};
	std::atomic<int> bad{0}; /* first inconsistency the reader saw (0: none) */
	vwait::util::pollfd_set *ps = &s.ps;
	std::vector<int> ours;
	for (const fd &f : s.fds)
		ours.push_back(f.get());
	std::thread reader([&] {
		std::vector<struct pollfd> fds;
		std::vector<void *> tags;
		uint64_t last = 0;
		while (!stop.load()) {
			fds.clear();
			tags.clear();
			uint64_t index = 0;
			ps->snapshot(fds, tags, &index);
			int why = 0;
			if (fds.size() != tags.size() || fds.size() > ours.size())
				why = 1;
			else if (index < last)
				why = 2;
			for (size_t i = 0; why == 0 && i < fds.size(); ++i) {
				bool known =
				    std::find(ours.begin(), ours.end(), fds[i].fd) != ours.end();
				bool twice =
				    std::count_if(fds.begin(), fds.end(), [&](const pollfd &p) {
					    return p.fd == fds[i].fd;
				    }) != 1;
				if (!known || twice || tags[i] != nullptr ||
				    fds[i].events != POLLIN)
					why = 3;
			}
			if (why != 0) {
				bad.store(why);
				return;
			}
			last = index;
			copies.fetch_add(1);
		}
	});
	/* spin (yielding) until the reader has taken more than n copies or given up */
	auto await_copy_after = [&](long n) {
		while (copies.load() <= n && bad.load() == 0)
			std::this_thread::yield();
	};
	await_copy_after(0);
	const int rounds = 20000;
	std::atomic<long> during{0}; /* copies taken after a writer reached halfway */
	std::vector<std::thread> writers;
	for (int w = 0; w < 2; ++w)
		writers.emplace_back([&, w] {
			int f0 = s.fds[static_cast<size_t>(2 * w)].get();
			int f1 = s.fds[static_cast<size_t>(2 * w + 1)].get();
			for (int i = 0; i < rounds; ++i) {
				if (i == rounds / 2) {
					long n = copies.load();
					await_copy_after(n);
					during.fetch_add(copies.load() > n ? 1 : 0);
				}
				ps->add(f0, POLLIN, nullptr);
				ps->add(f1, POLLIN, nullptr);
				ps->del(f0);
				ps->del(f1);
			}
		});
	for (auto &t : writers)
		t.join();
	stop = true;
	reader.join();
	assert_int_equal(bad.load(), 0);
	assert_int_equal(during.load(), 2);
	assert_int_equal(s.ps.size(), 0);
	assert_int_equal(s.ps.change_index(), 2u * 4u * rounds);
	assert_true(copies.load() >= 2);
}

} // namespace

int main(void)
{
	init_logging();
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_epoll, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_pollfd_change_index, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_pollfd_get, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_pollfd_threads, setup, teardown),
	};
	return cmocka_run_group_tests_name("util_fdset", tests, nullptr, nullptr);
}
