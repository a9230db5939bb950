/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* The work-queue pattern that test_util_cq's sread_threads asserts on and scale_util -m threads
 * measures: T consumer threads in fi_cq_sread (thread c on cqs[c % cqs.size()]), one producer
 * (the caller) writing `total` completions one at a time, the next once the previous was read,
 * so that the consumers sleep between them; completion i goes to qs[i % qs.size()]. Header
 * only, no cmocka: the caller checks the result. */
#ifndef VWAIT_TEST_WORK_QUEUE_H
#define VWAIT_TEST_WORK_QUEUE_H

#include "vwait/util/cq.h"
#include "vwait/util/wait.h"

#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>

#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace vwait_test
{

struct queue_run {
	vwait::util::wake_counts c; /* the waiter's, over the completions */
	double secs = 0;            /* from the first write to the last read */
	long switches = 0;          /* the consumers' voluntary context switches */
	long bad = 0;               /* an error, an unknown id or an id read twice */
	uintptr_t consumed = 0;
	std::vector<int> seen; /* how often each id was read */
};

/* mark (may be empty) runs just before the first write and just after the last read; write
 * (may be empty) writes completion i instead of a push on qs (which may then be empty): a
 * completion that comes through a channel. */
inline queue_run work_queue(const std::vector<struct fid_cq *> &cqs,
                            const std::vector<vwait::util::sw_cq *> &qs, vwait::util::waiter *w,
                            int threads, uintptr_t total, const std::function<void()> &mark = {},
                            const std::function<void(uintptr_t)> &write = {})
{
	using steady = std::chrono::steady_clock;
	std::vector<std::atomic<int>> seen(total);
	std::atomic<uintptr_t> consumed{0};
	std::atomic<long> bad{0}, switches{0};
	std::atomic<bool> done{false};
	std::vector<std::thread> ts;
	for (int c = 0; c < threads; c++) {
		struct fid_cq *cq = cqs[static_cast<size_t>(c) % cqs.size()];
		ts.emplace_back([&, cq] {
			struct rusage r0, r1;
			getrusage(RUSAGE_THREAD, &r0);
			struct fi_cq_entry out;
			while (!done.load()) {
				/* finite, so that a failure never leaves a thread blocked */
				ssize_t n = fi_cq_sread(cq, &out, 1, nullptr, 1000);
				if (n == -FI_EAGAIN)
					continue;
				auto id = reinterpret_cast<uintptr_t>(out.op_context);
				if (n != 1 || id >= total || seen[id].fetch_add(1) != 0)
					bad++;
				consumed++;
			}
			getrusage(RUSAGE_THREAD, &r1);
			switches += r1.ru_nvcsw - r0.ru_nvcsw;
		});
	}
	/* every consumer asleep (or about to be) before the first completion */
	std::this_thread::sleep_for(std::chrono::milliseconds(20));
	const vwait::util::wake_counts c0 = w->counts();
	if (mark)
		mark();
	const auto t0 = steady::now();
	const auto limit = t0 + std::chrono::seconds(20);
	for (uintptr_t i = 0; i < total && !bad.load(); i++) {
		vwait::util::cq_entry e;
		e.op_context = reinterpret_cast<void *>(i);
		if (write)
			write(i);
		else
			while (qs[i % qs.size()]->push(e) == -FI_EAGAIN)
				std::this_thread::yield();
		while (consumed.load() <= i && !bad.load() && steady::now() < limit)
			std::this_thread::yield();
	}
	queue_run r;
	r.secs = std::chrono::duration<double>(steady::now() - t0).count();
	if (mark)
		mark();
	const vwait::util::wake_counts c1 = w->counts();
	done = true;
	for (struct fid_cq *cq : cqs)
		fi_cq_signal(cq);
	for (auto &t : ts)
		t.join();
	r.c = c1.since(c0);
	r.switches = switches.load();
	r.bad = bad.load();
	r.consumed = consumed.load();
	r.seen.reserve(total);
	for (auto &s : seen)
		r.seen.push_back(s.load());
	return r;
}

} // namespace vwait_test

#endif
