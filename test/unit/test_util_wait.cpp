/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* util::waiter and wait sets: every wait object kind, bad inputs (a warning line and a negative
 * FI_E*), FI_GETWAIT / FI_GETWAITOBJ, timing, fd sources standing in for completion channels,
 * and a ping-pong stress test that counts lost wakeups. */
#include "test_tasks.h"
#include "test_util_common.h"

#include "vwait/fi_deprecated.h"
#include "vwait/util/helper_thread.h"
#include "vwait/util/wait.h"

#include <rdma/fi_eq.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <dirent.h>
#include <malloc.h>
#include <memory>
#include <numeric>
#include <poll.h>
#include <pthread.h>
#include <random>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace vwait_test;
using vwait::util::waiter;

namespace
{

using vwait::util::wait_policy;
using vwait::util::wait_policy_kind;

/* the adaptive policy's inputs for tests that must not depend on what other tests taught the
 * process: no process-wide wake-up cost */
const vwait::util::policy_inputs quiet{nullptr, nullptr};

/* what a test runs over: a wait-object kind and a wait policy */
struct variant {
	enum fi_wait_obj kind;
	wait_policy policy;
};

struct state {
	enum fi_wait_obj kind = FI_WAIT_FD;
	wait_policy policy;
	std::unique_ptr<fake_object> a, b;
	std::vector<std::unique_ptr<fake_object>> many; /* members of a large set */
	struct fid_wait *set = nullptr;
	fake_channel ch;
	std::vector<std::thread> threads;
	std::atomic<bool> stop{false};
	vwait::util::helper_thread helper;
	vwait::util::fd helper_stop;
};

int setup(void **st)
{
	auto *s = new state();
	if (*st) {
		s->kind = static_cast<variant *>(*st)->kind;
		s->policy = static_cast<variant *>(*st)->policy;
	}
	s->a = std::make_unique<fake_object>(FI_CLASS_CQ);
	s->b = std::make_unique<fake_object>(FI_CLASS_CNTR);
	s->a->set_wait_policy(s->policy);
	s->b->set_wait_policy(s->policy);
	*st = s;
	return 0;
}

int teardown(void **st)
{
	auto *s = static_cast<state *>(*st);
	s->stop = true;
	for (auto &t : s->threads)
		t.join();
	s->helper.stop();
	s->a.reset();
	s->b.reset();
	s->many.clear();
	if (s->set)
		fi_close(&s->set->fid);
	delete s;
	return 0;
}

state &S(void **st)
{
	return *static_cast<state *>(*st);
}

void open_set(state &s)
{
	struct fi_wait_attr attr = {s.kind, 0};
	assert_int_equal(vwait::util::wait_open(&test_prov, &attr, &s.set, {}, s.policy), 0);
	assert_non_null(s.set);
}

bool readable(int fd)
{
	struct pollfd p = {fd, POLLIN, 0};
	return ::poll(&p, 1, 0) == 1;
}

/* ------------------------------------------------------------------ the blocking hook */

/* util::note_blocking runs the provider's hook once per process, when a thread first may sleep.
 * Each case runs in a child process of its own (the hook fires once per process) and exits
 * with the number of hook calls, 10 more when blocking_seen() is false. */
std::atomic<int> hook_calls{0};

void count_hook() noexcept
{
	hook_calls.fetch_add(1);
}

int in_child(int (*scenario)())
{
	pid_t pid = fork();
	if (pid == 0) {
		vwait::util::set_blocking_hook(count_hook);
		int ret = scenario();
		_exit(ret ? 100 : hook_calls.load() + (vwait::util::blocking_seen() ? 0 : 10));
	}
	assert_true(pid > 0);
	int status = 0;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

/* A wait that ends while it spins never sleeps: no hook, even over 20 waits. */
int spin_only()
{
	std::unique_ptr<waiter> w;
	if (waiter::create(&test_prov, FI_WAIT_FD, w, {wait_policy_kind::fixed, 10000}))
		return 1;
	for (int i = 0; i < 20; i++) {
		int polls = 0;
		if (w->wait_until(vwait::util::deadline_after(5000), [&] { return ++polls > 50; }))
			return 1;
	}
	return 0;
}

/* Two waits that sleep until their deadline: the hook runs once, or never on a waiter that
 * does not count as blocking (an EQ's own). */
template <int Kind, bool Counts = true>
int sleep_twice()
{
	std::unique_ptr<waiter> w;
	if (waiter::create(&test_prov, Kind, w, {wait_policy_kind::block, 0}))
		return 1;
	if (!Counts)
		w->set_counts_as_blocking(false);
	for (int i = 0; i < 2; i++)
		if (w->wait_until(vwait::util::deadline_after(20), [] { return false; }) !=
		    -FI_ETIMEDOUT)
			return 1;
	return 0;
}

int trywait_once()
{
	std::unique_ptr<waiter> w;
	if (waiter::create(&test_prov, FI_WAIT_FD, w))
		return 1;
	return w->trywait() == 0 && w->trywait() == 0 ? 0 : 1;
}

int getwait_once()
{
	std::unique_ptr<waiter> w;
	if (waiter::create(&test_prov, FI_WAIT_FD, w))
		return 1;
	int fd = -1;
	return w->control(FI_GETWAIT, &fd) == 0 && fd >= 0 ? 0 : 1;
}

void test_blocking_hook(void **)
{
	assert_int_equal(in_child(spin_only), 10);
	assert_int_equal(in_child(sleep_twice<FI_WAIT_FD>), 1);
	assert_int_equal(in_child(sleep_twice<FI_WAIT_MUTEX_COND>), 1);
	assert_int_equal(in_child(sleep_twice<FI_WAIT_YIELD>), 1);
	assert_int_equal(in_child(sleep_twice<FI_WAIT_FD, false>), 10);
	assert_int_equal(in_child(trywait_once), 1);
	assert_int_equal(in_child(getwait_once), 1);
}

/* ------------------------------------------------------------------ bad inputs */

void test_create_bad_kinds(void **)
{
	std::unique_ptr<waiter> w;
	for (int k : {static_cast<int>(FI_WAIT_NONE), static_cast<int>(FI_WAIT_SET), 42}) {
		stderr_capture cap;
		cap.start();
		int ret = waiter::create(&test_prov, k, w);
		std::string log = cap.stop();
		assert_int_equal(ret, -FI_EINVAL);
		assert_null(w.get());
		assert_true(contains(log, "wait_obj"));
	}
}

void test_wait_open_bad(void **)
{
	struct fid_wait *set = nullptr;
	stderr_capture cap;

	cap.start();
	int ret = vwait::util::wait_open(&test_prov, nullptr, &set);
	std::string log = cap.stop();
	assert_int_equal(ret, -FI_EINVAL);
	assert_true(contains(log, "attr is NULL"));

	struct fi_wait_attr attr = {FI_WAIT_FD, 1};
	cap.start();
	ret = vwait::util::wait_open(&test_prov, &attr, &set);
	log = cap.stop();
	assert_int_equal(ret, -FI_EINVAL);
	assert_true(contains(log, "flags 0x1"));

	for (auto k : {FI_WAIT_NONE, FI_WAIT_SET}) {
		attr = {k, 0};
		cap.start();
		ret = vwait::util::wait_open(&test_prov, &attr, &set);
		log = cap.stop();
		assert_int_equal(ret, -FI_EINVAL);
		assert_true(contains(log, "wait_obj"));
		assert_null(set);
	}
	/* an application's out-of-range value, stored without an enum conversion */
	const int bad = 77;
	attr = {FI_WAIT_FD, 0};
	memcpy(&attr.wait_obj, &bad, sizeof(bad));
	cap.start();
	ret = vwait::util::wait_open(&test_prov, &attr, &set);
	log = cap.stop();
	assert_int_equal(ret, -FI_EINVAL);
	assert_true(contains(log, "wait_obj"));
}

void test_unspec_is_fd(void **st)
{
	state &s = S(st);
	s.kind = FI_WAIT_UNSPEC;
	open_set(s);
	enum fi_wait_obj obj = FI_WAIT_NONE;
	assert_int_equal(fi_control(&s.set->fid, FI_GETWAITOBJ, &obj), 0);
	assert_int_equal(obj, FI_WAIT_FD);
	int fd = -1;
	assert_int_equal(fi_control(&s.set->fid, FI_GETWAIT, &fd), 0);
	assert_true(fd >= 0);
	stderr_capture cap;
	cap.start();
	int ret = fi_control(&s.set->fid, FI_GETWAIT, nullptr);
	std::string log = cap.stop();
	assert_int_equal(ret, -FI_EINVAL);
	assert_true(contains(log, "arg is NULL"));
	assert_int_equal(fi_control(&s.set->fid, FI_ENABLE, &fd), -FI_ENOSYS);
}

void test_close_busy(void **st)
{
	state &s = S(st);
	open_set(s);
	assert_int_equal(s.a->open_wait(&test_prov, FI_WAIT_SET, s.set), 0);
	assert_int_equal(s.a->wait_obj(), FI_WAIT_SET);
	assert_false(s.a->wait_is_private());
	/* the member's FI_GETWAITOBJ reports the set's kind */
	enum fi_wait_obj obj = FI_WAIT_NONE;
	assert_int_equal(fi_control(s.a->fid(), FI_GETWAITOBJ, &obj), 0);
	assert_int_equal(obj, s.kind);
	stderr_capture cap;
	cap.start();
	int ret = fi_close(&s.set->fid);
	std::string log = cap.stop();
	assert_int_equal(ret, -FI_EBUSY);
	assert_true(contains(log, "still bound"));
	s.a->close_wait();
	assert_int_equal(fi_close(&s.set->fid), 0);
	s.set = nullptr;
}

void test_open_wait_bad(void **st)
{
	state &s = S(st);
	stderr_capture cap;
	cap.start();
	int ret = s.a->open_wait(&test_prov, FI_WAIT_SET, nullptr);
	std::string log = cap.stop();
	assert_int_equal(ret, -FI_EINVAL);
	assert_true(contains(log, "NULL"));

	/* a wait set of some other provider */
	struct fi_ops other_ops = {};
	other_ops.size = sizeof(other_ops);
	struct fid_wait foreign = {};
	foreign.fid.fclass = FI_CLASS_WAIT;
	foreign.fid.ops = &other_ops;
	cap.start();
	ret = s.a->open_wait(&test_prov, FI_WAIT_SET, &foreign);
	log = cap.stop();
	assert_int_equal(ret, -FI_EINVAL);
	assert_true(contains(log, "not a vwait wait set"));

	cap.start();
	ret = s.a->open_wait(&test_prov, 42, nullptr);
	log = cap.stop();
	assert_int_equal(ret, -FI_EINVAL);
	assert_true(contains(log, "wait_obj 42"));

	assert_int_equal(s.a->open_wait(&test_prov, FI_WAIT_NONE, nullptr), 0);
	assert_null(s.a->wait_object());
	int fd;
	assert_int_equal(fi_control(s.a->fid(), FI_GETWAIT, &fd), -FI_ENODATA);

	assert_int_equal(s.a->open_wait(&test_prov, FI_WAIT_FD, nullptr), 0);
	cap.start();
	ret = s.a->open_wait(&test_prov, FI_WAIT_FD, nullptr);
	log = cap.stop();
	assert_int_equal(ret, -FI_EINVAL);
	assert_true(contains(log, "already"));
}

/* ------------------------------------------------------------------ timing */

void test_wait_timeout(void **st)
{
	state &s = S(st);
	open_set(s);
	assert_int_equal(s.a->open_wait(&test_prov, FI_WAIT_SET, s.set), 0);
	/* never before the timeout: the deadline is taken inside, after t0 */
	auto t0 = std::chrono::steady_clock::now();
	int ret = fi_sets::wait(s.set, 500);
	double dt = seconds_since(t0);
	print_message("kind %d: fi_wait(500) -> %d after %.3f s\n", s.kind, ret, dt);
	assert_int_equal(ret, -FI_ETIMEDOUT);
	assert_true(dt >= 0.5 && dt <= 0.5 + late_s);
	/* timeout 0: a poll */
	assert_int_equal(fi_sets::wait(s.set, 0), -FI_ETIMEDOUT);
}

void test_signal_ends_wait(void **st)
{
	state &s = S(st);
	open_set(s);
	assert_int_equal(s.a->open_wait(&test_prov, FI_WAIT_SET, s.set), 0);
	assert_int_equal(s.b->open_wait(&test_prov, FI_WAIT_SET, s.set), 0);
	assert_int_equal(fi_sets::wait(s.set, 0), -FI_ETIMEDOUT); /* nothing yet */

	fake_object *a = s.a.get(), *b = s.b.get();
	auto t0 = std::chrono::steady_clock::now();
	s.threads.emplace_back([a] {
		std::this_thread::sleep_for(std::chrono::milliseconds(100));
		a->write();
	});
	int ret = fi_sets::wait(s.set, -1);
	double dt = seconds_since(t0);
	print_message("kind %d: CQ entry ended fi_wait(-1) after %.4f s\n", s.kind, dt);
	assert_int_equal(ret, 0);
	assert_true(dt >= 0.09 && dt < 0.1 + late_s);
	/* still queued: fi_wait returns at once; once read, it blocks again */
	assert_int_equal(fi_sets::wait(s.set, 0), 0);
	assert_true(a->read());
	assert_int_equal(fi_sets::wait(s.set, 0), -FI_ETIMEDOUT);

	/* a counter change (a wake: nothing queued) ends one fi_wait */
	t0 = std::chrono::steady_clock::now();
	s.threads.emplace_back([b] {
		std::this_thread::sleep_for(std::chrono::milliseconds(100));
		b->add();
	});
	ret = fi_sets::wait(s.set, 5000);
	dt = seconds_since(t0);
	assert_int_equal(ret, 0);
	assert_true(dt >= 0.09 && dt < 0.1 + late_s);
	assert_int_equal(fi_sets::wait(s.set, 0), -FI_ETIMEDOUT);
}

/* An eventfd standing in for a completion channel wakes a thread in wait_until. */
void test_source_wakes(void **st)
{
	state &s = S(st);
	assert_int_equal(s.a->open_wait(&test_prov, s.kind, nullptr), 0);
	assert_true(s.a->wait_is_private());
	waiter *w = s.a->wait_object();
	assert_non_null(w);
	s.ch.target = s.a.get();

	stderr_capture cap;
	cap.start();
	int ret = w->add_source(-1, POLLIN, fake_channel::drain, &s.ch);
	std::string log = cap.stop();
	assert_int_equal(ret, -FI_EINVAL);
	assert_true(contains(log, "fd -1"));

	assert_int_equal(w->add_source(s.ch.efd.get(), POLLIN, fake_channel::drain, &s.ch), 0);
	assert_int_equal(w->add_source(s.ch.efd.get(), POLLIN, fake_channel::drain, &s.ch),
	                 -FI_EALREADY);

	fake_channel *ch = &s.ch;
	auto t0 = std::chrono::steady_clock::now();
	s.threads.emplace_back([ch] {
		std::this_thread::sleep_for(std::chrono::milliseconds(100));
		ch->fire();
	});
	fake_object *a = s.a.get();
	ret = w->wait_until(vwait::util::deadline_after(5000), [a] { return a->read(); });
	double dt = seconds_since(t0);
	print_message("kind %d: channel event ended wait_until after %.4f s\n", s.kind, dt);
	assert_int_equal(ret, 0);
	assert_true(dt >= 0.09 && dt < 0.1 + late_s);
	assert_int_equal(s.ch.drains.load(), 1);

	/* trywait drains a readable source before it checks */
	s.ch.fire();
	if (s.kind == FI_WAIT_MUTEX_COND) /* the helper may drain first: either way it is seen */
		std::this_thread::sleep_for(std::chrono::milliseconds(50));
	assert_int_equal(w->trywait(), -FI_EAGAIN);
	assert_true(a->read());
	assert_int_equal(w->trywait(), 0);

	assert_int_equal(w->remove_source(s.ch.efd.get()), 0);
	assert_int_equal(w->remove_source(s.ch.efd.get()), -FI_ENOENT);
	/* removed: an event no longer reaches the object */
	s.ch.fire();
	assert_int_equal(w->wait_until(vwait::util::deadline_after(50), [a] { return a->read(); }),
	                 -FI_ETIMEDOUT);
}

/* Shared sources: held twice (a CQ's waiter and a counter it feeds), a source until the last
 * drop; another drain on the same fd is refused. */
void test_hold_source(void **st)
{
	state &s = S(st);
	assert_int_equal(s.a->open_wait(&test_prov, s.kind, nullptr), 0);
	waiter *w = s.a->wait_object();
	s.ch.target = s.a.get();
	const int fd = s.ch.efd.get();
	assert_int_equal(w->hold_source(fd, POLLIN, fake_channel::drain, &s.ch), 0);
	assert_int_equal(w->hold_source(fd, POLLIN, fake_channel::drain, &s.ch), 0);
	fake_channel other;
	stderr_capture cap;
	cap.start();
	int ret = w->hold_source(fd, POLLIN, fake_channel::drain, &other);
	std::string log = cap.stop();
	assert_int_equal(ret, -FI_EALREADY);
	assert_true(contains(log, "another drain"));

	fake_object *a = s.a.get();
	assert_int_equal(w->drop_source(fd), 0); /* one holder left */
	s.ch.fire();
	assert_int_equal(
	    w->wait_until(vwait::util::deadline_after(2000), [a] { return a->read(); }), 0);
	assert_int_equal(w->drop_source(fd), 0); /* gone */
	assert_int_equal(w->drop_source(fd), -FI_ENOENT);
	s.ch.fire();
	assert_int_equal(w->wait_until(vwait::util::deadline_after(50), [a] { return a->read(); }),
	                 -FI_ETIMEDOUT);
}

/* Spurious wakeups neither shorten nor lengthen the deadline. The waker wakes every 1 ms; a
 * wait that saw fewer than 2 of its wakeups (a loaded host starved the waker) tested nothing
 * and is run again, up to 10 times. */
void test_deadline_with_spurious_wakeups(void **st)
{
	state &s = S(st);
	assert_int_equal(s.a->open_wait(&test_prov, s.kind, nullptr), 0);
	fake_object *a = s.a.get();
	int wakes_seen = 0;
	for (int attempt = 0; attempt < 10 && wakes_seen < 2; attempt++) {
		std::atomic<bool> stop{false};
		std::atomic<int> wakes{0};
		std::thread waker([a, &stop, &wakes] {
			while (!stop.load()) {
				std::this_thread::sleep_for(std::chrono::milliseconds(1));
				a->wake();
				wakes.fetch_add(1);
			}
		});
		auto t0 = std::chrono::steady_clock::now();
		int ret = a->wait_object()->wait_until(vwait::util::deadline_after(500),
		                                       [] { return false; });
		double dt = seconds_since(t0);
		wakes_seen = wakes.load();
		stop = true;
		waker.join();
		print_message("kind %d: 0.5 s wait_until with %d wakeups -> %d after %.3f s\n",
		              s.kind, wakes_seen, ret, dt);
		assert_int_equal(ret, -FI_ETIMEDOUT);
		assert_true(dt >= 0.5 && dt < 0.5 + late_s);
	}
	assert_true(wakes_seen >= 2);
}

/* ------------------------------------------------------------------ FI_GETWAIT per kind */

void test_getwait_fd(void **st)
{
	state &s = S(st);
	s.kind = FI_WAIT_FD;
	open_set(s);
	assert_int_equal(s.a->open_wait(&test_prov, FI_WAIT_SET, s.set), 0);
	int fd = -1;
	assert_int_equal(fi_control(&s.set->fid, FI_GETWAIT, &fd), 0);
	waiter *w = nullptr;
	assert_int_equal(vwait::util::get_waiter(&s.set->fid, &w), 0);

	assert_int_equal(w->trywait(), 0);
	assert_false(readable(fd));
	s.a->write();
	assert_true(readable(fd));
	assert_int_equal(w->trywait(), -FI_EAGAIN);
	assert_true(s.a->read());
	assert_int_equal(w->trywait(), 0);
	assert_false(readable(fd));

	/* a source's event makes the epoll fd readable */
	s.ch.target = s.a.get();
	assert_int_equal(w->add_source(s.ch.efd.get(), POLLIN, fake_channel::drain, &s.ch), 0);
	assert_false(readable(fd));
	s.ch.fire();
	assert_true(readable(fd));
	assert_int_equal(w->trywait(), -FI_EAGAIN); /* drained: an entry is queued */
	assert_true(s.a->read());
	assert_int_equal(w->trywait(), 0);
	assert_false(readable(fd));
	assert_int_equal(w->remove_source(s.ch.efd.get()), 0);
}

void test_getwait_pollfd(void **st)
{
	state &s = S(st);
	s.kind = FI_WAIT_POLLFD;
	open_set(s);
	assert_int_equal(s.a->open_wait(&test_prov, FI_WAIT_SET, s.set), 0);
	waiter *w = nullptr;
	assert_int_equal(vwait::util::get_waiter(&s.set->fid, &w), 0);

	struct pollfd fds[4];
	struct fi_wait_pollfd pfd = {0, 0, nullptr};
	assert_int_equal(fi_control(&s.set->fid, FI_GETWAIT, &pfd), -FI_ETOOSMALL);
	assert_int_equal(pfd.nfds, 1);
	uint64_t idx0 = pfd.change_index;

	s.ch.target = s.a.get();
	assert_int_equal(w->add_source(s.ch.efd.get(), POLLIN, fake_channel::drain, &s.ch), 0);
	pfd = {0, 0, nullptr};
	assert_int_equal(fi_control(&s.set->fid, FI_GETWAIT, &pfd), -FI_ETOOSMALL);
	assert_int_equal(pfd.nfds, 2);
	assert_true(pfd.change_index != idx0);
	uint64_t idx1 = pfd.change_index;

	pfd = {0, 1, fds};
	assert_int_equal(fi_control(&s.set->fid, FI_GETWAIT, &pfd), -FI_ETOOSMALL);
	assert_int_equal(pfd.nfds, 2);
	pfd = {0, 2, nullptr};
	assert_int_equal(fi_control(&s.set->fid, FI_GETWAIT, &pfd), -FI_EINVAL);
	pfd = {0, 4, fds};
	assert_int_equal(fi_control(&s.set->fid, FI_GETWAIT, &pfd), 0);
	assert_int_equal(pfd.nfds, 2);
	assert_int_equal(pfd.change_index, idx1);
	assert_int_equal(fds[1].fd, s.ch.efd.get());
	assert_true(fds[0].events & POLLIN);

	/* the application's poll(2) over the array sees software events and channel events */
	assert_int_equal(w->trywait(), 0);
	assert_int_equal(::poll(fds, 2, 0), 0);
	s.a->write();
	assert_int_equal(::poll(fds, 2, 0), 1);
	assert_true(fds[0].revents & POLLIN);
	assert_int_equal(w->trywait(), -FI_EAGAIN);
	assert_true(s.a->read());
	assert_int_equal(w->trywait(), 0);
	s.ch.fire();
	assert_int_equal(::poll(fds, 2, 0), 1);
	assert_true(fds[1].revents & POLLIN);
	assert_int_equal(w->trywait(), -FI_EAGAIN);
	assert_true(s.a->read());
	assert_int_equal(w->trywait(), 0);

	assert_int_equal(w->remove_source(s.ch.efd.get()), 0);
	pfd = {0, 4, fds};
	assert_int_equal(fi_control(&s.set->fid, FI_GETWAIT, &pfd), 0);
	assert_int_equal(pfd.nfds, 1);
	assert_true(pfd.change_index != idx1);
}

struct cond_waiter_args {
	struct fi_mutex_cond mc;
	fake_object *obj;
	std::atomic<bool> woke{false};
	std::atomic<bool> started{false};
};

void *cond_waiter_main(void *p)
{
	auto *args = static_cast<cond_waiter_args *>(p);
	pthread_mutex_lock(args->mc.mutex);
	args->started = true;
	auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(4 * late_ms);
	while (!args->obj->ready() && std::chrono::steady_clock::now() < until) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 2 * late_ms / 1000;
		pthread_cond_timedwait(args->mc.cond, args->mc.mutex, &ts);
	}
	args->woke = args->obj->ready();
	pthread_mutex_unlock(args->mc.mutex);
	return nullptr;
}

/* The application blocks on the cond with its own predicate; a software event and a channel
 * event (through the helper thread) both wake it. */
void test_getwait_mutex_cond(void **st)
{
	state &s = S(st);
	s.kind = FI_WAIT_MUTEX_COND;
	assert_int_equal(s.a->open_wait(&test_prov, FI_WAIT_MUTEX_COND, nullptr), 0);
	cond_waiter_args args;
	args.obj = s.a.get();
	assert_int_equal(fi_control(s.a->fid(), FI_GETWAIT, &args.mc), 0);
	assert_non_null(args.mc.mutex);
	assert_non_null(args.mc.cond);

	for (int round = 0; round < 2; ++round) {
		args.woke = false;
		args.started = false;
		pthread_t t;
		assert_int_equal(pthread_create(&t, nullptr, cond_waiter_main, &args), 0);
		while (!args.started)
			std::this_thread::sleep_for(std::chrono::milliseconds(1));
		std::this_thread::sleep_for(std::chrono::milliseconds(50));
		auto t0 = std::chrono::steady_clock::now();
		if (round == 0) {
			s.a->write();
		} else {
			s.ch.target = s.a.get();
			assert_int_equal(s.a->wait_object()->add_source(s.ch.efd.get(), POLLIN,
			                                                fake_channel::drain, &s.ch),
			                 0);
			s.ch.fire();
		}
		pthread_join(t, nullptr);
		double dt = seconds_since(t0);
		print_message("MUTEX_COND: %s woke the application's cond wait after %.4f s\n",
		              round ? "channel event (helper thread)" : "software event", dt);
		assert_true(args.woke.load());
		assert_true(dt < late_s); /* its own cond timeout is twice that */
		assert_true(s.a->read());
	}
	assert_int_equal(s.a->wait_object()->remove_source(s.ch.efd.get()), 0);
}

/* The entries of a /proc/self directory: its threads (task) or its descriptors (fd). */
size_t proc_entries(const char *dir)
{
	DIR *d = opendir(dir);
	assert_non_null(d);
	size_t n = 0;
	while (struct dirent *e = readdir(d))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* The threads of this process, as the kernel counts them. */
size_t task_count()
{
	return proc_entries("/proc/self/task");
}

/* The thread count once it reaches `want`, or what it is after late_ms. A joined thread
 * stays listed in /proc/self/task for a moment after pthread_join returns (the kernel
 * wakes the joiner before it reaps the thread); on a loaded machine that moment is long. */
size_t task_count_reaching(size_t want)
{
	const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(late_ms);
	size_t n = task_count();
	while (n != want && std::chrono::steady_clock::now() < end) {
		std::this_thread::sleep_for(std::chrono::milliseconds(1));
		n = task_count();
	}
	return n;
}

/* The thread count once it has stopped falling (threads of earlier tests still leaving). */
size_t settled_task_count()
{
	size_t n = task_count();
	for (int same = 0, i = 0; same < 20 && i < late_ms; i++) {
		std::this_thread::sleep_for(std::chrono::milliseconds(1));
		const size_t m = task_count();
		same = m == n ? same + 1 : 0;
		n = m;
	}
	return n;
}

/* A thread that runs until its eventfd is written. */
int start_helper(state &s)
{
	if (!s.helper_stop)
		s.helper_stop = vwait::util::fd::eventfd_nonblock();
	const int efd = s.helper_stop.get();
	return s.helper.start(
	    "vwait-test",
	    [efd] {
		    struct pollfd p = {efd, POLLIN, 0};
		    while (::poll(&p, 1, -1) < 0 && errno == EINTR)
			    ;
		    uint64_t v;
		    (void)!::read(efd, &v, sizeof(v));
	    },
	    [efd] { (void)!eventfd_write(efd, 1); });
}

/* The provider's cleanup (libfabric's fi_fini, then the plugin unloaded): stop_all stops the
 * threads of objects nobody closed, here a MUTEX_COND waiter's helper and a bare helper; the
 * objects stay usable, and closing them later stops nothing twice. */
void test_helpers_stop_all(void **st)
{
	state &s = S(st);
	const size_t tasks0 = settled_task_count();
	assert_int_equal(vwait::util::helper_thread::count(), 0);
	assert_int_equal(s.a->open_wait(&test_prov, FI_WAIT_MUTEX_COND, nullptr), 0);
	struct fi_mutex_cond mc = {};
	assert_int_equal(fi_control(s.a->fid(), FI_GETWAIT, &mc), 0);
	s.ch.target = s.a.get();
	assert_int_equal(
	    s.a->wait_object()->add_source(s.ch.efd.get(), POLLIN, fake_channel::drain, &s.ch), 0);
	assert_int_equal(start_helper(s), 0);
	assert_int_equal(start_helper(s), 0); /* running: starts nothing more */
	assert_true(s.helper.running());
	assert_int_equal(vwait::util::helper_thread::count(), 2);
	assert_int_equal(task_count_reaching(tasks0 + 2), tasks0 + 2);
	/* each names itself, for top -H and gdb: the waiter's helper, and the test's own */
	assert_int_equal(tasks_named_reaching(1, late_ms, "vwait-wait"), 1);
	assert_int_equal(tasks_named_reaching(1, late_ms, "vwait-test"), 1);

	vwait::util::helper_thread::stop_all();
	assert_int_equal(vwait::util::helper_thread::count(), 0);
	assert_false(s.helper.running());
	assert_int_equal(task_count_reaching(tasks0), tasks0);

	/* still usable: a software event is read, a helper starts and stops again */
	s.a->write();
	assert_true(s.a->read());
	assert_int_equal(start_helper(s), 0);
	assert_int_equal(vwait::util::helper_thread::count(), 1);
	s.helper.stop();
	s.helper.stop();
	assert_int_equal(vwait::util::helper_thread::count(), 0);
	assert_int_equal(s.a->wait_object()->remove_source(s.ch.efd.get()), 0);
}

/* exit() on a helper thread (a library's crash handler calls it there) runs the cleanup on
 * that thread: stop_all leaves it detached instead of joining it, and the process goes on. */
void test_helpers_stop_all_on_helper(void **st)
{
	state &s = S(st);
	std::atomic<bool> done{false};
	assert_int_equal(s.helper.start("vwait-test",
	                                [&done] {
		                                vwait::util::helper_thread::stop_all();
		                                done = true;
	                                },
	                                {}),
	                 0);
	for (int i = 0; i < 5000 && !done; i++)
		std::this_thread::sleep_for(std::chrono::milliseconds(1));
	assert_true(done);
	assert_false(s.helper.running());
	assert_int_equal(vwait::util::helper_thread::count(), 0);
	s.helper.stop(); /* nothing left to stop */
}

void test_getwait_yield(void **st)
{
	state &s = S(st);
	assert_int_equal(s.a->open_wait(&test_prov, FI_WAIT_YIELD, nullptr), 0);
	int fd;
	assert_int_equal(fi_control(s.a->fid(), FI_GETWAIT, &fd), -FI_ENODATA);
	enum fi_wait_obj obj;
	assert_int_equal(fi_control(s.a->fid(), FI_GETWAITOBJ, &obj), 0);
	assert_int_equal(obj, FI_WAIT_YIELD);
}

/* ------------------------------------------------------------------ wait policy
 * (the learner alone, on fake inputs: test_util_policy.cpp) */

/* A wait that finds its work in the poll phase never reaches the prepare phase (never
 * arms): fixed policy with a budget far above the time the work takes to come. */
void test_poll_phase_never_arms(void **st)
{
	state &s = S(st);
	s.a->set_wait_policy({wait_policy_kind::fixed, 10000000});
	assert_int_equal(s.a->open_wait(&test_prov, s.kind, nullptr), 0);
	std::atomic<bool> flag{false};
	s.threads.emplace_back([&flag] {
		std::this_thread::sleep_for(std::chrono::milliseconds(20));
		flag = true; /* no notify: only polling can see it */
	});
	fake_object *a = s.a.get();
	auto t0 = std::chrono::steady_clock::now();
	int ret = a->wait_object()->wait_for(*a, vwait::util::deadline_after(5000),
	                                     [&] { return flag.load(); });
	double dt = seconds_since(t0);
	const long polls = a->polls.load(), prepares = a->arms.load();
	print_message("kind %d: fixed spin found the work after %.4f s, %ld polls, %ld prepares\n",
	              s.kind, dt, polls, prepares);
	assert_int_equal(ret, 0);
	assert_int_equal(prepares, 0);
	assert_true(polls > 1);
}

/* block: one look, then prepare and sleep; the thread does not spin while it waits. */
void test_block_prepares_at_once(void **st)
{
	state &s = S(st);
	s.a->set_wait_policy({wait_policy_kind::block, 50});
	assert_int_equal(s.a->open_wait(&test_prov, s.kind, nullptr), 0);
	fake_object *a = s.a.get();
	/* the write comes 100 ms after the wait's first look, so that the wait is blocked
	 * whenever the host runs this thread (started late, it would find the work at once) */
	std::atomic<bool> looked{false};
	s.threads.emplace_back([a, &looked] {
		while (!looked.load())
			std::this_thread::yield();
		std::this_thread::sleep_for(std::chrono::milliseconds(100));
		a->write();
	});
	int ret = a->wait_object()->wait_for(*a, vwait::util::deadline_after(5000), [&] {
		looked.store(true);
		return a->read();
	});
	s.threads.back().join();
	s.threads.pop_back();
	const long polls = a->polls.load(), prepares = a->arms.load();
	print_message("kind %d: block: %ld polls, %ld prepares\n", s.kind, polls, prepares);
	assert_int_equal(ret, 0);
	if (s.kind == FI_WAIT_YIELD) {
		assert_int_equal(prepares, 0); /* nothing sleeps on fds: never arms */
	} else {
		assert_true(prepares >= 1);
		assert_true(polls <= 8); /* slept: no spinning */
	}
}

/* A wait on a's waiter for a write that another thread makes after `after`: the polls it
 * took (the wait must succeed). */
long polls_until_written(fake_object *a, std::chrono::microseconds after)
{
	long polls = 0;
	/* the write comes `after` past the wait's first look, not past the thread's start: a
	 * waiting thread descheduled between the two (a loaded host) would otherwise see a wait
	 * shorter than the budget, which the adaptive policy rightly takes for a short one */
	std::atomic<bool> looked{false};
	std::thread t([a, after, &looked] {
		while (!looked.load())
			std::this_thread::yield();
		std::this_thread::sleep_for(after);
		a->write();
	});
	int ret = a->wait_object()->wait_until(vwait::util::deadline_after(5000), [&] {
		polls++;
		looked.store(true);
		return a->read();
	});
	t.join();
	assert_int_equal(ret, 0);
	return polls;
}

/* A real waiter measures its wake-up cost: 20 waits whose work comes 2 ms after the first
 * look sleep (adaptive learns they are long), and the calibration timer times the wake-up. */
void test_waiter_measures_wake(void **st)
{
	state &s = S(st);
	vwait::util::wake_stats proc;
	const vwait::util::policy_inputs in{&proc, nullptr};
	s.a->set_wait_policy({wait_policy_kind::adaptive, 1000, &in});
	assert_int_equal(s.a->open_wait(&test_prov, s.kind, nullptr), 0);
	fake_object *a = s.a.get();
	waiter *w = a->wait_object();
	/* 20 waits of 2 ms, and more while W is unknown: on a loaded machine the write that ends
	 * a wait often beats the calibration timer, whose wake-ups are the samples W needs */
	const auto &own = w->learner().own_wake();
	int waits = 0;
	while (waits < 20 || (!own.known() && waits < 400)) {
		polls_until_written(a, std::chrono::milliseconds(2));
		waits++;
	}
	print_message("kind %d: %d waits, wake-up cost %.1f us (path %.1f us over %llu sleeps, "
	              "wake-up %.1f us over %llu timers)\n",
	              s.kind, waits, w->learner().wake_cost_ns() / 1e3, own.path_ns() / 1e3,
	              static_cast<unsigned long long>(own.path().kept()), own.wake_ns() / 1e3,
	              static_cast<unsigned long long>(own.wake().kept()));
	assert_true(own.path().kept() >= 10);
	assert_true(own.wake().kept() >= 2);
	assert_true(own.known());
	assert_true(proc.known());
	assert_true(w->learner().wake_cost_ns() > 0);
}

/* adaptive: waits much longer than the budget make it stop spinning (its arms come without a
 * spin), and short ones bring spinning back. Counted by why each wait armed, not by polls: a
 * loaded host that deschedules a spinning thread cuts its polls, not its decision. */
void test_adaptive_learns(void **st)
{
	state &s = S(st);
	s.a->set_wait_policy({wait_policy_kind::adaptive, 2000, &quiet});
	assert_int_equal(s.a->open_wait(&test_prov, s.kind, nullptr), 0);
	fake_object *a = s.a.get();
	waiter *w = a->wait_object();
	auto long_wait = [a] { return polls_until_written(a, std::chrono::milliseconds(10)); };
	const vwait::util::wake_counts c0 = w->counts();
	long first = long_wait();
	const vwait::util::wake_counts c1 = w->counts();
	for (int i = 0; i < 7; i++)
		long_wait();
	assert_true(w->learner().score() < vwait::util::spin_learner::score_one / 2);
	long later = 0;
	const vwait::util::wake_counts c2 = w->counts();
	for (int i = 0; i < 4; i++)
		later += long_wait();
	const vwait::util::wake_counts l = w->counts().since(c2);
	print_message("kind %d: adaptive, 10 ms waits: %ld polls in the first, %ld in 4 later "
	              "ones, which armed %llu times at once and %llu after a spin\n",
	              s.kind, first, later, static_cast<unsigned long long>(l.arm_no_spin),
	              static_cast<unsigned long long>(l.arm_budget));
	if (s.kind != FI_WAIT_YIELD) { /* YIELD polls between yields and never arms */
		/* the first wait spun (a host that held it past 10 ms lets it find the work
		 * unarmed: no arm at all) */
		assert_int_equal(c1.since(c0).arm_no_spin, 0);
		/* later: at most one of 4 is a probe that spins; the others arm at once */
		assert_true(l.arm_budget <= 1);
		assert_true(l.arm_no_spin >= 1);
	}
	/* work that is there at once is no wait: it teaches nothing */
	const unsigned low = w->learner().score();
	for (int i = 0; i < 4; i++) {
		a->write();
		assert_int_equal(
		    w->wait_until(vwait::util::deadline_after(1000), [a] { return a->read(); }), 0);
	}
	assert_int_equal(w->learner().score(), low);
	/* waits shorter than the budget bring spinning back within a few. The work comes
	 * between the first look and the second, so the wait lasts microseconds however loaded
	 * the host: a thread's 200 us sleep overran the 2 ms budget on every wait with six busy
	 * loops on two cores (and failed CI's packaging stage, two builds at once). */
	int shorts = 0;
	while (shorts < 8 && w->learner().score() < vwait::util::spin_learner::score_one / 2) {
		int looks = 0;
		assert_int_equal(w->wait_until(vwait::util::deadline_after(1000),
		                               [a, &looks] {
			                               if (looks++ == 1)
				                               a->write();
			                               return a->read();
		                               }),
		                 0);
		assert_int_equal(looks, 2);
		shorts++;
	}
	print_message("kind %d: adaptive, spinning again after %d short waits\n", s.kind, shorts);
	assert_true(w->learner().score() >= vwait::util::spin_learner::score_one / 2);
}

/* adaptive: a call that finds its work at once between long waits (a server's send completion
 * between two pings that come after a think time) does not bring spinning back: the long
 * waits keep sleeping at once. Counted as short waits, those calls reset the probe gap and
 * every long wait spun its whole budget first. */
void test_adaptive_found_at_once(void **st)
{
	state &s = S(st);
	s.a->set_wait_policy({wait_policy_kind::adaptive, 2000, &quiet});
	assert_int_equal(s.a->open_wait(&test_prov, s.kind, nullptr), 0);
	fake_object *a = s.a.get();
	waiter *w = a->wait_object();
	auto long_wait = [a] { return polls_until_written(a, std::chrono::milliseconds(5)); };
	for (int i = 0; i < 8; i++)
		long_wait();
	/* at most two of the next 12 long waits may probe (the gap's countdown started while
	 * the gap grew) */
	std::vector<long> n;
	for (int i = 0; i < 12; i++) {
		a->write(); /* found at once */
		assert_int_equal(
		    w->wait_until(vwait::util::deadline_after(1000), [a] { return a->read(); }), 0);
		n.push_back(long_wait());
	}
	std::sort(n.begin(), n.end());
	const long polls = std::accumulate(n.begin(), n.end() - 2, 0L);
	print_message("kind %d: adaptive, 5 ms waits after work found at once: %ld polls in the "
	              "10 shortest of 12\n",
	              s.kind, polls);
	assert_true(w->learner().score() < vwait::util::spin_learner::score_one / 2);
	/* the premise: a 5 ms wait is long, past S. On a loaded host the calibrations can
	 * measure W in milliseconds, and then a wait of 5 ms less W is judged short (under S)
	 * and is spun, as it should be (once: 152,839 polls, a VM running beside the tests) */
	const uint64_t w_ns = w->learner().costs().w;
	if (w_ns + w->learner().costs().s >= 5000000) {
		print_message("W %.0f us: 5 ms waits are not long here, polls not checked\n",
		              w_ns / 1e3);
		return;
	}
	if (s.kind != FI_WAIT_YIELD) /* YIELD polls between yields */
		assert_true(polls <= 10 * 8);
}

/* A waiter with no traffic costs next to no CPU: one long wait, then a loop of short
 * timeouts (an application polling its CQ with fi_cq_sread(timeout 10 ms)). What it costs is
 * counted, not timed (the CPU time is printed): nothing but the policy's calibration timer
 * wakes it, every call ends asleep at its deadline, and few calls spin at all. A waiter that
 * spins while idle spins in every call. */
void test_idle_cpu(void **st)
{
	state &s = S(st);
	assert_int_equal(s.a->open_wait(&test_prov, s.kind, nullptr), 0);
	fake_object *a = s.a.get();
	waiter *w = a->wait_object();
	const int calls = 61;
	struct timespec c0, c1;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
	uint64_t unslept = 0; /* calls during which no sleep began */
	for (int i = 0; i < calls; i++) {
		const uint64_t before = w->counts().sleeps;
		assert_int_equal(w->wait_until(vwait::util::deadline_after(i == 0 ? 300 : 10),
		                               [a] { return a->read(); }),
		                 -FI_ETIMEDOUT);
		unslept += w->counts().sleeps == before;
	}
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
	const double cpu_ms = (c1.tv_sec - c0.tv_sec) * 1e3 + (c1.tv_nsec - c0.tv_nsec) / 1e6;
	const vwait::util::wake_counts c = w->counts();
	const uint64_t spun = c.arm_budget;
	print_message(
	    "kind %d, policy %s: %d idle calls: %.2f ms of CPU, %llu sleeps, %llu "
	    "wake-ups (%llu by the calibration timer), %llu calls spun their budget\n",
	    s.kind, vwait::util::wait_policy_name(s.policy.kind), calls, cpu_ms,
	    static_cast<unsigned long long>(c.sleeps), static_cast<unsigned long long>(c.wakeups),
	    static_cast<unsigned long long>(c.calib), static_cast<unsigned long long>(spun));
	assert_int_equal(c.sleeps, c.wakeups + c.timeouts);
	assert_int_equal(c.wakeups, c.calib);
	/* every call ends asleep at its deadline, or just after a calibration wake-up found the
	 * deadline passed; a call that a loaded host held past its deadline before it could arm
	 * ends unarmed and unslept: a few of those at most */
	assert_true(c.timeouts + c.calib + unslept >= static_cast<uint64_t>(calls));
	assert_true(unslept <= static_cast<uint64_t>(calls) / 10);
	/* a calibrated sleep is at most every other one, and the timer ends it once */
	assert_true(c.calib <= c.timeouts);
	/* adaptive spins only while its recent waits were short: the first waits, before the
	 * score falls below half (3 long ones), then the probes (a gap that doubles: 6 in 60
	 * calls), and the calls that start in the shared probe window (1 ms in 256, 3 at most
	 * in this test's 1 s); a third of the calls is far above that and far below all of them */
	assert_true(spun <= static_cast<uint64_t>(calls) / 3);
}

/* ------------------------------------------------------------------ stress */

/* Pairs of threads ping-pong through two waiters (a CQ-like object each way): every round
 * needs one wakeup each way, so a lost wakeup stalls the pair until its 2 s watchdog
 * deadline; stalls are counted and must be zero. A stall is a wait that timed out although
 * its work had been published a second before: a peer that merely did not run for 2 s (two
 * package builds testing at once on 2 cores) is not one, its waiter just waits again.
 * Several pairs share the two waiters, so several threads block on one waiter at once
 * (leader + followers). */
using clock_ns = int64_t;

clock_ns now_ns()
{
	return std::chrono::duration_cast<std::chrono::nanoseconds>(
	           std::chrono::steady_clock::now().time_since_epoch())
	    .count();
}

void test_stress_pingpong(void **st)
{
	state &s = S(st);
	const int pairs = 2;
	/* block and fixed share adaptive's code paths but for the budget: a fifth each */
	const int per_policy = s.policy.kind == wait_policy_kind::adaptive ? 1 : 5;
	const int rounds = (s.kind == FI_WAIT_YIELD ? 5000 : 50000) / per_policy;
	assert_int_equal(s.a->open_wait(&test_prov, s.kind, nullptr), 0);
	assert_int_equal(s.b->open_wait(&test_prov, s.kind, nullptr), 0);
	fake_object *ping = s.a.get(), *pong = s.b.get();

	struct counters {
		std::atomic<uint64_t> sent{0}, acked{0};
		std::atomic<clock_ns> sent_at{0}, acked_at{0};
	};
	std::vector<counters> c(pairs);
	std::atomic<int> stalls{0};
	std::atomic<long> waits{0};
	/* after a timeout: was the work there for a second already? */
	auto lost = [](bool there, const std::atomic<clock_ns> &at) {
		return there && now_ns() - at.load() > 1000000000;
	};
	auto t0 = std::chrono::steady_clock::now();
	for (int p = 0; p < pairs; ++p) {
		counters *cp = &c[static_cast<size_t>(p)];
		s.threads.emplace_back(
		    [=, &stalls,
		     &waits] { /* producer */
			       for (uint64_t i = 1; i <= static_cast<uint64_t>(rounds); ++i) {
				       cp->sent_at.store(now_ns());
				       cp->sent.store(i);
				       ping->notify();
				       while (pong->wait_object()->wait_until(
				                  vwait::util::deadline_after(2000),
				                  [&] { return cp->acked.load() >= i; }) != 0)
					       if (lost(cp->acked.load() >= i, cp->acked_at))
						       stalls.fetch_add(1);
				       waits.fetch_add(1);
			       }
		    });
		s.threads.emplace_back(
		    [=, &stalls,
		     &waits] { /* consumer */
			       for (uint64_t i = 1; i <= static_cast<uint64_t>(rounds); ++i) {
				       while (ping->wait_object()->wait_until(
				                  vwait::util::deadline_after(2000),
				                  [&] { return cp->sent.load() >= i; }) != 0)
					       if (lost(cp->sent.load() >= i, cp->sent_at))
						       stalls.fetch_add(1);
				       waits.fetch_add(1);
				       cp->acked_at.store(now_ns());
				       cp->acked.store(i);
				       pong->notify();
			       }
		    });
	}
	for (auto &t : s.threads)
		t.join();
	s.threads.clear();
	double dt = seconds_since(t0);
	print_message("kind %d, policy %s: %d pairs x %d round trips: %ld waits, %d stalls, "
	              "%.2f s (%.1f us per round trip)\n",
	              s.kind, vwait::util::wait_policy_name(s.policy.kind), pairs, rounds,
	              waits.load(), stalls.load(), dt, dt * 1e6 / rounds);
	assert_int_equal(stalls.load(), 0);
	assert_int_equal(waits.load(), 2L * pairs * rounds);
	for (auto &x : c)
		assert_int_equal(x.acked.load(), static_cast<uint64_t>(rounds));
}

/* ------------------------------------------------------------------ descriptors */

size_t fd_count()
{
	return proc_entries("/proc/self/fd");
}

/* What a private wait object holds, whatever the number of objects: FD an epoll descriptor
 * and the application's eventfd, POLLFD that eventfd, MUTEX_COND and YIELD none (the thread
 * that blocks has one eventfd of its own, for every wait object it blocks on). Closed, they
 * leave nothing behind. */
void test_descriptors(void **st)
{
	state &s = S(st);
	struct {
		enum fi_wait_obj kind;
		size_t each;
	} kinds[] = {
	    {FI_WAIT_FD, 2}, {FI_WAIT_POLLFD, 1}, {FI_WAIT_MUTEX_COND, 0}, {FI_WAIT_YIELD, 0}};
	/* this thread's own signal, opened by its first blocking wait */
	assert_int_equal(s.a->open_wait(&test_prov, FI_WAIT_FD, nullptr), 0);
	s.a->wait_object()->wait_until(vwait::util::deadline_after(1), [] { return false; });
	for (auto &k : kinds) {
		const size_t before = fd_count();
		for (int i = 0; i < 100; ++i) {
			s.many.push_back(std::make_unique<fake_object>(FI_CLASS_CQ));
			assert_int_equal(s.many.back()->open_wait(&test_prov, k.kind, nullptr), 0);
			s.many.back()->wait_object()->wait_until(vwait::util::deadline_after(0),
			                                         [] { return false; });
		}
		const size_t after = fd_count();
		print_message("wait_obj %d: %zu descriptors per object\n", static_cast<int>(k.kind),
		              (after - before) / 100);
		assert_int_equal(after - before, 100 * k.each);
		s.many.clear();
		assert_int_equal(fd_count(), before);
	}
}

/* What a private FI_WAIT_FD wait object (a CQ's own, one member and one source: its completion
 * channel) holds in memory: the waiter and what it allocates, counted by malloc, idle, after
 * fi_trywait (the fi_poll(3) loop of an application that sleeps in its own epoll), and after
 * its first blocking call. What only a large wait set uses (its recently active members), what
 * only a waiter that something blocks on uses (the wait policy's learner, the counts of its
 * sleeps, the sleepers' lock and list, MUTEX_COND's cond and helper thread) are not made for an
 * idle one; its one member takes a small hash table (the goal: an idle FD CQ costing no more
 * than upstream verbs', whose waiting parts are kernel objects); the figures are in
 * doc/benchmarks.md, Scale. */
void test_memory(void **st)
{
	state &s = S(st);
	print_message("sizeof(waiter) %zu\n", sizeof(waiter));
	assert_true(sizeof(waiter) <= 400); /* 384 with --enable-lock-check */
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
	constexpr int n = 100;
	long long idle = 0, tried = 0, blocked = 0;
	/* in a block: skip() leaves by longjmp, and nothing with a destructor may be alive then
	 * (ASan's leak check saw the vector's 400 bytes) */
	{
		/* stand-ins for the completion channels */
		std::vector<vwait::util::fd> channels(n + 1);
		for (int i = 0; i <= n; ++i) {
			s.many.push_back(std::make_unique<fake_object>(FI_CLASS_CQ));
			channels[i].reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
			assert_true(channels[i].get() >= 0);
		}
		auto heap = [] {
			const struct mallinfo2 m = mallinfo2();
			return static_cast<long long>(m.uordblks + m.hblkhd);
		};
		auto drain = [](void *) noexcept {};
		auto open = [&](int i) {
			assert_int_equal(s.many[i]->open_wait(&test_prov, FI_WAIT_FD, nullptr), 0);
			assert_int_equal(s.many[i]->wait_object()->add_source(
			                     channels[i].get(), POLLIN, drain, nullptr),
			                 0);
		};
		auto block_once = [&](int i) {
			s.many[i]->wait_object()->wait_until(vwait::util::deadline_after(0),
			                                     [] { return false; });
		};
		/* the last one first, through every path: what a thread makes once for all (its
		 * signal, its vectors) is not counted below */
		open(n);
		assert_int_equal(s.many[n]->wait_object()->trywait(), 0);
		block_once(n);
		const long long before = heap();
		for (int i = 0; i < n; ++i)
			open(i);
		idle = (heap() - before) / n;
		for (int i = 0; i < n; ++i)
			assert_int_equal(s.many[i]->wait_object()->trywait(), 0);
		tried = (heap() - before) / n;
		for (int i = 0; i < n; ++i)
			block_once(i);
		blocked = (heap() - before) / n;
		print_message(
		    "a private FI_WAIT_FD wait object with its one source: %lld bytes idle, "
		    "%lld after fi_trywait, %lld after a blocking call\n",
		    idle, tried, blocked);
		for (int i = 0; i <= n; ++i)
			assert_int_equal(s.many[i]->wait_object()->remove_source(channels[i].get()),
			                 0);
		s.many.clear();
	}
	if (idle == 0)
		skip(); /* a sanitizer's malloc: mallinfo2 does not see it */
	assert_true(idle <= 600);
	/* the fi_trywait loop makes nothing; a blocking call makes the blocking parts */
	assert_int_equal(tried, idle);
	assert_true(blocked >= idle + 300);
#else
	skip();
#endif
}

/* The blocking parts of a waiter are made by its first blocking call, whichever thread makes
 * it: threads that start their first call at once on a new waiter all end up with the same
 * parts (the learner, the counts), and every sleep is counted once (TSan, ASan: one set
 * made, the others' freed). */
void test_blocking_parts_race(void **st)
{
	state &s = S(st);
	constexpr int rounds = 50, nthreads = 4;
	for (int r = 0; r < rounds; ++r) {
		auto o = std::make_unique<fake_object>(FI_CLASS_CQ);
		o->set_wait_policy(s.policy);
		assert_int_equal(o->open_wait(&test_prov, FI_WAIT_FD, nullptr), 0);
		waiter *w = o->wait_object();
		assert_int_equal(w->counts().sleeps, 0);
		std::atomic<int> ready{0};
		std::atomic<int> timeouts{0};
		const vwait::util::spin_learner *seen[nthreads] = {};
		std::vector<std::thread> ts;
		for (int t = 0; t < nthreads; ++t)
			ts.emplace_back([&, t] {
				ready.fetch_add(1);
				while (ready.load() < nthreads) {
				}
				if (w->wait_until(vwait::util::deadline_after(1),
				                  [] { return false; }) == -FI_ETIMEDOUT)
					timeouts.fetch_add(1);
				seen[t] = &w->learner();
			});
		for (auto &t : ts)
			t.join();
		assert_int_equal(timeouts.load(), nthreads);
		for (int t = 1; t < nthreads; ++t)
			assert_ptr_equal(seen[t], seen[0]);
		const vwait::util::wake_counts c = w->counts();
		assert_int_equal(c.sleeps, c.wakeups + c.timeouts);
	}
}

/* ------------------------------------------------------------------ large sets */

/* A wait set of 4096 members whose waits all find their work in the poll phase (so none
 * reaches the prepare phase, which arms): the members that joined are armed once, on the first
 * pass, and after that a wait looks only at the few that reported something, not at every
 * member. Every member still wakes the set (a blocked waiter too), and closing them in a random
 * order leaves the set empty and closable. */
void test_many_members(void **st)
{
	state &s = S(st);
	open_set(s);
	constexpr size_t n = 4096;
	for (size_t i = 0; i < n; ++i) {
		s.many.push_back(std::make_unique<fake_object>(FI_CLASS_CQ));
		assert_int_equal(s.many.back()->open_wait(&test_prov, FI_WAIT_SET, s.set), 0);
	}
	waiter *w = nullptr;
	assert_int_equal(vwait::util::get_waiter(&s.set->fid, &w), 0);
	assert_int_equal(w->member_count(), n);
	auto looks = [&s] {
		long k = 0;
		for (auto &o : s.many)
			k += o->readies.exchange(0) + o->trywaits.exchange(0);
		return k;
	};
	assert_int_equal(looks(), 0); /* joining costs no look */

	/* the first wait arms everyone once */
	s.many[5]->write();
	assert_int_equal(fi_sets::wait(s.set, 0), 0);
	assert_true(s.many[5]->read());
	long first = looks();
	assert_true(first >= static_cast<long>(n) && first <= static_cast<long>(n) + 64);

	/* 1000 rounds, one member each, found in the poll phase */
	constexpr int rounds = 1000;
	for (int r = 0; r < rounds; ++r) {
		fake_object *o = s.many[static_cast<size_t>(r) * 7 % n].get();
		o->write();
		assert_int_equal(fi_sets::wait(s.set, 1000), 0);
		assert_true(o->read());
	}
	long later = looks();
	print_message("wait set of %zu members: first wait %ld looks, then %d rounds %ld looks "
	              "(a scan would be %ld)\n",
	              n, first, rounds, later, static_cast<long>(n) * rounds);
	/* each round: at most the recently reported ones (waiter::peek_keep, 32) and an
	 * arm of the one that went idle */
	assert_true(later <= 40L * rounds);

	/* every member wakes the set, found at once... */
	for (auto &o : s.many) {
		o->write();
		assert_int_equal(fi_sets::wait(s.set, 0), 0);
		assert_true(o->read());
	}
	/* ...and after everyone went idle, a blocked waiter, woken by any of them */
	assert_int_equal(fi_sets::wait(s.set, 0), -FI_ETIMEDOUT);
	for (size_t i : {size_t{0}, n / 3, n - 1}) {
		fake_object *o = s.many[i].get();
		std::thread t([o] {
			std::this_thread::sleep_for(std::chrono::milliseconds(20));
			o->write();
		});
		auto t0 = std::chrono::steady_clock::now();
		int ret = fi_sets::wait(s.set, 5000);
		t.join();
		assert_int_equal(ret, 0);
		assert_true(seconds_since(t0) < 2.0);
		assert_true(o->read());
	}

	/* closed in a random order: the set ends empty and closes */
	std::vector<size_t> order(n);
	std::iota(order.begin(), order.end(), size_t{0});
	std::shuffle(order.begin(), order.end(), std::mt19937(37));
	for (size_t k = 0; k < n; ++k) {
		s.many[order[k]].reset();
		if (k % 1024 == 0)
			assert_int_equal(w->member_count(), n - k - 1);
	}
	s.many.clear();
	assert_int_equal(w->member_count(), 0);
	assert_int_equal(fi_close(&s.set->fid), 0);
	s.set = nullptr;
}

constexpr wait_policy adaptive{wait_policy_kind::adaptive, vwait::util::default_spin_us};
constexpr wait_policy block{wait_policy_kind::block, vwait::util::default_spin_us};
constexpr wait_policy fixed{wait_policy_kind::fixed, vwait::util::default_spin_us};
variant k_fd{FI_WAIT_FD, adaptive}, k_pollfd{FI_WAIT_POLLFD, adaptive},
    k_mc{FI_WAIT_MUTEX_COND, adaptive}, k_yield{FI_WAIT_YIELD, adaptive};
variant b_fd{FI_WAIT_FD, block}, b_pollfd{FI_WAIT_POLLFD, block}, b_mc{FI_WAIT_MUTEX_COND, block},
    b_yield{FI_WAIT_YIELD, block};
variant f_fd{FI_WAIT_FD, fixed}, f_pollfd{FI_WAIT_POLLFD, fixed}, f_mc{FI_WAIT_MUTEX_COND, fixed},
    f_yield{FI_WAIT_YIELD, fixed};

} // namespace

#define PER_KIND(f)                                                                                \
	cmocka_unit_test_prestate_setup_teardown(f, setup, teardown, &k_fd),                       \
	    cmocka_unit_test_prestate_setup_teardown(f, setup, teardown, &k_pollfd),               \
	    cmocka_unit_test_prestate_setup_teardown(f, setup, teardown, &k_mc),                   \
	    cmocka_unit_test_prestate_setup_teardown(f, setup, teardown, &k_yield)
/* every kind under the block and fixed policies too (PER_KIND runs adaptive, the default) */
#define PER_OTHER_POLICY(f)                                                                        \
	cmocka_unit_test_prestate_setup_teardown(f, setup, teardown, &b_fd),                       \
	    cmocka_unit_test_prestate_setup_teardown(f, setup, teardown, &b_pollfd),               \
	    cmocka_unit_test_prestate_setup_teardown(f, setup, teardown, &b_mc),                   \
	    cmocka_unit_test_prestate_setup_teardown(f, setup, teardown, &b_yield),                \
	    cmocka_unit_test_prestate_setup_teardown(f, setup, teardown, &f_fd),                   \
	    cmocka_unit_test_prestate_setup_teardown(f, setup, teardown, &f_pollfd),               \
	    cmocka_unit_test_prestate_setup_teardown(f, setup, teardown, &f_mc),                   \
	    cmocka_unit_test_prestate_setup_teardown(f, setup, teardown, &f_yield)

int main(void)
{
	init_logging();
	const struct CMUnitTest tests[] = {
	    /* first: it forks, best done while no other thread runs */
	    cmocka_unit_test(test_blocking_hook),
	    cmocka_unit_test(test_create_bad_kinds),
	    cmocka_unit_test(test_wait_open_bad),
	    cmocka_unit_test_setup_teardown(test_unspec_is_fd, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_open_wait_bad, setup, teardown),
	    PER_KIND(test_close_busy),
	    PER_KIND(test_wait_timeout),
	    PER_KIND(test_signal_ends_wait),
	    PER_KIND(test_source_wakes),
	    PER_KIND(test_hold_source),
	    PER_KIND(test_deadline_with_spurious_wakeups),
	    cmocka_unit_test_setup_teardown(test_getwait_fd, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_getwait_pollfd, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_getwait_mutex_cond, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_getwait_yield, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_helpers_stop_all, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_helpers_stop_all_on_helper, setup, teardown),
	    cmocka_unit_test_prestate_setup_teardown(test_waiter_measures_wake, setup, teardown,
	                                             &k_fd),
	    cmocka_unit_test_prestate_setup_teardown(test_waiter_measures_wake, setup, teardown,
	                                             &k_pollfd),
	    PER_KIND(test_poll_phase_never_arms),
	    PER_KIND(test_block_prepares_at_once),
	    PER_KIND(test_adaptive_learns),
	    PER_KIND(test_adaptive_found_at_once),
	    cmocka_unit_test_prestate_setup_teardown(test_idle_cpu, setup, teardown, &k_fd),
	    cmocka_unit_test_prestate_setup_teardown(test_idle_cpu, setup, teardown, &k_mc),
	    PER_OTHER_POLICY(test_signal_ends_wait),
	    PER_OTHER_POLICY(test_source_wakes),
	    PER_KIND(test_stress_pingpong),
	    PER_OTHER_POLICY(test_stress_pingpong),
	    cmocka_unit_test_setup_teardown(test_descriptors, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_memory, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_blocking_parts_race, setup, teardown),
	    cmocka_unit_test_prestate_setup_teardown(test_many_members, setup, teardown, &k_fd),
	    cmocka_unit_test_prestate_setup_teardown(test_many_members, setup, teardown, &b_pollfd),
	};
	return cmocka_run_group_tests_name("util_wait", tests, nullptr, nullptr);
}
