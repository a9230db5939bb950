/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* The wait policy's learner (util::spin_learner) on its own, on fake inputs: a fake steady
 * clock for the samples' age, fake wake-up costs, a fake busy CPU (fake runnable counts fed to
 * a cpu_gauge). No waiter, no clock of the host: each test says what the learner must decide
 * and could fail. The learner inside a real waiter: test_util_wait. */
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
using vwait::util::cpu_gauge;
using vwait::util::policy_inputs;
using vwait::util::sample_window;
using vwait::util::spin_learner;
using vwait::util::wait_policy;
using vwait::util::wait_policy_kind;
using us = std::chrono::microseconds;

clock::duration d(long u)
{
	return std::chrono::duration_cast<clock::duration>(us(u));
}

bool never_short() noexcept
{
	return false;
}
bool always_short() noexcept
{
	return true;
}
/* the fake steady clock, in ms: tests move it */
std::atomic<uint64_t> fake_ms{5000000};
uint64_t fake_now() noexcept
{
	return fake_ms.load();
}
void advance_ms(uint64_t ms)
{
	fake_ms.fetch_add(ms);
}
/* a wall-clock millisecond outside the shared probe window, and one inside */
uint64_t outside() noexcept
{
	return 100;
}
uint64_t inside() noexcept
{
	return 3 * spin_learner::probe_period_ms;
}
/* CPUs never short, no process-wide wake-up cost, the fake clock */
const policy_inputs quiet{outside, never_short, nullptr, fake_now};

/* n sleeps of a learner, each with a sleep path (arm + drain) of path_us and a calibration
 * timer that woke it wake_us late */
void sleeps(spin_learner &l, long path_us, long wake_us, int n)
{
	for (int i = 0; i < n; i++) {
		l.record_sleep(us(path_us), us(1000), us(0));
		l.record_wake(us(wake_us));
	}
}
/* the warm-up: a waiter's first 4 sleeps, slow ones (start-up, page faults, first
 * connections); literal, not warmup_samples, so that a change of the constant is seen */
void warm_up(spin_learner &l)
{
	sleeps(l, 3000, 3000, 4);
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

/* The learner on its own, fed waits of known length: no clock involved. */
void test_learner(void **)
{
	const auto cap = d(100);
	spin_learner block({wait_policy_kind::block, 100});
	spin_learner fixed({wait_policy_kind::fixed, 100});
	spin_learner none({wait_policy_kind::adaptive, 0});
	for (int i = 0; i < 10; i++) {
		assert_true(block.budget(outside) == vwait::util::clock::duration::zero());
		assert_true(fixed.budget(outside) == cap);
		assert_true(none.budget(outside) == vwait::util::clock::duration::zero());
		fixed.record(us(5000), true); /* fixed learns nothing */
	}

	spin_learner a({wait_policy_kind::adaptive, 100, &quiet});
	/* before a wake-up is measured, adaptive spins min(cap, default_spin_us) */
	const auto first = std::chrono::duration_cast<vwait::util::clock::duration>(
	    us(vwait::util::default_spin_us));
	/* a new waiter spins, and keeps spinning while waits are short */
	for (int i = 0; i < 20; i++) {
		assert_true(a.budget(outside) == first);
		a.record(us(30), true);
	}
	assert_int_equal(a.score(), spin_learner::score_one);
	assert_true(a.mean_short_ns() > 25000 && a.mean_short_ns() < 35000);
	/* one long wait does not stop it */
	a.record(us(400), true);
	assert_true(a.budget(outside) == first);
	/* short timeouts teach nothing */
	for (int i = 0; i < 20; i++)
		a.record(us(10), false);
	assert_true(a.score() >= spin_learner::score_one / 2);
	/* long waits in a row: it stops spinning but probes, one wait in a growing gap */
	for (int i = 0; i < 12; i++) {
		(void)a.budget(outside);
		a.record(us(5000), true);
	}
	assert_true(a.score() < spin_learner::score_one / 2);
	assert_int_equal(a.probe_gap(), spin_learner::max_probe_gap);
	int spins = 0;
	for (int i = 0; i < 1000; i++) {
		if (a.budget(outside) == first)
			spins++;
		a.record(us(5000), true);
	}
	print_message("adaptive, waits of 5 ms against a 100 us cap: %d of 1000 waits spun\n",
	              spins);
	assert_true(spins >= 1 && spins <= 1000 / 128);
	/* every wait that starts in the shared probe window spins */
	for (int k = 0; k < 5; k++)
		assert_true(a.budget(inside) == first);
	assert_true(block.budget(inside) == vwait::util::clock::duration::zero());
	/* a timeout after the budget counts as long */
	a.record(us(5000), false);
	assert_true(a.score() < spin_learner::score_one / 2);
	/* short waits again: the next wait probes, and a few short ones bring spinning back */
	a.record(us(20), true);
	assert_int_equal(a.probe_gap(), 1);
	assert_true(a.budget(outside) == first);
	a.record(us(20), true);
	a.record(us(20), true);
	a.record(us(20), true);
	assert_true(a.score() >= spin_learner::score_one / 2);
	for (int i = 0; i < 5; i++)
		assert_true(a.budget(outside) == first);
}

/* W on fake samples: the median sleep path (arm + drain) plus the median wake-up latency, the
 * budget W under the cap, the process's W for a learner that has not slept, the
 * calibration timer's cadence, and waits short or long against that budget. */
void test_learner_wake_cost(void **)
{
	vwait::util::wake_stats proc;
	const policy_inputs in{outside, never_short, &proc, fake_now};
	spin_learner a({wait_policy_kind::adaptive, 1000, &in});
	assert_int_equal(a.wake_cost_ns(), 0);
	assert_true(a.budget(outside) == d(vwait::util::default_spin_us));
	/* while nothing is known every other sleep carries a calibration timer; with no sleep
	 * length known yet, due half-way into the spin budget (the fallback's 50 us) */
	for (int i = 0; i < 3; i++) {
		assert_true(a.calibration() == d(vwait::util::default_spin_us / 2));
		assert_true(a.calibration() == clock::duration::zero());
	}
	warm_up(a);
	/* sleeps of 1 ms, arming 10 us and draining 5 us, wake-ups 25 us late */
	for (int i = 0; i < 3; i++)
		a.record_sleep(us(10), us(1000), us(5));
	for (int i = 0; i < 3; i++)
		a.record_wake(us(25));
	assert_true(a.own_wake().known(fake_now()));
	assert_int_equal(a.wake_cost_ns(), 40000);
	assert_int_equal(proc.cost_ns(fake_now()), 40000);
	/* S = W + path = 55 us decides, and bounds the spin */
	assert_int_equal(a.budget_s_ns(), 55000);
	assert_true(a.threshold() == d(55));
	assert_true(a.spin_budget() == d(55));
	assert_true(a.budget(outside) == d(55));
	/* once known, a calibration when the newest wake-up sample is calib_interval_ms old, due
	 * half-way into sleeps like the recent ones */
	for (int i = 0; i < 100; i++)
		assert_true(a.calibration() == clock::duration::zero());
	advance_ms(spin_learner::calib_interval_ms);
	const clock::duration due = a.calibration();
	assert_true(due >= d(400) && due <= d(600)); /* half of ~1 ms */
	a.record_wake(us(25));
	assert_true(a.calibration() == clock::duration::zero());
	/* the cap bounds the budget */
	spin_learner capped({wait_policy_kind::adaptive, 30, &in});
	assert_true(capped.budget(outside) == d(30)); /* W from the process: 40 > 30 */
	/* a learner that has not slept takes the process's W */
	spin_learner fresh({wait_policy_kind::adaptive, 1000, &in});
	assert_int_equal(fresh.wake_cost_ns(), 40000);
	assert_true(fresh.budget(outside) == d(55));
	/* waits of 50 us are short against 55: spinning goes on */
	for (int i = 0; i < 20; i++)
		a.record(us(50), true);
	assert_true(a.score() >= spin_learner::score_one / 2);
	/* waits of 100 us are long (past S): it stops spinning (probes aside) */
	for (int i = 0; i < 20; i++)
		a.record(us(100), true);
	assert_true(a.score() < spin_learner::score_one / 2);
	/* a slower machine: wake-ups of 200 us make waits of 100 us short again */
	for (int i = 0; i < 8; i++)
		a.record_wake(us(200));
	assert_int_equal(a.wake_cost_ns(), 215000);
	for (int i = 0; i < 4; i++) {
		(void)a.budget(outside);
		a.record(us(100), true);
	}
	assert_true(a.score() >= spin_learner::score_one / 2);
	assert_true(a.budget(outside) == d(230)); /* S = W + path */
	/* block and fixed measure nothing */
	vwait::util::wake_stats none;
	const policy_inputs in2{outside, never_short, &none, fake_now};
	spin_learner f({wait_policy_kind::fixed, 100, &in2});
	sleeps(f, 10, 25, 10);
	assert_true(f.calibration() == clock::duration::zero());
	assert_false(none.known(fake_now()));
	assert_true(f.budget(outside) == d(100));
}

/* Warm-up: a waiter's first warmup_samples sleeps (slow: start-up, page faults, the first
 * connection) measure nothing, for it or for the process. Kept, they would be 4 of the 7
 * samples below and the median would say 3 ms. */
void test_estimator_warmup(void **)
{
	vwait::util::wake_stats proc;
	const policy_inputs in{outside, never_short, &proc, fake_now};
	spin_learner a({wait_policy_kind::adaptive, 1000, &in});
	warm_up(a);
	assert_int_equal(a.own_wake().path_samples(), 0);
	assert_int_equal(a.own_wake().wake_samples(), 0);
	assert_int_equal(a.wake_cost_ns(), 0);
	assert_false(proc.known(fake_now()));
	assert_true(a.budget(outside) == d(vwait::util::default_spin_us));
	sleeps(a, 15, 25, 3);
	assert_int_equal(a.own_wake().path_samples(), 3);
	assert_int_equal(a.wake_cost_ns(), 40000);
	assert_int_equal(proc.cost_ns(fake_now()), 40000);
	assert_true(a.budget(outside) == d(55));
	/* a second waiter warms up on its own: its first sleeps move neither W */
	spin_learner b({wait_policy_kind::adaptive, 1000, &in});
	warm_up(b);
	assert_int_equal(proc.cost_ns(fake_now()), 40000);
	assert_int_equal(b.wake_cost_ns(), 40000); /* the process's */
}

/* A stale W decays: a sample counts for sample_max_age_ms only. A waiter that stopped sleeping
 * (short think times) keeps no W measured under other conditions (boot r: wake_us=2255 for a
 * whole run of short waits); with nothing fresh it reports no W, budgets with the last W
 * it had and calibrates its next sleeps until W is known again. */
void test_estimator_ageing(void **)
{
	vwait::util::wake_stats proc;
	const policy_inputs in{outside, never_short, &proc, fake_now};
	spin_learner a({wait_policy_kind::adaptive, 1000, &in});
	warm_up(a);
	const uint64_t t0 = fake_now();
	sleeps(a, 100, 2000, 4); /* W = 2.1 ms: the budget is the cap */
	assert_int_equal(a.wake_cost_ns(), 2100000);
	assert_true(a.budget(outside) == d(1000));
	/* 600 ms on, three fast sleeps: still outvoted by the four slow ones */
	advance_ms(600);
	sleeps(a, 15, 25, 3);
	assert_int_equal(a.wake_cost_ns(), 2100000);
	/* once the slow ones are sample_max_age_ms old, the fast ones are W */
	fake_ms.store(t0 + 1000); /* a second: sample_max_age_ms */
	assert_int_equal(a.wake_cost_ns(), 40000);
	assert_int_equal(proc.cost_ns(fake_now()), 40000);
	assert_true(a.budget(outside) == d(55));
	/* no sleep for another second: no W measured, for the waiter or for the process (fi_info
	 * says "not measured yet" rather than an old figure); the budget keeps the last W it
	 * had (a waiter spinning through every wait makes no sample: with the fallback, waits
	 * of 90 us slept until W came back, boot v), and a waiter that never had one takes the
	 * fallback */
	advance_ms(1000);
	assert_int_equal(a.wake_cost_ns(), 0);
	assert_int_equal(a.budget_w_ns(), 40000);
	assert_false(proc.known(fake_now()));
	assert_int_equal(proc.cost_ns(fake_now()), 0);
	assert_true(a.budget(outside) == d(55));
	for (int i = 0; i < 8; i++)
		a.record(us(100), true); /* waits of 2.5 of that W: long against it */
	assert_true(a.score() < spin_learner::score_one / 2);
	spin_learner never({wait_policy_kind::adaptive, 1000, &in});
	assert_true(never.budget(outside) == d(vwait::util::default_spin_us));
	/* and it re-measures: every other sleep calibrates until W is known again */
	int calibrated = 0;
	for (int i = 0; i < 6; i++)
		calibrated += a.calibration() != clock::duration::zero();
	assert_int_equal(calibrated, 3);
	sleeps(a, 20, 60, 3);
	assert_int_equal(a.wake_cost_ns(), 80000);
	assert_true(a.calibration() == clock::duration::zero());
}

/* One huge sample (a calibration timer whose thread the host descheduled for 10 ms) never
 * defines W: W needs min_fresh samples of each part and takes their lower median. */
void test_estimator_outlier(void **)
{
	const policy_inputs in{outside, never_short, nullptr, fake_now};
	spin_learner a({wait_policy_kind::adaptive, 1000, &in});
	warm_up(a);
	for (int i = 0; i < 3; i++)
		a.record_sleep(us(15), us(1000), us(0));
	a.record_wake(us(10000));
	a.record_wake(us(25));
	/* two samples: not known (the median of two would be the outlier) */
	assert_int_equal(a.wake_cost_ns(), 0);
	assert_true(a.budget(outside) == d(vwait::util::default_spin_us));
	a.record_wake(us(25));
	assert_int_equal(a.wake_cost_ns(), 40000);
	/* two outliers of four: the lower median is still a real one */
	a.record_wake(us(10000));
	assert_int_equal(a.wake_cost_ns(), 40000);
	assert_true(a.budget(outside) == d(55));
	/* the window alone */
	sample_window w;
	w.push(10000000, 7);
	w.push(25000, 7);
	assert_int_equal(w.median(7), 0);
	w.push(30000, 7);
	assert_int_equal(w.median(7), 30000);
	assert_int_equal(w.fresh(7), 3);
	assert_int_equal(w.fresh(7 + 999), 3);
	assert_int_equal(w.fresh(7 + 1000), 0);
	/* fresh_at_least answers as fresh() does, in one look */
	sample_window x;
	for (uint64_t t = 100; t < 100 + 12 * 300; t += 300) {
		x.push(1000, t);
		for (uint64_t now : {t, t + 299, t + 999, t + 1000, t + 2500})
			for (unsigned n = 0; n <= sample_window::size + 1; n++)
				assert_int_equal(x.fresh_at_least(n, now), x.fresh(now) >= n);
	}
}

/* /proc/loadavg's runnable count, parsed by hand: the fourth field; anything else (the
 * descriptor now names another file) is -1 */
void test_loadavg_parse(void **)
{
	using vwait::util::parse_loadavg_runnable;
	assert_int_equal(parse_loadavg_runnable("0.20 0.83 1.15 3/412 30451\n"), 3);
	assert_int_equal(parse_loadavg_runnable("12.00 6.96 4.15 17/1203 9\n"), 17);
	assert_int_equal(parse_loadavg_runnable("0.00 0.00 0.00 0/1 1"), 0);
	assert_int_equal(parse_loadavg_runnable(""), -1);
	assert_int_equal(parse_loadavg_runnable("hello world\n"), -1);
	assert_int_equal(parse_loadavg_runnable("0.20 0.83 1.15\n"), -1);
	assert_int_equal(parse_loadavg_runnable("0.20 0.83 1.15 3\n"), -1);
	assert_int_equal(parse_loadavg_runnable("0.20 0.83 x.15 3/412 1\n"), -1);
	assert_int_equal(parse_loadavg_runnable("0.20  0.83 1.15 3/412 1\n"), -1);
	/* a count too large for an int saturates */
	assert_true(parse_loadavg_runnable("1.00 1.00 1.00 99999999999/5 1") > 1000000);
}

/* Until W is known the budget is min(cap, default_spin_us), whatever the partial samples say;
 * block and fixed are as ever. */
void test_fallback_budget(void **)
{
	spin_learner a({wait_policy_kind::adaptive, 1000, &quiet});
	spin_learner small({wait_policy_kind::adaptive, 30, &quiet});
	spin_learner block({wait_policy_kind::block, 1000, &quiet});
	assert_true(a.spin_budget() == d(vwait::util::default_spin_us));
	assert_true(a.budget(outside) == d(vwait::util::default_spin_us));
	assert_true(small.budget(outside) == d(30));
	assert_true(block.budget(outside) == clock::duration::zero());
	/* the path known, the wake-up latency not: still the fallback */
	warm_up(a);
	for (int i = 0; i < 8; i++)
		a.record_sleep(us(400), us(1000), us(0));
	a.record_wake(us(400));
	a.record_wake(us(400));
	assert_int_equal(a.wake_cost_ns(), 0);
	assert_true(a.budget(outside) == d(vwait::util::default_spin_us));
	a.record_wake(us(400));
	assert_true(a.budget(outside) == d(1000)); /* S = 1200, capped */
}

/* A fake busy CPU: runnable counts fed to a cpu_gauge of 2 CPUs. One ping-pong (2 spinners and
 * a kernel worker now and then) is no shortage; K = 3 pairs spinning (6) is one at once, and
 * it stays one while they all block (3: one side of each pair runs), so that they behave like
 * block rather than spinning again as soon as the first snapshot finds them asleep; it ends
 * when the load goes. A learner reading the gauge arms at once while it says so. */
cpu_gauge *test_gauge;
bool gauge_short() noexcept
{
	return test_gauge->short_now();
}

void test_cpu_gauge(void **)
{
	cpu_gauge g(2);
	test_gauge = &g;
	const policy_inputs in{outside, gauge_short, nullptr, fake_now};
	spin_learner a({wait_policy_kind::adaptive, 1000, &in});
	assert_true(g.mean256() < 0);
	const int k1[] = {2, 2, 3, 2, 2, 3, 2, 2, 3, 2};
	long most = 0;
	for (int round = 0; round < 20; round++)
		for (int r : k1) {
			assert_false(g.feed(r));
			most = std::max(most, g.mean256());
		}
	print_message("one pair: mean at most %.2f runnable on 2 CPUs\n", most / 256.0);
	assert_true(a.budget(outside) == d(vwait::util::default_spin_us));
	/* three pairs spinning: short at the first snapshot of 6 */
	assert_true(g.feed(6));
	assert_true(a.budget(outside) == clock::duration::zero());
	assert_true(a.budget(inside) == clock::duration::zero()); /* probes too */
	/* all blocking now: 3 runnable, for a second of snapshots: still short */
	for (int i = 0; i < 100; i++)
		assert_true(g.feed(3));
	assert_true(a.budget(outside) == clock::duration::zero());
	/* an unreadable count changes nothing */
	assert_true(g.feed(-1));
	/* the load gone: not short within 8 snapshots (80 ms), spinning again */
	int n = 0;
	while (g.feed(1))
		n++;
	print_message("load gone: short for %d more snapshots\n", n);
	assert_true(n < 8);
	assert_true(a.budget(outside) == d(vwait::util::default_spin_us));
	/* a process that starts oversubscribed: its first snapshot decides */
	cpu_gauge first(2);
	assert_true(first.feed(6));
	cpu_gauge one(1);
	assert_false(one.feed(1)); /* a single CPU and this thread: no shortage */
	/* the default signal answers (whatever the host's load) and reads /proc at most once per
	 * cpu_check_ms */
	(void)vwait::util::cpu_short_now();
	(void)vwait::util::cpu_short_now();
}

/* A starved peer: CPUs short (always_short) -> adaptive arms at once, fixed and block as
 * ever; a spin that lost its CPU for longer than preempt_gap_us stops, whatever W is (an
 * inflated W must not blunt it), but teaches nothing: a host that deschedules the VM's vCPU
 * now and then must not stop the spinning of the waits after it (the gauge judges CPUs). */
void test_learner_busy_cpu(void **)
{
	const policy_inputs busy{outside, always_short, nullptr, fake_now};
	spin_learner a({wait_policy_kind::adaptive, 1000, &busy});
	spin_learner f({wait_policy_kind::fixed, 100, &busy});
	for (int i = 0; i < 10; i++) {
		assert_true(a.budget(outside) == clock::duration::zero());
		assert_true(a.budget(inside) == clock::duration::zero()); /* probes too */
		assert_true(f.budget(outside) == d(100));
		/* and no calibration timer, W unknown as it is (its extra wake-ups cost CPU) */
		assert_true(a.calibration() == clock::duration::zero());
	}
	spin_learner p({wait_policy_kind::adaptive, 1000, &quiet});
	assert_false(p.preempted(us(30)));
	assert_false(p.preempted(us(spin_learner::preempt_gap_us)));
	/* a lone preemption is counted and stops nothing; one more within preempt_repeat_ms
	 * stops the spin, and so does each while they keep coming */
	assert_false(p.preempted(us(spin_learner::preempt_gap_us + 50)));
	assert_int_equal(p.preemptions(), 1);
	advance_ms(spin_learner::preempt_repeat_ms - 1);
	assert_true(p.preempted(us(spin_learner::preempt_gap_us + 50)));
	assert_true(p.preempted(us(spin_learner::preempt_gap_us + 50)));
	assert_int_equal(p.preemptions(), 3);
	/* after preempt_repeat_ms without one, the next is lone again */
	advance_ms(spin_learner::preempt_repeat_ms);
	assert_false(p.preempted(us(spin_learner::preempt_gap_us + 50)));
	/* W of 2.5 ms (inflated, or a slow machine): a 200 us gap is still a preemption */
	warm_up(p);
	sleeps(p, 0, 2500, 3);
	assert_int_equal(p.wake_cost_ns(), 2500000);
	advance_ms(spin_learner::preempt_repeat_ms);
	assert_false(p.preempted(us(200)));
	assert_true(p.preempted(us(200)));
	assert_false(p.preempted(us(60)));
	/* waits whose spins were preempted (and yielded), even after a sleep, move nothing */
	const unsigned before = p.score();
	for (int i = 0; i < 4; i++) {
		(void)p.budget(outside);
		assert_true(p.preempted(us(200)));
		p.record_sleep(us(10), us(3000), us(5));
		p.record(us(6000), true);
	}
	assert_int_equal(p.score(), before);
	assert_true(p.budget(outside) == d(1000));
	/* and the flag of their sleeps does not reach the next wait: a wait found after 900 us
	 * of spin is short against 1000 us (judged as slept, 900 - 2500 us, it would be too,
	 * so look at the mean of short waits) */
	p.record(us(900), true);
	assert_true(p.mean_short_ns() >= 800000);
	/* a wait whose spin met a lone preemption goes on spinning but teaches nothing: its
	 * length includes the time without a CPU (50 ms here, long against 1000 us); the flag
	 * does not reach the next wait, which learns again */
	advance_ms(spin_learner::preempt_repeat_ms);
	const unsigned s0 = p.score();
	assert_true(s0 >= spin_learner::score_one / 2);
	assert_true(p.budget(outside) == d(1000));
	assert_false(p.preempted(us(spin_learner::preempt_gap_us + 50)));
	p.record(us(50000), true);
	assert_int_equal(p.score(), s0);
	assert_true(p.budget(outside) == d(1000));
	p.record(us(50000), true);
	assert_true(p.score() < s0);
}

/* One wait of a learner whose wake-up costs w_us: one of true_us spins through when the
 * budget covers it, else it spins the budget (or not at all), sleeps, and is found a
 * wake-up later; the sleep's path is 15 us. Returns the budget it had. */
clock::duration wait_of(spin_learner &l, long true_us, long w_us)
{
	const clock::duration b = l.budget(outside);
	if (d(true_us) <= b) {
		l.record(us(true_us), true);
		return b;
	}
	l.record_sleep(us(10), us(true_us), us(5));
	l.record(us(true_us + w_us), true);
	return b;
}

/* S = W + path decides and bounds the spin: what a sleep costs, its latency W and its CPU (the
 * path, counted twice; the wake-up latency, which idles the CPU, once). A ping-pong's wait is
 * its think time plus a round trip, so every think time shorter than W (the goal: spin through
 * it) gives a wait shorter than S whenever a round trip costs less than the path; and a spun
 * wait costs at most S of CPU, where 2W cost up to 3.2x block's CPU at think 200 us, whose
 * waits (~440 us) were just under 2W (453 us, boot rr). Boot v with W deciding: think 50 and
 * 100 us at 2.9 and 2.1x spinning, their waits judged long. Waits between W and S are spun and
 * short; waits of 2.5 W spin S, sleep and are judged long, so the learner sleeps at once after
 * a few and spins only on probes. A wait that spun its budget and then slept was longer than
 * the budget: long. */
void test_decision_is_s(void **)
{
	vwait::util::wake_stats proc;
	const policy_inputs in{outside, never_short, &proc, fake_now};
	spin_learner a({wait_policy_kind::adaptive, 1000, &in});
	warm_up(a);
	sleeps(a, 15, 25, 3);
	assert_int_equal(a.wake_cost_ns(), 40000);
	assert_true(a.budget(outside) == d(55));
	for (int i = 0; i < 20; i++)
		assert_true(wait_of(a, 45, 40) == d(55));
	assert_true(a.score() >= spin_learner::score_one / 2);
	for (int i = 0; i < 3; i++)
		assert_true(wait_of(a, 100, 40) == d(55));
	assert_true(a.score() < spin_learner::score_one / 2);
	int spun = 0;
	for (int i = 0; i < 64; i++)
		spun += wait_of(a, 100, 40) != clock::duration::zero();
	print_message("waits of 2.5 W: %d of the next 64 spun (probes)\n", spun);
	assert_true(spun <= 6);
	/* a wait that spun its 55 us budget and then slept outlasted the spin, whatever the
	 * clocks say (70 - W = 30 is under S): long */
	spin_learner b({wait_policy_kind::adaptive, 1000, &in});
	for (int i = 0; i < 3; i++) {
		assert_true(b.budget(outside) == d(55));
		b.record_sleep(us(10), us(30), us(5));
		b.record(us(70), true);
	}
	assert_true(b.score() < spin_learner::score_one / 2);
}

/* Waits that slept are judged by their length less W against the budget of now: after long
 * waits, short traffic whose waits all sleep at once (no probe due) brings spinning back
 * within a few; so does a W that became known after waits that slept with none (the 50 us
 * fallback against waits of 66 us: a phase of think 20 us after one of think 0). With no W a
 * slept wait is long; a wait of the peer's wake-up plus W stays long (peers that both sleep:
 * the shared probe window's business). */
void test_slept_waits(void **)
{
	vwait::util::wake_stats proc;
	const policy_inputs in{outside, never_short, &proc, fake_now};
	spin_learner a({wait_policy_kind::adaptive, 1000, &in});
	warm_up(a);
	/* no W: waits of 66 us spin the 50 us fallback and sleep: long */
	for (int i = 0; i < 3; i++)
		assert_true(wait_of(a, 66, 150) == d(vwait::util::default_spin_us));
	assert_true(a.score() < spin_learner::score_one / 2);
	/* the first probe (due at once) misses too, and the next is 8 waits away */
	assert_true(wait_of(a, 66, 150) == d(vwait::util::default_spin_us));
	/* W known (150 us): the next waits sleep at once, and their length less W says 66 */
	sleeps(a, 15, 135, 3);
	assert_int_equal(a.wake_cost_ns(), 150000);
	int waits = 0;
	while (a.score() < spin_learner::score_one / 2 && waits < 10) {
		wait_of(a, 66, 150);
		waits++;
	}
	print_message("spinning again after %d waits that slept\n", waits);
	assert_true(waits <= 4);
	assert_true(wait_of(a, 66, 150) == d(165)); /* S = 150 + 15 */
	/* long waits (5 ms) put it to sleep, then short traffic, every wait asleep at once */
	for (int i = 0; i < 12; i++)
		wait_of(a, 5000, 150);
	assert_true(a.score() < spin_learner::score_one / 2);
	for (int i = 0; i < 3; i++)
		wait_of(a, 30, 150);
	assert_true(a.score() >= spin_learner::score_one / 2);
	/* a wait of the peer's wake-up and its own, and 30 us (2 W plus 30 us, past S): long */
	for (int i = 0; i < 3; i++)
		wait_of(a, 2 * 150 + 30, 150);
	assert_true(a.score() < spin_learner::score_one / 2);
}

/* The process's decision counters (fi_vwait_wait_attr version 4): one count per decision,
 * each in its own counter, and none without a process to report to. */
void test_decision_counts(void **)
{
	vwait::util::wake_stats proc;
	const vwait::util::policy_decisions &c = proc.decisions();
	const policy_inputs in{outside, never_short, &proc, fake_now};
	spin_learner a({wait_policy_kind::adaptive, 1000, &in});
	/* short waits: spun, judged short */
	for (int i = 0; i < 5; i++) {
		assert_true(a.budget(outside) > clock::duration::zero());
		a.record(us(20), true);
	}
	assert_int_equal(c.spun.load(), 5);
	assert_int_equal(c.judged_short.load(), 5);
	assert_int_equal(c.judged_long.load(), 0);
	/* long waits: judged long until the score turns; then armed at once, probes between */
	for (int i = 0; i < 40; i++) {
		(void)a.budget(outside);
		a.record(us(5000), true);
	}
	assert_int_equal(c.judged_long.load(), 40);
	assert_true(c.armed_long.load() > 0);
	assert_true(c.probes.load() > 0);
	assert_int_equal(c.spun.load() + c.probes.load() + c.armed_long.load(), 45);
	/* a preempted spin: a lone preemption stops nothing, a second one at once stops it */
	assert_false(a.preempted(us(50)));
	assert_false(a.preempted(us(500)));
	assert_int_equal(c.preempted.load(), 0);
	assert_true(a.preempted(us(500)));
	assert_int_equal(c.preempted.load(), 1);
	/* CPUs short: armed at once, counted as such */
	const policy_inputs busy{outside, always_short, &proc, fake_now};
	spin_learner b({wait_policy_kind::adaptive, 1000, &busy});
	for (int i = 0; i < 3; i++)
		assert_true(b.budget(outside) == clock::duration::zero());
	assert_int_equal(c.armed_cpu.load(), 3);
	/* block and fixed decide nothing; a learner without a process counts nowhere */
	spin_learner f({wait_policy_kind::block, 100, &in});
	(void)f.budget(outside);
	f.record(us(20), true);
	spin_learner q({wait_policy_kind::adaptive, 100, &quiet});
	(void)q.budget(outside);
	q.record(us(20), true);
	assert_int_equal(c.spun.load() + c.probes.load() + c.armed_long.load(), 45);
	assert_int_equal(c.judged_short.load(), 5);
}

/* The CPUs are looked at (a read of /proc/loadavg, at most one per cpu_check_ms) only for a
 * wait that would spin, or a sleep that would calibrate: a waiter whose waits are long and
 * arm at once looks at them only on its probes. */
std::atomic<int> short_calls{0};
bool counted_never_short() noexcept
{
	short_calls++;
	return false;
}
void test_cpu_looked_at_to_spin(void **)
{
	vwait::util::wake_stats proc;
	const policy_inputs in{outside, counted_never_short, &proc, fake_now};
	spin_learner a({wait_policy_kind::adaptive, 1000, &in});
	for (int i = 0; i < 10; i++) {
		(void)a.budget(outside);
		a.record(us(20), true);
	}
	assert_int_equal(short_calls.load(), 10); /* each spin asked */
	for (int i = 0; i < 20; i++) {
		(void)a.budget(outside);
		a.record(us(5000), true);
	}
	short_calls = 0;
	const uint64_t probes = proc.decisions().probes.load();
	for (int i = 0; i < 1000; i++) {
		(void)a.budget(outside);
		a.record(us(5000), true);
	}
	const uint64_t probed = proc.decisions().probes.load() - probes;
	print_message("1000 long waits: %d looks at the CPUs, %d probes\n", short_calls.load(),
	              static_cast<int>(probed));
	assert_true(probed >= 1 && probed <= 10);
	assert_int_equal(short_calls.load(), static_cast<int>(probed));
}

/* Before any sleep measured W, a seeded process (process_wake_stats) guesses it once from
 * timer wake-ups: a learner with nothing of its own budgets 2x that guess (capped), not the
 * 50 us fallback, which on a machine whose wake-ups cost more than 25 us would send every wait
 * just past it to sleep, and until W is known one wait per guess_arm_ms arms to measure it. A
 * stats object that is not seeded guesses nothing (the tests above). The seed is a fake, one
 * of the regimes a machine can be in: 2 us (a fast timer), 20 us, 75 us (an emulated guest) and
 * 1 ms (a slow or loaded one); the timer's resolution is a fake too. */
std::atomic<uint64_t> fake_seed{0};
unsigned seed_calls = 0;
uint64_t fake_seed_ns() noexcept
{
	seed_calls++;
	return fake_seed.load();
}
void seeded_guess(uint64_t g, uint64_t res_ns)
{
	fake_seed = g;
	seed_calls = 0;
	vwait::util::wake_stats seeded(0, fake_seed_ns);
	assert_int_equal(seeded.seed_ns(), g);
	assert_int_equal(seeded.seed_ns(), g); /* asked once */
	assert_int_equal(seed_calls, 1);
	assert_int_equal(seeded.cost_ns(fake_now()), 0); /* a guess, not a measured W */
	policy_inputs in{outside, never_short, &seeded, fake_now};
	in.timer_res_ns = res_ns;
	/* the largest cap, so that twice the guess is the budget */
	spin_learner a({wait_policy_kind::adaptive, vwait::util::max_spin_us, &in});
	assert_int_equal(a.wake_cost_ns(), 0);
	assert_int_equal(a.budget_w_ns(), g);
	assert_true(2 * g < vwait::util::max_spin_us * 1000ULL);
	const clock::duration want =
	    std::chrono::duration_cast<clock::duration>(std::chrono::nanoseconds(2 * g));
	/* on the guess, waits far below it spin twice the guess, and nothing arms: W would not
	 * change their fate */
	const std::atomic<uint64_t> &calib = seeded.decisions().armed_calib;
	assert_true(a.budget(outside) == want);
	for (int i = 0; i < 8; i++)
		a.record(want / 8, true);
	advance_ms(spin_learner::guess_arm_ms);
	for (int i = 0; i < 5; i++)
		assert_true(a.budget(outside) == want);
	assert_int_equal(calib.load(), 0);
	/* waits past half the guess, where W decides: one wait that would spin arms at once
	 * instead, to measure W, and then one per guess_arm_ms. A waiter whose waits all fit
	 * the guess would never sleep and never learn W */
	for (int i = 0; i < 16; i++)
		a.record(want * 3 / 4, true);
	assert_true(2 * a.mean_short_ns() > 2 * g);
	assert_true(a.budget(outside) == clock::duration::zero());
	assert_int_equal(calib.load(), 1);
	/* so the first sleep of a wait that armed to measure W is due a quarter of the way into
	 * the recent short waits, whatever the count of sleeps, and never sooner than the timer
	 * can be due; its next sleeps as before: every other one, one wake-up into the sleep
	 * while no sleep length is known */
	const uint64_t q = a.mean_short_ns() / 4;
	const clock::duration quarter = a.due_in(q);
	assert_true(quarter == std::chrono::nanoseconds(std::max(q, res_ns)));
	if (res_ns < g / 4)
		assert_true(quarter > want / 8 && quarter < want / 4);
	assert_true(a.calibration() == quarter);
	assert_true(a.calibration() == std::chrono::nanoseconds(std::max(g, res_ns))); /* 2g / 2 */
	assert_true(a.calibration() == clock::duration::zero());
	for (int i = 0; i < 5; i++)
		assert_true(a.budget(outside) == want);
	advance_ms(spin_learner::guess_arm_ms - 1);
	assert_true(a.budget(outside) == want);
	advance_ms(1);
	assert_true(a.budget(outside) == clock::duration::zero());
	assert_true(a.budget(outside) == want);
	assert_int_equal(calib.load(), 2);
	/* once measured, W replaces the guess; no wait arms to measure it again, not even once
	 * the samples aged out (the budget keeps the last W) */
	warm_up(a);
	sleeps(a, 15, 25, 3);
	assert_true(a.budget(outside) == d(55));
	advance_ms(2 * vwait::util::sample_window::sample_max_age_ms);
	assert_int_equal(a.wake_cost_ns(), 0);
	for (int i = 0; i < 4; i++) {
		advance_ms(spin_learner::guess_arm_ms);
		assert_true(a.budget(outside) == d(55));
	}
	assert_int_equal(calib.load(), 2);
}

void test_seeded_guess(void **)
{
	vwait::util::wake_stats plain;
	assert_int_equal(plain.seed_ns(), 0);
	/* an ideal timer, and one whose resolution is 1 us */
	for (uint64_t res : {uint64_t{1}, uint64_t{1000}})
		for (uint64_t g : {2000, 20000, 75000, 1000000})
			seeded_guess(g, res);
	/* a first idle second counts as max_sleep_ns: 16 sleeps of 400 us later the timer is due
	 * within 1 ms (counted whole, the second would keep it at max_calib_ns for 40 more) */
	spin_learner idle({wait_policy_kind::adaptive, vwait::util::max_spin_us, &quiet});
	idle.record_sleep(us(10), std::chrono::seconds(1), us(5));
	for (int i = 0; i < 16; i++)
		idle.record_sleep(us(10), us(400), us(5));
	const clock::duration due = idle.calibration();
	assert_true(due > d(200) && due < d(500));
	/* a process without a seed (no timer) guesses nothing: the 50 us fallback, no arming */
	vwait::util::wake_stats plain2;
	const policy_inputs in2{outside, never_short, &plain2, fake_now};
	spin_learner b({wait_policy_kind::adaptive, 1000, &in2});
	assert_true(b.budget(outside) == d(vwait::util::default_spin_us));
	assert_int_equal(plain2.decisions().armed_calib.load(), 0);
}

/* W is cached: path samples (one per sleep) reach it at its next refresh, w_refresh_ms later,
 * not at once (recomputed after every sleep, W cost its medians on every wait that slept);
 * a wake-up sample reaches it at once. Before any wake-up sample W stays 0 however many path
 * samples come. */
void test_cached_w(void **)
{
	spin_learner a({wait_policy_kind::adaptive, 1000, &quiet});
	warm_up(a);
	for (int i = 0; i < 8; i++)
		a.record_sleep(us(10), us(1000), us(0));
	assert_int_equal(a.wake_cost_ns(), 0);
	for (int i = 0; i < 3; i++)
		a.record_wake(us(25));
	assert_int_equal(a.wake_cost_ns(), 35000);
	for (int i = 0; i < 8; i++)
		a.record_sleep(us(50), us(1000), us(0));
	assert_int_equal(a.wake_cost_ns(), 35000);
	advance_ms(spin_learner::w_refresh_ms);
	assert_int_equal(a.wake_cost_ns(), 75000);
	assert_true(a.threshold() == d(125)); /* S = 75 + 50 */
	for (int i = 0; i < 4; i++)
		a.record_wake(us(40));
	/* the wake-up samples 25 25 25 40 40 40 40, at once: their lower median is 40 */
	assert_int_equal(a.wake_cost_ns(), 90000);
}

} // namespace

int main()
{
	init_logging();
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_policy_names),      cmocka_unit_test(test_loadavg_parse),
	    cmocka_unit_test(test_learner),           cmocka_unit_test(test_learner_wake_cost),
	    cmocka_unit_test(test_estimator_warmup),  cmocka_unit_test(test_estimator_ageing),
	    cmocka_unit_test(test_estimator_outlier), cmocka_unit_test(test_fallback_budget),
	    cmocka_unit_test(test_cpu_gauge),         cmocka_unit_test(test_learner_busy_cpu),
	    cmocka_unit_test(test_decision_is_s),     cmocka_unit_test(test_slept_waits),
	    cmocka_unit_test(test_decision_counts),   cmocka_unit_test(test_cpu_looked_at_to_spin),
	    cmocka_unit_test(test_seeded_guess),      cmocka_unit_test(test_cached_w),
	};
	return cmocka_run_group_tests_name("util_policy", tests, nullptr, nullptr);
}
