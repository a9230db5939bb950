/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* What a blocking call does with what a sleep costs (include/vwait/util/wait_policy.h). */
#include "vwait/util/wait_policy.h"

#include <strings.h>

#include <algorithm>
#include <iterator>

namespace vwait::util
{

namespace
{
constexpr const char *policy_names[] = {"adaptive", "block", "fixed"}; /* wait_policy_kind's */
}

const char *wait_policy_name(wait_policy_kind kind) noexcept
{
	const auto k = static_cast<unsigned>(kind);
	return k < std::size(policy_names) ? policy_names[k] : "unknown";
}

bool parse_wait_policy(const char *name, wait_policy_kind *out) noexcept
{
	for (unsigned k = 0; name && out && k < std::size(policy_names); k++)
		if (strcasecmp(name, policy_names[k]) == 0) {
			*out = static_cast<wait_policy_kind>(k);
			return true;
		}
	return false;
}

policy_inputs default_policy_inputs() noexcept
{
	return {&process_wake_stats(), steady_ms_now};
}

policy_decisions &process_decisions() noexcept
{
	static policy_decisions d;
	return d;
}

namespace
{
uint64_t ns_of(clock::duration d) noexcept
{
	const auto n = std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
	return n > 0 ? static_cast<uint64_t>(n) : 0;
}
clock::duration of_ns(uint64_t ns) noexcept
{
	return std::chrono::duration_cast<clock::duration>(std::chrono::nanoseconds(ns));
}
/* a load and a store, not a locked add: statistics, which a rare lost update between two
 * threads leaves meaningful, on every wait's path */
void count(std::atomic<uint64_t> policy_decisions::*which) noexcept
{
	std::atomic<uint64_t> &n = process_decisions().*which;
	n.store(n.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}
} // namespace

wake_costs spin_learner::costs() const noexcept
{
	if (own_.known())
		return own_.costs();
	if (!in_.process)
		return {};
	if (in_.process->known())
		return in_.process->costs();
	/* the seed times a wake-up alone: no path to count twice */
	const uint64_t seed = in_.process->seed_ns();
	return {seed, 2 * seed, seed != 0};
}

uint64_t spin_learner::wake_cost_ns() const noexcept
{
	const wake_costs c = costs();
	return c.guess ? 0 : c.w;
}

clock::duration spin_learner::bar(const wait_call &c, uint64_t s_ns) const noexcept
{
	const clock::duration t = threshold_of(s_ns);
	return c.probe ? std::min<clock::duration>(2 * t, cap()) : t;
}

clock::duration spin_learner::threshold_of(uint64_t s_ns) const noexcept
{
	if (policy_.kind != wait_policy_kind::adaptive)
		return cap();
	const clock::duration s = s_ns ? of_ns(s_ns) : std::chrono::microseconds(default_spin_us);
	return std::min<clock::duration>(s, cap());
}

wait_call spin_learner::begin() noexcept
{
	wait_call c;
	if (policy_.spin_us == 0 || policy_.kind == wait_policy_kind::block)
		return c;
	if (policy_.kind == wait_policy_kind::fixed) {
		c.budget = cap();
		return c;
	}
	if (score_.load(std::memory_order_relaxed) < score_one / 2) {
		/* long waits lately: arm at once, but for a probe now and then */
		unsigned left = until_probe_.load(std::memory_order_relaxed);
		while (left > 0)
			if (until_probe_.compare_exchange_weak(left, left - 1,
			                                       std::memory_order_relaxed)) {
				count(&policy_decisions::armed_long);
				return c;
			}
		until_probe_.store(gap_.load(std::memory_order_relaxed) - 1,
		                   std::memory_order_relaxed);
		c.probe = true;
	}
	count(c.probe ? &policy_decisions::probes : &policy_decisions::spun);
	c.budget = bar(c, costs().s);
	return c;
}

void spin_learner::slept(clock::duration arm, clock::duration slept, clock::duration drain) noexcept
{
	if (!adaptive())
		return;
	const uint64_t path = ns_of(arm) + ns_of(drain), now = now_ms();
	if (own_.add_path(path, now) && in_.process)
		in_.process->add_path(path, now);
	const uint64_t ns = std::min(ns_of(slept), 2 * ns_of(cap()));
	const uint64_t m = sleep_ns_.load(std::memory_order_relaxed);
	sleep_ns_.store(m ? m - m / score_weight + ns / score_weight : ns,
	                std::memory_order_relaxed);
}

clock::duration spin_learner::calibration() noexcept
{
	if (!adaptive())
		return clock::duration::zero();
	/* one timed sleep per sample_gap_ms once the latency is known, window_size times as
	 * many before: counted from the last timed sleep, not the last sample, for a timer that
	 * an event beats takes none, and timing every sleep costs each a timer and a wake-up */
	const uint64_t now = now_ms(), last = calib_ms_.load(std::memory_order_relaxed);
	const uint64_t gap =
	    own_.wake().kept() >= min_samples ? sample_gap_ms : sample_gap_ms / window_size;
	if (last != 0 && now - last < gap)
		return clock::duration::zero();
	calib_ms_.store(now ? now : 1, std::memory_order_relaxed);
	/* half-way into a sleep like the recent ones (before any, like the spin budget), so
	 * that the CPU idles about as deeply as in the sleeps it stands for; never past the cap:
	 * a W beyond it changes no decision. A timer due before its sleeper sleeps times a
	 * system call, not a wake-up: waiter::sleep drops it then. */
	const uint64_t len = sleep_ns_.load(std::memory_order_relaxed);
	const uint64_t due = (len ? len : ns_of(threshold())) / 2;
	return of_ns(std::clamp<uint64_t>(due, 1, std::max<uint64_t>(ns_of(cap()), 1)));
}

void spin_learner::timer_woke(clock::duration late) noexcept
{
	if (!adaptive())
		return;
	const uint64_t ns = ns_of(late), now = now_ms();
	if (own_.add_wake(ns, now) && in_.process)
		in_.process->add_wake(ns, now);
}

void spin_learner::end(const wait_call &c, clock::duration waited, bool found) noexcept
{
	if (!adaptive())
		return;
	if (found && !c.slept && waited <= c.budget) {
		learn(true); /* found in its spin: within its bar, whatever S is now */
		return;
	}
	const wake_costs k = costs();
	const clock::duration b = bar(c, k.s);
	if (!found && waited < std::max(b, c.budget))
		return; /* a short timeout says nothing about how long waits last */
	if (!found || !c.slept)
		learn(found && waited <= std::max(b, c.budget));
	else /* it lasted its length less the wake-up it paid, and at least the spin it had */
		learn(k.w && !k.guess && std::max(c.budget, waited - of_ns(k.w)) < b);
}

void spin_learner::learn(bool hit) noexcept
{
	count(hit ? &policy_decisions::judged_short : &policy_decisions::judged_long);
	/* stored only when they change: threads that share a waiter and keep spinning do not
	 * pass its cache line back and forth on every wait */
	const unsigned s = score_.load(std::memory_order_relaxed);
	const unsigned next = (s * (score_weight - 1) + (hit ? score_one : 0)) / score_weight;
	if (next != s)
		score_.store(next, std::memory_order_relaxed);
	if (hit) {
		if (gap_.load(std::memory_order_relaxed) != 1)
			gap_.store(1, std::memory_order_relaxed);
		if (until_probe_.load(std::memory_order_relaxed) != 0)
			until_probe_.store(0, std::memory_order_relaxed);
	} else if (const unsigned g = gap_.load(std::memory_order_relaxed); g < max_probe_gap) {
		gap_.store(2 * g, std::memory_order_relaxed);
	}
}

} // namespace vwait::util
