/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* The wait policy on its own, on fake inputs: what it measures (util::wake_stats, the sample
 * windows, the CPU gauge) and what it decides (util::spin_learner), fed fake wake-up costs, a
 * fake steady clock, a fake CPU verdict and fake seeds. No waiter, no clock of the host. Every
 * decision is checked across regimes whose wake-up cost runs from 2 us (a real machine's) to
 * 1 ms, at timer resolutions of 1 ns and 1 us where that matters. The learner inside a real
 * waiter: test_util_wait. */
#include "test_util_common.h"

#include "vwait/util/wait_policy.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>

using namespace vwait_test;

namespace
{

using vwait::util::clock;
using vwait::util::min_samples;
using vwait::util::policy_inputs;
using vwait::util::sample_window;
using vwait::util::spin_learner;
using vwait::util::wait_call;
using vwait::util::wait_policy_kind;
using vwait::util::wake_stats;
using us = std::chrono::microseconds;

clock::duration d(uint64_t u)
{
	return std::chrono::duration_cast<clock::duration>(us(u));
}
clock::duration dns(uint64_t ns)
{
	return std::chrono::duration_cast<clock::duration>(std::chrono::nanoseconds(ns));
}

std::atomic<uint64_t> fake_ms{5000000};
uint64_t fake_now() noexcept
{
	return fake_ms.load();
}
/* no process W, the fake clock */
const policy_inputs quiet{nullptr, fake_now};

/* a regime: what one sleep's path (arm + drain) and wake-up latency cost, in ns */
struct regime {
	uint64_t path_ns, wake_ns;
	uint64_t w() const { return path_ns + wake_ns; }
	uint64_t s() const { return 2 * path_ns + wake_ns; }
};
/* a real machine (2 us), a slow one (20 us), the emulated test guest (75 us), a very slow
 * one (1 ms, past the default cap) */
const regime regimes[] = {{1000, 1000}, {8000, 12000}, {25000, 50000}, {400000, 600000}};

/* n sleeps that an event ended, each timed by a calibration timer too */
void sleeps(spin_learner &l, const regime &r, int n)
{
	for (int i = 0; i < n; i++) {
		l.slept(dns(r.path_ns / 2), d(1000), dns(r.path_ns - r.path_ns / 2));
		l.timer_woke(dns(r.wake_ns));
	}
}
/* a learner that knows W: its first min_samples sleeps (start-up, 3 ms each) are dropped */
void learn_w(spin_learner &l, const regime &r)
{
	sleeps(l, regime{3000000, 3000000}, static_cast<int>(min_samples));
	assert_int_equal(l.wake_cost_ns(), 0);
	sleeps(l, r, static_cast<int>(min_samples));
	assert_int_equal(l.wake_cost_ns(), r.w());
}
/* one wait: begins, and ends after `len` (found) as a waiter would tell it, sleeping when the
 * budget is shorter than the wait (it then lasts len plus the wake-up `w_ns` it pays) */
wait_call one_wait(spin_learner &l, clock::duration len, uint64_t w_ns)
{
	wait_call c = l.begin();
	if (c.budget >= len) {
		l.end(c, len, true);
		return c;
	}
	c.slept = true;
	l.end(c, len + dns(w_ns), true);
	return c;
}

void test_policy_names(void **)
{
	for (wait_policy_kind k :
	     {wait_policy_kind::adaptive, wait_policy_kind::block, wait_policy_kind::fixed}) {
		wait_policy_kind got = wait_policy_kind::adaptive;
		assert_true(vwait::util::parse_wait_policy(vwait::util::wait_policy_name(k), &got));
		assert_true(got == k);
	}
	wait_policy_kind got = wait_policy_kind::fixed;
	assert_true(vwait::util::parse_wait_policy("BLOCK", &got));
	assert_true(got == wait_policy_kind::block);
	assert_false(vwait::util::parse_wait_policy("spin", &got));
	assert_false(vwait::util::parse_wait_policy("", &got));
	assert_false(vwait::util::parse_wait_policy(nullptr, &got));
	assert_true(got == wait_policy_kind::block); /* untouched */
}

/* The window: the first `drop` samples go, a median needs min_samples, it is the lower median
 * of the last 8, and 3 outliers of 8 (however large) do not move it. */
void test_window(void **)
{
	sample_window w(2);
	assert_false(w.push(9000, 1));
	assert_false(w.push(9000, 2));
	assert_true(w.push(100, 3));
	assert_true(w.push(300, 4));
	assert_int_equal(w.median(), 0); /* 2 < min_samples */
	assert_true(w.push(200, 5));
	assert_int_equal(w.median(), 200);
	assert_int_equal(w.newest_ms(), 5);
	assert_true(w.push(400, 6));
	assert_int_equal(w.median(), 200); /* of 100 200 300 400: the smaller middle one */
	sample_window o;
	for (int i = 0; i < 5; i++)
		o.push(50, 1);
	for (int i = 0; i < 3; i++)
		o.push(uint64_t{1} << 40, 1); /* saturated, not wrapped */
	assert_int_equal(o.median(), 50);
	/* the window follows: 8 new samples replace the old ones */
	for (int i = 0; i < 8; i++)
		o.push(70, 2);
	assert_int_equal(o.median(), 70);
	assert_int_equal(o.kept(), 16);
}

/* W = path + wake-up, S = W + path, per regime; a learner without its own uses the process's,
 * and without either the process's seed (S twice the seed, a guess: reported as no W). */
void test_costs(void **)
{
	for (const regime &r : regimes) {
		spin_learner l({wait_policy_kind::adaptive, 10000, &quiet});
		assert_int_equal(l.costs().s, 0);
		learn_w(l, r);
		assert_int_equal(l.costs().s, r.s());
		assert_false(l.costs().guess);
		/* the process's, for a learner that has none */
		wake_stats proc;
		for (unsigned i = 0; i < min_samples; i++) {
			proc.add_path(r.path_ns, 1);
			proc.add_wake(r.wake_ns, 1);
		}
		const policy_inputs in{&proc, fake_now};
		spin_learner fresh({wait_policy_kind::adaptive, 10000, &in});
		assert_int_equal(fresh.costs().w, r.w());
		assert_int_equal(fresh.wake_cost_ns(), r.w());
	}
	static std::atomic<int> asked{0};
	wake_stats seeded(0, []() noexcept -> uint64_t {
		asked++;
		return 30000;
	});
	const policy_inputs in{&seeded, fake_now};
	spin_learner l({wait_policy_kind::adaptive, 10000, &in});
	assert_int_equal(l.costs().w, 30000);
	assert_int_equal(l.costs().s, 60000);
	assert_true(l.costs().guess);
	assert_int_equal(l.wake_cost_ns(), 0);
	assert_int_equal(asked.load(), 1); /* asked once */
}

/* The budget per policy and regime: block 0, fixed the cap, adaptive S capped (the 50 us
 * fallback before any W); a probe may spin twice that. */
void test_budget_is_s(void **)
{
	for (const regime &r : regimes)
		for (unsigned cap : {30u, 1000u, 10000u}) {
			spin_learner a({wait_policy_kind::adaptive, cap, &quiet});
			spin_learner f({wait_policy_kind::fixed, cap, &quiet});
			spin_learner b({wait_policy_kind::block, cap, &quiet});
			assert_true(b.begin().budget == clock::duration::zero());
			assert_true(f.begin().budget == d(cap));
			assert_true(a.begin().budget == std::min(d(cap), d(50)));
			learn_w(a, r);
			assert_true(a.begin().budget == std::min(d(cap), dns(r.s())));
			assert_true(a.threshold() == std::min(d(cap), dns(r.s())));
		}
	spin_learner off({wait_policy_kind::adaptive, 0, &quiet});
	assert_true(off.begin().budget == clock::duration::zero());
}

/* Long waits (10 S) stop the spinning within a few, probes then come one wait in `gap` with
 * the gap doubling to max_probe_gap; short ones bring spinning back within a few. */
void test_long_then_short(void **)
{
	for (const regime &r : regimes) {
		spin_learner l({wait_policy_kind::adaptive, 100000, &quiet});
		learn_w(l, r);
		const clock::duration s = dns(r.s());
		int spun = 0;
		for (int i = 0; i < 8; i++)
			spun += one_wait(l, 10 * s, r.w()).budget > clock::duration::zero();
		assert_true(l.score() < spin_learner::score_one / 2);
		assert_true(spun <= 5);
		int probes = 0;
		for (int i = 0; i < 2000; i++) {
			const wait_call c = one_wait(l, 10 * s, r.w());
			probes += c.probe;
			assert_true(c.probe == (c.budget > clock::duration::zero()));
			if (c.probe)
				assert_true(c.budget == 2 * s);
		}
		print_message("W %.0f us: %d probes in 2000 long waits, gap %u\n", r.w() / 1e3,
		              probes, l.probe_gap());
		assert_int_equal(l.probe_gap(), vwait::util::max_probe_gap);
		assert_true(probes >= 2000 / 256 && probes <= 20);
		/* short waits again (a tenth of S): those that sleep are judged by their length
		 * less the W they paid, so spinning is back within a few waits */
		int n = 0;
		while (l.score() < spin_learner::score_one / 2 && n < 10)
			one_wait(l, s / 10, r.w()), n++;
		print_message("  spinning again after %d short waits\n", n);
		assert_true(n <= 4);
		assert_int_equal(l.probe_gap(), 1);
	}
}

/* A pair of peers both in a blocking call, think 0: each wait lasts the peer's reaction (its
 * wake-up if it slept) and a round trip, plus this side's wake-up if it sleeps. Started with
 * both asleep (both learners saw long waits), they must turn to spinning by themselves within
 * a few hundred round trips, in every regime, and stay there. With a round trip past the
 * sleep path (rtt = W), a wait slept at once, less its own wake-up, still lasts more than S
 * (the peer's wake-up and the trip): both asleep confirms itself, and only the probe's 2S
 * gets them out. Beyond S, both asleep is right: no test. */
void test_both_asleep_escapes(void **)
{
	for (const regime &r : regimes)
		for (const uint64_t rtt_ns : {r.w() / 3, r.w()}) {
			const clock::duration rtt = dns(rtt_ns);
			spin_learner a({wait_policy_kind::adaptive, 100000, &quiet});
			spin_learner b({wait_policy_kind::adaptive, 100000, &quiet});
			learn_w(a, r);
			learn_w(b, r);
			for (int i = 0; i < 8; i++) {
				one_wait(a, 10 * dns(r.s()), r.w());
				one_wait(b, 10 * dns(r.s()), r.w());
			}
			bool peer_slept = true; /* its reaction costs a wake-up */
			int turned = -1, slept_after = 0;
			for (int i = 0; i < 2000; i++) {
				spin_learner &me = i % 2 ? b : a;
				const clock::duration len =
				    rtt + (peer_slept ? dns(r.w()) : clock::duration::zero());
				peer_slept = one_wait(me, len, r.w()).budget < len;
				if (turned < 0 && !peer_slept && a.score() >= 128 &&
				    b.score() >= 128)
					turned = i;
				else if (turned >= 0)
					slept_after += peer_slept;
			}
			print_message("W %.0f us, rtt %.0f us: both spinning after %d half round "
			              "trips, %d slept after\n",
			              r.w() / 1e3, rtt_ns / 1e3, turned, slept_after);
			assert_true(turned >= 0 && turned < 600);
			assert_int_equal(slept_after, 0);
		}
}

/* A wait that ended by its deadline sooner than the budget teaches nothing; one at or past it
 * is long. A wait found at once after arming is short. */
void test_timeouts(void **)
{
	spin_learner l({wait_policy_kind::adaptive, 1000, &quiet});
	learn_w(l, regimes[2]);
	for (int i = 0; i < 20; i++) {
		const wait_call c = l.begin();
		l.end(c, c.budget / 2, false);
	}
	assert_int_equal(l.score(), spin_learner::score_one);
	const wait_call c = l.begin();
	l.end(c, 2 * c.budget, false);
	assert_true(l.score() < spin_learner::score_one);
	wait_call armed;
	armed.slept = false;
	const unsigned before = l.score();
	l.end(armed, d(1), true);
	assert_true(l.score() > before);
}

/* The calibration timer: one timed sleep per sample_gap_ms / window_size of the fake clock
 * until the wake-up latency is known, then one per sample_gap_ms, counted from the last timed
 * sleep (not the last sample: an event that beats the timer gives none); it is due half-way
 * into a sleep like the recent ones (before any sleep: half the spin budget), never past the
 * cap. Per regime. */
void test_calibration(void **)
{
	using vwait::util::sample_gap_ms;
	using vwait::util::window_size;
	const clock::duration none = clock::duration::zero();
	for (const regime &r : regimes) {
		spin_learner l({wait_policy_kind::adaptive, 1000, &quiet});
		assert_true(l.calibration() == d(25)); /* half the 50 us fallback */
		assert_true(l.calibration() == none);  /* the next sleep at once: untimed */
		for (unsigned i = 0; i < 2 * min_samples; i++) {
			if (i > 0) {
				fake_ms += sample_gap_ms / window_size - 1;
				assert_true(l.calibration() == none);
				fake_ms += 1;
				assert_true(l.calibration() > none);
			}
			l.slept(dns(r.path_ns), dns(4 * r.w()), none);
			l.timer_woke(dns(r.wake_ns));
		}
		assert_int_equal(l.wake_cost_ns(), r.w());
		fake_ms += sample_gap_ms - 1;
		assert_true(l.calibration() == none);
		fake_ms += 1;
		const clock::duration due = l.calibration();
		print_message("W %.0f us: timer due %.1f us into a sleep\n", r.w() / 1e3,
		              std::chrono::duration<double, std::micro>(due).count());
		assert_true(due == std::min(d(1000), dns(2 * r.w())));
		/* the timer that an event always beats: still one timed sleep per gap, no more */
		fake_ms += sample_gap_ms / 2;
		assert_true(l.calibration() == none);
		fake_ms += sample_gap_ms - sample_gap_ms / 2;
		assert_true(l.calibration() > none);
		fake_ms += sample_gap_ms;
	}
	spin_learner tiny({wait_policy_kind::adaptive, 1, &quiet});
	assert_true(tiny.calibration() > none);
	spin_learner block({wait_policy_kind::block, 1000, &quiet});
	assert_true(block.calibration() == none);
}

/* Before any sleep, the budget stands on the process's timer seed, whatever it is (2 us to
 * 1 ms): twice the seed, capped, and the first timer due half of that. */
void test_seeded_guess(void **)
{
	static uint64_t seed;
	for (uint64_t s : {2000u, 20000u, 75000u, 1000000u}) {
		seed = s;
		wake_stats proc(0, []() noexcept { return seed; });
		const policy_inputs in{&proc, fake_now};
		spin_learner l({wait_policy_kind::adaptive, 1000, &in});
		const clock::duration b = std::min(d(1000), dns(2 * s));
		assert_true(l.begin().budget == b);
		assert_true(l.calibration() == b / 2);
		assert_int_equal(l.wake_cost_ns(), 0);
	}
}

} // namespace

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_policy_names),    cmocka_unit_test(test_window),
	    cmocka_unit_test(test_costs),           cmocka_unit_test(test_budget_is_s),
	    cmocka_unit_test(test_long_then_short), cmocka_unit_test(test_both_asleep_escapes),
	    cmocka_unit_test(test_timeouts),        cmocka_unit_test(test_calibration),
	    cmocka_unit_test(test_seeded_guess),
	};
	return cmocka_run_group_tests(tests, nullptr, nullptr);
}
