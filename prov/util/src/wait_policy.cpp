/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* util::wait_policy and the adaptive policy's learner (see include/vwait/util/wait_policy.h). */
#include "vwait/util/wait_policy.h"

#include <strings.h>

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

uint64_t spin_learner::wall_ms_now() noexcept
{
	return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
	                                 std::chrono::system_clock::now().time_since_epoch())
	                                 .count());
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
	if (score_.load(std::memory_order_relaxed) >= score_one / 2)
		return cap();
	/* long waits lately: spin only on a probe, in the shared window or by the gap */
	if (wall_ms() % probe_period_ms == 0)
		return cap();
	unsigned left = until_probe_.load(std::memory_order_relaxed);
	while (left > 0) {
		if (until_probe_.compare_exchange_weak(left, left - 1, std::memory_order_relaxed))
			return clock::duration::zero();
	}
	until_probe_.store(gap_.load(std::memory_order_relaxed), std::memory_order_relaxed);
	return cap();
}

void spin_learner::record(clock::duration waited, bool found) noexcept
{
	if (policy_.kind != wait_policy_kind::adaptive || policy_.spin_us == 0)
		return;
	if (!found && waited < cap())
		return; /* a short timeout says nothing about how long waits last */
	const bool hit = found && waited <= cap();
	const unsigned s = score_.load(std::memory_order_relaxed);
	score_.store((3 * s + (hit ? score_one : 0)) / 4, std::memory_order_relaxed);
	if (hit) {
		const auto ns = static_cast<uint64_t>(
		    std::chrono::duration_cast<std::chrono::nanoseconds>(waited).count());
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

} // namespace vwait::util
