/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* util::sw_cq, the software completion queue: every format, error entries and the err_data
 * rules, bad input, every wait object standalone and in a wait set, sread timing,
 * fi_cq_signal, FI_CQ_COND_THRESHOLD, and many threads pushing and reading. */
#include "vwait/fi_deprecated.h"
#include "vwait/util/cntr.h"
#include "vwait/util/cq.h"
#include "vwait/util/eq.h"
#include "vwait/util/fast_mutex.h"
#include "vwait/util/poll.h"
#include "vwait/util/trywait.h"
#include "vwait/util/wait.h"

#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>

#include "test_util_common.h"
#include "vwait_cmocka.h"
#include "work_queue.h"

#include <poll.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <sys/resource.h>
#include <thread>
#include <vector>

namespace
{

using namespace vwait;
using steady = std::chrono::steady_clock;

using namespace vwait_test::fixture;

struct fi_cq_attr attr_of(enum fi_wait_obj w, enum fi_cq_format f = FI_CQ_FORMAT_TAGGED)
{
	struct fi_cq_attr a = {};
	a.format = f;
	a.wait_obj = w;
	return a;
}

util::sw_cq *open_cq(state &s, struct fi_cq_attr a)
{
	assert_int_equal(util::cq_open(&test_prov, &a, &s.cq, &s), 0);
	util::sw_cq *q = util::object_of<util::sw_cq>(&s.cq->fid);
	assert_non_null(q);
	return q;
}

util::cq_entry entry(uintptr_t id)
{
	util::cq_entry e;
	e.op_context = reinterpret_cast<void *>(id);
	e.flags = FI_RECV | FI_MSG | FI_REMOTE_CQ_DATA;
	e.len = 100 + id;
	e.buf = reinterpret_cast<void *>(0x1000 + id);
	e.data = 0xd0 + id;
	e.tag = 0x7a0 + id;
	return e;
}

/* ---------------------------------------------------------------- formats */

void format_context(void **st)
{
	state &s = st_of(st);
	util::sw_cq *q = open_cq(s, attr_of(FI_WAIT_NONE, FI_CQ_FORMAT_CONTEXT));
	assert_int_equal(q->push(entry(1)), 0);
	assert_int_equal(q->push(entry(2)), 0);
	struct fi_cq_entry out[4] = {};
	assert_int_equal(fi_cq_read(s.cq, out, 4), 2);
	assert_ptr_equal(out[0].op_context, reinterpret_cast<void *>(1));
	assert_ptr_equal(out[1].op_context, reinterpret_cast<void *>(2));
	assert_int_equal(fi_cq_read(s.cq, out, 4), -FI_EAGAIN);
}

void format_unspec_is_context(void **st)
{
	state &s = st_of(st);
	util::sw_cq *q = open_cq(s, attr_of(FI_WAIT_NONE, FI_CQ_FORMAT_UNSPEC));
	assert_int_equal(q->format(), util::cq_default_format);
	assert_int_equal(q->push(entry(5)), 0);
	struct fi_cq_entry out[2] = {};
	assert_int_equal(fi_cq_read(s.cq, out, 2), 1);
	assert_ptr_equal(out[0].op_context, reinterpret_cast<void *>(5));
}

void format_msg(void **st)
{
	state &s = st_of(st);
	util::sw_cq *q = open_cq(s, attr_of(FI_WAIT_NONE, FI_CQ_FORMAT_MSG));
	for (uintptr_t i = 1; i <= 3; i++)
		assert_int_equal(q->push(entry(i)), 0);
	struct fi_cq_msg_entry out[3] = {};
	assert_int_equal(fi_cq_read(s.cq, out, 3), 3);
	for (uintptr_t i = 0; i < 3; i++) {
		assert_ptr_equal(out[i].op_context, reinterpret_cast<void *>(i + 1));
		assert_int_equal(out[i].flags, FI_RECV | FI_MSG | FI_REMOTE_CQ_DATA);
		assert_int_equal(out[i].len, 101 + i);
	}
}

void format_data(void **st)
{
	state &s = st_of(st);
	util::sw_cq *q = open_cq(s, attr_of(FI_WAIT_NONE, FI_CQ_FORMAT_DATA));
	assert_int_equal(q->push(entry(7)), 0);
	struct fi_cq_data_entry out[1] = {};
	assert_int_equal(fi_cq_read(s.cq, out, 1), 1);
	assert_ptr_equal(out[0].op_context, reinterpret_cast<void *>(7));
	assert_int_equal(out[0].len, 107);
	assert_ptr_equal(out[0].buf, reinterpret_cast<void *>(0x1007));
	assert_int_equal(out[0].data, 0xd7);
}

void format_tagged(void **st)
{
	state &s = st_of(st);
	util::sw_cq *q = open_cq(s, attr_of(FI_WAIT_NONE, FI_CQ_FORMAT_TAGGED));
	assert_int_equal(q->push(entry(9)), 0);
	struct fi_cq_tagged_entry out[2] = {};
	assert_int_equal(fi_cq_read(s.cq, out, 2), 1);
	assert_ptr_equal(out[0].op_context, reinterpret_cast<void *>(9));
	assert_int_equal(out[0].flags, FI_RECV | FI_MSG | FI_REMOTE_CQ_DATA);
	assert_int_equal(out[0].len, 109);
	assert_ptr_equal(out[0].buf, reinterpret_cast<void *>(0x1009));
	assert_int_equal(out[0].data, 0xd9);
	assert_int_equal(out[0].tag, 0x7a9);
}

void readfrom_source(void **st)
{
	state &s = st_of(st);
	util::sw_cq *q = open_cq(s, attr_of(FI_WAIT_NONE, FI_CQ_FORMAT_CONTEXT));
	util::cq_entry known = entry(1);
	known.src_addr = 42;
	assert_int_equal(q->push(known), 0);
	assert_int_equal(q->push(entry(2)), 0); /* source unknown */
	struct fi_cq_entry out[2] = {};
	fi_addr_t src[2] = {0, 0};
	assert_int_equal(fi_cq_readfrom(s.cq, out, 2, src), 2);
	assert_int_equal(src[0], 42);
	assert_int_equal(src[1], FI_ADDR_NOTAVAIL);
}

void count_zero_and_size(void **st)
{
	state &s = st_of(st);
	struct fi_cq_attr a = attr_of(FI_WAIT_NONE, FI_CQ_FORMAT_CONTEXT);
	a.size = 4;
	util::sw_cq *q = open_cq(s, a);
	assert_int_equal(q->size(), 4);
	for (uintptr_t i = 0; i < 4; i++)
		assert_int_equal(q->push(entry(i)), 0);
	assert_int_equal(q->push(entry(4)), -FI_EAGAIN); /* full: the producer keeps it */
	assert_int_equal(fi_cq_read(s.cq, nullptr, 0), 0);
	struct fi_cq_entry out[8] = {};
	assert_int_equal(fi_cq_read(s.cq, out, 8), 4);
	assert_int_equal(fi_cq_read(s.cq, nullptr, 0), -FI_EAGAIN);
	assert_ptr_equal(out[3].op_context, reinterpret_cast<void *>(3));
	/* wraps around */
	for (uintptr_t i = 10; i < 14; i++)
		assert_int_equal(q->push(entry(i)), 0);
	assert_int_equal(fi_cq_read(s.cq, out, 2), 2);
	assert_int_equal(fi_cq_read(s.cq, out + 2, 8), 2);
	assert_ptr_equal(out[0].op_context, reinterpret_cast<void *>(10));
	assert_ptr_equal(out[3].op_context, reinterpret_cast<void *>(13));
	/* size 0: the default */
	assert_int_equal(fi_close(&s.cq->fid), 0);
	s.cq = nullptr;
	q = open_cq(s, attr_of(FI_WAIT_NONE));
	assert_int_equal(q->size(), util::cq_default_size);
}

/* push_n: a batch in order, cut short when the ring fills up */
void push_batch(void **st)
{
	state &s = st_of(st);
	struct fi_cq_attr a = attr_of(FI_WAIT_FD, FI_CQ_FORMAT_CONTEXT);
	a.size = 8;
	util::sw_cq *q = open_cq(s, a);
	util::cq_entry batch[6];
	for (uintptr_t i = 0; i < 6; i++)
		batch[i] = entry(i);
	assert_int_equal(q->push_n(batch, 6), 6);
	assert_int_equal(q->push_n(batch, 6), 2); /* 2 free slots */
	assert_int_equal(q->push_n(batch, 6), 0);
	struct fi_cq_entry out[8];
	assert_int_equal(fi_cq_sread(s.cq, out, 8, nullptr, 1000), 8);
	assert_ptr_equal(out[5].op_context, reinterpret_cast<void *>(5));
	assert_ptr_equal(out[7].op_context, reinterpret_cast<void *>(1));
}

/* Single-thread cost of the ring: 10^6 completions pushed and read in batches of 16. */
void throughput(void **st)
{
	state &s = st_of(st);
	for (enum fi_cq_format f : {FI_CQ_FORMAT_CONTEXT, FI_CQ_FORMAT_TAGGED}) {
		util::sw_cq *q = open_cq(s, attr_of(FI_WAIT_FD, f));
		constexpr size_t total = 1000000, batch = 16;
		util::cq_entry in[batch];
		struct fi_cq_tagged_entry out[batch];
		size_t got = 0;
		auto t0 = steady::now();
		for (size_t i = 0; i < total; i += batch) {
			for (size_t k = 0; k < batch; k++)
				in[k] = entry(i + k);
			q->push_n(in, batch);
			ssize_t n = fi_cq_read(s.cq, out, batch);
			if (n > 0)
				got += static_cast<size_t>(n);
		}
		long ms = ms_since(t0);
		print_message(
		    "format %d: %zu completions pushed and read (batches of %zu): %ld ms, "
		    "%.1f M/s\n",
		    f, got, batch, ms, ms ? total / 1000.0 / ms : 0.0);
		assert_int_equal(got, total);
		assert_int_equal(fi_close(&s.cq->fid), 0);
		s.cq = nullptr;
	}
}

/* ---------------------------------------------------------------- error entries */

struct fi_cq_err_entry error_entry(uintptr_t id)
{
	struct fi_cq_err_entry e = {};
	e.op_context = reinterpret_cast<void *>(id);
	e.flags = FI_SEND;
	e.len = 3;
	e.err = FI_EIO;
	e.prov_errno = 12;
	e.olen = 5;
	return e;
}

/* The ring grows as entries queue up (from 16, doubling, up to the size asked, here not a power
 * of two), also while its entries wrap around its end; order, error entries among them and the
 * size limit hold across every growth. */
void ring_grows_in_order(void **st)
{
	state &s = st_of(st);
	struct fi_cq_attr a = attr_of(FI_WAIT_NONE, FI_CQ_FORMAT_CONTEXT);
	a.size = 100;
	util::sw_cq *q = open_cq(s, a);
	struct fi_cq_entry out[128] = {};
	uintptr_t next_in = 0, next_out = 0;
	for (; next_in < 10; next_in++)
		assert_int_equal(q->push(entry(next_in)), 0);
	assert_int_equal(fi_cq_read(s.cq, out, 7), 7); /* head at 7 of 16: the rest wraps */
	next_out = 7;
	for (; next_in < 40; next_in++) /* 16 -> 32 -> 64, each while wrapped */
		assert_int_equal(q->push(entry(next_in)), 0);
	assert_int_equal(q->push_error(error_entry(1000), nullptr, 0), 0);
	while (q->queued() < 100)
		assert_int_equal(q->push(entry(next_in++)), 0);
	assert_int_equal(q->push(entry(next_in)), -FI_EAGAIN); /* the size asked, no more */
	assert_int_equal(q->push_error(error_entry(1001), nullptr, 0), -FI_EAGAIN);
	assert_int_equal(fi_cq_read(s.cq, out, 128), 33); /* up to the error */
	for (size_t i = 0; i < 33; i++)
		assert_ptr_equal(out[i].op_context, reinterpret_cast<void *>(next_out + i));
	next_out += 33;
	struct fi_cq_err_entry err = {};
	assert_int_equal(fi_cq_readerr(s.cq, &err, 0), 1);
	assert_ptr_equal(err.op_context, reinterpret_cast<void *>(1000));
	assert_int_equal(fi_cq_read(s.cq, out, 128), 66);
	for (size_t i = 0; i < 66; i++)
		assert_ptr_equal(out[i].op_context, reinterpret_cast<void *>(next_out + i));
	assert_int_equal(fi_cq_read(s.cq, out, 128), -FI_EAGAIN);
}

void error_in_order(void **st)
{
	state &s = st_of(st);
	util::sw_cq *q = open_cq(s, attr_of(FI_WAIT_NONE, FI_CQ_FORMAT_CONTEXT));
	const char payload[] = "0123456789";
	assert_int_equal(q->push(entry(1)), 0);
	assert_int_equal(q->push_error(error_entry(2), payload, sizeof(payload)), 0);
	assert_int_equal(q->push(entry(3)), 0);
	assert_int_equal(q->queued(), 3);

	struct fi_cq_err_entry err = {};
	assert_int_equal(fi_cq_readerr(s.cq, &err, 0), -FI_EAGAIN); /* not at the head yet */
	struct fi_cq_entry out[4] = {};
	assert_int_equal(fi_cq_read(s.cq, out, 4), 1); /* stops before the error */
	assert_int_equal(fi_cq_read(s.cq, out, 4), -FI_EAVAIL);
	assert_int_equal(fi_cq_read(s.cq, nullptr, 0), -FI_EAVAIL);

	/* err_data_size 0 on input: a provider-owned buffer */
	assert_int_equal(fi_cq_readerr(s.cq, &err, 0), 1);
	assert_ptr_equal(err.op_context, reinterpret_cast<void *>(2));
	assert_int_equal(err.err, FI_EIO);
	assert_int_equal(err.prov_errno, 12);
	assert_int_equal(err.olen, 5);
	assert_int_equal(err.flags, FI_SEND);
	assert_int_equal(err.err_data_size, sizeof(payload));
	assert_non_null(err.err_data);
	assert_memory_equal(err.err_data, payload, sizeof(payload));

	assert_int_equal(fi_cq_read(s.cq, out, 4), 1);
	assert_ptr_equal(out[0].op_context, reinterpret_cast<void *>(3));
	assert_int_equal(fi_cq_readerr(s.cq, &err, 0), -FI_EAGAIN);
}

/* unread_mark / read_past (the EQ's shutdown hold): a mark covers what is queued when it is
 * taken, reads and readerr both count, entries pushed after it do not. */
void read_marks(void **st)
{
	state &s = st_of(st);
	util::sw_cq *q = open_cq(s, attr_of(FI_WAIT_NONE, FI_CQ_FORMAT_CONTEXT));
	const uint64_t empty = q->unread_mark();
	assert_true(q->read_past(empty)); /* nothing queued: nothing to wait for */
	assert_int_equal(q->push(entry(1)), 0);
	assert_int_equal(q->push_error(error_entry(2), nullptr, 0), 0);
	assert_int_equal(q->push(entry(3)), 0);
	const uint64_t mark = q->unread_mark();
	assert_int_equal(mark, empty + 3);
	assert_false(q->read_past(mark));
	assert_int_equal(q->push(entry(4)), 0); /* after the mark */
	struct fi_cq_entry out[4] = {};
	assert_int_equal(fi_cq_read(s.cq, out, 4), 1);
	assert_false(q->read_past(mark));
	struct fi_cq_err_entry err = {};
	assert_int_equal(fi_cq_readerr(s.cq, &err, 0), 1);
	assert_false(q->read_past(mark));
	assert_int_equal(fi_cq_read(s.cq, out, 1), 1);
	assert_true(q->read_past(mark)); /* entry 4 is still queued: not needed */
	assert_int_equal(q->queued(), 1);
	assert_int_equal(q->unread_mark(), mark + 1);
}

void error_user_buffer(void **st)
{
	state &s = st_of(st);
	util::sw_cq *q = open_cq(s, attr_of(FI_WAIT_NONE));
	const char payload[] = "abcdefghijklmnop";
	assert_int_equal(q->push_error(error_entry(1), payload, 16), 0);
	assert_int_equal(q->push_error(error_entry(2), payload, 16), 0);
	assert_int_equal(q->push_error(error_entry(3), nullptr, 0), 0);

	char big[64];
	std::memset(big, 'x', sizeof(big));
	struct fi_cq_err_entry err = {};
	err.err_data = big;
	err.err_data_size = sizeof(big);
	assert_int_equal(fi_cq_readerr(s.cq, &err, 0), 1);
	assert_ptr_equal(err.err_data, big); /* the application's buffer, filled */
	assert_int_equal(err.err_data_size, 16);
	assert_memory_equal(big, payload, 16);
	assert_int_equal(big[16], 'x');

	char small[4];
	err = {};
	err.err_data = small;
	err.err_data_size = sizeof(small);
	assert_int_equal(fi_cq_readerr(s.cq, &err, 0), 1);
	assert_ptr_equal(err.err_data, small);
	assert_int_equal(err.err_data_size, 4); /* what fitted */
	assert_memory_equal(small, payload, 4);

	err = {};
	err.err_data = big;
	err.err_data_size = sizeof(big);
	assert_int_equal(fi_cq_readerr(s.cq, &err, 0), 1);
	assert_int_equal(err.err_data_size, 0);
	assert_ptr_equal(err.op_context, reinterpret_cast<void *>(3));
}

/* A fabric opened with an API older than 1.5: err_data is always the provider's. */
void error_old_api(void **st)
{
	state &s = st_of(st);
	struct fi_cq_attr a = attr_of(FI_WAIT_NONE);
	assert_int_equal(util::cq_open(&test_prov, &a, &s.cq, nullptr, FI_VERSION(1, 4)), 0);
	util::sw_cq *q = util::object_of<util::sw_cq>(&s.cq->fid);
	const char payload[] = "old";
	assert_int_equal(q->push_error(error_entry(1), payload, sizeof(payload)), 0);
	char mine[16] = {};
	struct fi_cq_err_entry err = {};
	err.err_data = mine;
	err.err_data_size = sizeof(mine);
	assert_int_equal(fi_cq_readerr(s.cq, &err, 0), 1);
	assert_ptr_not_equal(err.err_data, mine);
	assert_int_equal(err.err_data_size, sizeof(payload));
	assert_memory_equal(err.err_data, payload, sizeof(payload));
	assert_int_equal(mine[0], 0);
}

void strerror_text(void **st)
{
	state &s = st_of(st);
	open_cq(s, attr_of(FI_WAIT_NONE));
	char buf[64];
	const char *r = fi_cq_strerror(s.cq, FI_EIO, nullptr, buf, sizeof(buf));
	assert_ptr_equal(r, buf);
	assert_non_null(strstr(buf, "5"));
	char tiny[4];
	r = fi_cq_strerror(s.cq, FI_EIO, nullptr, tiny, sizeof(tiny));
	assert_int_equal(strlen(r), 3);
	r = fi_cq_strerror(s.cq, FI_EIO, nullptr, nullptr, 0);
	assert_non_null(r);
	assert_true(strlen(r) > 0);
}

/* ---------------------------------------------------------------- bad input */

void bad_input(void **st)
{
	state &s = st_of(st);
	struct fid_cq *cq = nullptr;
	assert_int_equal(util::cq_open(&test_prov, nullptr, &cq, nullptr), -FI_EINVAL);
	struct fi_cq_attr a = attr_of(FI_WAIT_NONE);
	assert_int_equal(util::cq_open(&test_prov, &a, nullptr, nullptr), -FI_EINVAL);
	set_raw(a.format, 99);
	assert_int_equal(util::cq_open(&test_prov, &a, &cq, nullptr), -FI_EINVAL);
	assert_null(cq);
	a = attr_of(FI_WAIT_NONE);
	set_raw(a.wait_obj, 77);
	assert_int_equal(util::cq_open(&test_prov, &a, &cq, nullptr), -FI_EINVAL);
	assert_null(cq);
	a = attr_of(FI_WAIT_SET); /* no wait_set */
	assert_int_equal(util::cq_open(&test_prov, &a, &cq, nullptr), -FI_EINVAL);
	a = attr_of(FI_WAIT_NONE);
	a.flags = 1ULL << 40;
	assert_int_equal(util::cq_open(&test_prov, &a, &cq, nullptr), -FI_EINVAL);
	a = attr_of(FI_WAIT_FD);
	set_raw(a.wait_cond, 5);
	assert_int_equal(util::cq_open(&test_prov, &a, &cq, nullptr), -FI_EINVAL);
	a = attr_of(FI_WAIT_NONE);
	a.size = util::cq_max_size + 1;
	assert_int_equal(util::cq_open(&test_prov, &a, &cq, nullptr), -FI_EINVAL);
	assert_null(cq);

	open_cq(s, attr_of(FI_WAIT_NONE));
	assert_int_equal(fi_cq_read(s.cq, nullptr, 1), -FI_EINVAL);
	assert_int_equal(fi_cq_readfrom(s.cq, nullptr, 2, nullptr), -FI_EINVAL);
	assert_int_equal(fi_cq_readerr(s.cq, nullptr, 0), -FI_EINVAL);
	struct fi_cq_err_entry err = {};
	assert_int_equal(fi_cq_readerr(s.cq, &err, FI_PEEK), -FI_EINVAL);
	struct fi_cq_entry out;
	/* FI_WAIT_NONE: nothing to block on */
	assert_int_equal(fi_cq_sread(s.cq, &out, 1, nullptr, 0), -FI_EINVAL);
	assert_int_equal(fi_cq_signal(s.cq), -FI_EINVAL);
	/* no wait object to hand out (util::waitable's answer, as upstream util gives) */
	void *w = nullptr;
	assert_int_equal(fi_control(&s.cq->fid, FI_GETWAIT, &w), -FI_ENODATA);
	enum fi_wait_obj obj = FI_WAIT_FD;
	assert_int_equal(fi_control(&s.cq->fid, FI_GETWAITOBJ, &obj), -FI_ENODATA);
	assert_int_equal(fi_control(&s.cq->fid, 12345, nullptr), -FI_ENOSYS);
}

void close_busy(void **st)
{
	state &s = st_of(st);
	util::sw_cq *q = open_cq(s, attr_of(FI_WAIT_NONE));
	q->hold();
	assert_int_equal(fi_close(&s.cq->fid), -FI_EBUSY);
	q->unhold();
	assert_int_equal(fi_close(&s.cq->fid), 0);
	s.cq = nullptr;
}

/* ---------------------------------------------------------------- wait objects */

const enum fi_wait_obj own_objs[] = {FI_WAIT_UNSPEC, FI_WAIT_FD, FI_WAIT_POLLFD, FI_WAIT_MUTEX_COND,
                                     FI_WAIT_YIELD};

/* Opens s.cq with wait object w (FI_WAIT_SET: a new FD wait set). */
util::sw_cq *open_waiting(state &s, enum fi_wait_obj w, struct fi_cq_attr a)
{
	a.wait_obj = w;
	if (w == FI_WAIT_SET) {
		struct fi_wait_attr wa = {};
		wa.wait_obj = FI_WAIT_FD;
		assert_int_equal(util::wait_open(&test_prov, &wa, &s.set), 0);
		a.wait_set = s.set;
	}
	return open_cq(s, a);
}

void close_cq(state &s)
{
	for (auto &t : s.threads)
		t.join();
	s.threads.clear();
	assert_int_equal(fi_close(&s.cq->fid), 0);
	s.cq = nullptr;
	if (s.set) {
		assert_int_equal(fi_close(&s.set->fid), 0);
		s.set = nullptr;
	}
}

/* For each wait object: an sread that times out returns -FI_EAGAIN at its deadline, never
 * before it; a push from another thread ends an infinite sread, and fi_cq_signal ends one too,
 * each after the event and within bound_ms(0) of it; an error at the head ends a blocked sread
 * with -FI_EAVAIL. */
void each_wait_object(void **st)
{
	state &s = st_of(st);
	std::vector<enum fi_wait_obj> objs(std::begin(own_objs), std::end(own_objs));
	objs.push_back(FI_WAIT_SET);
	for (enum fi_wait_obj w : objs) {
		util::sw_cq *q = open_waiting(s, w, attr_of(FI_WAIT_NONE, FI_CQ_FORMAT_CONTEXT));
		const util::waiter *waiter = q->wait_object();
		struct fi_cq_entry out[4] = {};

		auto t0 = steady::now();
		assert_int_equal(fi_cq_sread(s.cq, out, 4, nullptr, 200), -FI_EAGAIN);
		long ms = ms_since(t0);
		print_message("wait_obj %d: sread(200 ms) timed out after %ld ms\n", w, ms);
		assert_true(ms >= 200 && ms < bound_ms(200));

		/* a push ends an infinite sread (a lost wakeup hangs here) */
		event_time fired;
		util::wake_counts c0 = waiter->counts();
		s.threads.emplace_back([q, waiter, c0, &fired] {
			let_it_sleep(waiter, c0);
			fired.mark();
			q->push(entry(11));
		});
		assert_int_equal(fi_cq_sread(s.cq, out, 4, nullptr, -1), 1);
		ms = fired.ms_since_mark();
		assert_ptr_equal(out[0].op_context, reinterpret_cast<void *>(11));
		assert_true(ms >= 0 && ms < bound_ms(0));
		s.threads.back().join();
		s.threads.clear();

		/* a signal ends one: after the signal, never before it */
		event_time signalled;
		c0 = waiter->counts();
		s.threads.emplace_back([&s, waiter, c0, &signalled] {
			let_it_sleep(waiter, c0);
			signalled.mark();
			fi_cq_signal(s.cq);
		});
		assert_int_equal(fi_cq_sread(s.cq, out, 4, nullptr, -1), -FI_EAGAIN);
		ms = signalled.ms_since_mark();
		print_message("wait_obj %d: signal ended an infinite sread %ld ms after it\n", w,
		              ms);
		assert_true(ms >= 0 && ms < bound_ms(0));

		/* an error at the head ends a blocked sread with -FI_EAVAIL, not at its deadline */
		s.threads.back().join();
		s.threads.clear();
		c0 = waiter->counts();
		event_time pushed;
		s.threads.emplace_back([q, waiter, c0, &pushed] {
			let_it_sleep(waiter, c0);
			pushed.mark();
			q->push_error(error_entry(3), nullptr, 0);
		});
		/* no deadline: only the error can end it, within the bound of its push */
		assert_int_equal(fi_cq_sread(s.cq, out, 4, nullptr, -1), -FI_EAVAIL);
		ms = pushed.ms_since_mark();
		assert_true(ms >= 0 && ms < bound_ms(0));
		close_cq(s);
	}
}

/* A CQ in a wait set of each kind: sread blocks on the set, a push ends it, and fi_wait on the
 * set returns for it. */
void wait_set_kinds(void **st)
{
	state &s = st_of(st);
	for (enum fi_wait_obj k : {FI_WAIT_FD, FI_WAIT_POLLFD, FI_WAIT_MUTEX_COND, FI_WAIT_YIELD}) {
		struct fi_wait_attr wa = {};
		wa.wait_obj = k;
		assert_int_equal(util::wait_open(&test_prov, &wa, &s.set), 0);
		struct fi_cq_attr a = attr_of(FI_WAIT_SET, FI_CQ_FORMAT_CONTEXT);
		a.wait_set = s.set;
		util::sw_cq *q = open_cq(s, a);
		struct fi_cq_entry out[2];
		util::waiter *waiter = nullptr;
		assert_int_equal(util::get_waiter(&s.set->fid, &waiter), 0);
		auto t0 = steady::now();
		assert_int_equal(fi_cq_sread(s.cq, out, 2, nullptr, 100), -FI_EAGAIN);
		long ms = ms_since(t0);
		assert_true(ms >= 100 && ms < bound_ms(100));
		event_time fired;
		const util::wake_counts c0 = waiter->counts();
		s.threads.emplace_back([q, waiter, c0, &fired] {
			let_it_sleep(waiter, c0);
			fired.mark();
			q->push(entry(7));
		});
		/* a deadline longer than the bound: fi_wait returns 0 within it only if woken */
		assert_int_equal(fi_sets::wait(s.set, 2 * bound_ms(0)), 0);
		ms = fired.ms_since_mark();
		print_message("wait set of kind %d: fi_wait returned %ld ms after a push\n", k, ms);
		assert_true(ms >= 0 && ms < bound_ms(0));
		assert_int_equal(fi_cq_sread(s.cq, out, 2, nullptr, 1000), 1);
		assert_ptr_equal(out[0].op_context, reinterpret_cast<void *>(7));
		close_cq(s);
	}
}

void getwait(void **st)
{
	state &s = st_of(st);
	enum fi_wait_obj obj;

	open_waiting(s, FI_WAIT_FD, attr_of(FI_WAIT_NONE));
	int fd = -1;
	assert_int_equal(fi_control(&s.cq->fid, FI_GETWAIT, &fd), 0);
	assert_true(fd >= 0);
	assert_int_equal(fi_control(&s.cq->fid, FI_GETWAITOBJ, &obj), 0);
	assert_int_equal(obj, FI_WAIT_FD);
	assert_int_equal(fi_control(&s.cq->fid, FI_GETWAIT, nullptr), -FI_EINVAL);
	close_cq(s);

	open_waiting(s, FI_WAIT_UNSPEC, attr_of(FI_WAIT_NONE));
	assert_int_equal(fi_control(&s.cq->fid, FI_GETWAITOBJ, &obj), 0);
	assert_int_equal(obj, FI_WAIT_FD); /* vwait's documented choice */
	close_cq(s);

	open_waiting(s, FI_WAIT_MUTEX_COND, attr_of(FI_WAIT_NONE));
	struct fi_mutex_cond mc = {};
	assert_int_equal(fi_control(&s.cq->fid, FI_GETWAIT, &mc), 0);
	assert_non_null(mc.mutex);
	assert_non_null(mc.cond);
	close_cq(s);

	open_waiting(s, FI_WAIT_POLLFD, attr_of(FI_WAIT_NONE));
	struct pollfd pfd[8];
	struct fi_wait_pollfd wp = {};
	wp.nfds = 8;
	wp.fd = pfd;
	assert_int_equal(fi_control(&s.cq->fid, FI_GETWAIT, &wp), 0);
	assert_true(wp.nfds >= 1);
	close_cq(s);

	/* a wait set member hands out the set's wait object */
	open_waiting(s, FI_WAIT_SET, attr_of(FI_WAIT_NONE));
	assert_int_equal(fi_control(&s.cq->fid, FI_GETWAITOBJ, &obj), 0);
	assert_int_equal(obj, FI_WAIT_FD);
	int set_fd = -1;
	fd = -1;
	assert_int_equal(fi_control(&s.set->fid, FI_GETWAIT, &set_fd), 0);
	assert_int_equal(fi_control(&s.cq->fid, FI_GETWAIT, &fd), 0);
	assert_int_equal(fd, set_fd);
	close_cq(s);
}

/* The FD wait object becomes readable when a completion arrives. */
void fd_readable(void **st)
{
	state &s = st_of(st);
	util::sw_cq *q = open_waiting(s, FI_WAIT_FD, attr_of(FI_WAIT_NONE));
	int fd = -1;
	assert_int_equal(fi_control(&s.cq->fid, FI_GETWAIT, &fd), 0);
	struct fid *fids[1] = {&s.cq->fid};
	assert_int_equal(util::trywait(&test_prov, fids, 1), 0);
	struct pollfd p = {fd, POLLIN, 0};
	assert_int_equal(poll(&p, 1, 0), 0);
	assert_int_equal(q->push(entry(1)), 0);
	assert_int_equal(poll(&p, 1, 1000), 1);
	assert_int_equal(util::trywait(&test_prov, fids, 1), -FI_EAGAIN);
	struct fi_cq_tagged_entry out;
	assert_int_equal(fi_cq_read(s.cq, &out, 1), 1);
	assert_int_equal(util::trywait(&test_prov, fids, 1), 0);
}

/* The deadline is kept: spurious wakeups (wakes with fewer entries than the threshold) neither
 * end nor extend it. A waker wakes the call each time it falls asleep; the call returns what is
 * there at its deadline, never before it, and the waiter counts the wakeups it slept through
 * and the timeout that ended it. */
void sread_deadline_kept(void **st)
{
	state &s = st_of(st);
	struct fi_cq_attr a = attr_of(FI_WAIT_FD, FI_CQ_FORMAT_CONTEXT);
	a.wait_cond = FI_CQ_COND_THRESHOLD;
	util::sw_cq *q = open_cq(s, a);
	const util::waiter *w = q->wait_object();
	size_t threshold = 8;
	struct fi_cq_entry out[8];
	/* 300 ms: room for several wakes of the sleeping call; not early is exact at any length */
	constexpr long deadline = 300;
	/* a waker that never ran while the call slept proves nothing: try again (three runs of
	 * 300 ms in which a runnable thread never gets a CPU is a stopped host, not a slow one) */
	uint64_t woken = 0;
	for (int attempt = 0; attempt < 3 && woken == 0; attempt++) {
		assert_int_equal(q->push(entry(1)), 0); /* below the threshold */
		std::atomic<bool> stop{false};
		const util::wake_counts c0 = w->counts();
		s.threads.emplace_back([q, w, &stop, seen = c0.sleeps]() mutable {
			while (!stop.load()) {
				const uint64_t now = w->counts().sleeps;
				if (now > seen) {
					seen = now;
					q->wake();
				}
				std::this_thread::sleep_for(std::chrono::milliseconds(5));
			}
		});
		auto t0 = steady::now();
		ssize_t ret = fi_cq_sread(s.cq, out, 8, &threshold, deadline);
		long ms = ms_since(t0);
		stop = true;
		for (auto &t : s.threads) /* it reads stop: join before this frame ends */
			t.join();
		s.threads.clear();
		const util::wake_counts c = w->counts().since(c0);
		woken = c.wakeups - c.calib;
		print_message("sread(threshold 8, %ld ms) with 1 entry queued: %zd after %ld ms; "
		              "%llu sleeps, %llu wakeups, %llu timeouts\n",
		              deadline, ret, ms, static_cast<unsigned long long>(c.sleeps),
		              static_cast<unsigned long long>(woken),
		              static_cast<unsigned long long>(c.timeouts));
		assert_int_equal(ret, 1); /* what is there, once the deadline passed */
		assert_ptr_equal(out[0].op_context, reinterpret_cast<void *>(1));
		/* no wakeup ended it (not early), none moved its deadline (not late) */
		assert_true(ms >= deadline && ms < bound_ms(deadline));
	}
	assert_true(woken > 0);
	const util::wake_counts c0 = w->counts();
	auto t0 = steady::now();
	assert_int_equal(fi_cq_sread(s.cq, out, 8, &threshold, deadline), -FI_EAGAIN);
	long ms = ms_since(t0);
	print_message("sread(%ld ms) on an empty CQ: -FI_EAGAIN after %ld ms\n", deadline, ms);
	assert_true(ms >= deadline && ms < bound_ms(deadline));
	assert_true(w->counts().since(c0).timeouts >= 1);
}

void threshold(void **st)
{
	state &s = st_of(st);
	struct fi_cq_attr a = attr_of(FI_WAIT_FD, FI_CQ_FORMAT_CONTEXT);
	a.wait_cond = FI_CQ_COND_THRESHOLD;
	util::sw_cq *q = open_cq(s, a);
	s.threads.emplace_back([q] {
		for (uintptr_t i = 0; i < 10; i++) {
			std::this_thread::sleep_for(std::chrono::milliseconds(20));
			q->push(entry(i));
		}
	});
	size_t cond = 5;
	struct fi_cq_entry out[16];
	/* 5 s for the 5 pushes of about 100 ms: fifty times that, a deadline only a hang meets */
	ssize_t ret = fi_cq_sread(s.cq, out, 16, &cond, 5000);
	assert_true(ret >= 5);
	assert_ptr_equal(out[0].op_context, reinterpret_cast<void *>(0));
}

/* A signal raised while nobody is blocked ends the next sread, once. */
void signal_before_sread(void **st)
{
	state &s = st_of(st);
	open_cq(s, attr_of(FI_WAIT_FD, FI_CQ_FORMAT_CONTEXT));
	assert_int_equal(fi_cq_signal(s.cq), 0);
	struct fi_cq_entry out;
	auto t0 = steady::now();
	/* a deadline past the bound: within it, only the signal can have ended the call */
	assert_int_equal(fi_cq_sread(s.cq, &out, 1, nullptr, 2 * bound_ms(0)), -FI_EAGAIN);
	assert_true(ms_since(t0) < bound_ms(0));
	/* once: the next sread runs out its time, never less */
	t0 = steady::now();
	assert_int_equal(fi_cq_sread(s.cq, &out, 1, nullptr, 100), -FI_EAGAIN);
	const long ms = ms_since(t0);
	assert_true(ms >= 100 && ms < bound_ms(100));
}

/* One signal ends every blocked sread. */
void signal_wakes_all(void **st)
{
	state &s = st_of(st);
	util::sw_cq *q = open_cq(s, attr_of(FI_WAIT_FD, FI_CQ_FORMAT_CONTEXT));
	std::atomic<int> ended{0};
	std::atomic<long> latest{-1}; /* ms from the signal to the last return */
	std::atomic<bool> early{false};
	event_time signalled;
	const util::wake_counts c0 = q->wait_object()->counts();
	for (int i = 0; i < 3; i++)
		s.threads.emplace_back([&] {
			struct fi_cq_entry out;
			/* a deadline past the bound: a reader the signal missed ends late */
			if (fi_cq_sread(s.cq, &out, 1, nullptr, 2 * bound_ms(0)) == -FI_EAGAIN)
				ended++;
			const long ms = signalled.ms_since_mark();
			if (ms < 0)
				early = true; /* returned before the signal */
			long l = latest.load();
			while (ms > l && !latest.compare_exchange_weak(l, ms))
				;
		});
	let_it_sleep(q->wait_object(), c0, 3);
	signalled.mark();
	assert_int_equal(fi_cq_signal(s.cq), 0);
	for (auto &t : s.threads)
		t.join();
	s.threads.clear();
	print_message("one signal, three blocked sreads: the last returned %ld ms after it\n",
	              latest.load());
	assert_int_equal(ended.load(), 3);
	assert_false(early.load());
	assert_true(latest.load() < bound_ms(0));
}

/* Two readers blocked, one completion: the one that does not get it keeps waiting until its
 * own deadline (a wakeup for an entry someone else took is spurious, it ends nothing). */
void two_readers_one_entry(void **st)
{
	state &s = st_of(st);
	util::sw_cq *q = open_cq(s, attr_of(FI_WAIT_FD, FI_CQ_FORMAT_CONTEXT));
	std::atomic<int> got{0}, empty{0};
	std::atomic<long> empty_ms{0};
	const util::wake_counts c0 = q->wait_object()->counts();
	for (int i = 0; i < 2; i++)
		s.threads.emplace_back([&] {
			struct fi_cq_entry out;
			auto t0 = steady::now();
			ssize_t n = fi_cq_sread(s.cq, &out, 1, nullptr, 200);
			if (n == 1) {
				got++;
			} else if (n == -FI_EAGAIN) {
				empty++;
				empty_ms = ms_since(t0);
			}
		});
	let_it_sleep(q->wait_object(), c0, 2);
	q->push(entry(1));
	for (auto &t : s.threads)
		t.join();
	s.threads.clear();
	print_message("one entry, two sread(200 ms): the empty one returned after %ld ms\n",
	              empty_ms.load());
	assert_int_equal(got.load(), 1);
	assert_int_equal(empty.load(), 1);
	/* its full time, never less, and no more than the bound */
	assert_true(empty_ms.load() >= 200 && empty_ms.load() < bound_ms(200));
}

/* ---------------------------------------------------------------- threads */

/* Every id was read exactly once, and no read was bad. */
void assert_each_once(const std::vector<std::atomic<int>> &seen, long bad, uintptr_t consumed)
{
	assert_int_equal(bad, 0);
	assert_int_equal(consumed, seen.size());
	for (size_t i = 0; i < seen.size(); i++)
		if (seen[i].load() != 1)
			fail_msg("id %zu seen %d times", i, seen[i].load());
}

/* 4 producers push 10^5 completions through a 256-entry ring, 2 consumers read them with
 * sread: every id arrives exactly once. */
void many_threads(void **st)
{
	state &s = st_of(st);
	for (enum fi_wait_obj w : {FI_WAIT_FD, FI_WAIT_MUTEX_COND}) {
		struct fi_cq_attr a = attr_of(w, FI_CQ_FORMAT_CONTEXT);
		a.size = 256;
		util::sw_cq *q = open_cq(s, a);
		constexpr uintptr_t producers = 4, per_producer = 25000;
		constexpr uintptr_t total = producers * per_producer;
		std::vector<std::atomic<int>> seen(total);
		std::atomic<uintptr_t> consumed{0};
		std::atomic<long> bad{0};
		auto t0 = steady::now();
		for (uintptr_t p = 0; p < producers; p++)
			s.threads.emplace_back([q, p] {
				for (uintptr_t i = 0; i < per_producer; i++) {
					util::cq_entry e;
					e.op_context =
					    reinterpret_cast<void *>(p * per_producer + i);
					while (q->push(e) == -FI_EAGAIN)
						sched_yield();
				}
			});
		for (int c = 0; c < 2; c++)
			s.threads.emplace_back([&] {
				struct fi_cq_entry out[32];
				while (consumed.load() < total) {
					ssize_t n = fi_cq_sread(s.cq, out, 32, nullptr, 100);
					if (n == -FI_EAGAIN)
						continue;
					if (n < 0) {
						bad++;
						return;
					}
					for (ssize_t i = 0; i < n; i++) {
						auto id =
						    reinterpret_cast<uintptr_t>(out[i].op_context);
						if (id >= total || seen[id].fetch_add(1) != 0)
							bad++;
					}
					consumed += static_cast<uintptr_t>(n);
				}
			});
		for (auto &t : s.threads)
			t.join();
		s.threads.clear();
		long ms = ms_since(t0);
		print_message(
		    "wait_obj %d: %lu completions, 4 producers, 2 sread consumers: %ld ms "
		    "(%.2f M/s)\n",
		    w, static_cast<unsigned long>(total), ms, ms ? total / 1000.0 / ms : 0.0);
		assert_each_once(seen, bad.load(), consumed.load());
		close_cq(s);
	}
}

/* The work-queue pattern with T = 1, 2, 4, 8 consumers, one producer feeding one completion at
 * a time (the next once the previous was read, so that the consumers sleep between them):
 *   one CQ    T threads in fi_cq_sread on one FI_WAIT_FD CQ;
 *   own CQs   T threads, each in fi_cq_sread on its own CQ of one FI_WAIT_FD wait set,
 *             completion i going to CQ i % T.
 * Every completion read exactly once, none lost (the run ends), and one completion wakes one
 * sleeper: the waiter's wakeups (waiter::counts(): sleeps that ended before their deadline,
 * whatever ended them, empty ones and the policy's calibration timer included) are at most 1.1
 * per completion at T = 8. The count does not depend on the scheduling: a completion raises at
 * most one sleeper, a consumer that takes a completion meant for another (while spinning)
 * costs that one an empty wakeup but saves its own. The consumers' voluntary context switches
 * (getrusage RUSAGE_THREAD) are printed beside it. */
vwait_test::queue_run run_queue(state &s, int threads, bool own_cqs, uintptr_t total)
{
	std::vector<util::sw_cq *> qs;
	util::waiter *w = nullptr;
	if (own_cqs) {
		struct fi_wait_attr wa = {};
		wa.wait_obj = FI_WAIT_FD;
		assert_int_equal(util::wait_open(&test_prov, &wa, &s.set), 0);
		assert_int_equal(util::get_waiter(&s.set->fid, &w), 0);
		for (int c = 0; c < threads; c++) {
			struct fi_cq_attr a = attr_of(FI_WAIT_SET, FI_CQ_FORMAT_CONTEXT);
			a.wait_set = s.set;
			struct fid_cq *cq = nullptr;
			assert_int_equal(util::cq_open(&test_prov, &a, &cq, &s), 0);
			s.cqs.push_back(cq);
			qs.push_back(util::object_of<util::sw_cq>(&cq->fid));
		}
	} else {
		qs.push_back(open_cq(s, attr_of(FI_WAIT_FD, FI_CQ_FORMAT_CONTEXT)));
		s.cqs.push_back(s.cq);
		s.cq = nullptr;
		w = qs[0]->wait_object();
	}
	vwait_test::queue_run r = vwait_test::work_queue(s.cqs, qs, w, threads, total);
	assert_int_equal(r.bad, 0);
	assert_int_equal(r.consumed, total);
	for (size_t i = 0; i < r.seen.size(); i++)
		if (r.seen[i] != 1)
			fail_msg("id %zu seen %d times", i, r.seen[i]);
	for (struct fid_cq *cq : s.cqs)
		assert_int_equal(fi_close(&cq->fid), 0);
	s.cqs.clear();
	if (s.set) {
		assert_int_equal(fi_close(&s.set->fid), 0);
		s.set = nullptr;
	}
	return r;
}

void sread_threads(void **st)
{
	state &s = st_of(st);
	constexpr uintptr_t total = 2000;
	for (bool own : {false, true})
		for (int threads : {1, 2, 4, 8}) {
			vwait_test::queue_run r = run_queue(s, threads, own, total);
			const double per = static_cast<double>(r.c.wakeups) / total;
			print_message("T=%d sread threads, %s: %lu completions in %ld ms; per "
			              "completion: %.3f wakeups (%.3f empty, %.3f hand-offs, %.3f "
			              "calibration), %.2f sleeps, %.2f voluntary switches\n",
			              threads, own ? "own CQs of one wait set" : "one CQ",
			              static_cast<unsigned long>(total),
			              static_cast<long>(r.secs * 1000), per,
			              static_cast<double>(r.c.empty) / total,
			              static_cast<double>(r.c.handoffs) / total,
			              static_cast<double>(r.c.calib) / total,
			              static_cast<double>(r.c.sleeps) / total,
			              static_cast<double>(r.switches) / total);
			/* every call that slept armed first, and each armed call has one cause (up
			 * to one call per thread in flight when the counts were taken) */
			const uint64_t armed = r.c.arm_no_spin + r.c.arm_budget;
			const uint64_t slept_calls =
			    r.c.slept_100us + r.c.slept_1ms + r.c.slept_longer;
			print_message("  calls armed: %lu (no spin %lu, after the "
			              "budget %lu), of which slept: %lu\n",
			              static_cast<unsigned long>(armed),
			              static_cast<unsigned long>(r.c.arm_no_spin),
			              static_cast<unsigned long>(r.c.arm_budget),
			              static_cast<unsigned long>(slept_calls));
			const auto slack = static_cast<uint64_t>(threads);
			assert_true(slept_calls <= armed + slack);
			assert_true(r.c.sleeps <= slack || armed > 0);
			assert_true(slept_calls <= r.c.sleeps + slack);
			/* before: 10.8 (one CQ) and 10.3 (own CQs) at T = 8 */
			if (threads == 8)
				assert_true(per <= 1.1);
		}
}

/* ---------------------------------------------------------------- poll sets, trywait */

void in_poll_set(void **st)
{
	state &s = st_of(st);
	util::sw_cq *q = open_cq(s, attr_of(FI_WAIT_NONE, FI_CQ_FORMAT_CONTEXT));
	assert_int_equal(util::poll_open(&test_prov, nullptr, &s.pollset), 0);
	assert_int_equal(fi_sets::poll_add(s.pollset, &s.cq->fid, 0), 0);
	void *ctx[4] = {};
	assert_int_equal(fi_sets::poll(s.pollset, ctx, 4), 0);
	assert_int_equal(q->push(entry(1)), 0);
	assert_int_equal(fi_sets::poll(s.pollset, ctx, 4), 1);
	assert_ptr_equal(ctx[0], &s); /* the CQ's context */
	/* still not empty: reported again */
	assert_int_equal(fi_sets::poll(s.pollset, ctx, 4), 1);
	struct fi_cq_entry out;
	assert_int_equal(fi_cq_read(s.cq, &out, 1), 1);
	assert_int_equal(fi_sets::poll(s.pollset, ctx, 4), 0);
	/* closing a CQ still in a poll set is refused */
	assert_int_equal(fi_close(&s.cq->fid), -FI_EBUSY);
	assert_int_equal(fi_sets::poll_del(s.pollset, &s.cq->fid, 0), 0);
}

void trywait_wait_set(void **st)
{
	state &s = st_of(st);
	util::sw_cq *q = open_waiting(s, FI_WAIT_SET, attr_of(FI_WAIT_NONE, FI_CQ_FORMAT_CONTEXT));
	struct fid *fids[2] = {&s.cq->fid, &s.set->fid};
	assert_int_equal(util::trywait(&test_prov, fids, 2), 0);
	util::waiter *w = nullptr;
	assert_int_equal(util::get_waiter(&s.set->fid, &w), 0);
	event_time fired;
	const util::wake_counts c0 = w->counts();
	s.threads.emplace_back([q, w, c0, &fired] {
		let_it_sleep(w, c0);
		fired.mark();
		q->push(entry(1));
	});
	/* a deadline past the bound: returning 0 within the bound, it was the push */
	assert_int_equal(fi_sets::wait(s.set, 2 * bound_ms(0)), 0);
	const long ms = fired.ms_since_mark();
	assert_true(ms >= 0 && ms < bound_ms(0));
	assert_int_equal(util::trywait(&test_prov, fids, 2), -FI_EAGAIN);
	struct fi_cq_entry out;
	assert_int_equal(fi_cq_read(s.cq, &out, 1), 1);
	auto t0 = steady::now();
	assert_int_equal(fi_sets::wait(s.set, 100), -FI_ETIMEDOUT);
	const long waited = ms_since(t0);
	assert_true(waited >= 100 && waited < bound_ms(100));
}

/* The verbs CQ's shape: progress() feeds the ring, arm() is the trywait step. */
class fed_cq : public util::sw_cq
{
public:
	using util::sw_cq::sw_cq;
	std::atomic<int> backlog{0}; /* completions "in hardware" */
	std::atomic<int> arms{0};
	/* false: events below reach nobody unless someone polls (poll sets then check it on
	 * every fi_poll) */
	bool self_notifying() const noexcept override { return false; }

protected:
	void progress() noexcept override
	{
		while (backlog.load() > 0) {
			if (push(entry(static_cast<uintptr_t>(backlog.load()))) != 0)
				break;
			backlog--;
		}
	}
	int arm() noexcept override
	{
		arms++;
		return FI_SUCCESS;
	}
	std::string describe_error(int prov_errno, const void *) const override
	{
		return "hw status " + std::to_string(prov_errno);
	}
};

void subclass_hooks(void **st)
{
	state &s = st_of(st);
	struct fi_cq_attr a = attr_of(FI_WAIT_FD, FI_CQ_FORMAT_CONTEXT);
	auto obj = std::make_unique<fed_cq>(&test_prov, a, FI_VERSION(1, 17));
	fed_cq *q = obj.get();
	assert_int_equal(util::cq_install(std::move(obj), &s.cq, nullptr), 0);
	struct fid *fids[1] = {&s.cq->fid};
	assert_int_equal(util::trywait(&test_prov, fids, 1), 0);
	assert_true(q->arms.load() >= 1);
	q->backlog = 3;
	struct fi_cq_entry out[8];
	assert_int_equal(fi_cq_read(s.cq, out, 8), 3); /* read drives progress */
	q->backlog = 2;
	assert_int_equal(fi_cq_sread(s.cq, out, 8, nullptr, 1000), 2);
	q->backlog = 1;
	assert_int_equal(util::trywait(&test_prov, fids, 1), -FI_EAGAIN);
	char buf[32];
	assert_string_equal(fi_cq_strerror(s.cq, 7, nullptr, buf, sizeof(buf)), "hw status 7");
	struct fi_cq_entry drop[8];
	while (fi_cq_read(s.cq, drop, 8) > 0)
		;

	/* a poll set's fi_poll drives progress() too (push() from inside the poll: no deadlock) */
	assert_int_equal(util::poll_open(&test_prov, nullptr, &s.pollset), 0);
	assert_int_equal(fi_sets::poll_add(s.pollset, &s.cq->fid, 0), 0);
	void *ctx[2] = {};
	assert_int_equal(fi_sets::poll(s.pollset, ctx, 2), 0);
	q->backlog = 2;
	assert_int_equal(fi_sets::poll(s.pollset, ctx, 2), 1);
	assert_int_equal(q->backlog.load(), 0);
	assert_int_equal(fi_cq_read(s.cq, drop, 8), 2);
	assert_int_equal(fi_sets::poll(s.pollset, ctx, 2), 0);
	assert_int_equal(fi_sets::poll_del(s.pollset, &s.cq->fid, 0), 0);
}

/* ---------------------------------------------------------------- mixes */

/* A CQ, a counter and an EQ in one wait set: fi_trywait over all of them, fi_wait ended by
 * each kind, and each object's own blocking call through the set. */
void mixed_wait_set(void **st)
{
	state &s = st_of(st);
	struct fi_wait_attr wa = {};
	wa.wait_obj = FI_WAIT_FD;
	assert_int_equal(util::wait_open(&test_prov, &wa, &s.set), 0);
	struct fi_cq_attr ca = attr_of(FI_WAIT_SET, FI_CQ_FORMAT_CONTEXT);
	ca.wait_set = s.set;
	util::sw_cq *q = open_cq(s, ca);
	struct fi_cntr_attr na = {};
	na.wait_obj = FI_WAIT_SET;
	na.wait_set = s.set;
	assert_int_equal(util::cntr_open(&test_prov, &na, &s.cntr, nullptr), 0);
	struct fi_eq_attr ea = {};
	ea.wait_obj = FI_WAIT_SET;
	ea.wait_set = s.set;
	assert_int_equal(util::eq_open(&test_prov, &ea, &s.eq, nullptr), 0);
	struct fid *fids[4] = {&s.cq->fid, &s.cntr->fid, &s.eq->fid, &s.set->fid};
	int fd = -1;
	assert_int_equal(fi_control(&s.set->fid, FI_GETWAIT, &fd), 0);

	for (int kind = 0; kind < 3; kind++) {
		assert_int_equal(util::trywait(&test_prov, fids, 4), 0);
		struct pollfd p = {fd, POLLIN, 0};
		assert_int_equal(poll(&p, 1, 0), 0);
		event_time fired;
		s.threads.emplace_back([&s, q, kind, &fired] {
			/* poll(2) below should be asleep first: no waiter counts it, so a delay */
			std::this_thread::sleep_for(std::chrono::milliseconds(30));
			fired.mark();
			if (kind == 0) {
				q->push(entry(1));
			} else if (kind == 1) {
				fi_cntr_add(s.cntr, 1);
			} else {
				struct fi_eq_entry e = {};
				fi_eq_write(s.eq, FI_NOTIFY, &e, sizeof(e), 0);
			}
		});
		/* the application's own loop: poll(2) on the set's fd, with a timeout past the
		 * bound: readable within the bound of the event, it was the event */
		assert_int_equal(poll(&p, 1, static_cast<int>(2 * bound_ms(0))), 1);
		const long ms = fired.ms_since_mark();
		assert_true(ms >= 0 && ms < bound_ms(0));
		s.threads.back().join();
		s.threads.clear();
		assert_int_equal(fi_sets::wait(s.set, 0), 0);
		if (kind == 0) {
			assert_int_equal(util::trywait(&test_prov, fids, 4), -FI_EAGAIN);
			struct fi_cq_entry out;
			assert_int_equal(fi_cq_sread(s.cq, &out, 1, nullptr, 1000), 1);
		} else if (kind == 1) {
			assert_int_equal(fi_cntr_wait(s.cntr, 1, 1000), 0);
		} else {
			assert_int_equal(util::trywait(&test_prov, fids, 4), -FI_EAGAIN);
			uint32_t event;
			struct fi_eq_entry e;
			assert_int_equal(fi_eq_sread(s.eq, &event, &e, sizeof(e), 1000, 0),
			                 sizeof(e));
		}
	}
	assert_int_equal(fi_close(&s.set->fid), -FI_EBUSY); /* members still attached */
	assert_int_equal(fi_close(&s.eq->fid), 0);
	s.eq = nullptr;
	assert_int_equal(fi_close(&s.cntr->fid), 0);
	s.cntr = nullptr;
	assert_int_equal(fi_close(&s.cq->fid), 0);
	s.cq = nullptr;
}

/* Two CQs and a counter in one poll set: fi_poll reports exactly those with something to
 * report, with their contexts. */
void mixed_poll_set(void **st)
{
	state &s = st_of(st);
	int ctx_a = 0, ctx_b = 0, ctx_c = 0;
	struct fi_cq_attr ca = attr_of(FI_WAIT_NONE, FI_CQ_FORMAT_CONTEXT);
	assert_int_equal(util::cq_open(&test_prov, &ca, &s.cq, &ctx_a), 0);
	assert_int_equal(util::cq_open(&test_prov, &ca, &s.cq2, &ctx_b), 0);
	struct fi_cntr_attr na = {};
	assert_int_equal(util::cntr_open(&test_prov, &na, &s.cntr, &ctx_c), 0);
	assert_int_equal(util::poll_open(&test_prov, nullptr, &s.pollset), 0);
	assert_int_equal(fi_sets::poll_add(s.pollset, &s.cq->fid, 0), 0);
	assert_int_equal(fi_sets::poll_add(s.pollset, &s.cq2->fid, 0), 0);
	assert_int_equal(fi_sets::poll_add(s.pollset, &s.cntr->fid, 0), 0);
	void *ctx[4] = {};
	assert_int_equal(fi_sets::poll(s.pollset, ctx, 4), 0);
	assert_int_equal(util::object_of<util::sw_cq>(&s.cq2->fid)->push(entry(1)), 0);
	fi_cntr_add(s.cntr, 1);
	int n = fi_sets::poll(s.pollset, ctx, 4);
	assert_int_equal(n, 2);
	bool b = false, c = false;
	for (int i = 0; i < n; i++) {
		b = b || ctx[i] == &ctx_b;
		c = c || ctx[i] == &ctx_c;
		assert_ptr_not_equal(ctx[i], &ctx_a);
	}
	assert_true(b && c);
	/* the CQ still holds its entry, the counter did not change again */
	assert_int_equal(fi_sets::poll(s.pollset, ctx, 4), 1);
	assert_ptr_equal(ctx[0], &ctx_b);
	/* an error entry counts as something to report */
	struct fi_cq_entry out;
	assert_int_equal(fi_cq_read(s.cq2, &out, 1), 1);
	assert_int_equal(
	    util::object_of<util::sw_cq>(&s.cq->fid)->push_error(error_entry(1), nullptr, 0), 0);
	assert_int_equal(fi_sets::poll(s.pollset, ctx, 4), 1);
	assert_ptr_equal(ctx[0], &ctx_a);
	for (struct fid *f : {&s.cq->fid, &s.cq2->fid, &s.cntr->fid})
		assert_int_equal(fi_sets::poll_del(s.pollset, f, 0), 0);
}

/* Ping-pong between two threads through two CQs with blocking reads: the round trip of a
 * completion that wakes a sread, per wait object (a figure for the report, and no wakeup
 * may be lost: every one of the round trips completes). */
void pingpong_latency(void **st)
{
	state &s = st_of(st);
	for (enum fi_wait_obj w : {FI_WAIT_FD, FI_WAIT_POLLFD, FI_WAIT_MUTEX_COND, FI_WAIT_YIELD}) {
		struct fi_cq_attr a = attr_of(w, FI_CQ_FORMAT_CONTEXT);
		assert_int_equal(util::cq_open(&test_prov, &a, &s.cq, nullptr), 0);
		assert_int_equal(util::cq_open(&test_prov, &a, &s.cq2, nullptr), 0);
		util::sw_cq *ping = util::object_of<util::sw_cq>(&s.cq->fid),
		            *pong = util::object_of<util::sw_cq>(&s.cq2->fid);
		constexpr int rounds = 2000;
		std::atomic<int> echoed{0};
		s.threads.emplace_back([&s, ping, &echoed] {
			struct fi_cq_entry e;
			for (int i = 0; i < rounds; i++) {
				if (fi_cq_sread(s.cq2, &e, 1, nullptr, 5000) != 1)
					return;
				ping->push(entry(static_cast<uintptr_t>(i)));
				echoed++;
			}
		});
		std::vector<long> ns;
		ns.reserve(rounds);
		int done = 0;
		for (int i = 0; i < rounds; i++) {
			auto t0 = steady::now();
			pong->push(entry(static_cast<uintptr_t>(i)));
			struct fi_cq_entry e;
			if (fi_cq_sread(s.cq, &e, 1, nullptr, 5000) != 1)
				break;
			ns.push_back(static_cast<long>(
			    std::chrono::duration_cast<std::chrono::nanoseconds>(steady::now() - t0)
			        .count()));
			done++;
		}
		for (auto &t : s.threads)
			t.join();
		s.threads.clear();
		std::sort(ns.begin(), ns.end());
		print_message(
		    "wait_obj %d: sread ping-pong round trip over %d rounds: median %.1f us, "
		    "p99 %.1f us\n",
		    w, done, ns.empty() ? 0.0 : ns[ns.size() / 2] / 1000.0,
		    ns.empty() ? 0.0 : ns[ns.size() * 99 / 100] / 1000.0);
		assert_int_equal(done, rounds);
		assert_int_equal(echoed.load(), rounds);
		assert_int_equal(fi_close(&s.cq->fid), 0);
		s.cq = nullptr;
		assert_int_equal(fi_close(&s.cq2->fid), 0);
		s.cq2 = nullptr;
	}
}

void bad_input_warnings(void **st)
{
	state &s = st_of(st);
	struct fid_cq *cq = nullptr;
	struct fi_cq_attr a = attr_of(FI_WAIT_NONE);
	expect_warning([&] { return util::cq_open(&test_prov, nullptr, &cq, nullptr); }, -FI_EINVAL,
	               "attr is NULL");
	set_raw(a.format, 99);
	expect_warning([&] { return util::cq_open(&test_prov, &a, &cq, nullptr); }, -FI_EINVAL,
	               "attr->format 99");
	a = attr_of(FI_WAIT_NONE);
	set_raw(a.wait_obj, 77);
	expect_warning([&] { return util::cq_open(&test_prov, &a, &cq, nullptr); }, -FI_EINVAL,
	               "attr->wait_obj 77");
	a = attr_of(FI_WAIT_SET);
	expect_warning([&] { return util::cq_open(&test_prov, &a, &cq, nullptr); }, -FI_EINVAL,
	               "wait_set");
	a = attr_of(FI_WAIT_NONE);
	a.flags = 1ULL << 40;
	expect_warning([&] { return util::cq_open(&test_prov, &a, &cq, nullptr); }, -FI_EINVAL,
	               "attr->flags 0x10000000000");
	a = attr_of(FI_WAIT_FD);
	set_raw(a.wait_cond, 5);
	expect_warning([&] { return util::cq_open(&test_prov, &a, &cq, nullptr); }, -FI_EINVAL,
	               "attr->wait_cond 5");
	a = attr_of(FI_WAIT_NONE);
	a.size = util::cq_max_size + 1;
	expect_warning([&] { return util::cq_open(&test_prov, &a, &cq, nullptr); }, -FI_EINVAL,
	               "attr->size");
	assert_null(cq);

	open_cq(s, attr_of(FI_WAIT_NONE));
	expect_warning([&] { return fi_cq_read(s.cq, nullptr, 3); }, -FI_EINVAL, "count 3");
	struct fi_cq_err_entry err = {};
	expect_warning([&] { return fi_cq_readerr(s.cq, &err, FI_PEEK); }, -FI_EINVAL, "flags");
	struct fi_cq_entry out;
	expect_warning([&] { return fi_cq_sread(s.cq, &out, 1, nullptr, 0); }, -FI_EINVAL,
	               "FI_WAIT_NONE");
	expect_warning([&] { return fi_cq_signal(s.cq); }, -FI_EINVAL, "FI_WAIT_NONE");
	expect_warning([&] { return fi_control(&s.cq->fid, 12345, nullptr); }, -FI_ENOSYS, "12345");
}

/* The verbs CQ's polling lock: threads that fight over it (sleeping on the futex, woken by
 * unlock) never both hold it, and none is left asleep. */
void fast_mutex_exclusion(void **)
{
	vwait::util::fast_mutex m{vwait::lock_level::cq_progress};
	long counter = 0; /* not atomic: only the lock protects it */
	int inside = 0;
	bool overlap = false;
	constexpr int threads = 4, rounds = 50000;
	std::vector<std::thread> t;
	for (int i = 0; i < threads; i++)
		t.emplace_back([&] {
			for (int k = 0; k < rounds; k++) {
				std::lock_guard<vwait::util::fast_mutex> g(m);
				if (++inside != 1)
					overlap = true;
				counter++;
				if (k % 1000 == 0)
					std::this_thread::yield(); /* let the others find it taken
					                            */
				--inside;
			}
		});
	for (std::thread &th : t)
		th.join();
	assert_false(overlap);
	assert_int_equal(counter, long{threads} * rounds);
	assert_true(m.try_lock());
	assert_false(m.try_lock());
	m.unlock();
}

} // namespace

int main()
{
	vwait_test::init_logging();
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(format_context, setup, teardown),
	    cmocka_unit_test_setup_teardown(ring_grows_in_order, setup, teardown),
	    cmocka_unit_test_setup_teardown(format_unspec_is_context, setup, teardown),
	    cmocka_unit_test_setup_teardown(format_msg, setup, teardown),
	    cmocka_unit_test_setup_teardown(format_data, setup, teardown),
	    cmocka_unit_test_setup_teardown(format_tagged, setup, teardown),
	    cmocka_unit_test_setup_teardown(readfrom_source, setup, teardown),
	    cmocka_unit_test_setup_teardown(count_zero_and_size, setup, teardown),
	    cmocka_unit_test_setup_teardown(push_batch, setup, teardown),
	    cmocka_unit_test_setup_teardown(throughput, setup, teardown),
	    cmocka_unit_test_setup_teardown(error_in_order, setup, teardown),
	    cmocka_unit_test_setup_teardown(read_marks, setup, teardown),
	    cmocka_unit_test_setup_teardown(error_user_buffer, setup, teardown),
	    cmocka_unit_test_setup_teardown(error_old_api, setup, teardown),
	    cmocka_unit_test_setup_teardown(strerror_text, setup, teardown),
	    cmocka_unit_test_setup_teardown(bad_input, setup, teardown),
	    cmocka_unit_test_setup_teardown(bad_input_warnings, setup, teardown),
	    cmocka_unit_test_setup_teardown(close_busy, setup, teardown),
	    cmocka_unit_test_setup_teardown(each_wait_object, setup, teardown),
	    cmocka_unit_test_setup_teardown(wait_set_kinds, setup, teardown),
	    cmocka_unit_test_setup_teardown(getwait, setup, teardown),
	    cmocka_unit_test_setup_teardown(fd_readable, setup, teardown),
	    cmocka_unit_test_setup_teardown(sread_deadline_kept, setup, teardown),
	    cmocka_unit_test_setup_teardown(threshold, setup, teardown),
	    cmocka_unit_test_setup_teardown(signal_before_sread, setup, teardown),
	    cmocka_unit_test_setup_teardown(signal_wakes_all, setup, teardown),
	    cmocka_unit_test_setup_teardown(two_readers_one_entry, setup, teardown),
	    cmocka_unit_test_setup_teardown(many_threads, setup, teardown),
	    cmocka_unit_test_setup_teardown(in_poll_set, setup, teardown),
	    cmocka_unit_test_setup_teardown(trywait_wait_set, setup, teardown),
	    cmocka_unit_test_setup_teardown(subclass_hooks, setup, teardown),
	    cmocka_unit_test_setup_teardown(mixed_wait_set, setup, teardown),
	    cmocka_unit_test_setup_teardown(mixed_poll_set, setup, teardown),
	    cmocka_unit_test_setup_teardown(pingpong_latency, setup, teardown),
	    cmocka_unit_test_setup_teardown(sread_threads, setup, teardown),
	    cmocka_unit_test(fast_mutex_exclusion),
	};
	return cmocka_run_group_tests(tests, nullptr, nullptr);
}
