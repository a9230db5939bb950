/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* util::wait_policy: how long a blocking call (fi_cq_sread, fi_cntr_wait, fi_eq_sread, fi_wait)
 * keeps polling before it arms its sources and sleeps on the fds. Handed to a waiter when it is
 * created; the provider reads it from FI_VWAIT_WAIT_POLICY / FI_VWAIT_SPIN_US.
 *
 *   block     never spin: poll once, arm, look again, sleep (upstream verbs' way);
 *   fixed     poll for spin_us, then arm and sleep;
 *   adaptive  (the default) poll for up to spin_us while recent waits mostly ended within
 *             spin_us, arm and sleep at once otherwise (spin_learner below).
 *
 * util::spin_learner is the per-waiter state of adaptive: a score of recent waits (an
 * exponentially weighted share of waits that ended within spin_us; a new waiter starts
 * trusting spin). While the score says most waits end within the budget, every wait may spin
 * up to spin_us; otherwise it spins only on a probe, one wait in `gap`, the gap doubling after
 * every wait that missed (up to max_probe_gap) and back to 1 after one that hit, so that a
 * return of short waits is noticed while long think times cost nearly nothing. Two peers
 * that both sleep see each other's wakeup in every wait and could keep each other asleep (a
 * probe of one finds the other asleep), so waits that start in the first millisecond of every
 * probe_period_ms of wall-clock time (CLOCK_REALTIME: the same on one host and, through NTP,
 * about the same on peers) probe too: peers probe together and find each other fast. A wait that
 * ends by its deadline counts as a long one only when it lasted at least spin_us (a loop of
 * short timeouts teaches nothing), and a call that finds its work at its first look is no wait
 * at all (waiter::wait_until returns before it asks for a budget). The state is a few relaxed
 * atomics: several threads may wait on one waiter; their samples mix, which is what "recent waits
 * of this waiter" means. */
#ifndef VWAIT_UTIL_WAIT_POLICY_H
#define VWAIT_UTIL_WAIT_POLICY_H

#include <atomic>
#include <chrono>
#include <cstdint>

namespace vwait::util
{

using clock = std::chrono::steady_clock;

enum class wait_policy_kind { adaptive, block, fixed };

/* The default spin budget in microseconds: a spinning round trip takes ~30 us in the
 * emulated VM and a few us on a real NIC, while arming and sleeping costs two or more system
 * calls and a wakeup (tens of us). Linux documents 50 us for its own busy-poll budget
 * (net.core.busy_read). */
constexpr unsigned default_spin_us = 50;
/* The largest FI_VWAIT_SPIN_US taken (10 ms); larger values are clamped with a warning. */
constexpr unsigned max_spin_us = 10000;

struct wait_policy {
	wait_policy_kind kind = wait_policy_kind::adaptive;
	unsigned spin_us = default_spin_us;
};

/* "adaptive", "block", "fixed". */
const char *wait_policy_name(wait_policy_kind kind) noexcept;
/* true and *out for one of the names above (case-insensitive); false otherwise. */
bool parse_wait_policy(const char *name, wait_policy_kind *out) noexcept;

class spin_learner
{
public:
	/* the score is a share of 256; waits spin while it is at least half */
	static constexpr unsigned score_one = 256;
	static constexpr unsigned max_probe_gap = 256;
	static constexpr uint64_t probe_period_ms = 256;

	explicit spin_learner(wait_policy p) noexcept : policy_(p) {}

	const wait_policy &policy() const noexcept { return policy_; }

	/* How long the wait that starts now may poll without arming (zero: arm at once).
	 * wall_ms() gives the wall clock in milliseconds (it aligns the probes of peers); it is
	 * called only while waits are long. */
	using wall_clock_fn = uint64_t (*)() noexcept;
	clock::duration budget(wall_clock_fn wall_ms = wall_ms_now) noexcept;
	/* The wall clock in milliseconds, as budget() wants it. */
	static uint64_t wall_ms_now() noexcept;
	/* A wait ended after `waited`: found what it waited for (or was signalled) when found is
	 * true, reached its deadline otherwise. */
	void record(clock::duration waited, bool found) noexcept;

	/* for tests and reports */
	unsigned score() const noexcept { return score_.load(std::memory_order_relaxed); }
	unsigned probe_gap() const noexcept { return gap_.load(std::memory_order_relaxed); }
	/* the exponentially weighted mean of the waits that ended within the budget, in ns */
	uint64_t mean_short_ns() const noexcept { return mean_ns_.load(std::memory_order_relaxed); }

private:
	clock::duration cap() const noexcept { return std::chrono::microseconds(policy_.spin_us); }

	const wait_policy policy_;
	std::atomic<unsigned> score_{score_one};
	std::atomic<unsigned> gap_{1};
	std::atomic<unsigned> until_probe_{0};
	std::atomic<uint64_t> mean_ns_{0};
};

} // namespace vwait::util

#endif
