/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* util::wait_policy and the adaptive policy's learner (see include/vwait/util/wait_policy.h). */
#include "vwait/util/wait_policy.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <strings.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>

namespace vwait::util
{

const char *wait_policy_name(wait_policy_kind kind) noexcept
{
	switch (kind) {
	case wait_policy_kind::adaptive:
		return "adaptive";
	case wait_policy_kind::block:
		return "block";
	case wait_policy_kind::fixed:
		return "fixed";
	}
	return "unknown";
}

bool parse_wait_policy(const char *name, wait_policy_kind *out) noexcept
{
	if (!name || !out)
		return false;
	for (wait_policy_kind k :
	     {wait_policy_kind::adaptive, wait_policy_kind::block, wait_policy_kind::fixed}) {
		if (strcasecmp(name, wait_policy_name(k)) == 0) {
			*out = k;
			return true;
		}
	}
	return false;
}

namespace
{
uint64_t ns_of(clock::duration d) noexcept
{
	const auto n = std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
	return n > 0 ? static_cast<uint64_t>(n) : 0;
}

/* CLOCK_MONOTONIC_COARSE (steady_ms_now in wait_policy.h): the vDSO copies it from the last
 * tick, with no read of the TSC; CLOCK_MONOTONIC where it cannot be had */
uint64_t steady_ms() noexcept
{
	struct timespec ts;
	if (::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) == 0)
		return static_cast<uint64_t>(ts.tv_sec) * 1000 +
		       static_cast<uint64_t>(ts.tv_nsec) / 1000000;
	return static_cast<uint64_t>(
	    std::chrono::duration_cast<std::chrono::milliseconds>(clock::now().time_since_epoch())
	        .count());
}

/* a run of digits at p, its value in *out (saturated); the end of the run, or null if none */
const char *parse_digits(const char *p, long *out) noexcept
{
	long v = 0;
	const char *start = p;
	for (; *p >= '0' && *p <= '9'; p++)
		v = v < 100000000 ? v * 10 + (*p - '0') : v;
	*out = v;
	return p == start ? nullptr : p;
}
} // namespace

/* By hand, not sscanf: the three averages are skipped, not converted (sscanf's three %lf
 * were ~4,550 instructions a snapshot, counted in the guest, where a wait's own bookkeeping
 * is a few hundred) */
int parse_loadavg_runnable(const char *buf) noexcept
{
	const char *p = buf;
	for (int field = 0; field < 3; field++) {
		long whole, frac;
		if (!(p = parse_digits(p, &whole)) || *p++ != '.' ||
		    !(p = parse_digits(p, &frac)) || *p++ != ' ')
			return -1;
	}
	long running, total;
	if (!(p = parse_digits(p, &running)) || *p++ != '/' || !parse_digits(p, &total))
		return -1;
	return running > INT_MAX ? INT_MAX : static_cast<int>(running);
}

namespace
{
/* /proc/loadavg, opened once per process and read with pread (one system call a snapshot,
 * not three for open, read and close). -1: not open; -2: it cannot be opened (no /proc), never
 * retried. */
std::atomic<int> loadavg_fd{-1};

int open_loadavg() noexcept
{
	const int f = ::open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
	loadavg_fd.store(f >= 0 ? f : -2, std::memory_order_relaxed);
	return f;
}

/* runnable threads of the system; -1 when it cannot be read. One thread at a time calls it
 * (cpu_short_now). A read that fails, or reads something that is not /proc/loadavg (the
 * application closed the descriptor and the number now names a file of its own), opens it
 * anew; the old number is not closed, since it may be the application's now. */
int runnable_now() noexcept
{
	for (int attempt = 0; attempt < 2; attempt++) {
		int f = loadavg_fd.load(std::memory_order_relaxed);
		if (f == -2)
			return -1;
		if (f < 0 && (f = open_loadavg()) < 0)
			return -1;
		char buf[128];
		const ssize_t n = ::pread(f, buf, sizeof(buf) - 1, 0);
		if (n > 0) {
			buf[n] = '\0';
			const int r = parse_loadavg_runnable(buf);
			if (r >= 0)
				return r;
		}
		loadavg_fd.store(-1, std::memory_order_relaxed);
	}
	return -1;
}

int cpus_of_process() noexcept
{
	cpu_set_t set;
	CPU_ZERO(&set);
	if (sched_getaffinity(0, sizeof(set), &set) == 0) {
		int n = CPU_COUNT(&set);
		if (n > 0)
			return n;
	}
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? static_cast<int>(n) : 1;
}
} // namespace

bool sample_window::push(uint64_t ns, uint64_t now_ms) noexcept
{
	if (seen_.fetch_add(1, std::memory_order_relaxed) < warmup_)
		return false;
	const uint64_t v = ns > UINT32_MAX ? UINT32_MAX : ns;
	const uint64_t k = kept_.fetch_add(1, std::memory_order_relaxed);
	v_[k % size].store((now_ms << 32) | v, std::memory_order_relaxed);
	newest_.store(now_ms, std::memory_order_relaxed);
	return true;
}

/* whether a sample (its word: stamp and value) counts at now_ms. Signed: a sample another
 * thread stamped a moment after now_ms is fresh */
bool sample_window::counts_at(uint64_t s, uint64_t now_ms) noexcept
{
	const int32_t age =
	    static_cast<int32_t>(static_cast<uint32_t>(now_ms) - static_cast<uint32_t>(s >> 32));
	return age < static_cast<int32_t>(sample_max_age_ms);
}

/* the values of the samples that count at now_ms into out (size of them at most) */
unsigned sample_window::collect(uint64_t now_ms, uint32_t *out) const noexcept
{
	const uint64_t k = kept();
	const unsigned m = k < size ? static_cast<unsigned>(k) : size;
	unsigned n = 0;
	for (unsigned i = 0; i < m; i++) {
		const uint64_t s = v_[i].load(std::memory_order_relaxed);
		if (counts_at(s, now_ms))
			out[n++] = static_cast<uint32_t>(s);
	}
	return n;
}

bool sample_window::fresh_at_least(unsigned n, uint64_t now_ms) const noexcept
{
	const uint64_t k = kept();
	if (n == 0)
		return true;
	if (n > size || k < n)
		return false;
	return counts_at(v_[(k - n) % size].load(std::memory_order_relaxed), now_ms);
}

unsigned sample_window::fresh(uint64_t now_ms) const noexcept
{
	uint32_t v[size];
	return collect(now_ms, v);
}

uint64_t sample_window::median(uint64_t now_ms) const noexcept
{
	uint32_t v[size];
	const unsigned n = collect(now_ms, v);
	if (n < min_fresh)
		return 0;
	/* the lower median: of an even count, the smaller middle one */
	std::nth_element(v, v + (n - 1) / 2, v + n);
	return v[(n - 1) / 2];
}

uint64_t steady_ms_now() noexcept
{
	return steady_ms();
}

wake_stats &process_wake_stats() noexcept
{
	static wake_stats stats(0, timer_wake_ns);
	return stats;
}

uint64_t timer_resolution_ns() noexcept
{
	static const uint64_t res = [] {
		struct timespec ts;
		if (::clock_getres(CLOCK_MONOTONIC, &ts) != 0)
			return uint64_t{1};
		const uint64_t ns = static_cast<uint64_t>(ts.tv_sec) * 1000000000 +
		                    static_cast<uint64_t>(ts.tv_nsec);
		return ns ? ns : uint64_t{1};
	}();
	return res;
}

/* The lower median of the lateness of seed_rounds timer wake-ups; 0 if fewer than 3 could
 * be measured. */
uint64_t timer_wake_ns() noexcept
{
	const int t = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
	if (t < 0)
		return 0;
	uint64_t v[wake_stats::seed_rounds];
	unsigned n = 0;
	for (unsigned i = 0; i < wake_stats::seed_rounds; i++) {
		const clock::time_point due =
		    clock::now() + std::chrono::microseconds(wake_stats::seed_sleep_us);
		const auto ns =
		    std::chrono::duration_cast<std::chrono::nanoseconds>(due.time_since_epoch())
		        .count();
		struct itimerspec its = {};
		its.it_value.tv_sec = static_cast<time_t>(ns / 1000000000);
		its.it_value.tv_nsec = static_cast<long>(ns % 1000000000);
		if (timerfd_settime(t, TFD_TIMER_ABSTIME, &its, nullptr) != 0)
			break;
		struct pollfd p = {t, POLLIN, 0};
		if (::poll(&p, 1, 100) != 1)
			break;
		const clock::time_point woke = clock::now();
		uint64_t expirations;
		if (::read(t, &expirations, sizeof(expirations)) != sizeof(expirations))
			break;
		v[n++] = ns_of(woke - due);
	}
	::close(t);
	if (n < 3)
		return 0;
	std::nth_element(v, v + (n - 1) / 2, v + n);
	return v[(n - 1) / 2];
}

uint64_t wake_stats::seed_ns() noexcept
{
	if (!seed_)
		return 0;
	int state = seed_state_.load(std::memory_order_acquire);
	if (state == 0 &&
	    seed_state_.compare_exchange_strong(state, 1, std::memory_order_acq_rel)) {
		seed_ns_.store(seed_(), std::memory_order_relaxed);
		seed_state_.store(2, std::memory_order_release);
	}
	return seed_ns_.load(std::memory_order_relaxed);
}

namespace
{
/* the budget this thread was last given, and whether the wait it is in slept (record_sleep):
 * record() judges the wait by them (a wait is one thread's, from budget() to record()) */
thread_local clock::duration given_budget{};
thread_local bool wait_slept = false;
/* and whether its spin met a preemption (preempted) and found the work: its length then
 * includes time without a CPU, and it teaches nothing (cleared by spin_ran_out) */
thread_local bool wait_lost_cpu = false;
/* and whether it armed at once to measure W (armed_calib): its first sleep's timer is then due
 * by the recent short waits' length (calibration) */
thread_local bool wait_calib = false;
} // namespace

bool cpu_gauge::feed(int runnable) noexcept
{
	if (runnable < 0)
		return short_now();
	const long r = 256L * runnable;
	long m = mean_.load(std::memory_order_relaxed);
	m = m < 0 ? r : m + (r - m) / gauge_weight;
	mean_.store(m, std::memory_order_relaxed);
	const bool s = m > 256L * cpus_ + 128;
	short_.store(s, std::memory_order_relaxed);
	return s;
}

bool cpu_short_now() noexcept
{
	static std::atomic<uint64_t> checked_ms{0};
	static cpu_gauge gauge(cpus_of_process());
	const uint64_t now = steady_ms();
	uint64_t last = checked_ms.load(std::memory_order_relaxed);
	if (now - last < cpu_check_ms && last != 0)
		return gauge.short_now();
	/* one thread of the process looks; the others keep the last answer meanwhile */
	if (!checked_ms.compare_exchange_strong(last, now, std::memory_order_relaxed))
		return gauge.short_now();
	return gauge.feed(runnable_now());
}

policy_inputs default_policy_inputs() noexcept
{
	return {spin_learner::wall_ms_now, cpu_short_now, &process_wake_stats(), steady_ms_now,
	        timer_resolution_ns()};
}

uint64_t spin_learner::wall_ms_now() noexcept
{
	return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
	                                 std::chrono::system_clock::now().time_since_epoch())
	                                 .count());
}

uint64_t spin_learner::wake_cost_ns() const noexcept
{
	/* computed at most once per w_refresh_ms and wake-up sample (two medians of 8, or four) */
	const uint64_t now = now_ms();
	const uint64_t key = now / w_refresh_ms + 1;
	if (w_ms_.load(std::memory_order_relaxed) == key)
		return w_ns_.load(std::memory_order_relaxed);
	wake_stats::costs_ns c = own_.costs(now);
	if (!c.w && in_.process)
		c = in_.process->costs(now);
	s_ns_.store(c.s, std::memory_order_relaxed);
	w_ns_.store(c.w, std::memory_order_relaxed);
	w_ms_.store(key, std::memory_order_relaxed);
	if (c.w) {
		last_s_ns_.store(c.s, std::memory_order_relaxed);
		last_w_ns_.store(c.w, std::memory_order_relaxed);
	}
	return c.w;
}

spin_learner::costs spin_learner::budget_costs() const noexcept
{
	const uint64_t w = wake_cost_ns();
	if (w)
		return {w, s_ns_.load(std::memory_order_relaxed), false};
	const uint64_t last = last_w_ns_.load(std::memory_order_relaxed);
	if (last || !in_.process)
		return {last, last_s_ns_.load(std::memory_order_relaxed), false};
	/* the seed times a wake-up alone: no path part to count twice */
	const uint64_t seed = in_.process->seed_ns();
	return {seed, 2 * seed, seed != 0};
}

bool spin_learner::guess_arm_due() noexcept
{
	const uint64_t now = now_ms() + 1; /* + 1: 0 means never */
	uint64_t last = guess_arm_ms_.load(std::memory_order_relaxed);
	if (last != 0 && now - last < guess_arm_ms)
		return false;
	return guess_arm_ms_.compare_exchange_strong(last, now, std::memory_order_relaxed);
}

uint64_t spin_learner::budget_w_ns() const noexcept
{
	return budget_costs().w_ns;
}

uint64_t spin_learner::budget_s_ns() const noexcept
{
	return budget_costs().s_ns;
}

clock::duration spin_learner::threshold() const noexcept
{
	if (policy_.kind != wait_policy_kind::adaptive)
		return cap();
	return threshold_of(budget_s_ns());
}

clock::duration spin_learner::threshold_of(uint64_t s) const noexcept
{
	const clock::duration b =
	    s ? std::chrono::duration_cast<clock::duration>(std::chrono::nanoseconds(s))
	      : std::chrono::microseconds(default_spin_us);
	return std::min(b, std::chrono::duration_cast<clock::duration>(cap()));
}

clock::duration spin_learner::budget(wall_clock_fn wall_ms) noexcept
{
	if (policy_.spin_us == 0)
		return clock::duration::zero();
	switch (policy_.kind) {
	case wait_policy_kind::block:
		return clock::duration::zero();
	case wait_policy_kind::fixed:
		return cap();
	case wait_policy_kind::adaptive:
		break;
	}
	wait_slept = false;
	wait_lost_cpu = false;
	wait_calib = false;
	given_budget = adaptive_budget(wall_ms);
	return given_budget;
}

clock::duration spin_learner::adaptive_budget(wall_clock_fn wall_ms) noexcept
{
	std::atomic<uint64_t> policy_decisions::*spin = &policy_decisions::spun;
	if (score_.load(std::memory_order_relaxed) < score_one / 2) {
		/* long waits lately: sleep at once, but spin on a probe, in the shared window or
		 * by the gap */
		spin = &policy_decisions::probes;
		if (wall_ms() % probe_period_ms != 0) {
			unsigned left = until_probe_.load(std::memory_order_relaxed);
			while (left > 0) {
				if (until_probe_.compare_exchange_weak(left, left - 1,
				                                       std::memory_order_relaxed)) {
					count(&policy_decisions::armed_long);
					return clock::duration::zero();
				}
			}
			until_probe_.store(gap_.load(std::memory_order_relaxed),
			                   std::memory_order_relaxed);
		}
	}
	/* CPUs are short: a spin would take the CPU the awaited thread needs. Asked only of a
	 * wait that would spin: one that arms at once anyway costs no look at the CPUs */
	if (in_.cpu_short && in_.cpu_short()) {
		count(&policy_decisions::armed_cpu);
		return clock::duration::zero();
	}
	/* no W measured yet and recent waits past half the guess, where W decides: now and then
	 * a wait sleeps to measure it, or a waiter whose waits all fit the guess would never
	 * learn W (guess_arm_ms) */
	const costs c = budget_costs();
	if (c.guess && 2 * mean_ns_.load(std::memory_order_relaxed) > c.s_ns && guess_arm_due()) {
		count(&policy_decisions::armed_calib);
		wait_calib = true;
		return clock::duration::zero();
	}
	count(spin);
	return threshold_of(c.s_ns);
}

void spin_learner::record(clock::duration waited, bool found) noexcept
{
	if (!adaptive())
		return;
	const bool slept = wait_slept;
	wait_slept = false;
	if (wait_lost_cpu) {
		/* how long it lasted says nothing of how long the wait was */
		wait_lost_cpu = false;
		return;
	}
	/* the bar: a wait that spun and never slept is judged against the budget it was given,
	 * the threshold of its start (no look at W on the way out of a wait that spun); any
	 * other against the threshold now, W read once (for a wait that slept, also the
	 * wake-up it paid) */
	const bool spun_only = !slept && given_budget > clock::duration::zero();
	const costs c = spun_only ? costs{} : budget_costs();
	const uint64_t w = c.w_ns;
	const clock::duration b = spun_only ? given_budget : threshold_of(c.s_ns);
	if (!found && waited < b)
		return; /* a short timeout says nothing about how long waits last */
	if (!found || !slept) {
		learn(found && waited <= b, waited);
		return;
	}
	/* it slept: the wait itself lasted about `waited` less the wake-up cost, and longer than
	 * the spin it was given; short when that is under the budget it would get now (a wait
	 * that slept at once after waits judged against a smaller budget, or before W was known) */
	if (w == 0) {
		learn(false, waited);
		return;
	}
	const clock::duration est = std::max<clock::duration>(
	    given_budget,
	    waited - std::chrono::duration_cast<clock::duration>(std::chrono::nanoseconds(w)));
	learn(est < b, est);
}

void spin_learner::learn(bool hit, clock::duration waited) noexcept
{
	count(hit ? &policy_decisions::judged_short : &policy_decisions::judged_long);
	const unsigned s = score_.load(std::memory_order_relaxed);
	score_.store((3 * s + (hit ? score_one : 0)) / 4, std::memory_order_relaxed);
	if (hit) {
		const uint64_t ns = ns_of(waited);
		const uint64_t m = mean_ns_.load(std::memory_order_relaxed);
		mean_ns_.store(m == 0 ? ns : m - m / 8 + ns / 8, std::memory_order_relaxed);
		gap_.store(1, std::memory_order_relaxed);
		until_probe_.store(0, std::memory_order_relaxed);
		return;
	}
	const unsigned g = gap_.load(std::memory_order_relaxed);
	if (g < max_probe_gap)
		gap_.store(g * 2, std::memory_order_relaxed);
}

void spin_learner::record_sleep(clock::duration arm, clock::duration slept,
                                clock::duration drain) noexcept
{
	if (!adaptive())
		return;
	wait_slept = true;
	const uint64_t path = ns_of(arm) + ns_of(drain);
	const uint64_t now = now_ms();
	/* the path sample reaches W at its next refresh (w_refresh_ms): W recomputed after
	 * every sleep cost its medians on every wait that slept */
	if (own_.add_path(path, now) && in_.process)
		in_.process->add_path(path, now);
	const uint64_t ns = std::min(ns_of(slept), max_sleep_ns);
	const uint64_t m = sleep_ns_.load(std::memory_order_relaxed);
	sleep_ns_.store(m == 0 ? ns : m - m / 8 + ns / 8, std::memory_order_relaxed);
}

clock::duration spin_learner::calibration() noexcept
{
	if (!adaptive())
		return clock::duration::zero();
	if (wait_calib) {
		/* a wait armed to measure W (adaptive_budget, which asked the CPUs) lasts about as
		 * long as the recent short waits, and those are a few W at most (they arm only
		 * where W decides): its first sleep's timer is due a quarter of the way into one,
		 * so that the wake-up after it ends before the work comes (a sleep woken with its
		 * work measures nothing). Due half-way, it would fire after the work wherever a
		 * wake-up costs half a wait or more, and the waiter would arm wait after wait
		 * without learning W */
		wait_calib = false;
		return due_in(mean_ns_.load(std::memory_order_relaxed) / 4);
	}
	/* every other sleep while the wake-up latency is not known (warm-up, or its samples aged
	 * out: a sleep that the timer ended is followed by one that it does not, so that a long
	 * wait is not a chain of calibrations); then one whenever the newest sample is
	 * calib_interval_ms old */
	const uint64_t k = sleeps_.fetch_add(1, std::memory_order_relaxed);
	const uint64_t now = now_ms();
	if (!own_.wake().fresh_at_least(sample_window::min_fresh, now)) {
		if (k % 2 != 0)
			return clock::duration::zero();
	} else if (static_cast<int64_t>(now - own_.wake().newest_ms()) <
	           static_cast<int64_t>(calib_interval_ms)) {
		return clock::duration::zero();
	}
	/* no W is used while CPUs are short (every wait arms at once), and a calibrated sleep
	 * costs system calls and, when the timer ends it, one more wake-up: CPU the others
	 * queue for (K = 3 pairs on 2 CPUs: adaptive 1.5x block with the waits all slept).
	 * Asked only of a sleep that would calibrate (a few a second) */
	if (in_.cpu_short && in_.cpu_short())
		return clock::duration::zero();
	/* half-way into a sleep as long as the recent ones; before any sleep was timed, as long
	 * as the spin budget (S, the seed's 2W, or the fallback) */
	const uint64_t sleep_ns = sleep_ns_.load(std::memory_order_relaxed);
	return due_in((sleep_ns ? sleep_ns : ns_of(threshold())) / 2);
}

clock::duration spin_learner::due_in(uint64_t ns) const noexcept
{
	const uint64_t floor =
	    std::min<uint64_t>(std::max<uint64_t>(in_.timer_res_ns, 1), max_calib_ns);
	return std::chrono::nanoseconds(std::clamp<uint64_t>(ns, floor, max_calib_ns));
}

void spin_learner::record_wake(clock::duration late) noexcept
{
	if (!adaptive())
		return;
	const uint64_t ns = ns_of(late);
	const uint64_t now = now_ms();
	if (own_.add_wake(ns, now)) {
		w_ms_.store(0, std::memory_order_relaxed);
		if (in_.process)
			in_.process->add_wake(ns, now);
	}
}

bool spin_learner::preempted(clock::duration gap) noexcept
{
	if (!adaptive())
		return false;
	if (ns_of(gap) <= preempt_gap_us * 1000ULL)
		return false;
	preempt_.fetch_add(1, std::memory_order_relaxed);
	/* the wait's length now includes time without a CPU: if the spin finds the work, the
	 * wait teaches nothing (record). Not a long one: a shortage of CPUs is cpu_gauge's to
	 * judge, and one lost spin (a host that descheduled a vCPU, an interrupt storm) must not
	 * stop the spinning of the waits after it */
	wait_lost_cpu = true;
	/* stored + 1, so that 0 means none even when the clock starts at 0 (fake clocks) */
	const uint64_t now = now_ms() + 1;
	const uint64_t last = preempt_ms_.exchange(now, std::memory_order_relaxed);
	if (last == 0 || now - last >= preempt_repeat_ms)
		return false; /* a lone one: the host took the CPU once; spin on */
	count(&policy_decisions::preempted);
	return true;
}

void spin_learner::spin_ran_out() noexcept
{
	wait_lost_cpu = false;
}

} // namespace vwait::util
