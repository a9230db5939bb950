/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* The run-time lock order check (include/vwait/util/lock_check.h). Compiled to nothing unless
 * the build has VWAIT_LOCK_CHECK. */
#include "vwait/util/lock_check.h"

#ifdef VWAIT_LOCK_CHECK

#include <stdio.h>
#include <stdlib.h>

namespace vwait::util::lock_check
{
namespace
{
/* deeper than any path of the order (about eight locks at most) */
constexpr int max_held = 32;
thread_local int held[max_held];
thread_local int depth = 0;

void print_held() noexcept
{
	fprintf(stderr, "vwait: lock order: held, outermost first:");
	for (int i = 0; i < depth; i++)
		fprintf(stderr, " %d (%s)", held[i], name(held[i]));
	fprintf(stderr, "\n");
}

/* A broken order is a bug of vwait: say which, where a debugger or the core finds the
 * rest. Written to stderr, not through FI_WARN: the util layer has no provider here, and a
 * log level must not hide it. */
[[noreturn]] void fail(const char *what, int level, int other) noexcept
{
	fprintf(stderr, "vwait: lock order violated: %s %d (%s) while holding %d (%s)\n", what,
	        level, name(level), other, name(other));
	print_held();
	fflush(stderr);
	abort();
}

void push(int level) noexcept
{
	if (depth == max_held) {
		fprintf(stderr, "vwait: lock order: more than %d locks held\n", max_held);
		print_held();
		abort();
	}
	held[depth++] = level;
}
} // namespace

void acquire(int level) noexcept
{
	for (int i = 0; i < depth; i++) {
		/* lock_level::alone: taken with no other lock held; so nothing is taken under
		 * it either (it is the greatest level) */
		if (held[i] >= level || level == lock_level::alone)
			fail("taking", level, held[i]);
	}
	push(level);
}

void acquired(int level) noexcept
{
	push(level);
}

void release(int level) noexcept
{
	for (int i = depth - 1; i >= 0; i--) {
		if (held[i] == level) {
			for (int j = i; j + 1 < depth; j++)
				held[j] = held[j + 1];
			depth--;
			return;
		}
	}
	fprintf(stderr, "vwait: lock order: releasing %d (%s), which this thread does not hold\n",
	        level, name(level));
	print_held();
	abort();
}

const char *name(int level) noexcept
{
	namespace l = lock_level;
	static const struct {
		int level;
		const char *name;
	} names[] = {
	    {l::endpoint, "endpoint"},
	    {l::wait_members, "wait_members"},
	    {l::poll_members, "poll_members"},
	    {l::poll_polled, "poll_polled"},
	    {l::cntr_feeds, "cntr_feeds"},
	    {l::channels, "channels"},
	    {l::wait_sources, "wait_sources"},
	    {l::eq_registry, "eq_registry"},
	    {l::eq_thread, "eq_thread"},
	    {l::eq_progress, "eq_progress"},
	    {l::eq_probe, "eq_probe"},
	    {l::qp, "qp"},
	    {l::rx_post, "rx_post"},
	    {l::cq_progress, "cq_progress"},
	    {l::cq_cold, "cq_cold"},
	    {l::async_events, "async_events"},
	    {l::av_table, "av_table"},
	    {l::cq_events, "cq_events"},
	    {l::mr_cache, "mr_cache"},
	    {l::mem_monitor, "mem_monitor"},
	    {l::sw_queue, "sw_queue"},
	    {l::listeners, "listeners"},
	    {l::ready, "ready"},
	    {l::wait_block, "wait_block"},
	    {l::threads, "threads"},
	    {l::fdset, "fdset"},
	    {l::thread, "thread"},
	    {l::alone, "alone"},
	};
	for (const auto &n : names)
		if (n.level == level)
			return n.name;
	return "?";
}

} // namespace vwait::util::lock_check

#endif
