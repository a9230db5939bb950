/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* bench_util: the util layer's blocking machinery, measured on the host, beside libfabric's own
 * util objects (the tcp provider) through the public API in the same run.
 *
 *   wake latency   signal -> the blocked thread running again, per wait object kind (and
 *                  through an eventfd standing in for a completion channel)
 *   trywait        util::trywait on one idle object (fi_trywait's cost)
 *   fi_poll        1, 64, 1024 members of which one is active (and none active)
 *   tcp            fi_cq_sread woken by fi_cq_signal; fi_trywait on a CQ; fi_poll over
 *                  1/64/1024 idle tcp CQs
 *
 *   think          (-T repeats) the wait policy on a think-time sweep: adaptive, block and
 *                  spinning, latency, server CPU per message and adaptive's measured W
 *
 * usage: bench_util [-n iterations] [-q] [-T repeats]   (-q: skip the tcp part; -T: only the
 * think-time sweep)
 */
#include "tcp_env.h"
#include "vwait/fi_deprecated.h"
#include "vwait/util/fd.h"
#include "vwait/util/poll.h"
#include "vwait/util/trywait.h"
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
#include <memory>
#include <poll.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace
{

using clk = std::chrono::steady_clock;
using vwait::util::waiter;

struct fi_provider bench_prov = {
    .version = FI_VERSION(0, 1),
    .fi_version = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION),
    .context = {},
    .name = "vwait-bench",
    .getinfo = nullptr,
    .fabric = nullptr,
    .cleanup = nullptr,
};

/* A CQ-like object: entries counted, context for fi_poll, a fid that answers
 * ctl_get_waitable. */
class object : public vwait::util::waitable
{
public:
	explicit object(void *context)
	{
		ops_.size = sizeof(ops_);
		ops_.control = [](struct fid *f, int cmd, void *arg) noexcept {
			return reinterpret_cast<holder *>(f)->self->answer_control(cmd, arg);
		};
		h_.fid.fclass = FI_CLASS_CQ;
		h_.fid.context = context;
		h_.fid.ops = &ops_;
		h_.self = this;
	}
	~object() override { close_wait(); }
	struct fid *fid() noexcept { return &h_.fid; }
	bool ready() noexcept override { return entries.load() > 0; }
	int trywait() noexcept override { return entries.load() > 0 ? -FI_EAGAIN : 0; }
	void *poll_context() const noexcept override { return h_.fid.context; }
	/* a blocking call's trywait phase (waiter::wait_for) */
	int arm_now() noexcept override
	{
		armed.store(true);
		return 0;
	}
	std::atomic<long> entries{0};
	std::atomic<bool> armed{false};

private:
	struct holder {
		struct fid fid;
		object *self;
	};
	holder h_ = {};
	struct fi_ops ops_ = {};
};

/* an eventfd standing in for a completion channel: its drain queues the event on target */
struct chan {
	vwait::util::fd efd = vwait::util::fd::eventfd_nonblock();
	object *target;
	static void drain(void *arg) noexcept
	{
		auto *c = static_cast<chan *>(arg);
		uint64_t v;
		if (::read(c->efd.get(), &v, sizeof(v)) == sizeof(v))
			c->target->notify();
	}
};

double ns_since(clk::time_point t0)
{
	return std::chrono::duration<double, std::nano>(clk::now() - t0).count();
}

struct stats {
	double median, p99;
};

stats summarize(std::vector<double> &v)
{
	std::sort(v.begin(), v.end());
	return {v[v.size() / 2], v[std::min(v.size() - 1, v.size() * 99 / 100)]};
}

/* Let the waiting thread block for real before each signal. */
void pause_us(int us)
{
	std::this_thread::sleep_for(std::chrono::microseconds(us));
}

/* One-way wake latency: the producer stamps the time, then signals; the blocked thread stamps
 * the time it runs again. signal() is how the event is delivered. */
template <typename Wait, typename Signal>
stats wake_latency(int n, Wait wait, Signal signal)
{
	std::vector<double> lat(static_cast<size_t>(n));
	std::atomic<long> posted{0}, done{0};
	std::vector<clk::time_point> stamp(static_cast<size_t>(n) + 1);
	std::thread t([&] {
		for (long i = 1; i <= n; ++i) {
			wait([&] { return posted.load() >= i; });
			lat[static_cast<size_t>(i - 1)] =
			    std::chrono::duration<double, std::nano>(clk::now() -
			                                             stamp[static_cast<size_t>(i)])
			        .count();
			done.store(i);
		}
	});
	for (long i = 1; i <= n; ++i) {
		while (done.load() < i - 1)
			std::this_thread::yield();
		pause_us(30);
		stamp[static_cast<size_t>(i)] = clk::now();
		posted.store(i);
		signal();
	}
	t.join();
	return summarize(lat);
}

void report(const char *what, stats s)
{
	printf("%-58s median %8.1f us   p99 %8.1f us\n", what, s.median / 1000, s.p99 / 1000);
	fflush(stdout);
}

void bench_wake(int n)
{
	printf("\n== wake-up latency (signal -> blocked thread running), %d samples\n", n);
	struct kind {
		enum fi_wait_obj k;
		const char *name;
	} kinds[] = {{FI_WAIT_FD, "FD"},
	             {FI_WAIT_POLLFD, "POLLFD"},
	             {FI_WAIT_MUTEX_COND, "MUTEX_COND"},
	             {FI_WAIT_YIELD, "YIELD"}};
	/* the first kind measured twice: the first pass warms caches, lazily set-up kernel
	 * structures and the CPU clock, and is not reported */
	std::vector<kind> order(std::begin(kinds), std::end(kinds));
	order.insert(order.begin(), kinds[0]);
	bool warm = false;
	for (auto &k : order) {
		bool quiet = !warm;
		warm = true;
		auto report = [quiet](const char *what, stats st) {
			if (!quiet)
				::report(what, st);
		};
		object obj(nullptr);
		if (obj.open_wait(&bench_prov, k.k, nullptr))
			return;
		waiter *w = obj.wait_object();
		char label[128];
		snprintf(label, sizeof(label), "vwait %s: wait_until, woken by notify()", k.name);
		report(label, wake_latency(
		                  n,
		                  [&](auto pred) {
			                  w->wait_until(vwait::util::deadline_after(5000), pred);
		                  },
		                  [&] { obj.notify(); }));

		chan ch;
		ch.target = &obj;
		if (w->add_source(ch.efd.get(), POLLIN, chan::drain, &ch))
			return;
		snprintf(label, sizeof(label), "vwait %s: wait_until, woken by a channel fd event",
		         k.name);
		report(label, wake_latency(
		                  n,
		                  [&](auto pred) {
			                  w->wait_until(vwait::util::deadline_after(5000), pred);
		                  },
		                  [&] {
			                  uint64_t one = 1;
			                  ssize_t r = ::write(ch.efd.get(), &one, sizeof(one));
			                  (void)r;
		                  }));
		w->remove_source(ch.efd.get());
	}

	/* the application's own loop: fi_trywait, then poll(2) on FI_GETWAIT's fd */
	object obj(nullptr);
	obj.open_wait(&bench_prov, FI_WAIT_FD, nullptr);
	int fd = -1;
	obj.answer_control(FI_GETWAIT, &fd);
	struct fid *fids[1] = {obj.fid()};
	report("vwait FD: application fi_trywait + poll(2) on the fd",
	       wake_latency(
	           n,
	           [&](auto pred) {
		           while (!pred()) {
			           if (vwait::util::trywait(&bench_prov, fids, 1) == 0) {
				           struct pollfd p = {fd, POLLIN, 0};
				           ::poll(&p, 1, 5000);
			           }
		           }
	           },
	           [&] { obj.notify(); }));
}

void bench_trywait(int n)
{
	printf("\n== fi_trywait on one idle object (nothing queued), %d calls\n", n);
	for (auto k : {FI_WAIT_FD, FI_WAIT_POLLFD, FI_WAIT_MUTEX_COND}) {
		object obj(nullptr);
		obj.open_wait(&bench_prov, k, nullptr);
		struct fid *fids[1] = {obj.fid()};
		vwait::util::trywait(&bench_prov, fids, 1);
		auto t0 = clk::now();
		for (int i = 0; i < n; ++i)
			vwait::util::trywait(&bench_prov, fids, 1);
		printf("vwait util::trywait, wait object %-24s %8.1f ns/call\n",
		       k == FI_WAIT_FD       ? "FD"
		       : k == FI_WAIT_POLLFD ? "POLLFD"
		                             : "MUTEX_COND",
		       ns_since(t0) / n);
	}
}

void bench_poll(int n)
{
	printf("\n== fi_poll with N members (count 8), %d calls\n", n);
	double base = 0;
	for (int members : {1, 64, 1024}) {
		struct fid_poll *ps = nullptr;
		if (vwait::util::poll_open(&bench_prov, nullptr, &ps))
			return;
		std::vector<std::unique_ptr<object>> objs;
		for (int i = 0; i < members; ++i) {
			objs.push_back(std::make_unique<object>(
			    reinterpret_cast<void *>(static_cast<intptr_t>(i + 1))));
			fi_sets::poll_add(ps, objs.back()->fid(), 0);
		}
		void *ctx[8];
		while (fi_sets::poll(ps, ctx, 8) > 0)
			;
		/* best of 5 runs: the host is shared */
		auto best_of = [&](int iters) {
			double best = 1e18;
			for (int rep = 0; rep < 5; ++rep) {
				auto t0 = clk::now();
				for (int i = 0; i < iters; ++i)
					fi_sets::poll(ps, ctx, 8);
				best = std::min(best, ns_since(t0) / iters);
			}
			return best;
		};
		double idle = best_of(n);
		objs[static_cast<size_t>(members / 2)]->entries = 1;
		objs[static_cast<size_t>(members / 2)]->notify();
		double active = best_of(n);
		if (members == 1)
			base = active;
		printf("vwait fi_poll, %4d members: none active %7.1f ns, one active %7.1f ns "
		       "(%.2fx the 1-member cost)\n",
		       members, idle, active, active / base);
		for (auto &o : objs)
			fi_sets::poll_del(ps, o->fid(), 0);
		objs.clear();
		fi_close(&ps->fid);
	}
}

/* ------------------------------------------------------------------ libfabric tcp */

void bench_tcp(int n)
{
	printf("\n== libfabric tcp provider (its util CQ / wait / poll), same run\n");
	tcp_env e;
	int ret = tcp_open(e);
	if (ret) {
		printf("tcp: cannot open fabric/domain on 127.0.0.1: %s (skipped)\n",
		       fi_strerror(-ret));
		return;
	}
	printf("tcp: provider %s, fabric %s, domain %s\n", e.info->fabric_attr->prov_name,
	       e.info->fabric_attr->name, e.info->domain_attr->name);
	struct fi_cq_attr cq_attr = {};
	cq_attr.format = FI_CQ_FORMAT_CONTEXT;
	cq_attr.wait_obj = FI_WAIT_FD;
	cq_attr.size = 64;
	struct fid_cq *cq = nullptr;
	ret = fi_cq_open(e.domain, &cq_attr, &cq, nullptr);
	if (ret) {
		printf("tcp: fi_cq_open(FI_WAIT_FD): %s (skipped)\n", fi_strerror(-ret));
		return;
	}
	/* fi_cq_sread woken by fi_cq_signal */
	report("tcp FD CQ: fi_cq_sread, woken by fi_cq_signal",
	       wake_latency(
	           n,
	           [&](auto pred) {
		           struct fi_cq_entry entry;
		           while (!pred())
			           fi_cq_sread(cq, &entry, 1, nullptr, 5000);
	           },
	           [&] { fi_cq_signal(cq); }));
	struct fid *fids[1] = {&cq->fid};
	fi_trywait(e.fabric, fids, 1);
	auto t0 = clk::now();
	int tw = 0;
	for (int i = 0; i < n * 10; ++i)
		tw = fi_trywait(e.fabric, fids, 1);
	printf("tcp fi_trywait on one idle FD CQ                          %8.1f ns/call "
	       "(returns %d)\n",
	       ns_since(t0) / (n * 10), tw);
	fi_close(&cq->fid);

	for (int members : {1, 64, 1024}) {
		struct fi_poll_attr pattr = {};
		struct fid_poll *ps = nullptr;
		ret = fi_sets::poll_open(e.domain, &pattr, &ps);
		if (ret) {
			printf("tcp: fi_poll_open: %s (skipped)\n", fi_strerror(-ret));
			return;
		}
		std::vector<struct fid_cq *> cqs;
		cq_attr.wait_obj = FI_WAIT_NONE;
		for (int i = 0; i < members; ++i) {
			struct fid_cq *c = nullptr;
			if (fi_cq_open(e.domain, &cq_attr, &c, nullptr))
				break;
			cqs.push_back(c);
			fi_sets::poll_add(ps, &c->fid, 0);
		}
		void *ctx[8];
		int iters = members >= 1024 ? n / 10 : n * 10;
		auto t1 = clk::now();
		for (int i = 0; i < iters; ++i)
			fi_sets::poll(ps, ctx, 8);
		printf("tcp fi_poll, %4zu CQs, none active: %10.1f ns/call\n", cqs.size(),
		       ns_since(t1) / iters);
		for (auto *c : cqs) {
			fi_sets::poll_del(ps, &c->fid, 0);
			fi_close(&c->fid);
		}
		fi_close(&ps->fid);
	}
}

/* The wait policy on the host: a client thread that spins on its answer and thinks `gap` us
 * (busy) before each message, a server thread that waits in wait_until under a policy for the
 * message. The message lands in the server's queue at once (a completion in a CQ that polling
 * sees) and, when the server has armed (its prepare phase), also raises an eventfd source
 * standing in for a completion channel, whose drain wakes the server. One-way latency (half the
 * client's round trip, think excluded), the server thread's CPU per message, and the wake-up cost W
 * adaptive measured. Policies: adaptive (the default inputs: real CPU-shortage signal), block, spin
 * (fixed with a 10 ms budget: polls through every gap here). */
struct think_result {
	double lat_us, cpu_us, wake_us; /* wake_us: this waiter's own W (adaptive; else -1) */
};

think_result think_run(vwait::util::wait_policy policy, int gap_us, int n)
{
	object obj(nullptr);
	obj.set_wait_policy(policy);
	think_result r = {0, 0, 0};
	if (obj.open_wait(&bench_prov, FI_WAIT_FD, nullptr))
		return r;
	waiter *w = obj.wait_object();
	chan ch;
	ch.target = &obj;
	if (w->add_source(ch.efd.get(), POLLIN, chan::drain, &ch))
		return r;
	std::atomic<long> answered{0};
	double cpu_ns = 0;
	std::thread server([&] {
		struct timespec c0, c1;
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
		for (long i = 1; i <= n; ++i) {
			w->wait_for(obj, vwait::util::deadline_after(5000),
			            [&] { return obj.entries.load() >= i; });
			answered.store(i);
		}
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
		cpu_ns = (c1.tv_sec - c0.tv_sec) * 1e9 + (c1.tv_nsec - c0.tv_nsec);
	});
	double sum_ns = 0;
	for (long i = 1; i <= n; ++i) {
		const clk::time_point until = clk::now() + std::chrono::microseconds(gap_us);
		while (clk::now() < until) {
		}
		const clk::time_point t0 = clk::now();
		obj.entries.fetch_add(1);
		if (obj.armed.exchange(false)) {
			uint64_t one = 1;
			ssize_t wr = ::write(ch.efd.get(), &one, sizeof(one));
			(void)wr;
		}
		while (answered.load() < i) {
		}
		sum_ns += ns_since(t0);
	}
	server.join();
	w->remove_source(ch.efd.get());
	r.lat_us = sum_ns / n / 1000;
	r.cpu_us = cpu_ns / n / 1000;
	r.wake_us = policy.kind == vwait::util::wait_policy_kind::adaptive
	                ? w->learner().own_wake().cost_ns() / 1000.0
	                : -1;
	return r;
}

void bench_think(int repeats)
{
	using vwait::util::wait_policy_kind;
	const int gaps[] = {0, 20, 50, 100, 200, 500, 5000};
	const struct {
		const char *name;
		vwait::util::wait_policy p;
	} pols[] = {
	    {"adaptive", {wait_policy_kind::adaptive, vwait::util::default_adaptive_cap_us}},
	    {"block", {wait_policy_kind::block, 0}},
	    {"spin", {wait_policy_kind::fixed, 10000}}};
	printf("\n== think-time sweep on the host (server in wait_until woken through an eventfd "
	       "source; client spinning), median of %d runs\n",
	       repeats);
	printf("%6s  %-9s %10s %12s %9s\n", "gap us", "policy", "lat us", "cpu us/msg", "W us");
	for (int gap : gaps) {
		const int n = gap >= 5000 ? 100 : gap >= 500 ? 1000 : 4000;
		for (const auto &pol : pols) {
			std::vector<double> lat, cpu, wake;
			for (int k = 0; k < repeats; k++) {
				think_result t = think_run(pol.p, gap, n);
				lat.push_back(t.lat_us);
				cpu.push_back(t.cpu_us);
				wake.push_back(t.wake_us);
			}
			auto med = [](std::vector<double> &v) {
				std::sort(v.begin(), v.end());
				return v[v.size() / 2];
			};
			printf("%6d  %-9s %10.2f %12.2f %9.1f\n", gap, pol.name, med(lat), med(cpu),
			       med(wake));
			fflush(stdout);
		}
	}
}

} // namespace

int main(int argc, char **argv)
{
	int n = 20000;
	bool tcp = true;
	int opt, think = 0;
	while ((opt = getopt(argc, argv, "n:qT:")) != -1) {
		if (opt == 'n')
			n = atoi(optarg);
		else if (opt == 'q')
			tcp = false;
		else if (opt == 'T')
			think = atoi(optarg);
		else {
			fprintf(stderr, "usage: %s [-n iterations] [-q] [-T repeats]\n", argv[0]);
			return 2;
		}
	}
	if (think > 0) {
		bench_think(think);
		return 0;
	}
	if (n < 100)
		n = 100;
	bench_wake(n / 4);
	bench_trywait(n * 10);
	bench_poll(n * 10);
	if (tcp)
		bench_tcp(n / 4);
	return 0;
}
