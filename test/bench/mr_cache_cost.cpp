/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* mr_cache_cost: the registration cache's own work per lookup, for callgrind (valgrind has no
 * userfaultfd(2), so a vwait domain under valgrind runs without its cache): util::mr_cache over
 * callbacks that do nothing and no monitor.
 *
 *   valgrind --tool=callgrind --instr-atstart=no test/bench/mr_cache_cost [-n N] hit|miss
 * hit: get + put of one 1 MiB buffer N times after a first get; miss: two buffers in turn with
 * room for one registration (each get registers and evicts). Only the N rounds are
 * instrumented; instructions / N is the cache's cost per fi_mr_reg + fi_close beyond the
 * provider's MR object (and, on a miss, beyond ibv_reg_mr, ibv_dereg_mr and the monitor's
 * UFFDIO_REGISTER). */
#include "vwait/util/mr_cache.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#endif
#endif
#ifndef CALLGRIND_START_INSTRUMENTATION
#define CALLGRIND_START_INSTRUMENTATION
#define CALLGRIND_STOP_INSTRUMENTATION
#endif

namespace
{

unsigned long regs, deregs;

int reg(void *, uintptr_t, size_t, uint64_t, void **handle) noexcept
{
	*handle = reinterpret_cast<void *>(++regs);
	return 0;
}

void dereg(void *, void *) noexcept
{
	deregs++;
}

} // namespace

int main(int argc, char **argv)
{
	size_t n = 10000;
	int c;
	while ((c = getopt(argc, argv, "n:")) != -1) {
		if (c != 'n')
			return 2;
		n = strtoul(optarg, nullptr, 10);
	}
	if (optind >= argc)
		return 2;
	const bool miss = strcmp(argv[optind], "miss") == 0;
	const size_t mib = size_t{1} << 20;
	vwait::util::mr_cache cache({reg, dereg, nullptr}, {miss ? 1u : 1024u, size_t{1} << 30},
	                            nullptr);
	/* two page-aligned 1 MiB ranges, never touched */
	const uintptr_t a = uintptr_t{1} << 40, b = a + 2 * mib;
	vwait::util::mr_cache::entry *e = nullptr;
	if (cache.get(reinterpret_cast<void *>(a), mib, 7, &e))
		return 1;
	cache.put(e);
	CALLGRIND_START_INSTRUMENTATION;
	for (size_t i = 0; i < n; i++) {
		const uintptr_t at = miss && i % 2 == 0 ? b : a;
		if (cache.get(reinterpret_cast<void *>(at + 64), mib - 128, 7, &e))
			return 1;
		cache.put(e);
	}
	CALLGRIND_STOP_INSTRUMENTATION;
	const vwait::util::mr_cache_stats st = cache.stats();
	printf(
	    "mr_cache %s x %zu: %llu hits, %llu misses, %lu registrations, %lu deregistrations\n",
	    miss ? "miss" : "hit", n, static_cast<unsigned long long>(st.hits),
	    static_cast<unsigned long long>(st.misses), regs, deregs);
	return 0;
}
