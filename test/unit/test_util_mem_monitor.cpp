/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* util::mem_monitor with util::mr_cache over fake callbacks, on real memory: every way the
 * pages of a cached range go away (munmap, mmap MAP_FIXED over it, mremap, MADV_DONTNEED and
 * a touch, free + malloc of an mmap'd block, a brk shrink through malloc_trim) must take the
 * registration out of the cache before the call returns to the next lookup; so must it with
 * a second thread churning malloc / free and the cache, under SIGPROF at 1 kHz; a fork child
 * bypasses the cache and is never held by the parent's monitor; memory the monitor cannot
 * watch (file-backed, another uffd's) or must not (a tmpfs file, shared memory: their pages
 * change with no event here) is registered but not kept. Each test is bounded by
 * alarm(2): a hang kills the binary. Skipped where userfaultfd(2) is refused. */
#include "test_tasks.h"
#include "vwait/util/mem_monitor.h"
#include "vwait/util/mr_cache.h"

#include <rdma/fi_errno.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/userfaultfd.h>
#include <malloc.h>
#include <memory>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "vwait_cmocka.h"

using vwait::util::mem_monitor;
using vwait::util::mr_cache;
using vwait::util::mr_cache_limits;
using vwait::util::mr_cache_ops;

namespace
{

const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
/* a sanitizer's allocator is not glibc's: free neither unmaps nor trims at once */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool sanitized = true;
#else
constexpr bool sanitized = false;
#endif
/* how many rounds the ordering loops run (VWAIT_MR_ROUNDS) */
unsigned rounds = 2000;

struct fake {
	std::atomic<unsigned> regs{0}, deregs{0};
};

/* what ibv_reg_mr does that matters here: the pages present, and memory allocated (and
 * freed at dereg, under the cache's lock). The pages around a malloc'd buffer are touched as
 * the kernel touches them: outside ASan's view. */
__attribute__((no_sanitize_address)) int fake_reg(void *ctx, uintptr_t start, size_t len, uint64_t,
                                                  void **handle) noexcept
{
	for (size_t off = 0; off < len; off += page)
		(void)*reinterpret_cast<volatile const char *>(start + off);
	*handle = malloc(64);
	if (!*handle)
		return -FI_ENOMEM;
	static_cast<fake *>(ctx)->regs++;
	return 0;
}

void fake_dereg(void *ctx, void *handle) noexcept
{
	free(handle);
	static_cast<fake *>(ctx)->deregs++;
}

struct state {
	fake f;
	std::unique_ptr<mr_cache> cache;
};

int setup(void **st)
{
	const char *reason = nullptr;
	if (mem_monitor::instance().acquire(&reason) != 0)
		return -1;
	auto *s = new state;
	s->cache = std::make_unique<mr_cache>(mr_cache_ops{fake_reg, fake_dereg, &s->f},
	                                      mr_cache_limits{1024, size_t{1} << 32},
	                                      &mem_monitor::instance());
	*st = s;
	alarm(120);
	return 0;
}

int teardown(void **st)
{
	alarm(0);
	auto *s = static_cast<state *>(*st);
	s->cache.reset();
	const bool balanced = s->f.regs == s->f.deregs;
	delete s;
	mem_monitor::instance().release();
	return balanced ? 0 : -1;
}

/* one lookup: whether it was a miss (a new registration) */
bool miss(state *s, const void *buf, size_t len)
{
	const unsigned before = s->f.regs;
	mr_cache::entry *e = nullptr;
	assert_int_equal(s->cache->get(buf, len, 1, &e), 0);
	s->cache->put(e);
	return s->f.regs != before;
}

char *map(size_t len, void *at = nullptr)
{
	void *p = mmap(at, len, PROT_READ | PROT_WRITE,
	               MAP_PRIVATE | MAP_ANONYMOUS | (at ? MAP_FIXED : 0), -1, 0);
	assert_true(p != MAP_FAILED);
	return static_cast<char *>(p);
}

/* the threads of this process */
int threads()
{
	FILE *f = fopen("/proc/self/status", "r");
	assert_non_null(f);
	char line[256];
	int n = -1;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "Threads: %d", &n) == 1)
			break;
	fclose(f);
	assert_true(n > 0);
	return n;
}

/* First in the process: no range has been watched yet, so the reader has not started. A
 * cache that waits for a repeat watches nothing, and so starts no thread, until a buffer is
 * registered again. */
void test_repeat_starts_the_reader(void **st)
{
	auto *s = static_cast<state *>(*st);
	fake f;
	auto cache = std::make_unique<mr_cache>(mr_cache_ops{fake_reg, fake_dereg, &f},
	                                        mr_cache_limits{1024, size_t{1} << 32, true},
	                                        &mem_monitor::instance());
	const int before = threads();
	const size_t n = 2 * mr_cache::repeat_ring;
	char *p = map(2 * n * page);
	memset(p, 1, 2 * n * page);
	auto once = [&](char *buf) {
		mr_cache::entry *e = nullptr;
		assert_int_equal(cache->get(buf, page, 1, &e), 0);
		cache->put(e);
	};
	assert_false(mem_monitor::instance().reading());
	for (size_t i = 0; i < n; i++)
		once(p + 2 * i * page);
	assert_false(cache->stats().armed);
	assert_int_equal(cache->stats().count, 0);
	assert_false(mem_monitor::instance().reading());
	assert_int_equal(threads(), before);
	/* the last one again: kept, watched, and the reader runs (at least one thread more: a
	 * sanitizer's runtime may start its own beside the first thread) */
	once(p + 2 * (n - 1) * page);
	assert_true(cache->stats().armed);
	assert_int_equal(cache->stats().count, 1);
	assert_true(mem_monitor::instance().reading());
	assert_true(threads() > before);
	/* it names itself, for top -H and gdb (10 s: a loaded host may delay its first step) */
	assert_int_equal(tasks_named_reaching(1, 10000, "vwait-mr"), 1);
	/* and it is watched: unmapping it takes it out */
	assert_int_equal(munmap(p, 2 * n * page), 0);
	char *q = map(2 * n * page, p);
	assert_ptr_equal(p, q);
	memset(q, 2, 2 * n * page);
	mr_cache::entry *e = nullptr;
	assert_int_equal(cache->get(q + 2 * (n - 1) * page, page, 1, &e), 0);
	cache->put(e);
	assert_int_equal(cache->stats().invalidated, 1);
	cache.reset();
	assert_int_equal(f.regs, f.deregs);
	munmap(q, 2 * n * page);
	(void)s;
}

void test_hit_then_munmap(void **st)
{
	auto *s = static_cast<state *>(*st);
	const size_t len = 4 * page;
	char *p = map(len);
	memset(p, 1, len);
	assert_true(miss(s, p + 10, 100));
	assert_false(miss(s, p + 10, 100));
	assert_true(miss(s, p, len)); /* four pages: not covered by the first */
	assert_false(miss(s, p + 3 * page, 1));
	assert_int_equal(munmap(p, len), 0);
	/* new memory at the same address */
	char *q = map(len, p);
	assert_ptr_equal(p, q);
	assert_true(miss(s, q + 10, 100));
	assert_int_equal(s->cache->stats().invalidated, 2);
	munmap(q, len);
}

void test_map_fixed_over(void **st)
{
	auto *s = static_cast<state *>(*st);
	const size_t len = 8 * page;
	char *p = map(len);
	for (unsigned i = 0; i < rounds; i++) {
		memset(p, static_cast<int>(i), len);
		assert_true(miss(s, p + page, page));
		/* new pages over the cached ones: the next lookup must not hit */
		map(len, p);
	}
	assert_int_equal(s->cache->stats().hits, 0);
	munmap(p, len);
}

void test_mremap_moves(void **st)
{
	auto *s = static_cast<state *>(*st);
	const size_t len = 4 * page;
	/* the target stays mapped until mremap replaces it: nothing else can land there */
	char *spare = map(len);
	char *p = map(len);
	memset(p, 2, len);
	assert_true(miss(s, p, len));
	void *moved = mremap(p, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, spare);
	assert_ptr_equal(moved, spare);
	char *q = map(len, p);
	assert_true(miss(s, q, len));
	assert_false(miss(s, q, len));
	/* shrinking in place unmaps the tail: the range is cached no more */
	assert_ptr_equal(mremap(q, len, page, 0), q);
	assert_true(miss(s, q, page));
	munmap(spare, len);
	munmap(q, page);
}

void test_dontneed_and_touch(void **st)
{
	auto *s = static_cast<state *>(*st);
	const size_t len = 4 * page;
	char *p = map(len);
	const uint64_t faults = mem_monitor::instance().stats().faults;
	for (unsigned i = 0; i < rounds / 4; i++) {
		memset(p, 'a' + static_cast<int>(i % 26), len);
		assert_true(miss(s, p, len));
		assert_false(miss(s, p, len));
		assert_int_equal(madvise(p, len, MADV_DONTNEED), 0);
		/* touch: reads zero, never hangs (the alarm would end the test) */
		assert_int_equal(p[page + 1], 0);
		p[2 * page] = 1;
		/* a kernel-mode access to a dropped page: read(2) into it (answered by a full
		 * uffd; a user-mode-only one leaves a window, see mem_monitor.h) */
		if (i == 0 && strcmp(mem_monitor::mode(), "userfaultfd") == 0) {
			int fd = open("/dev/zero", O_RDONLY);
			assert_true(fd >= 0);
			assert_int_equal(madvise(p, len, MADV_DONTNEED), 0);
			assert_int_equal(read(fd, p + 3 * page, 16), 16);
			close(fd);
		}
	}
	/* write-protect mode, never armed, raises no fault at all */
	if (mem_monitor::faultless())
		assert_int_equal(mem_monitor::instance().stats().faults, faults);
	munmap(p, len);
}

/* A cached mapping grown in place by mremap: the new pages are read and written, by the
 * process and by the kernel (read(2) into them), and the next lookup of the grown range
 * registers it anew. */
void test_mremap_grows(void **st)
{
	auto *s = static_cast<state *>(*st);
	const size_t len = 4 * page;
	/* room after it: reserve twice the size, give the second half back */
	char *p = map(2 * len);
	assert_int_equal(munmap(p + len, len), 0);
	memset(p, 1, len);
	assert_true(miss(s, p, len));
	assert_false(miss(s, p, len));
	void *q = mremap(p, len, 2 * len, 0);
	if (q == MAP_FAILED) {
		munmap(p, len);
		skip();
	}
	assert_ptr_equal(q, p);
	assert_int_equal(p[len + 5], 0);
	int fd = open("/dev/zero", O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(read(fd, p + len + page, 64), 64);
	close(fd);
	memset(p + len, 2, len);
	assert_true(miss(s, p, 2 * len));
	assert_false(miss(s, p + len, len));
	munmap(p, 2 * len);
}

void test_free_malloc_large(void **st)
{
	auto *s = static_cast<state *>(*st);
	const size_t len = 1 << 20; /* above glibc's mmap threshold: munmap at free */
	if (sanitized)
		skip();
	mallopt(M_MMAP_THRESHOLD, 128 << 10); /* fixed: no dynamic threshold */
	unsigned same = 0;
	for (unsigned i = 0; i < rounds / 4; i++) {
		char *p = static_cast<char *>(malloc(len));
		assert_non_null(p);
		memset(p, static_cast<int>(i), len);
		const unsigned deregs = s->f.deregs;
		const bool missed = miss(s, p, len);
		/* the first round, or a block at the address of the last: always a miss */
		assert_true(missed);
		const uintptr_t was = reinterpret_cast<uintptr_t>(p);
		free(p);
		char *q = static_cast<char *>(malloc(len));
		same += reinterpret_cast<uintptr_t>(q) == was;
		memset(q, static_cast<int>(i + 1), len);
		assert_true(miss(s, q, len));
		assert_true(s->f.deregs > deregs);
		free(q);
	}
	print_message("free + malloc at the same address: %u of %u\n", same, rounds / 4);
}

void test_brk_shrink_trim(void **st)
{
	auto *s = static_cast<state *>(*st);
	/* from the heap, not mmap: a brk shrink (or malloc_trim's MADV_DONTNEED) when freed */
	if (sanitized)
		skip();
	mallopt(M_MMAP_THRESHOLD, 64 << 20);
	const size_t len = 4 << 20;
	for (unsigned i = 0; i < 50; i++) {
		char *p = static_cast<char *>(malloc(len));
		assert_non_null(p);
		memset(p, static_cast<int>(i), len);
		const unsigned deregs = s->f.deregs;
		assert_true(miss(s, p + page, len - 2 * page));
		char *const was = p;
		free(p);
		malloc_trim(0);
		char *q = static_cast<char *>(malloc(len));
		assert_non_null(q);
		memset(q, static_cast<int>(i + 7), len);
		/* the old pages went back to the kernel: the range is no longer cached */
		assert_true(miss(s, q + page, len - 2 * page) || q != was);
		assert_true(s->f.deregs > deregs);
		free(q);
	}
	mallopt(M_MMAP_THRESHOLD, 128 << 10);
}

std::atomic<bool> churning{false};
std::atomic<unsigned long> profs{0};

void on_prof(int)
{
	profs.fetch_add(1, std::memory_order_relaxed);
}

/* mapped again where it was, if the address is still free: another thread's malloc may
 * have taken it since the munmap, and MAP_FIXED would map over that block */
char *map_again(size_t len, char *was)
{
	void *p = mmap(was, len, PROT_READ | PROT_WRITE,
	               MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (p == MAP_FAILED)
		return map(len);
	if (p != was) { /* a kernel older than MAP_FIXED_NOREPLACE takes it as a hint */
		munmap(p, len);
		return map(len);
	}
	return static_cast<char *>(p);
}

/* the ordering loop (MAP_FIXED, DONTNEED, munmap + mmap) with a second thread churning the
 * allocator and the cache at once. Nothing in the loop asserts while the churner runs: a
 * failed assertion would leave it running on a cache the teardown destroys. */
void churn_and_check(state *s)
{
	churning = true;
	std::thread churn([s] {
		unsigned n = 0;
		while (churning.load(std::memory_order_relaxed)) {
			size_t sz = (n * 7919u) % (512u << 10) + 16;
			char *b = static_cast<char *>(malloc(sz));
			if (b) {
				b[0] = 1;
				b[sz - 1] = 2;
				mr_cache::entry *e = nullptr;
				if (n % 4 == 0 && s->cache->get(b, sz, 2, &e) == 0)
					s->cache->put(e);
				free(b);
			}
			n++;
		}
	});
	const size_t len = 8 * page;
	char *p = map(len);
	unsigned stale = 0, failed = 0, same = 0, remapped = 0;
	for (unsigned i = 0; i < rounds; i++) {
		memset(p, static_cast<int>(i), len);
		const unsigned before = s->f.regs;
		mr_cache::entry *e = nullptr;
		if (s->cache->get(p, len, 1, &e) != 0) {
			failed++;
			continue;
		}
		s->cache->put(e);
		stale += s->f.regs == before;
		switch (i % 3) {
		case 0:
			map(len, p);
			break;
		case 1:
			failed += madvise(p, len, MADV_DONTNEED) != 0;
			break;
		default: {
			munmap(p, len);
			char *q = map_again(len, p);
			remapped++;
			same += q == p;
			p = q;
			break;
		}
		}
	}
	churning = false;
	churn.join();
	munmap(p, len);
	print_message("munmap + mmap at the same address: %u of %u\n", same, remapped);
	assert_int_equal(failed, 0);
	assert_int_equal(stale, 0);
}

void test_churn(void **st)
{
	churn_and_check(static_cast<state *>(*st));
}

void test_churn_under_sigprof(void **st)
{
	struct sigaction sa = {};
	sa.sa_handler = on_prof;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGPROF, &sa, nullptr);
	struct itimerval t = {{0, 1000}, {0, 1000}};
	setitimer(ITIMER_PROF, &t, nullptr);
	churn_and_check(static_cast<state *>(*st));
	struct itimerval off = {};
	setitimer(ITIMER_PROF, &off, nullptr);
	print_message("SIGPROF delivered %lu times\n", profs.load());
	assert_true(profs.load() > 0);
	/* the reader is alive: one more invalidation is seen */
	auto *s = static_cast<state *>(*st);
	char *p = map(page);
	assert_true(miss(s, p, page));
	map(page, p);
	assert_true(miss(s, p, page));
	munmap(p, page);
}

void test_fork_child_bypasses(void **st)
{
	auto *s = static_cast<state *>(*st);
	const size_t len = 4 * page;
	char *p = map(len);
	memset(p, 3, len);
	assert_true(miss(s, p, len));
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		alarm(20);
		/* the child: the cache is not for it; unmapping the watched range (its copy is
		 * not registered) does not wait on the parent's reader */
		int bad = s->cache->usable() ? 1 : 0;
		if (munmap(p, len) != 0)
			bad |= 2;
		map(len, p);
		_exit(bad);
	}
	int status = 0;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	/* the parent's pages are untouched: still a hit */
	assert_true(s->cache->usable());
	assert_false(miss(s, p, len));
	munmap(p, len);
}

void test_unwatchable_not_kept(void **st)
{
	auto *s = static_cast<state *>(*st);
	/* file-backed on a disk file system: uffd cannot watch it. Not on tmpfs (a package
	 * build under /tmp), whose pages are shmem, which uffd watches */
	const char *const files[] = {"/proc/self/exe", "/usr/bin/env", "/bin/sh"};
	const uint64_t before = s->cache->stats().not_kept;
	uint64_t not_kept = 0;
	int fd = -1;
	for (const char *name : files) {
		struct statfs fs;
		if (statfs(name, &fs) == 0 && fs.f_type != TMPFS_MAGIC &&
		    fs.f_type != HUGETLBFS_MAGIC && (fd = open(name, O_RDONLY)) >= 0)
			break;
	}
	if (fd >= 0) {
		void *f = mmap(nullptr, page, PROT_READ, MAP_PRIVATE, fd, 0);
		close(fd);
		assert_true(f != MAP_FAILED);
		assert_true(miss(s, f, page));
		assert_true(miss(s, f, page));
		not_kept += 2;
		assert_int_equal(s->cache->stats().not_kept, before + not_kept);
		munmap(f, page);
	} else {
		print_message("no file outside tmpfs to map: the file-backed case not run\n");
	}
	/* another uffd owns the mapping (EBUSY) */
	int other = static_cast<int>(syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK));
	if (other < 0)
		other = static_cast<int>(
		    syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY));
	assert_true(other >= 0);
	struct uffdio_api api = {};
	api.api = UFFD_API;
	assert_int_equal(ioctl(other, UFFDIO_API, &api), 0);
	char *p = map(page);
	p[0] = 1;
	struct uffdio_register reg = {};
	reg.range.start = reinterpret_cast<uintptr_t>(p);
	reg.range.len = page;
	reg.mode = UFFDIO_REGISTER_MODE_MISSING;
	assert_int_equal(ioctl(other, UFFDIO_REGISTER, &reg), 0);
	assert_true(miss(s, p, page));
	assert_true(miss(s, p, page));
	assert_int_equal(s->cache->stats().not_kept, before + not_kept + 2);
	close(other);
	munmap(p, page);
}

/* Shared memory whose pages change with no event for this process: a tmpfs file (memfd)
 * truncated and grown again, and a MAP_SHARED | MAP_ANONYMOUS mapping. Neither may be kept:
 * after the truncation a cached registration would still hold the old pages. */
void test_shared_not_kept(void **st)
{
	auto *s = static_cast<state *>(*st);
	const size_t len = 4 * page;
	int fd = static_cast<int>(syscall(SYS_memfd_create, "mr", 0));
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, static_cast<off_t>(len)), 0);
	for (int flags : {MAP_SHARED, MAP_PRIVATE}) {
		void *m = mmap(nullptr, len, PROT_READ | PROT_WRITE, flags, fd, 0);
		assert_true(m != MAP_FAILED);
		char *p = static_cast<char *>(m);
		memset(p, 1, len);
		assert_true(miss(s, p, len));
		/* the file's pages go, new ones come: no uffd event here */
		assert_int_equal(ftruncate(fd, 0), 0);
		assert_int_equal(ftruncate(fd, static_cast<off_t>(len)), 0);
		memset(p, 2, len);
		assert_true(miss(s, p, len));
		munmap(p, len);
	}
	close(fd);
	void *m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(m != MAP_FAILED);
	memset(m, 1, len);
	assert_true(miss(s, m, len));
	assert_true(miss(s, m, len));
	munmap(m, len);
	/* private anonymous memory beside it is kept */
	char *p = map(len);
	memset(p, 1, len);
	assert_true(miss(s, p, len));
	assert_false(miss(s, p, len));
	munmap(p, len);
}

} // namespace

int main()
{
	if (const char *r = getenv("VWAIT_MR_ROUNDS"))
		rounds = static_cast<unsigned>(strtoul(r, nullptr, 10));
	const char *reason = nullptr;
	if (mem_monitor::probe(&reason) != 0) {
		printf("userfaultfd refused here (%s): skipped\n", reason);
		return 77;
	}
	printf("monitor: %s\n", mem_monitor::mode());
	atexit([] {
		printf("ranges registered in %s mode\n",
		       mem_monitor::faultless() ? "write-protect" : "missing");
	});
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_repeat_starts_the_reader, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hit_then_munmap, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_map_fixed_over, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_mremap_moves, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_mremap_grows, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_dontneed_and_touch, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_free_malloc_large, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_brk_shrink_trim, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_churn, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_churn_under_sigprof, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_fork_child_bypasses, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_unwatchable_not_kept, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_shared_not_kept, setup, teardown),
	};
	return cmocka_run_group_tests(tests, nullptr, nullptr);
}
