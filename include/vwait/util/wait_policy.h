/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* util::wait_policy: how long a blocking call (fi_cq_sread, fi_cntr_wait, fi_eq_sread, fi_wait)
 * polls before it arms its sources and sleeps; the half of the policy that decides, from what
 * wait_cost.h measures and the waits it is told about:
 *   block     never spin: poll once, arm, look again, sleep (upstream verbs' way);
 *   fixed     spin spin_us, then arm and sleep;
 *   adaptive  (the default) spin up to S, capped at spin_us, while most recent waits ended
 *             within S; otherwise arm at once. A wait of length d costs d spun through and S
 *             slept through: spinning up to S, then sleeping, costs at most twice the choice
 *             made with hindsight (ski rental), whatever d and W are.
 * The score is the share of recent waits that ended within S; at half or more a wait spins.
 * Below, waits arm at once but for a probe, one in `gap` (doubled after a probe that missed,
 * 1 after a hit). A probe spins up to 2S and is judged against 2S: where both sides of a
 * ping-pong sleep, each wait lasts both wake-ups, and judged against S both would sleep for
 * good; a probe that finds its peer turns to spinning, and the peer's waits then end at once.
 * A slept wait is judged by its length less the W it paid, and at least the spin it had; a
 * timeout within the budget teaches nothing. No check of the CPUs: a spin is capped at S, so
 * a spinner that holds a CPU another thread needs costs it at most one sleep's worth per wait.
 * Before any sleep measured W, S is twice the process's timer seed (default_spin_us without).
 *
 *  constant         value  why
 *  score_weight     4      the newest wait weighs 1/4: a change of phase turns it in a few waits
 *  max_probe_gap    256    while waits are long, one in 256 at most probes: a probe costs 2S at
 *                          most, so long waits pay under 1 % of a sleep's cost in probes
 * The knobs' defaults (not the policy's constants): fixed spins 50 us (Linux's net.core.busy_read
 * default), as adaptive does before any W; adaptive up to 1 ms; FI_VWAIT_SPIN_US at most 10 ms.
 *
 * A blocking call's decisions live in a wait_call for the call. The learner's state is relaxed
 * atomics: threads waiting on one waiter mix their waits, which is what "recent waits of this
 * waiter" means. */
#ifndef VWAIT_UTIL_WAIT_POLICY_H
#define VWAIT_UTIL_WAIT_POLICY_H

#include "vwait/util/wait_cost.h"

namespace vwait::util
{

enum class wait_policy_kind { adaptive, block, fixed };

constexpr unsigned default_spin_us = 50;
constexpr unsigned default_adaptive_cap_us = 1000;
constexpr unsigned max_spin_us = 10000;

constexpr unsigned score_weight = 4;
constexpr unsigned max_probe_gap = 256;

struct policy_inputs;

struct wait_policy {
	wait_policy_kind kind = wait_policy_kind::adaptive;
	unsigned spin_us = default_spin_us;
	/* what adaptive reads of the world; null: default_policy_inputs(). Tests give fakes;
	 * the object must outlive the waiters given this policy. */
	const policy_inputs *inputs = nullptr;
};

/* "adaptive", "block", "fixed" */
const char *wait_policy_name(wait_policy_kind kind) noexcept;
/* true and *out for one of the names above (case-insensitive) */
bool parse_wait_policy(const char *name, wait_policy_kind *out) noexcept;

/* What the learner reads of the world: injectable, so that tests run it on fakes. */
struct policy_inputs {
	/* where samples go besides the learner's own, and whose W a learner without one uses */
	wake_stats *process;
	/* the steady clock in ms (null: steady_ms_now) */
	uint64_t (*now_ms)() noexcept;
};
/* &process_wake_stats(), steady_ms_now */
policy_inputs default_policy_inputs() noexcept;

/* How the process's learners decided (for benchmarks and the debug log): waits begun with a
 * spin or a probe, armed at once (waits long), and judged short or long. */
struct policy_decisions {
	std::atomic<uint64_t> spun{0}, probes{0}, armed_long{0};
	std::atomic<uint64_t> judged_short{0}, judged_long{0};
};
policy_decisions &process_decisions() noexcept;

/* One blocking call, from its first look that found nothing to its return. */
struct wait_call {
	clock::duration budget{}; /* how long it may spin (zero: arm at once) */
	bool probe = false;       /* spun as a probe: judged against 2S */
	bool slept = false;       /* it slept (the waiter sets it) */
};

class spin_learner
{
public:
	static constexpr unsigned score_one = 256; /* waits spin while the score is half or more */

	explicit spin_learner(wait_policy p) noexcept
	    : spin_learner(p, p.inputs ? *p.inputs : default_policy_inputs())
	{
	}
	spin_learner(wait_policy p, policy_inputs in) noexcept
	    : policy_(p), in_(in), own_(min_samples)
	{
	}
	const wait_policy &policy() const noexcept { return policy_; }

	/* a call begins: how long it may spin */
	wait_call begin() noexcept;
	/* a sleep that an event ended: prepare took `arm`, the sleep `slept`, and the caller's
	 * poll found the work `drain` after it */
	void slept(clock::duration arm, clock::duration slept, clock::duration drain) noexcept;
	/* whether the sleep that starts now carries the calibration timer: when it is due
	 * (zero: none) */
	clock::duration calibration() noexcept;
	/* the calibration timer woke the sleeper `late` after its expiry */
	void timer_woke(clock::duration late) noexcept;
	/* the call ends after `waited`: found its work (or was signalled), or timed out */
	void end(const wait_call &c, clock::duration waited, bool found) noexcept;

	/* for reports and tests */
	unsigned score() const noexcept { return score_.load(std::memory_order_relaxed); }
	unsigned probe_gap() const noexcept { return gap_.load(std::memory_order_relaxed); }
	/* W and S as the budget uses them: this waiter's, else the process's, else the guess */
	wake_costs costs() const noexcept;
	/* the W this waiter or its process measured (0: none) */
	uint64_t wake_cost_ns() const noexcept;
	/* S capped (the fallback without any S): a wait within it was worth spinning for */
	clock::duration threshold() const noexcept { return threshold_of(costs().s); }
	const wake_stats &own_wake() const noexcept { return own_; }

private:
	bool adaptive() const noexcept
	{
		return policy_.kind == wait_policy_kind::adaptive && policy_.spin_us != 0;
	}
	clock::duration cap() const noexcept { return std::chrono::microseconds(policy_.spin_us); }
	clock::duration threshold_of(uint64_t s_ns) const noexcept;
	/* what a wait is judged against: S capped, 2S for a probe */
	clock::duration bar(const wait_call &c, uint64_t s_ns) const noexcept;
	void learn(bool hit) noexcept;
	uint64_t now_ms() const noexcept { return in_.now_ms ? in_.now_ms() : steady_ms_now(); }

	const wait_policy policy_;
	const policy_inputs in_;
	wake_stats own_;
	std::atomic<unsigned> score_{score_one}; /* a new waiter trusts spinning */
	std::atomic<unsigned> gap_{1}, until_probe_{0};
	/* the sleeps' mean length (each at most twice the cap): where the timer goes */
	std::atomic<uint64_t> sleep_ns_{0};
	std::atomic<uint64_t> calib_ms_{0}; /* the last timed sleep's start (0: none yet) */
};

} // namespace vwait::util

#endif
