/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* util::mr_cache over fake register / deregister callbacks (no memory is touched, no
 * monitor): hits by page-rounded range and access, references, LRU eviction by count and by
 * bytes, invalidation of referenced and unreferenced registrations, failures, teardown, fork,
 * and waiting for a repeated registration before keeping any. */
#include "vwait/util/mr_cache.h"

#include <rdma/fi_errno.h>

#include <cstdint>
#include <memory>
#include <set>
#include <sys/wait.h>
#include <unistd.h>
#include <utility>

#include "vwait_cmocka.h"

using vwait::util::mr_cache;
using vwait::util::mr_cache_limits;
using vwait::util::mr_cache_ops;

namespace
{

struct fake {
	unsigned regs = 0, deregs = 0;
	int fail = 0; /* the next reg returns this */
	uintptr_t last_start = 0;
	size_t last_len = 0;
	std::set<void *> live;
};

int fake_reg(void *ctx, uintptr_t start, size_t len, uint64_t, void **handle) noexcept
{
	auto *f = static_cast<fake *>(ctx);
	if (f->fail)
		return std::exchange(f->fail, 0);
	f->regs++;
	f->last_start = start;
	f->last_len = len;
	*handle = reinterpret_cast<void *>(static_cast<uintptr_t>(f->regs));
	f->live.insert(*handle);
	return 0;
}

void fake_dereg(void *ctx, void *handle) noexcept
{
	auto *f = static_cast<fake *>(ctx);
	f->deregs++;
	assert_int_equal(f->live.erase(handle), 1);
}

const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
const uintptr_t base = uintptr_t{0x100000} * page;

const void *at(uintptr_t pages, uintptr_t bytes = 0)
{
	return reinterpret_cast<const void *>(base + pages * page + bytes);
}

struct state {
	fake f;
	std::unique_ptr<mr_cache> cache;
};

state *make(void **st, size_t max_count, size_t max_bytes, bool wait_for_repeat = false)
{
	auto *s = static_cast<state *>(*st);
	s->cache = std::make_unique<mr_cache>(
	    mr_cache_ops{fake_reg, fake_dereg, &s->f},
	    mr_cache_limits{max_count, max_bytes, wait_for_repeat}, nullptr);
	return s;
}

int setup(void **st)
{
	*st = new state;
	return 0;
}

int teardown(void **st)
{
	auto *s = static_cast<state *>(*st);
	s->cache.reset();
	/* every registration deregistered by the destructor at the latest */
	int leaked = static_cast<int>(s->f.live.size());
	delete s;
	return leaked;
}

mr_cache::entry *get(state *s, const void *buf, size_t len, uint64_t access = 1)
{
	mr_cache::entry *e = nullptr;
	assert_int_equal(s->cache->get(buf, len, access, &e), 0);
	assert_non_null(e);
	return e;
}

void test_hit_by_pages_and_access(void **st)
{
	state *s = make(st, 16, 1 << 30);
	auto *a = get(s, at(0, 100), 50);
	assert_int_equal(s->f.regs, 1);
	/* the page, not the caller's bytes, is registered */
	assert_int_equal(s->f.last_start, base);
	assert_int_equal(s->f.last_len, page);
	auto *b = get(s, at(0, 3000 % page), 1);
	assert_ptr_equal(a, b);
	assert_int_equal(s->f.regs, 1);
	/* other access bits: another registration */
	auto *c = get(s, at(0, 100), 50, 2);
	assert_ptr_not_equal(a, c);
	assert_int_equal(s->f.regs, 2);
	s->cache->put(a);
	s->cache->put(b);
	s->cache->put(c);
	assert_int_equal(s->f.deregs, 0);
	/* after the last put it is still there */
	auto *d = get(s, at(0, 8), 8);
	assert_ptr_equal(a, d);
	s->cache->put(d);
	auto st2 = s->cache->stats();
	assert_int_equal(st2.hits, 2);
	assert_int_equal(st2.misses, 2);
	assert_int_equal(st2.count, 2);
	assert_int_equal(st2.bytes, 2 * page);
}

void test_covering_range_serves(void **st)
{
	state *s = make(st, 16, 1 << 30);
	/* pages 0..3 (the last byte is on page 3) */
	auto *big = get(s, at(0, 1), 3 * page);
	assert_int_equal(s->f.last_len, 4 * page);
	auto *inner = get(s, at(2, 5), page);
	assert_ptr_equal(big, inner);
	/* reaches past it: a new registration */
	auto *past = get(s, at(3), 2 * page);
	assert_ptr_not_equal(big, past);
	assert_int_equal(s->f.regs, 2);
	/* before it, overlapping: new too */
	auto *before = get(s, reinterpret_cast<const void *>(base - page), 2 * page);
	assert_ptr_not_equal(big, before);
	assert_int_equal(s->f.regs, 3);
	for (auto *e : {big, inner, past, before})
		s->cache->put(e);
	assert_int_equal(s->f.deregs, 0);
}

void test_invalidate_unreferenced_and_referenced(void **st)
{
	state *s = make(st, 16, 1 << 30);
	auto *a = get(s, at(0), page);
	auto *b = get(s, at(4), page);
	s->cache->put(a);
	/* a: unreferenced, deregistered now; b: referenced, at its last put */
	s->cache->invalidate(base, 8 * page);
	assert_int_equal(s->f.deregs, 1);
	/* the next lookup misses for both */
	auto *b2 = get(s, at(4), page);
	assert_ptr_not_equal(b, b2);
	assert_int_equal(s->f.regs, 3);
	s->cache->put(b);
	assert_int_equal(s->f.deregs, 2);
	s->cache->put(b2);
	assert_int_equal(s->f.deregs, 2);
	/* an invalidation that only touches the last byte before a range leaves it */
	s->cache->invalidate(base + 3 * page, page);
	auto *b3 = get(s, at(4), page);
	assert_ptr_equal(b2, b3);
	s->cache->put(b3);
	/* one byte inside it is enough */
	s->cache->invalidate(base + 5 * page - 1, 1);
	assert_int_equal(s->f.deregs, 3);
	assert_int_equal(s->cache->stats().invalidated, 3);
}

void test_lru_by_count(void **st)
{
	state *s = make(st, 2, 1 << 30);
	auto *a = get(s, at(0), 1);
	s->cache->put(a);
	auto *b = get(s, at(2), 1);
	s->cache->put(b);
	/* a used again: b is the least recently used */
	s->cache->put(get(s, at(0), 1));
	auto *c = get(s, at(4), 1);
	s->cache->put(c);
	assert_int_equal(s->f.deregs, 1);
	assert_int_equal(s->cache->stats().evicted, 1);
	/* a and c hit, b misses */
	s->cache->put(get(s, at(0), 1));
	s->cache->put(get(s, at(4), 1));
	assert_int_equal(s->f.regs, 3);
	s->cache->put(get(s, at(2), 1));
	assert_int_equal(s->f.regs, 4);
	assert_int_equal(s->cache->stats().count, 2);
}

void test_lru_by_bytes(void **st)
{
	state *s = make(st, 100, 3 * page);
	s->cache->put(get(s, at(0), 2 * page)); /* 2 pages */
	s->cache->put(get(s, at(4), page));     /* 1: 3 in all */
	assert_int_equal(s->f.deregs, 0);
	s->cache->put(get(s, at(8), page)); /* 4: the oldest goes */
	assert_int_equal(s->f.deregs, 1);
	assert_int_equal(s->cache->stats().bytes, 2 * page);
	/* larger than the bound: never kept, deregistered at its put */
	auto *huge = get(s, at(16), 4 * page);
	assert_int_equal(s->cache->stats().not_kept, 1);
	s->cache->put(huge);
	assert_int_equal(s->f.deregs, 2);
	assert_int_equal(s->cache->stats().count, 2);
}

void test_referenced_are_not_evicted(void **st)
{
	state *s = make(st, 1, 1 << 30);
	auto *a = get(s, at(0), 1);
	auto *b = get(s, at(2), 1);
	auto *c = get(s, at(4), 1);
	/* over the bound while all are held: nothing deregistered under a user */
	assert_int_equal(s->f.deregs, 0);
	s->cache->put(a);
	/* a unreferenced, count 3 > 1: a goes */
	assert_int_equal(s->f.deregs, 1);
	s->cache->put(b);
	s->cache->put(c);
	assert_int_equal(s->f.deregs, 2);
	assert_int_equal(s->cache->stats().count, 1);
}

void test_count_zero_keeps_nothing(void **st)
{
	state *s = make(st, 0, 1 << 30);
	auto *a = get(s, at(0), 1);
	auto *b = get(s, at(0), 1);
	assert_ptr_not_equal(a, b);
	s->cache->put(a);
	s->cache->put(b);
	assert_int_equal(s->f.regs, 2);
	assert_int_equal(s->f.deregs, 2);
}

void test_reg_failure_propagates(void **st)
{
	state *s = make(st, 16, 1 << 30);
	s->f.fail = -FI_ENOMEM;
	mr_cache::entry *e = reinterpret_cast<mr_cache::entry *>(1);
	assert_int_equal(s->cache->get(at(0), 1, 1, &e), -FI_ENOMEM);
	assert_null(e);
	assert_int_equal(s->cache->stats().count, 0);
	s->cache->put(get(s, at(0), 1));
	assert_int_equal(s->f.regs, 1);
}

void test_destructor_deregisters_all(void **st)
{
	state *s = make(st, 16, 1 << 30);
	for (uintptr_t i = 0; i < 10; i++)
		s->cache->put(get(s, at(2 * i), 1));
	assert_int_equal(s->f.live.size(), 10);
	s->cache.reset();
	assert_int_equal(s->f.live.size(), 0);
	assert_int_equal(s->f.deregs, 10);
}

void test_fork_child_bypasses(void **st)
{
	state *s = make(st, 16, 1 << 30);
	s->cache->put(get(s, at(0), 1));
	assert_true(s->cache->usable());
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		/* the child: not usable; its teardown deregisters nothing of the parent's */
		unsigned before = s->f.deregs;
		bool usable = s->cache->usable();
		s->cache.reset();
		_exit(!usable && s->f.deregs == before ? 0 : 1);
	}
	int status = 0;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_true(s->cache->usable());
}

void test_repeat_once_each_keeps_nothing(void **st)
{
	state *s = make(st, 16, 1 << 30, true);
	for (uintptr_t i = 0; i < 3 * mr_cache::repeat_ring; i++)
		s->cache->put(get(s, at(2 * i), 1));
	auto c = s->cache->stats();
	assert_false(c.armed);
	assert_int_equal(c.count, 0);
	assert_int_equal(c.not_kept, 3 * mr_cache::repeat_ring);
	/* as without a cache: deregistered at each put */
	assert_int_equal(s->f.regs, 3 * mr_cache::repeat_ring);
	assert_int_equal(s->f.deregs, 3 * mr_cache::repeat_ring);
}

void test_repeat_arms_then_hits(void **st)
{
	state *s = make(st, 16, 1 << 30, true);
	s->cache->put(get(s, at(0), 3 * page));
	assert_false(s->cache->stats().armed);
	/* within the released range: the miss arms the cache and is kept */
	auto *a = get(s, at(1, 7), page);
	assert_true(s->cache->stats().armed);
	assert_int_equal(s->f.regs, 2);
	s->cache->put(a);
	assert_int_equal(s->f.deregs, 1);
	auto *b = get(s, at(1, 7), page);
	assert_ptr_equal(a, b);
	s->cache->put(b);
	/* armed for good: a buffer seen once is kept now */
	s->cache->put(get(s, at(8), 1));
	auto c = s->cache->stats();
	assert_int_equal(c.hits, 1);
	assert_int_equal(c.misses, 3);
	assert_int_equal(c.count, 2);
	assert_int_equal(s->f.deregs, 1);
}

void test_repeat_needs_same_access_and_cover(void **st)
{
	state *s = make(st, 16, 1 << 30, true);
	s->cache->put(get(s, at(0), page, 1));
	/* other access bits */
	s->cache->put(get(s, at(0), page, 2));
	/* reaches past the released page, and starts before it */
	s->cache->put(get(s, at(0), 2 * page, 1));
	assert_false(s->cache->stats().armed);
	s->cache->put(get(s, reinterpret_cast<const void *>(base - page), 2 * page, 1));
	assert_false(s->cache->stats().armed);
	/* a second one while the first is held is not a repeat: nothing was released */
	auto *held = get(s, at(40), 1);
	s->cache->put(get(s, at(40), 1));
	assert_false(s->cache->stats().armed);
	s->cache->put(held);
	assert_int_equal(s->f.regs, s->f.deregs);
	s->cache->put(get(s, at(40), 1));
	assert_true(s->cache->stats().armed);
}

void test_repeat_ring_forgets_the_oldest(void **st)
{
	state *s = make(st, 16, 1 << 30, true);
	for (uintptr_t i = 0; i <= mr_cache::repeat_ring; i++)
		s->cache->put(get(s, at(2 * i), 1));
	/* the first has been pushed out of the ring */
	s->cache->put(get(s, at(0), 1));
	assert_false(s->cache->stats().armed);
	s->cache->put(get(s, at(2 * mr_cache::repeat_ring), 1));
	assert_true(s->cache->stats().armed);
}

void test_repeat_over_the_bound_does_not_arm(void **st)
{
	state *s = make(st, 16, 2 * page, true);
	/* never kept for its size: its repeat would not have hit either */
	s->cache->put(get(s, at(0), 4 * page));
	s->cache->put(get(s, at(0), 4 * page));
	assert_false(s->cache->stats().armed);
	s->cache->put(get(s, at(0), page));
	s->cache->put(get(s, at(0), page));
	assert_true(s->cache->stats().armed);
	assert_int_equal(s->cache->stats().count, 1);
}

} // namespace

int main()
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_hit_by_pages_and_access, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_covering_range_serves, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_invalidate_unreferenced_and_referenced, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_lru_by_count, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_lru_by_bytes, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_referenced_are_not_evicted, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_count_zero_keeps_nothing, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_reg_failure_propagates, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_destructor_deregisters_all, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_fork_child_bypasses, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_repeat_once_each_keeps_nothing, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_repeat_arms_then_hits, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_repeat_needs_same_access_and_cover, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_repeat_ring_forgets_the_oldest, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_repeat_over_the_bound_does_not_arm, setup,
	                                    teardown),
	};
	return cmocka_run_group_tests(tests, nullptr, nullptr);
}
