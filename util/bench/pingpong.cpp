/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* Latency and CPU per message of the ping-pong (main.cpp's header says how to run each):
 *   one plain run   -I rounds after -W unmeasured ones: the client's one-way latency, either
 *                   side's CPU time per message;
 *   think-time run  -T: phases, one per think time, the client thinking before each send; per
 *                   phase the latency (think excluded), the server's CPU per message, and what
 *                   vwait's wait policy measured and decided in it;
 *   bursts          -R: bursts timed apart, each (-G) when a driver gives the pair its turn. */
#include "bench.h"

#include "vwait/policy_stats.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <time.h>

#include <algorithm>
#include <cinttypes>

namespace vwait_bench
{

int thread_count()
{
	int n = 0;
	if (DIR *d = opendir("/proc/self/task")) {
		while (struct dirent *e = readdir(d))
			if (e->d_name[0] != '.')
				n++;
		closedir(d);
	}
	return n;
}

double cpu_now_us()
{
	struct timespec ts = {};
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* the client's think time: a busy wait when short (a sleep would overshoot it), a sleep else */
void think(int us)
{
	if (us <= 0)
		return;
	if (us < 200) {
		auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
		while (std::chrono::steady_clock::now() < until) {
		}
		return;
	}
	struct timespec ts = {us / 1000000, (us % 1000000) * 1000L};
	nanosleep(&ts, nullptr);
}

namespace
{

/* one phase of a think-time run */
struct phase {
	int think_us;
	int iters;
};

/* The phases of a think-time run: -I rounds at think 0, fewer when the think is long (at most
 * budget_us of think per phase, at least 20 rounds). Both sides compute the same plan. */
std::vector<phase> plan_of(const std::vector<int> &thinks, int iters, long budget_us)
{
	std::vector<phase> p;
	for (int t : thinks) {
		long n = t > 0 ? budget_us / t : iters;
		p.push_back({t, static_cast<int>(std::max<long>(20, std::min<long>(iters, n)))});
	}
	return p;
}

/* What vwait's adaptive policy has measured and decided in this process so far,
 * through vwait's debug ops (vwait/policy_stats.h): false for another provider. */
bool policy_state(struct fid_fabric *fabric, struct fi_vwait_policy_stats &stats)
{
	struct fi_vwait_policy_stats_ops *ops = nullptr;
	stats = {};
	return fabric &&
	       fi_open_ops(&fabric->fid, FI_VWAIT_POLICY_STATS_OPS, 0,
	                   reinterpret_cast<void **>(&ops), nullptr) == 0 &&
	       ops && ops->query(&fabric->fid, &stats) == 0;
}

/* The policy's decisions between two policy_state() snapshots, as key=value fields */
std::string decisions(const struct fi_vwait_policy_stats &a, const struct fi_vwait_policy_stats &b)
{
	char buf[256];
	snprintf(buf, sizeof(buf),
	         " spun=%" PRIu64 " probes=%" PRIu64 " armed_long=%" PRIu64 " judged_short=%" PRIu64
	         " judged_long=%" PRIu64,
	         b.spun - a.spun, b.probes - a.probes, b.armed_long - a.armed_long,
	         b.judged_short - a.judged_short, b.judged_long - a.judged_long);
	return buf;
}

/* -R: bursts of warmup + iters rounds, each timed apart (the client prints BURST lines);
 * with -G, each burst waits for the driver's turn */
int burst_run(link &l, const options &o)
{
	const bool client = l.client();
	int go = -1, done = -1;
	if (!o.go_fifo.empty()) {
		go = open(o.go_fifo.c_str(), O_RDONLY | O_CLOEXEC);
		done = open(o.done_fifo.c_str(), O_WRONLY | O_CLOEXEC);
		if (go < 0 || done < 0) {
			perror("-G fifo");
			return -FI_EIO;
		}
	}
	/* -T with -R: the client thinks the first think time before every round, and a
	 * burst's latency counts the rounds alone */
	const int think_us = o.thinks.empty() ? 0 : o.thinks[0];
	int ret = 0, i = 0;
	for (int b = 0; b < o.bursts && !ret; b++) {
		char c = 0;
		if (go >= 0 && read(go, &c, 1) != 1) {
			fprintf(stderr, "-G: the driver went away\n");
			ret = -FI_EIO;
			break;
		}
		std::chrono::steady_clock::duration spent{};
		std::chrono::steady_clock::time_point t0;
		for (int k = 0; k < o.warmup + o.iters && !ret; k++) {
			if (client && think_us)
				think(think_us);
			if (k >= o.warmup && (k == o.warmup || think_us))
				t0 = std::chrono::steady_clock::now();
			ret = l.round(client, i++);
			if (k >= o.warmup && think_us)
				spent += std::chrono::steady_clock::now() - t0;
		}
		if (ret)
			break;
		if (!think_us)
			spent = std::chrono::steady_clock::now() - t0;
		double usec = std::chrono::duration<double, std::micro>(spent).count();
		if (client)
			printf("BURST prov=%s burst=%d iters=%d lat_us=%.3f\n", o.prov.c_str(), b,
			       o.iters, usec / o.iters / 2);
		if (done >= 0 && write(done, &c, 1) != 1) {
			fprintf(stderr, "-G: the driver went away\n");
			ret = -FI_EIO;
		}
	}
	if (!ret)
		ret = l.drain(i);
	if (go >= 0)
		close(go);
	if (done >= 0)
		close(done);
	if (!ret && client)
		printf("RESULT prov=%s mode=%s size=%zu bursts=%d iters=%d threads=%d\n",
		       o.prov.c_str(), o.mode_name.c_str(), o.size, o.bursts, o.iters,
		       thread_count());
	return ret;
}

/* A think-time run: warmup rounds, then per phase one unmeasured round at think 0 (the
 * server takes its CPU time there, so that the wait for a phase's first message counts
 * in that phase) and the phase's rounds, and a last round that closes the last phase. */
int think_run(link &l, const options &o)
{
	const bool client = l.client();
	const std::vector<phase> plan = plan_of(o.thinks, o.iters, o.budget_us);
	std::vector<double> lat(plan.size()), cpu(plan.size() + 1);
	std::vector<int> wake(plan.size(), -1);
	/* the policy's state at each phase's start, and at the last one's end */
	std::vector<struct fi_vwait_policy_stats> pol(plan.size() + 1);
	std::vector<bool> pol_ok(plan.size() + 1, false);
	int i = 0;
	for (; i < o.warmup; i++)
		FI_CALL(l.round(client, i));
	for (size_t p = 0; p <= plan.size(); p++) {
		FI_CALL(l.round(client, i++));
		cpu[p] = cpu_now_us();
		pol_ok[p] = policy_state(l.fabric(), pol[p]);
		if (p == plan.size())
			break;
		double sum = 0;
		for (int k = 0; k < plan[p].iters; k++) {
			if (client)
				think(plan[p].think_us);
			auto t0 = std::chrono::steady_clock::now();
			FI_CALL(l.round(client, i++));
			sum += std::chrono::duration<double, std::micro>(
			           std::chrono::steady_clock::now() - t0)
			           .count();
		}
		lat[p] = sum / plan[p].iters / 2;
		struct fi_vwait_policy_stats now;
		wake[p] = policy_state(l.fabric(), now)
		              ? static_cast<int>((now.wake_cost_ns + 999) / 1000)
		              : -1;
	}
	FI_CALL(l.drain(i));
	for (size_t p = 0; p < plan.size(); p++) {
		/* the phase's decisions include its leading round at think 0 */
		const std::string d =
		    pol_ok[p] && pol_ok[p + 1] ? decisions(pol[p], pol[p + 1]) : "";
		if (client)
			printf("PHASE side=client prov=%s mode=%s think_us=%d iters=%d "
			       "lat_us=%.2f wake_us=%d%s\n",
			       o.prov.c_str(), o.mode_name.c_str(), plan[p].think_us, plan[p].iters,
			       lat[p], wake[p], d.c_str());
		else
			printf("PHASE side=server prov=%s mode=%s think_us=%d iters=%d "
			       "cpu_us_per_msg=%.2f wake_us=%d%s\n",
			       o.prov.c_str(), o.mode_name.c_str(), plan[p].think_us, plan[p].iters,
			       (cpu[p + 1] - cpu[p]) / plan[p].iters, wake[p], d.c_str());
	}
	return 0;
}

} // namespace

/* one plain run, -T phases or -R bursts */
int run_pingpong(link &l, const options &o)
{
	if (o.bursts)
		return burst_run(l, o);
	if (!o.thinks.empty())
		return think_run(l, o);
	const bool client = l.client();
	struct rusage r0 = {}, r1 = {};
	std::chrono::steady_clock::time_point t0;
	const int rounds = o.warmup + o.iters;
	for (int i = 0; i < rounds; i++) {
		if (i == o.warmup) {
			getrusage(RUSAGE_SELF, &r0);
			t0 = std::chrono::steady_clock::now();
		}
		FI_CALL(l.round(client, i));
	}
	FI_CALL(l.drain(rounds));
	auto t1 = std::chrono::steady_clock::now();
	getrusage(RUSAGE_SELF, &r1);
	double usec = std::chrono::duration<double, std::micro>(t1 - t0).count();
	double cpu = (r1.ru_utime.tv_sec - r0.ru_utime.tv_sec) * 1e6 +
	             (r1.ru_utime.tv_usec - r0.ru_utime.tv_usec) +
	             (r1.ru_stime.tv_sec - r0.ru_stime.tv_sec) * 1e6 +
	             (r1.ru_stime.tv_usec - r0.ru_stime.tv_usec);
	const int threads = thread_count();
	if (client)
		printf("RESULT prov=%s mode=%s size=%zu iters=%d members=%d lat_us=%.2f "
		       "cpu_us_per_msg=%.2f reads_empty=%llu reads_full=%llu threads=%d\n",
		       o.prov.c_str(), o.mode_name.c_str(), o.size, o.iters, o.members,
		       usec / o.iters / 2, cpu / o.iters / 2, reads_empty, reads_full, threads);
	else
		printf("SERVER prov=%s mode=%s threads=%d cpu_us_per_msg=%.2f\n", o.prov.c_str(),
		       o.mode_name.c_str(), threads, cpu / o.iters / 2);
	return 0;
}

} // namespace vwait_bench
