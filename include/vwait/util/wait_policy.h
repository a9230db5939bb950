/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* util::wait_policy: how long a blocking call (fi_cq_sread, fi_cntr_wait, fi_eq_sread, fi_wait)
 * keeps polling before it arms its sources and sleeps on the fds. Handed to a waiter when it is
 * created; the provider reads it from FI_VWAIT_WAIT_POLICY / FI_VWAIT_SPIN_US.
 *
 *   block     never spin: poll once, arm, look again, sleep (upstream verbs' way);
 *   fixed     poll for spin_us, then arm and sleep;
 *   adaptive  (the default) poll for up to S, what a sleep costs: the measured wake-up cost
 *             W plus the sleep path's CPU (at most spin_us), while recent waits mostly ended
 *             within that budget; arm and sleep at once otherwise (spin_learner below).
 *
 * The wake-up cost W is what one sleep costs the waiter: arming and looking again (the
 * prepare phase), the wake-up itself (from the moment the awaited thing is there to this
 * thread running again) and the drain until the caller's poll finds the work. The first and
 * last are timed on every sleep that an event ends. The wake-up latency cannot be timed on
 * such a sleep (when the completion became visible is not observable), so it is timed on a
 * sleep whose end is known: a calibrated sleep also waits on a timer (timerfd: no timer slack)
 * due part-way into the sleep, at half the recent sleeps' length, so that the CPU idles about as
 * deeply as in the sleeps it stands for; the lateness of that wake-up past the timer's expiry is
 * the wake-up latency. W is the sum of the parts' medians, kept per waiter and, for waiters
 * that have no W of their own and for reports, per process.
 *
 * The estimator (sample_window), and why (a waiter's first samples measure start-up, at many
 * times a wake-up's cost, and a waiter at short think times sleeps too seldom to replace them):
 *  - warm-up: a waiter's first warmup_samples (4) samples of each part are dropped, for the
 *    waiter and the process: the first sleeps of a waiter pay page faults, the first system
 *    calls on new fds, connection set-up, the timerfd's creation; they measure start-up;
 *  - ageing: a sample counts for sample_max_age_ms (1 s) only. A waiter sleeps seldom exactly
 *    when its waits became short, so a count of waits or sleeps would keep the old samples;
 *    time does not. With no fresh W, the waiter budgets with the last W it had (below), and
 *    every other sleep calibrates until W is known again; at very short waits it never sleeps and
 *    needs no W. Once known, a sleep is calibrated when the newest wake-up sample is
 *    calib_interval_ms (125 ms) old: 8 samples a second at most whatever the sleep rate (a
 *    count, such as one sleep in 64, gives none where sleeps are rare and dozens a second
 *    where they are frequent);
 *  - outliers: W needs min_fresh (3) fresh samples of each part, and each part is the lower
 *    median of its fresh samples (of 8 at most): one sample, however huge (a timer whose
 *    thread the host descheduled for 10 ms), never defines it, nor do two of four;
 *  - before W is known: the last W the waiter had (it keeps it once the samples aged out), else a
 *    guess made once per process at its first wait: the median lateness of 5 timer wake-ups 50 us
 *    away (wake_stats::seed_ns, ~0.3 ms once; the wake-up part of W without the path); only when no
 *    timer can be had, min(spin_us, default_spin_us = 50 us), the budget that fixed has. With that
 *    50 us before any sleep, a pair both in fi_cq_sread at think 0 sends every wait that a stall of
 *    the peer's vCPU stretches past 50 us to sleep, too seldom to measure W, and never learns that
 *    spinning pays. But a waiter on the seed whose waits all fit twice the seed never sleeps, and
 *    would judge against the guess for good: a server whose waits are just under twice the seed
 *    spins every one, at several times block's CPU, where a server that knows W sleeps. So until W
 *    is first known, while the mean of the recent short waits is over half the guess (where W
 *    decides: waits under it would be spun for any W not far below the seed), one wait that would
 *    spin per guess_arm_ms (16 ms) arms at once (armed_calib); such a sleep, as long as the waits,
 *    carries a calibration timer due a quarter of the way into a wait like the recent short ones
 *    (mean_short_ns), so that the wake-up after it ends before the work comes (a timer due half-way
 *    fires after the work wherever a wake-up costs half a wait or more, as it can in an emulated
 *    guest, and the waiter would arm wait after wait without learning W); once known, the waiter
 *    keeps its last W and never does so again. It arms only where W decides: arming whatever the
 *    waits would also sleep waits at think 0-100 us, whose short sleeps (the message comes before
 *    the timer) seldom measure W, each paying a wake-up that spinning does not.
 * The last W is cached for w_refresh_ms (16 ms) of the learner's clock, and until a wake-up
 * sample comes (two medians of 8 per wait otherwise: recomputed after every sleep, W cost ~450
 * instructions a wait that slept, counted in the guest); a path sample, one per sleep, reaches
 * W at the next refresh. That clock is CLOCK_MONOTONIC_COARSE (steady_ms_now): no TSC read,
 * and its tick (1-4 ms) is fine enough for ages of 125 ms and 1 s and the 10 ms CPU check; a
 * spinning wait of adaptive reads the precise clock only where the waiter does (at its start
 * and end, and once per 8 polls), as fixed does.
 *
 * Why S = W + path: a wait of length d costs d of CPU when spun through; slept through, it
 * costs W of latency and the path's CPU (the system calls of arming and sleeping, the drain;
 * the wake-up latency idles the CPU, and is counted once). So a sleep costs S in all, and
 * spinning up to S and then sleeping costs at most twice the better of the two chosen with
 * hindsight, latency and CPU together. A ping-pong's wait is its think time plus a round trip,
 * and a round trip costs less than the path wherever blocking matters: every think time
 * shorter than W gives a wait shorter than S, which is spun through (no wake-up in the
 * latency). The learner sleeps at once when recent waits were longer than S, so a wait slept
 * through costs its length plus W, not the spin as well, but for those near S (a wait of S or
 * a little more spins and then sleeps, paying both until the learner turns). Neither W nor
 * 2W would do: W alone leaves out the path's CPU, so waits a little past W would sleep, and pay
 * a wake-up, where spinning through them costs less; 2W counts the wake-up latency twice, so
 * waits just under 2W would be spun at several times block's CPU. Before any sleep S is twice the
 * seed (a wake-up alone, no path to count). Capped by spin_us (FI_VWAIT_SPIN_US, default
 * 1000 us for adaptive).
 *
 * util::spin_learner is the per-waiter state of adaptive: a score of recent waits (an
 * exponentially weighted share of waits that ended within the budget; a new waiter starts
 * trusting spin). While the score says most waits end within the budget, every wait may spin
 * up to it; otherwise it spins only on a probe, one wait in `gap`, the gap doubling after
 * every wait that missed (up to max_probe_gap) and back to 1 after one that hit, so that a
 * return of short waits is noticed while long think times cost nearly nothing. Two peers
 * that both sleep see each other's wakeup in every wait and could keep each other asleep (a
 * probe of one finds the other asleep), so waits that start in the first millisecond of every
 * probe_period_ms of wall-clock time (CLOCK_REALTIME: the same on one host and, through NTP,
 * about the same on peers) probe too: peers probe together and find each other fast. A wait that
 * ends by its deadline counts as a long one only when it lasted at least the budget (a loop of
 * short timeouts teaches nothing), and a call that finds its work at its first look is no wait
 * at all (waiter::wait_until returns before it asks for a budget).
 *
 * A wait that slept is judged by its length less W (the wake-up it paid; none known: long),
 * floored at the budget it was given (it outlasted that spin), against the budget of now: short
 * traffic whose waits all sleep at once brings spinning back within a few waits without a
 * probe, and so does a W that became known after waits that slept while none was (the 50 us
 * fallback against waits of 70 us at the start of a phase of think 20 us). Whether the wait
 * slept, and the budget it had, are the calling thread's (record_sleep and budget set them,
 * record reads them: a wait is one thread's).
 *
 * A starved peer: spinning helps only while the awaited thread has a CPU. Two signals say it
 * may not, and neither depends on W (so that a W measured too high cannot blunt them):
 * (1) the spin's own clock reads (one every few polls) jump by more than preempt_gap_us
 * (100 us: more than an interrupt or a soft-RoCE softirq takes in the emulated VM) twice within
 * preempt_repeat_ms: the spinner keeps losing its CPU, so it yields it once and spins on (it
 * does not arm: a yield with nobody to run returns at once, where a sleep pays a wake-up that
 * fixed never pays); a wait that its spin found teaches nothing (counted as a long one, a host
 * that deschedules a guest's vCPUs would stop the spinning at short think times, and no sleep
 * in the guest helps against that), while one whose spin
 * ran out its budget first is judged as any other (spin_ran_out: by the wall clock nothing came
 * within the budget). A lone preemption stops nothing: a host that deschedules a vCPU now and
 * then preempts about one wait in a hundred once at short think times, and were each to stop
 * the spin, those waits would sleep and pay a wake-up that fixed never pays;
 * (2) policy_inputs::cpu_short, by default a cpu_gauge (below) over the system's count of runnable
 * threads (/proc/loadavg, read at most once per cpu_check_ms per process): while their mean exceeds
 * the CPUs this process may use by more than half a thread, every wait arms at once, probes
 * included, and no sleep is calibrated (W is not used then, and a calibration costs system calls
 * and a wake-up). K = 3 blocking pairs on 2 CPUs keep about 6 threads runnable, well over the
 * threshold; one pair keeps about 2, under it. Both are cheap: the first costs
 * nothing (the spin reads the clock anyway); the second is asked only by a wait that would spin and
 * a sleep that would calibrate (a waiter whose waits arm at once never looks, but on its probes),
 * and costs one pread(2) of /proc/loadavg, kept open, per cpu_check_ms at most (opening, reading
 * and closing it would cost 3 system calls a look for 1: at up to 100 looks a second, 0.6 per
 * completion of a server answering every 2 ms). The state is
 * a few relaxed atomics: several threads may wait on one waiter; their samples mix, which is what
 * "recent waits of this waiter" means. */
#ifndef VWAIT_UTIL_WAIT_POLICY_H
#define VWAIT_UTIL_WAIT_POLICY_H

#include <atomic>
#include <chrono>
#include <cstdint>

namespace vwait::util
{

using clock = std::chrono::steady_clock;

enum class wait_policy_kind { adaptive, block, fixed };

/* The spin of fixed by default, and adaptive's budget until it has measured a wake-up: a
 * spinning round trip takes ~30 us in the emulated VM and a few us on a real NIC, while
 * arming and sleeping costs two or more system calls and a wakeup (tens of us). Linux documents
 * 50 us for its own busy-poll budget (net.core.busy_read). */
constexpr unsigned default_spin_us = 50;
/* adaptive's default cap: the budget follows the measured wake-up cost (W) up to this. */
constexpr unsigned default_adaptive_cap_us = 1000;
/* The largest FI_VWAIT_SPIN_US taken (10 ms); larger values are clamped with a warning. */
constexpr unsigned max_spin_us = 10000;

struct policy_inputs;

struct wait_policy {
	wait_policy_kind kind = wait_policy_kind::adaptive;
	unsigned spin_us = default_spin_us;
	/* what adaptive reads of the world (below); null: default_policy_inputs(). Tests give
	 * fakes; the object must outlive the waiters given this policy. */
	const policy_inputs *inputs = nullptr;
};

/* "adaptive", "block", "fixed". */
const char *wait_policy_name(wait_policy_kind kind) noexcept;
/* true and *out for one of the names above (case-insensitive); false otherwise. */
bool parse_wait_policy(const char *name, wait_policy_kind *out) noexcept;

/* Recent samples (nanoseconds) of one part of the wake-up cost, with the steady-clock
 * millisecond each was taken at, in relaxed atomics (one 64-bit word a sample). A sample counts
 * while it is younger than sample_max_age_ms; the value is the lower median of those that
 * count, and none while fewer than min_fresh count. The first `warmup` samples pushed are
 * dropped (see "The estimator" above). */
class sample_window
{
public:
	static constexpr unsigned size = 8;
	static constexpr unsigned min_fresh = 3;
	static constexpr uint32_t sample_max_age_ms = 1000;

	explicit sample_window(unsigned warmup = 0) noexcept : warmup_(warmup) {}
	/* false when the sample was a warm-up one (dropped) */
	bool push(uint64_t ns, uint64_t now_ms) noexcept;
	/* the samples that count at now_ms */
	unsigned fresh(uint64_t now_ms) const noexcept;
	/* fresh(now_ms) >= n, in one look: the n-th newest sample counts (samples are pushed in
	 * the order of their clock), so that asking costs no pass over the window */
	bool fresh_at_least(unsigned n, uint64_t now_ms) const noexcept;
	/* their lower median; 0 while fewer than min_fresh count */
	uint64_t median(uint64_t now_ms) const noexcept;
	/* samples kept (warm-up ones not included), and when the last one was */
	uint64_t kept() const noexcept { return kept_.load(std::memory_order_relaxed); }
	uint64_t newest_ms() const noexcept { return newest_.load(std::memory_order_relaxed); }

private:
	unsigned collect(uint64_t now_ms, uint32_t *out) const noexcept;
	static bool counts_at(uint64_t sample, uint64_t now_ms) noexcept;

	const unsigned warmup_;
	std::atomic<uint64_t> seen_{0};
	std::atomic<uint64_t> kept_{0};
	std::atomic<uint64_t> newest_{0};
	std::atomic<uint64_t> v_[size] = {}; /* (ms << 32) | ns, both truncated to 32 bits */
};

/* The steady clock in milliseconds (what samples are stamped with by default): from
 * CLOCK_MONOTONIC_COARSE, so it moves by the kernel's tick (1-4 ms). */
uint64_t steady_ms_now() noexcept;

/* What the adaptive learners of a process decided, since it started (relaxed counters, for
 * benchmarks and fi_vwait_wait_attr versions 4 and 5): how waits began (spin budget given
 * because recent waits were short, or as a probe; armed at once because they were long,
 * because CPUs were short, or to measure W), how many spins a preemption stopped, and how
 * waits were judged when they ended (short: worth spinning for; long). */
struct policy_decisions {
	std::atomic<uint64_t> spun{0};
	std::atomic<uint64_t> probes{0};
	std::atomic<uint64_t> armed_long{0};
	std::atomic<uint64_t> armed_cpu{0};
	std::atomic<uint64_t> preempted{0};
	/* armed at once to measure W: none measured yet, the budget a guess (guess_arm_ms) */
	std::atomic<uint64_t> armed_calib{0};
	std::atomic<uint64_t> judged_short{0};
	std::atomic<uint64_t> judged_long{0};
};

/* The wake-up cost W of sleeping, in its parts (see above): the sleep path's own cost (prepare
 * plus the drain after an event woke the sleeper) and the wake-up latency (timed against a
 * calibration timer). Per waiter (with a warm-up), and one per process (process_wake_stats,
 * fed only the samples its waiters kept). Without now_ms: at steady_ms_now(). */
class wake_stats
{
public:
	/* seed: what seed_ns() measures, once (process_wake_stats: timer_wake_ns; a test gives a
	 * fake); null: no guess */
	using seed_fn = uint64_t (*)() noexcept;
	explicit wake_stats(unsigned warmup = 0, seed_fn seed = nullptr) noexcept
	    : path_(warmup), wake_(warmup), seed_(seed)
	{
	}
	bool add_path(uint64_t ns, uint64_t now_ms) noexcept { return path_.push(ns, now_ms); }
	bool add_wake(uint64_t ns, uint64_t now_ms) noexcept { return wake_.push(ns, now_ms); }
	/* both parts have min_fresh samples that count */
	bool known(uint64_t now_ms) const noexcept
	{
		return path_.fresh_at_least(sample_window::min_fresh, now_ms) &&
		       wake_.fresh_at_least(sample_window::min_fresh, now_ms);
	}
	bool known() const noexcept { return known(steady_ms_now()); }
	/* W, and S: what a sleep costs in all, its latency W plus the CPU it takes, of which the
	 * sleep path (W's first part) is what is timed, so W + path. In ns, both 0 while not
	 * known; each median taken once */
	struct costs_ns {
		uint64_t w;
		uint64_t s;
	};
	costs_ns costs(uint64_t now_ms) const noexcept
	{
		if (!known(now_ms))
			return {0, 0};
		const uint64_t path = path_.median(now_ms);
		const uint64_t w = path + wake_.median(now_ms);
		return {w, w + path};
	}
	uint64_t cost_ns(uint64_t now_ms) const noexcept { return costs(now_ms).w; }
	uint64_t cost_ns() const noexcept { return cost_ns(steady_ms_now()); }
	uint64_t path_ns() const noexcept { return path_.median(steady_ms_now()); }
	uint64_t wake_ns() const noexcept { return wake_.median(steady_ms_now()); }
	const sample_window &path() const noexcept { return path_; }
	const sample_window &wake() const noexcept { return wake_; }
	uint64_t wake_samples() const noexcept { return wake_.kept(); }
	uint64_t path_samples() const noexcept { return path_.kept(); }
	/* A first guess at W before any sleep measured it: the seed function's answer, asked
	 * once (by the first caller; the others get 0 meanwhile); 0 without one. */
	uint64_t seed_ns() noexcept;
	static constexpr unsigned seed_rounds = 5;
	static constexpr unsigned seed_sleep_us = 50;
	/* the decisions of the learners that report here */
	policy_decisions &decisions() noexcept { return decisions_; }
	const policy_decisions &decisions() const noexcept { return decisions_; }

private:
	sample_window path_;
	sample_window wake_;
	policy_decisions decisions_;
	const seed_fn seed_;
	std::atomic<int> seed_state_{0}; /* 0: not measured, 1: measuring, 2: done */
	std::atomic<uint64_t> seed_ns_{0};
};

/* The process's: every adaptive learner adds its samples here too; seeded by timer_wake_ns. */
wake_stats &process_wake_stats() noexcept;
/* The median lateness of wake_stats::seed_rounds wake-ups by a timerfd (no timer slack) due
 * seed_sleep_us after it was set; 0 if the timer cannot be had. Measures this machine. */
uint64_t timer_wake_ns() noexcept;
/* The resolution of CLOCK_MONOTONIC's timers (clock_getres), at least 1 ns. */
uint64_t timer_resolution_ns() noexcept;

/* What the learner reads of the world besides the waits it is told about: injectable, so that
 * tests can run it on fake inputs (no globals but the process-wide defaults below). */
struct policy_inputs {
	/* the wall clock in milliseconds (aligns the probes of peers); called only while waits
	 * are long */
	uint64_t (*wall_ms)() noexcept;
	/* true when CPUs are short: spinning would take the CPU the awaited thread needs */
	bool (*cpu_short)() noexcept;
	/* where samples go besides the learner's own, and where a learner that has not measured
	 * yet reads W (may be null) */
	wake_stats *process;
	/* the steady clock in milliseconds: the samples' age (null: steady_ms_now) */
	uint64_t (*now_ms)() noexcept;
	/* the finest due a calibration timer can have, in ns: a timer due sooner is due at
	 * once (the default: an ideal timer; default_policy_inputs: timer_resolution_ns) */
	uint64_t timer_res_ns = 1;
};
/* wall_ms_now, cpu_short_now, &process_wake_stats(), steady_ms_now, timer_resolution_ns() */
policy_inputs default_policy_inputs() noexcept;

/* The CPU-shortage verdict from snapshots of the system's runnable threads (this one included):
 * their exponentially weighted mean (weight 1/gauge_weight for the newest, the first snapshot
 * taken as the mean) above the CPUs plus one half. A mean, not one snapshot: a ping-pong's two
 * sides spinning on two CPUs are 2, and soft-RoCE's kernel workers come and go on top (one
 * snapshot of 3 is no shortage); and a verdict that makes every waiter arm lowers the next
 * snapshots (the spinners are gone), so one snapshot would turn it off at once and the
 * waiters would spin again into the same shortage. The mean of K = 3 ping-pong pairs on 2
 * CPUs stays near 3 while they all block (one side of each pair runs), above 2.5. */
class cpu_gauge
{
public:
	static constexpr int gauge_weight = 8;
	explicit cpu_gauge(int cpus) noexcept : cpus_(cpus > 0 ? cpus : 1) {}
	/* one snapshot (a negative count, unreadable, changes nothing): the verdict after it */
	bool feed(int runnable) noexcept;
	bool short_now() const noexcept { return short_.load(std::memory_order_relaxed); }
	/* the mean, in 1/256 of a thread (-1 before the first snapshot) */
	long mean256() const noexcept { return mean_.load(std::memory_order_relaxed); }

private:
	const int cpus_;
	std::atomic<long> mean_{-1};
	std::atomic<bool> short_{false};
};
/* The process's cpu_gauge over /proc/loadavg's runnable count, fed at most once per
 * cpu_check_ms (one thread of the process reads; the others take the last verdict). */
bool cpu_short_now() noexcept;
constexpr uint64_t cpu_check_ms = 10;
/* /proc/loadavg's runnable count (the fourth field, "running/total") in buf; -1 when buf is
 * not in /proc/loadavg's form (the descriptor no longer names it) */
int parse_loadavg_runnable(const char *buf) noexcept;

class spin_learner
{
public:
	/* the score is a share of 256; waits spin while it is at least half */
	static constexpr unsigned score_one = 256;
	static constexpr unsigned max_probe_gap = 256;
	static constexpr uint64_t probe_period_ms = 256;
	/* a waiter's first samples of each part that are dropped (warm-up) */
	static constexpr unsigned warmup_samples = 4;
	/* every other sleep carries the calibration timer while fewer than min_fresh wake-up
	 * samples count; then one when the newest is this old (the window of 8 is renewed within
	 * sample_max_age_ms) */
	static constexpr uint64_t calib_interval_ms =
	    sample_window::sample_max_age_ms / sample_window::size;
	/* a calibration timer is due half-way into a sleep like the recent ones (a quarter of the
	 * way into a wait armed to measure W), no sooner than the timer's resolution (a due below
	 * it is not kept: the timer is due at once) and no later than max_calib_ns: past a few
	 * ms a sleep's wake-up costs what one of a few ms costs (the CPU reached its deepest idle
	 * state), and a due that late would keep W unknown through most of a sample's lifetime.
	 * A sleep counts at most twice the latest due in that length (sleep_ns_). A timer due
	 * before its sleeper is asleep measures no wake-up: waiter::sleep drops it then. */
	static constexpr uint64_t max_calib_ns = 2000000;
	static constexpr uint64_t max_sleep_ns = 2 * max_calib_ns;
	/* how long a computed W is kept (see "The last W is cached" above) */
	static constexpr uint64_t w_refresh_ms = 16;
	/* while this waiter has never had a W (own or the process's: the budget stands on the
	 * seed, a guess) and its recent waits were past half the guess, one wait that would spin
	 * per this many ms arms at once instead, so that its sleep measures W (see "before W is
	 * known" above) */
	static constexpr uint64_t guess_arm_ms = 16;
	/* a gap in the spin's clock reads longer than this is a preemption (not W: see above) */
	static constexpr unsigned preempt_gap_us = 100;
	/* a preemption stops the spin when another came less than this long before it (the
	 * spinner keeps losing its CPU); a lone one does not (see above) */
	static constexpr uint64_t preempt_repeat_ms = 5;

	explicit spin_learner(wait_policy p) noexcept
	    : spin_learner(p, p.inputs ? *p.inputs : default_policy_inputs())
	{
	}
	spin_learner(wait_policy p, policy_inputs in) noexcept
	    : policy_(p), in_(in), own_(warmup_samples)
	{
	}

	const wait_policy &policy() const noexcept { return policy_; }

	/* How long the wait that starts now may poll without arming (zero: arm at once).
	 * wall_ms() gives the wall clock in milliseconds (it aligns the probes of peers); it is
	 * called only while waits are long. */
	using wall_clock_fn = uint64_t (*)() noexcept;
	clock::duration budget() noexcept { return budget(in_.wall_ms); }
	clock::duration budget(wall_clock_fn wall_ms) noexcept;
	/* The wall clock in milliseconds, as budget() wants it. */
	static uint64_t wall_ms_now() noexcept;
	/* A wait ended after `waited`: found what it waited for (or was signalled) when found is
	 * true, reached its deadline otherwise. */
	void record(clock::duration waited, bool found) noexcept;

	/* ---- the wake-up cost (adaptive only; the others ignore these) ---- */
	/* A sleep that an event ended: prepare took `arm`, the sleep `slept`, and the caller's
	 * poll found the work `drain` after the sleep returned. */
	void record_sleep(clock::duration arm, clock::duration slept,
	                  clock::duration drain) noexcept;
	/* Whether the sleep that starts now should carry a calibration timer, and when it is due
	 * (zero: no calibration); the first sleep of a wait armed to measure W always does. */
	clock::duration calibration() noexcept;
	/* a calibration timer due ns into the sleep, held to the timer's resolution
	 * (policy_inputs::timer_res_ns) to max_calib_ns */
	clock::duration due_in(uint64_t ns) const noexcept;
	/* A calibration timer due at its expiry woke the sleeper `late` after it. */
	void record_wake(clock::duration late) noexcept;
	/* True when a gap of `gap` between two clock reads of a spin is a preemption (longer
	 * than preempt_gap_us) and another came less than preempt_repeat_ms before it: the
	 * spinner keeps losing its CPU, the caller yields it and spins on. A lone preemption
	 * is counted (preemptions()) and the spin goes on. Either way the wait's record() then
	 * teaches nothing (its length includes the time without a CPU) if the spin found the
	 * work (not after spin_ran_out()). */
	bool preempted(clock::duration gap) noexcept;
	/* The wait's spin ran its whole budget without finding its work: by the wall clock the
	 * wait lasted at least that long, preempted or not, and its record() judges it. */
	void spin_ran_out() noexcept;

	/* for tests and reports */
	unsigned score() const noexcept { return score_.load(std::memory_order_relaxed); }
	unsigned probe_gap() const noexcept { return gap_.load(std::memory_order_relaxed); }
	/* the exponentially weighted mean of the waits that ended within the budget, in ns */
	uint64_t mean_short_ns() const noexcept { return mean_ns_.load(std::memory_order_relaxed); }
	/* W as this waiter measured it: its own once measured, else the process's, else 0
	 * (0 once the samples aged out: what fi_info reports) */
	uint64_t wake_cost_ns() const noexcept;
	/* W as the budget uses it: wake_cost_ns(), else the last W this waiter had, else the
	 * process's seed (wake_stats::seed_ns), else 0. A
	 * waiter that spins through every wait makes no sleep and so no fresh sample: with the
	 * fallback budget then, waits a little past it would sleep until W was measured again,
	 * and then spin until it aged out again, for as long as the think time lasts. */
	uint64_t budget_w_ns() const noexcept;
	const wake_stats &own_wake() const noexcept { return own_; }
	/* S as the budget uses it, with W: from the same samples as budget_w_ns(); twice the
	 * process's seed before any (the seed has no path part), else 0 */
	uint64_t budget_s_ns() const noexcept;
	/* the wait length that decides between spinning and sleeping at once (adaptive: S
	 * capped, S as budget_s_ns() has it; the 50 us fallback without any): a wait found
	 * within it was worth spinning for */
	clock::duration threshold() const noexcept;
	/* the budget a spinning wait gets now: the threshold */
	clock::duration spin_budget() const noexcept { return threshold(); }
	uint64_t preemptions() const noexcept { return preempt_.load(std::memory_order_relaxed); }

private:
	clock::duration cap() const noexcept { return std::chrono::microseconds(policy_.spin_us); }
	/* adaptive's threshold for an S of s ns (budget_s_ns) */
	clock::duration threshold_of(uint64_t s) const noexcept;
	/* W and S as the budget uses them, from one look; guess: from the process's seed */
	struct costs {
		uint64_t w_ns;
		uint64_t s_ns;
		bool guess;
	};
	/* one wait in guess_arm_ms is due to arm and measure W (claims it) */
	bool guess_arm_due() noexcept;
	costs budget_costs() const noexcept;
	clock::duration adaptive_budget(wall_clock_fn wall_ms) noexcept;
	void learn(bool hit, clock::duration waited) noexcept;
	bool adaptive() const noexcept
	{
		return policy_.kind == wait_policy_kind::adaptive && policy_.spin_us != 0;
	}
	uint64_t now_ms() const noexcept { return in_.now_ms ? in_.now_ms() : steady_ms_now(); }
	/* one more of a process decision counter (none without a process wake_stats) */
	void count(std::atomic<uint64_t> policy_decisions::*which) noexcept
	{
		if (in_.process)
			(in_.process->decisions().*which).fetch_add(1, std::memory_order_relaxed);
	}

	const wait_policy policy_;
	const policy_inputs in_;
	std::atomic<unsigned> score_{score_one};
	std::atomic<unsigned> gap_{1};
	std::atomic<unsigned> until_probe_{0};
	std::atomic<uint64_t> mean_ns_{0};
	/* the wake-up cost; W as last computed, for the w_refresh_ms period w_ms_ - 1 (0: none) */
	wake_stats own_;
	mutable std::atomic<uint64_t> w_ns_{0};
	mutable std::atomic<uint64_t> last_w_ns_{0}; /* the last non-zero W: budget_w_ns() */
	mutable std::atomic<uint64_t> s_ns_{0};      /* S, computed with w_ns_ */
	mutable std::atomic<uint64_t> last_s_ns_{0}; /* and with last_w_ns_ */
	mutable std::atomic<uint64_t> w_ms_{0};
	std::atomic<uint64_t> sleeps_{0};
	/* EWMA of the sleeps' length (the timer's place), each counted at most max_sleep_ns (one
	 * idle second would otherwise put the timer past the waits of the next dozens of sleeps) */
	std::atomic<uint64_t> sleep_ns_{0};
	std::atomic<uint64_t> preempt_{0};
	std::atomic<uint64_t> preempt_ms_{0};   /* now_ms() + 1 of the last preemption; 0: none */
	std::atomic<uint64_t> guess_arm_ms_{0}; /* now_ms() + 1 of the last guess_arm_due() */
};

} // namespace vwait::util

#endif
