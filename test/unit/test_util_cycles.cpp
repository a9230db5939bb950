/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* Leaks: open/close cycles of every util object kind (CQ, counter and EQ with each wait object,
 * standalone and as wait-set members; wait sets of each kind; poll sets with members), 10^4 of
 * each by default (VWAIT_CYCLES=N to change), with the fds of /proc/self/fd counted before and
 * after: the count must not change. Every cycle also uses the object once (an entry, a signal,
 * fi_trywait, FI_GETWAIT) so that what is created on first use goes away too. Memory leaks are
 * LeakSanitizer's part (the asan stage runs this program). Prints cycles run and fds seen. */
#include "vwait/fi_deprecated.h"
#include "vwait/util/cntr.h"
#include "vwait/util/cq.h"
#include "vwait/util/eq.h"
#include "vwait/util/poll.h"
#include "vwait/util/trywait.h"
#include "vwait/util/wait.h"

#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#include "test_util_common.h"
#include "vwait_cmocka.h"

#include <dirent.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace
{

using namespace vwait;
using vwait_test::test_prov;

int count_fds()
{
	DIR *d = opendir("/proc/self/fd");
	assert_non_null(d);
	int n = 0;
	while (struct dirent *e = readdir(d))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1; /* the directory's own fd */
}

/* 10^4; fewer under the sanitizer stages (each runs this program too), where a cycle costs
 * more: 2000 under ASan, 200 under TSan (each thread start-up is slow there). What is asserted
 * is a count of fds; the times printed are the host's. */
long cycles()
{
	const char *env = getenv("VWAIT_CYCLES");
#if defined(__SANITIZE_THREAD__)
	const long dflt = 200;
#elif defined(__SANITIZE_ADDRESS__)
	const long dflt = 2000;
#else
	const long dflt = 10000;
#endif
	return env ? strtol(env, nullptr, 10) : dflt;
}

constexpr int member_kinds[] = {FI_WAIT_NONE,       FI_WAIT_UNSPEC, FI_WAIT_FD, FI_WAIT_POLLFD,
                                FI_WAIT_MUTEX_COND, FI_WAIT_YIELD,  FI_WAIT_SET};
constexpr int set_kinds[] = {FI_WAIT_FD, FI_WAIT_POLLFD, FI_WAIT_MUTEX_COND, FI_WAIT_YIELD};

const char *kind_name(int k)
{
	switch (k) {
	case FI_WAIT_NONE:
		return "NONE";
	case FI_WAIT_UNSPEC:
		return "UNSPEC";
	case FI_WAIT_FD:
		return "FD";
	case FI_WAIT_POLLFD:
		return "POLLFD";
	case FI_WAIT_MUTEX_COND:
		return "MUTEX_COND";
	case FI_WAIT_YIELD:
		return "YIELD";
	case FI_WAIT_SET:
		return "SET(FD)";
	default:
		return "?";
	}
}

/* One use of a waitable object's wait object: FI_GETWAIT as its kind wants, fi_trywait. */
void use_wait(struct fid *f, int kind)
{
	if (kind == FI_WAIT_NONE)
		return;
	union {
		int fd;
		struct fi_mutex_cond mc;
		struct fi_wait_pollfd pfd;
	} arg;
	memset(&arg, 0, sizeof(arg));
	struct pollfd fds[8];
	arg.pfd.nfds = 8;
	arg.pfd.fd = fds;
	int want = kind == FI_WAIT_YIELD ? -FI_ENODATA : 0;
	if (kind != FI_WAIT_POLLFD && kind != FI_WAIT_SET)
		assert_int_equal(fi_control(f, FI_GETWAIT, &arg), want);
	struct fid *one = f;
	int r = util::trywait(&test_prov, &one, 1);
	assert_true(r == 0 || r == -FI_EAGAIN);
}

long run_kind(const char *what, long n, int kind, struct fid_wait *set)
{
	long done = 0;
	for (long i = 0; i < n; i++) {
		if (!strcmp(what, "cq")) {
			struct fi_cq_attr a = {};
			a.wait_obj = static_cast<enum fi_wait_obj>(kind);
			a.wait_set = set;
			a.size = 16;
			struct fid_cq *cq = nullptr;
			assert_int_equal(util::cq_open(&test_prov, &a, &cq, nullptr), 0);
			util::cq_entry e;
			assert_int_equal(util::object_of<util::sw_cq>(&cq->fid)->push(e), 0);
			use_wait(&cq->fid, kind);
			struct fi_cq_entry out;
			assert_int_equal(fi_cq_read(cq, &out, 1), 1);
			if (kind != FI_WAIT_NONE)
				assert_int_equal(fi_cq_signal(cq), 0);
			assert_int_equal(fi_close(&cq->fid), 0);
		} else if (!strcmp(what, "cntr")) {
			struct fi_cntr_attr a = {};
			a.wait_obj = static_cast<enum fi_wait_obj>(kind);
			a.wait_set = set;
			struct fid_cntr *c = nullptr;
			assert_int_equal(util::cntr_open(&test_prov, &a, &c, nullptr), 0);
			assert_int_equal(fi_cntr_add(c, 1), 0);
			use_wait(&c->fid, kind);
			if (kind != FI_WAIT_NONE)
				assert_int_equal(fi_cntr_wait(c, 1, 0), 0);
			assert_int_equal(fi_close(&c->fid), 0);
		} else {
			struct fi_eq_attr a = {};
			a.wait_obj = static_cast<enum fi_wait_obj>(kind);
			a.wait_set = set;
			struct fid_eq *e = nullptr;
			assert_int_equal(util::eq_open(&test_prov, &a, &e, nullptr), 0);
			uint64_t v = 7;
			assert_int_equal(fi_eq_write(e, FI_NOTIFY, &v, sizeof(v), 0), sizeof(v));
			use_wait(&e->fid, kind);
			uint32_t ev;
			uint64_t back = 0;
			assert_int_equal(fi_eq_read(e, &ev, &back, sizeof(back), 0), sizeof(back));
			assert_int_equal(fi_close(&e->fid), 0);
		}
		done++;
	}
	return done;
}

void objects(void **)
{
	vwait_test::init_logging();
	long n = cycles();
	long total = 0;
	int before = count_fds();
	struct fi_wait_attr wa = {};
	wa.wait_obj = FI_WAIT_FD;
	struct fid_wait *set = nullptr;
	assert_int_equal(util::wait_open(&test_prov, &wa, &set), 0);
	auto t0 = std::chrono::steady_clock::now();
	for (const char *what : {"cq", "cntr", "eq"}) {
		for (int kind : member_kinds) {
			int f0 = count_fds();
			total += run_kind(what, n, kind, kind == FI_WAIT_SET ? set : nullptr);
			int f1 = count_fds();
			printf("cycles: %-4s %-10s %ld open/close, fds %d -> %d\n", what,
			       kind_name(kind), n, f0, f1);
			assert_int_equal(f0, f1);
		}
	}
	assert_int_equal(fi_close(&set->fid), 0);
	int after = count_fds();
	double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
	printf("cycles: %ld CQ/counter/EQ open/close cycles in %.1f s, fds %d -> %d\n", total, s,
	       before, after);
	assert_int_equal(after, before);
}

void sets(void **)
{
	vwait_test::init_logging();
	long n = cycles();
	long total = 0;
	int before = count_fds();
	auto t0 = std::chrono::steady_clock::now();
	for (int kind : set_kinds) {
		int f0 = count_fds();
		for (long i = 0; i < n; i++) {
			/* a wait set with a CQ member, a poll set with a counter, both used once */
			struct fi_wait_attr wa = {};
			wa.wait_obj = static_cast<enum fi_wait_obj>(kind);
			struct fid_wait *set = nullptr;
			assert_int_equal(util::wait_open(&test_prov, &wa, &set), 0);
			struct fi_cq_attr ca = {};
			ca.wait_obj = FI_WAIT_SET;
			ca.wait_set = set;
			struct fid_cq *cq = nullptr;
			assert_int_equal(util::cq_open(&test_prov, &ca, &cq, nullptr), 0);
			struct fid_poll *ps = nullptr;
			assert_int_equal(util::poll_open(&test_prov, nullptr, &ps), 0);
			struct fi_cntr_attr na = {};
			na.wait_obj = FI_WAIT_NONE;
			struct fid_cntr *c = nullptr;
			assert_int_equal(util::cntr_open(&test_prov, &na, &c, nullptr), 0);
			assert_int_equal(fi_sets::poll_add(ps, &c->fid, 0), 0);
			assert_int_equal(fi_sets::poll_add(ps, &cq->fid, 0), 0);
			assert_int_equal(fi_cntr_add(c, 1), 0);
			util::cq_entry e;
			assert_int_equal(util::object_of<util::sw_cq>(&cq->fid)->push(e), 0);
			void *ctx[2];
			assert_int_equal(fi_sets::poll(ps, ctx, 2), 2);
			assert_int_equal(fi_sets::wait(set, 0), 0);
			struct fi_cq_entry out;
			assert_int_equal(fi_cq_read(cq, &out, 1), 1);
			struct fid *one = &set->fid;
			int r = util::trywait(&test_prov, &one, 1);
			assert_true(r == 0 || r == -FI_EAGAIN);
			assert_int_equal(fi_sets::poll_del(ps, &c->fid, 0), 0);
			assert_int_equal(fi_sets::poll_del(ps, &cq->fid, 0), 0);
			assert_int_equal(fi_close(&ps->fid), 0);
			assert_int_equal(fi_close(&c->fid), 0);
			assert_int_equal(fi_close(&cq->fid), 0);
			assert_int_equal(fi_close(&set->fid), 0);
			total++;
		}
		int f1 = count_fds();
		printf(
		    "cycles: wait set %-10s + CQ member, poll set + counter + CQ: %ld, fds %d -> "
		    "%d\n",
		    kind_name(kind), n, f0, f1);
		assert_int_equal(f0, f1);
	}
	double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
	int after = count_fds();
	printf("cycles: %ld wait set + poll set stacks in %.1f s, fds %d -> %d\n", total, s, before,
	       after);
	assert_int_equal(before, after);
}

} // namespace

int main()
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(objects),
	    cmocka_unit_test(sets),
	};
	return cmocka_run_group_tests(tests, nullptr, nullptr);
}
