/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* What a sleep costs, measured (include/vwait/util/wait_cost.h). */
#include "vwait/util/wait_cost.h"

#include "vwait/util/wait_policy.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>

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

uint64_t wake_stats::seed_ns() noexcept
{
	if (seed_)
		std::call_once(seeded_, [this] { seed_ns_ = seed_(); });
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

bool cpu_gauge::feed(int runnable) noexcept
{
	if (runnable < 0)
		return short_now();
	const long r = 256L * runnable, m = mean_.load(std::memory_order_relaxed);
	const long mean = m < 0 ? r : m + (r - m) / gauge_weight;
	mean_.store(mean, std::memory_order_relaxed);
	short_.store(mean > 256L * cpus_ + 128, std::memory_order_relaxed);
	return short_now();
}

/* the three averages skipped as words: %f would follow the application's LC_NUMERIC */
int parse_loadavg_runnable(const char *buf) noexcept
{
	long running = 0, total = 0;
	if (!buf || std::sscanf(buf, "%*s %*s %*s %ld/%ld", &running, &total) != 2 || running < 0)
		return -1;
	return static_cast<int>(std::min<long>(running, INT_MAX));
}

namespace
{
/* opened for each snapshot (one in gauge_period_ms): a descriptor kept open could be closed
 * under us by an application that closes what it did not open */
int runnable_now() noexcept
{
	const int f = ::open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
	if (f < 0)
		return -1;
	char buf[128];
	const ssize_t n = ::read(f, buf, sizeof(buf) - 1);
	::close(f);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	return parse_loadavg_runnable(buf);
}
} // namespace

bool cpu_short_now() noexcept
{
	static std::atomic<uint64_t> checked_ms{0};
	static cpu_gauge gauge([] {
		cpu_set_t set;
		CPU_ZERO(&set);
		if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
			return CPU_COUNT(&set);
		return static_cast<int>(std::max(sysconf(_SC_NPROCESSORS_ONLN), 1L));
	}());
	const uint64_t now = steady_ms_now();
	uint64_t last = checked_ms.load(std::memory_order_relaxed);
	/* one thread of the process looks; the others take the last verdict meanwhile */
	if ((last != 0 && now - last < gauge_period_ms) ||
	    !checked_ms.compare_exchange_strong(last, now, std::memory_order_relaxed))
		return gauge.short_now();
	return gauge.feed(runnable_now());
}

} // namespace vwait::util
