/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* What a sleep costs, measured (include/vwait/util/wait_cost.h). */
#include "vwait/util/wait_cost.h"

#include "vwait/util/wait_policy.h"

#include <poll.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>

namespace vwait::util
{

bool sample_window::push(uint64_t ns, uint64_t now_ms) noexcept
{
	if (seen_.fetch_add(1, std::memory_order_relaxed) < drop_)
		return false;
	const uint64_t k = kept_.fetch_add(1, std::memory_order_relaxed);
	v_[k % window_size].store(static_cast<uint32_t>(std::min<uint64_t>(ns, UINT32_MAX)),
	                          std::memory_order_relaxed);
	newest_.store(now_ms, std::memory_order_relaxed);
	return true;
}

uint64_t sample_window::median() const noexcept
{
	const unsigned n = static_cast<unsigned>(std::min<uint64_t>(kept(), window_size));
	uint32_t v[window_size];
	for (unsigned i = 0; i < n; i++)
		v[i] = v_[i].load(std::memory_order_relaxed);
	if (n < min_samples)
		return 0;
	std::nth_element(v, v + (n - 1) / 2, v + n); /* of an even count, the smaller middle */
	return v[(n - 1) / 2];
}

/* W recomputed on the sleeping thread, after its sleep: a wait that spins reads two words */
bool wake_stats::add(sample_window &part, uint64_t ns, uint64_t now_ms) noexcept
{
	if (!part.push(ns, now_ms))
		return false;
	if (const uint64_t path = path_.median(), wake = wake_.median(); path && wake) {
		s_.store(2 * path + wake, std::memory_order_relaxed);
		w_.store(path + wake, std::memory_order_relaxed);
	}
	return true;
}

/* asked on every wait until W is known: a load when answered (a locked instruction, as in
 * call_once, costs tens of times more under an emulator) */
uint64_t wake_stats::seed_ns() noexcept
{
	if (!seed_ || seeded_.load(std::memory_order_acquire))
		return seed_ns_;
	std::call_once(once_, [this] {
		seed_ns_ = seed_();
		seeded_.store(true, std::memory_order_release);
	});
	return seed_ns_;
}

wake_stats &process_wake_stats() noexcept
{
	static wake_stats stats(0, timer_wake_ns);
	return stats;
}

bool set_timer_at(int timerfd, clock::time_point at) noexcept
{
	uint64_t stale;
	while (::read(timerfd, &stale, sizeof(stale)) > 0) {
	}
	const auto ns = std::chrono::nanoseconds(at.time_since_epoch()).count();
	struct itimerspec its = {};
	its.it_value.tv_sec = static_cast<time_t>(ns / 1000000000);
	its.it_value.tv_nsec = static_cast<long>(ns % 1000000000);
	return ::timerfd_settime(timerfd, TFD_TIMER_ABSTIME, &its, nullptr) == 0;
}

uint64_t timer_wake_ns() noexcept
{
	const int t = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	uint64_t v[min_samples];
	unsigned n = 0;
	for (; t >= 0 && n < min_samples; n++) {
		const clock::time_point due =
		    clock::now() + std::chrono::microseconds(default_spin_us);
		struct pollfd p = {t, POLLIN, 0};
		if (!set_timer_at(t, due) || ::poll(&p, 1, 100) != 1)
			break;
		v[n] = static_cast<uint64_t>(std::chrono::nanoseconds(clock::now() - due).count());
	}
	if (t >= 0)
		::close(t);
	if (n < min_samples)
		return 0;
	std::nth_element(v, v + n / 2, v + n);
	return v[n / 2];
}

uint64_t steady_ms_now() noexcept
{
	struct timespec ts;
	if (::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) != 0 &&
	    ::clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
		return 0;
	return static_cast<uint64_t>(ts.tv_sec) * 1000 +
	       static_cast<uint64_t>(ts.tv_nsec) / 1000000;
}

} // namespace vwait::util
