/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* What a sleep costs, measured: the half of the wait policy that observes (wait_policy.h
 * decides from what this reports and from nothing else of the machine).
 *
 * W, what a sleep costs its sleeper, is the sleep path (arming and looking again, then the
 * drain from the wake-up to the poll that finds the work), timed on every sleep an event ends,
 * plus the wake-up latency. When the event happened is not observable, so the latency is timed
 * on a sleep that also waits on a timer (timerfd: no slack) due part-way into it. W is the sum
 * of the parts' lower medians; S = W + path is one sleep's latency plus its CPU, what ski
 * rental spins before it sleeps.
 *
 *  constant         value  why
 *  window_size      8      samples per part: a lower median of 8 ignores 3 outliers (a thread
 *                          descheduled for 10 ms never defines W)
 *  min_samples      3      samples a median needs, and the waiter's first sleeps dropped (page
 *                          faults and first system calls on new fds: start-up, not W)
 *  sample_gap_ms    125    once the latency is known, one sleep per gap carries the timer (one
 *                          per gap / window_size before): W follows the machine within a
 *                          second, and a waiter that sleeps often pays for a few sleeps only */
#ifndef VWAIT_UTIL_WAIT_COST_H
#define VWAIT_UTIL_WAIT_COST_H

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>

namespace vwait::util
{

using clock = std::chrono::steady_clock;

constexpr unsigned window_size = 8;
constexpr unsigned min_samples = 3;
constexpr uint64_t sample_gap_ms = 125;

/* The last window_size samples (ns) of one part of W, after the first `drop`. */
class sample_window
{
public:
	explicit sample_window(unsigned drop = 0) noexcept : drop_(drop) {}
	bool push(uint64_t ns, uint64_t now_ms) noexcept; /* false: a dropped one */
	uint64_t median() const noexcept;                 /* 0: fewer than min_samples */
	uint64_t kept() const noexcept { return kept_.load(std::memory_order_relaxed); }
	uint64_t newest_ms() const noexcept { return newest_.load(std::memory_order_relaxed); }

private:
	const unsigned drop_;
	std::atomic<uint64_t> seen_{0}, kept_{0}, newest_{0};
	std::atomic<uint32_t> v_[window_size] = {};
};

/* W and S in ns; guess: from the seed, no sleep measured them */
struct wake_costs {
	uint64_t w = 0, s = 0;
	bool guess = false;
};

/* W in its parts, for one waiter or for the process. */
class wake_stats
{
public:
	/* seed: asked once, by seed_ns() (the process's: timer_wake_ns; tests give fakes) */
	using seed_fn = uint64_t (*)() noexcept;
	explicit wake_stats(unsigned drop = 0, seed_fn seed = nullptr) noexcept
	    : path_(drop), wake_(drop), seed_(seed)
	{
	}
	bool add_path(uint64_t ns, uint64_t now_ms) noexcept { return add(path_, ns, now_ms); }
	bool add_wake(uint64_t ns, uint64_t now_ms) noexcept { return add(wake_, ns, now_ms); }
	/* W and S once both parts have min_samples (zero before) */
	wake_costs costs() const noexcept { return {w_.load(relaxed), s_.load(relaxed)}; }
	bool known() const noexcept { return w_.load(relaxed) != 0; }
	uint64_t cost_ns() const noexcept { return w_.load(relaxed); }
	uint64_t path_ns() const noexcept { return path_.median(); }
	uint64_t wake_ns() const noexcept { return wake_.median(); }
	const sample_window &path() const noexcept { return path_; }
	const sample_window &wake() const noexcept { return wake_; }
	uint64_t seed_ns() noexcept; /* the seed's answer, 0 without one */

private:
	static constexpr auto relaxed = std::memory_order_relaxed;
	bool add(sample_window &part, uint64_t ns, uint64_t now_ms) noexcept;
	sample_window path_, wake_;
	std::atomic<uint64_t> w_{0}, s_{0};
	const seed_fn seed_;
	std::once_flag once_;
	std::atomic<bool> seeded_{false};
	uint64_t seed_ns_ = 0;
};

/* The process's: every waiter's kept samples go here too; seeded by timer_wake_ns. */
wake_stats &process_wake_stats() noexcept;
/* This machine's timerfd lateness: the median of min_samples wake-ups due default_spin_us away
 * (0: no timer). */
uint64_t timer_wake_ns() noexcept;
/* A timerfd set to expire at `at` (steady_clock is CLOCK_MONOTONIC), old expirations read
 * first: true when set. */
bool set_timer_at(int timerfd, clock::time_point at) noexcept;
/* CLOCK_MONOTONIC_COARSE in ms: no TSC read; its 1-4 ms tick is fine for the gaps above. */
uint64_t steady_ms_now() noexcept;

} // namespace vwait::util

#endif
