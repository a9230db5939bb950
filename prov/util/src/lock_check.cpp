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
	switch (level) {
	case l::endpoint:
		return "endpoint";
	case l::wait_members:
		return "wait_members";
	case l::poll_members:
		return "poll_members";
	case l::poll_polled:
		return "poll_polled";
	case l::cntr_feeds:
		return "cntr_feeds";
	case l::channels:
		return "channels";
	case l::wait_sources:
		return "wait_sources";
	case l::eq_registry:
		return "eq_registry";
	case l::eq_thread:
		return "eq_thread";
	case l::eq_progress:
		return "eq_progress";
	case l::eq_probe:
		return "eq_probe";
	case l::qp:
		return "qp";
	case l::rx_post:
		return "rx_post";
	case l::cq_progress:
		return "cq_progress";
	case l::cq_cold:
		return "cq_cold";
	case l::async_events:
		return "async_events";
	case l::av_table:
		return "av_table";
	case l::cq_events:
		return "cq_events";
	case l::sw_queue:
		return "sw_queue";
	case l::listeners:
		return "listeners";
	case l::ready:
		return "ready";
	case l::wait_block:
		return "wait_block";
	case l::threads:
		return "threads";
	case l::fdset:
		return "fdset";
	case l::thread:
		return "thread";
	case l::alone:
		return "alone";
	default:
		return "?";
	}
}

} // namespace vwait::util::lock_check

#endif
