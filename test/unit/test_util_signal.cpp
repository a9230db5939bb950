/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* util::fd and util::signal: ownership, coalescing, reset, and no lost wakeup under races. */
#include "vwait/util/fd.h"
#include "vwait/util/signal.h"
/* The interface headers must compile on their own, in any order. */
#include "vwait/util/fdset.h"
#include "vwait/util/poll.h"
#include "vwait/util/trywait.h"
#include "vwait/util/wait.h"
#include "vwait/util/waitable.h"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <fcntl.h>
#include <poll.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "test_util_common.h"
#include "vwait_cmocka.h"

using vwait::util::fd;
using vwait_test::progress_bound;

namespace
{

bool readable(int raw)
{
	struct pollfd p = {raw, POLLIN, 0};
	return ::poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

bool is_open(int raw)
{
	return ::fcntl(raw, F_GETFD) >= 0 || errno != EBADF;
}

void test_fd_owns_and_moves(void **)
{
	int raw;
	{
		fd a = fd::eventfd_nonblock();
		assert_true(static_cast<bool>(a));
		raw = a.get();
		fd b(std::move(a));
		assert_false(static_cast<bool>(a));
		assert_int_equal(b.get(), raw);
		fd c;
		c = std::move(b);
		assert_int_equal(c.get(), raw);
		assert_true(is_open(raw));
	}
	assert_false(is_open(raw));
}

void test_fd_release_and_close(void **)
{
	fd a = fd::eventfd_nonblock();
	int raw = a.release();
	assert_false(static_cast<bool>(a));
	assert_true(is_open(raw));
	fd b(raw);
	assert_int_equal(b.close(), 0);
	assert_false(is_open(raw));
	assert_int_equal(b.close(), 0); /* empty: nothing to close */
}

void test_signal_raise_reset(void **state)
{
	auto *s = static_cast<vwait::util::signal *>(*state);
	assert_false(readable(s->fd()));
	s->raise();
	assert_true(readable(s->fd()));
	assert_true(s->raised());
	s->raise(); /* coalesces */
	s->raise();
	s->reset();
	assert_false(readable(s->fd()));
	assert_false(s->raised());
	s->reset(); /* reset of a clear signal is harmless */
	assert_false(readable(s->fd()));
	s->raise();
	assert_true(readable(s->fd()));
	s->reset();
}

/* The contract under races: producers publish a token, then raise; one consumer follows
 * "reset, re-check, block on the fd". Each producer waits for its token to be taken before it
 * publishes the next, so every round needs a wakeup. A lost one is told apart without a clock:
 * when the consumer's poll(2) times out while a token waits, every raise has returned (none in
 * flight) and the fd is still not readable, that raise is lost for good. Such stalls are
 * counted and must be 0; a timeout with a raise still in flight (a producer kept off its CPU)
 * is only printed. */
void test_signal_no_lost_wakeup(void **state)
{
	auto *s = static_cast<vwait::util::signal *>(*state);
	const int producers = 2;
	const long rounds = 60000;
	struct slot {
		std::atomic<long> posted{0}, taken{0};
	} slots[producers];
	std::atomic<int> in_flight{0}; /* producers between publishing a token and raise() done */
	std::atomic<bool> stop{false};
	std::vector<std::thread> threads;
	for (int p = 0; p < producers; ++p)
		threads.emplace_back([s, &slots, &in_flight, &stop, p, rounds] {
			for (long i = 1; i <= rounds && !stop.load(); ++i) {
				in_flight.fetch_add(1);
				slots[p].posted.store(i);
				s->raise();
				in_flight.fetch_sub(1);
				while (slots[p].taken.load() < i && !stop.load())
					std::this_thread::yield();
			}
		});
	long stalls = 0, timeouts = 0, blocks = 0, total = 0;
	auto t0 = std::chrono::steady_clock::now();
	/* gives up after 20 s with no token taken: a round takes microseconds, a stall 1 s, and
	 * a thread on a loaded host may be kept off its CPU for seconds */
	progress_bound bound(std::chrono::seconds(20));
	while (total < producers * rounds && bound.ok(total)) {
		s->reset();
		bool found = false;
		for (auto &sl : slots) {
			long p = sl.posted.load();
			if (p > sl.taken.load()) {
				total += p - sl.taken.load();
				sl.taken.store(p);
				found = true;
			}
		}
		if (found)
			continue;
		struct pollfd pfd = {s->fd(), POLLIN, 0};
		++blocks;
		/* how long to block before looking whether the wakeup was lost: a wakeup takes
		 * microseconds, and the look is exact whatever this is */
		if (::poll(&pfd, 1, 1000) == 0) {
			++timeouts;
			bool waiting = false;
			for (auto &sl : slots)
				waiting |= sl.posted.load() > sl.taken.load();
			/* a token seen above was published after in_flight went up: 0 now means its
			 * raise() has returned, after this consumer's last reset() */
			if (waiting && in_flight.load() == 0 && !readable(s->fd()))
				++stalls;
		}
	}
	stop.store(true);
	for (auto &t : threads)
		t.join();
	double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
	print_message("signal: %ld tokens from %d producers, %ld blocks in poll(2), %ld poll "
	              "timeouts, %ld stalls, %.2f s\n",
	              total, producers, blocks, timeouts, stalls, dt);
	assert_int_equal(stalls, 0);
	assert_int_equal(total, producers * rounds);
	assert_true(blocks > 0);
}

int signal_setup(void **state)
{
	auto *s = new vwait::util::signal();
	*state = s;
	return s->open();
}

int signal_teardown(void **state)
{
	delete static_cast<vwait::util::signal *>(*state);
	return 0;
}

} // namespace

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_fd_owns_and_moves),
	    cmocka_unit_test(test_fd_release_and_close),
	    cmocka_unit_test_setup_teardown(test_signal_raise_reset, signal_setup, signal_teardown),
	    cmocka_unit_test_setup_teardown(test_signal_no_lost_wakeup, signal_setup,
	                                    signal_teardown),
	};
	return cmocka_run_group_tests_name("util_signal", tests, nullptr, nullptr);
}
