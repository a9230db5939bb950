/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* util::sw_eq, the software event queue: fi_eq_write / read of entries of any length, FI_PEEK,
 * CM entries cut short, error entries and the err_data rules, bad input, every wait object
 * standalone and in a wait set, sread timing, fi_eq_write ending a blocked sread, and many
 * threads writing and reading; the verbs EQ's shape (a subclass draining an fd source), with
 * every wait object, fi_trywait + poll() on its fd, and the queue bound. */
#include "vwait/fi_deprecated.h"
#include "vwait/util/eq.h"
#include "vwait/util/trywait.h"
#include "vwait/util/wait.h"

#include <rdma/fi_cm.h>
#include <rdma/fi_errno.h>

#include "test_util_common.h"
#include "vwait_cmocka.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace
{

using namespace vwait;
using steady = std::chrono::steady_clock;

using namespace vwait_test::fixture;

util::sw_eq *open_eq(state &s, enum fi_wait_obj w, size_t size = 0)
{
	struct fi_eq_attr a = {};
	a.size = size;
	a.flags = FI_WRITE;
	a.wait_obj = w;
	if (w == FI_WAIT_SET) {
		struct fi_wait_attr wa = {};
		wa.wait_obj = FI_WAIT_FD;
		assert_int_equal(util::wait_open(&test_prov, &wa, &s.set), 0);
		a.wait_set = s.set;
	}
	assert_int_equal(util::eq_open(&test_prov, &a, &s.eq, &s), 0);
	util::sw_eq *q = util::object_of<util::sw_eq>(&s.eq->fid);
	assert_non_null(q);
	return q;
}

void close_eq(state &s)
{
	for (auto &t : s.threads)
		t.join();
	s.threads.clear();
	assert_int_equal(fi_close(&s.eq->fid), 0);
	s.eq = nullptr;
	if (s.set) {
		assert_int_equal(fi_close(&s.set->fid), 0);
		s.set = nullptr;
	}
}

struct fi_eq_entry notify_entry(uint64_t data)
{
	struct fi_eq_entry e = {};
	e.fid = nullptr;
	e.context = reinterpret_cast<void *>(0x55);
	e.data = data;
	return e;
}

void write_read(void **st)
{
	state &s = st_of(st);
	open_eq(s, FI_WAIT_NONE);
	struct fi_eq_entry in = notify_entry(7);
	assert_int_equal(fi_eq_write(s.eq, FI_NOTIFY, &in, sizeof(in), 0), sizeof(in));
	in.data = 8;
	assert_int_equal(fi_eq_write(s.eq, FI_MR_COMPLETE, &in, sizeof(in), 0), sizeof(in));
	uint32_t event = 99;
	struct fi_eq_entry out = {};
	assert_int_equal(fi_eq_read(s.eq, &event, &out, sizeof(out), 0), sizeof(out));
	assert_int_equal(event, FI_NOTIFY);
	assert_int_equal(out.data, 7);
	assert_ptr_equal(out.context, reinterpret_cast<void *>(0x55));
	assert_int_equal(fi_eq_read(s.eq, &event, &out, sizeof(out), 0), sizeof(out));
	assert_int_equal(event, FI_MR_COMPLETE);
	assert_int_equal(out.data, 8);
	assert_int_equal(fi_eq_read(s.eq, &event, &out, sizeof(out), 0), -FI_EAGAIN);
}

/* Any length from 1 byte to the maximum goes through unchanged. */
void any_length(void **st)
{
	state &s = st_of(st);
	open_eq(s, FI_WAIT_NONE);
	std::vector<uint8_t> in(util::eq_max_entry_size), out(util::eq_max_entry_size);
	for (size_t i = 0; i < in.size(); i++)
		in[i] = static_cast<uint8_t>(i * 7 + 3);
	for (size_t len : {size_t{1}, size_t{3}, sizeof(struct fi_eq_entry), size_t{1000},
	                   util::eq_max_entry_size}) {
		assert_int_equal(fi_eq_write(s.eq, 1000 + len, in.data(), len, 0), len);
		uint32_t event = 0;
		std::fill(out.begin(), out.end(), 0);
		assert_int_equal(fi_eq_read(s.eq, &event, out.data(), out.size(), 0), len);
		assert_int_equal(event, 1000 + len);
		assert_memory_equal(out.data(), in.data(), len);
	}
	assert_int_equal(fi_eq_write(s.eq, 1, in.data(), util::eq_max_entry_size + 1, 0),
	                 -FI_EINVAL);
}

void peek(void **st)
{
	state &s = st_of(st);
	open_eq(s, FI_WAIT_NONE);
	struct fi_eq_entry in = notify_entry(1);
	assert_int_equal(fi_eq_write(s.eq, FI_NOTIFY, &in, sizeof(in), 0), sizeof(in));
	in.data = 2;
	assert_int_equal(fi_eq_write(s.eq, FI_NOTIFY, &in, sizeof(in), 0), sizeof(in));
	uint32_t event;
	struct fi_eq_entry out = {};
	for (int i = 0; i < 3; i++) {
		assert_int_equal(fi_eq_read(s.eq, &event, &out, sizeof(out), FI_PEEK), sizeof(out));
		assert_int_equal(out.data, 1);
	}
	assert_int_equal(fi_eq_read(s.eq, &event, &out, sizeof(out), 0), sizeof(out));
	assert_int_equal(out.data, 1);
	assert_int_equal(fi_eq_read(s.eq, &event, &out, sizeof(out), 0), sizeof(out));
	assert_int_equal(out.data, 2);
}

/* A buffer too small: -FI_ETOOSMALL and the entry stays; CM events may be cut to the room
 * the reader gives, down to the fi_eq_cm_entry header. */
void too_small_and_cm(void **st)
{
	state &s = st_of(st);
	util::sw_eq *q = open_eq(s, FI_WAIT_NONE);
	struct fi_eq_entry in = notify_entry(3);
	assert_int_equal(fi_eq_write(s.eq, FI_NOTIFY, &in, sizeof(in), 0), sizeof(in));
	uint32_t event;
	uint8_t small[8];
	assert_int_equal(fi_eq_read(s.eq, &event, small, sizeof(small), 0), -FI_ETOOSMALL);
	struct fi_eq_entry out;
	assert_int_equal(fi_eq_read(s.eq, &event, &out, sizeof(out), 0), sizeof(out));

	constexpr size_t data_len = 56;
	std::vector<uint8_t> cm(sizeof(struct fi_eq_cm_entry) + data_len);
	for (size_t i = 0; i < data_len; i++)
		cm[sizeof(struct fi_eq_cm_entry) + i] = static_cast<uint8_t>(i);
	assert_int_equal(q->push(FI_CONNREQ, cm.data(), cm.size()), 0);
	std::vector<uint8_t> room(sizeof(struct fi_eq_cm_entry) + 16);
	assert_int_equal(fi_eq_read(s.eq, &event, room.data(), room.size(), 0), room.size());
	assert_int_equal(event, FI_CONNREQ);
	assert_int_equal(room[sizeof(struct fi_eq_cm_entry) + 15], 15);
	assert_int_equal(q->push(FI_CONNECTED, cm.data(), cm.size()), 0);
	assert_int_equal(fi_eq_read(s.eq, &event, small, sizeof(small), 0), -FI_ETOOSMALL);
}

struct fi_eq_err_entry error_entry(int err)
{
	struct fi_eq_err_entry e = {};
	e.context = reinterpret_cast<void *>(0x77);
	e.data = 9;
	e.err = err;
	e.prov_errno = -err;
	return e;
}

void errors(void **st)
{
	state &s = st_of(st);
	util::sw_eq *q = open_eq(s, FI_WAIT_NONE);
	const char payload[] = "rejected by peer";
	struct fi_eq_entry in = notify_entry(1);
	assert_int_equal(fi_eq_write(s.eq, FI_NOTIFY, &in, sizeof(in), 0), sizeof(in));
	assert_int_equal(q->push_error(error_entry(FI_ECONNREFUSED), payload, sizeof(payload)), 0);
	assert_int_equal(q->push_error(error_entry(FI_ETIMEDOUT), payload, sizeof(payload)), 0);
	assert_int_equal(q->push_error(error_entry(FI_EIO), payload, sizeof(payload)), 0);

	uint32_t event;
	struct fi_eq_entry out;
	struct fi_eq_err_entry err = {};
	assert_int_equal(fi_eq_readerr(s.eq, &err, 0), -FI_EAGAIN); /* not at the head */
	assert_int_equal(fi_eq_read(s.eq, &event, &out, sizeof(out), 0), sizeof(out));
	assert_int_equal(fi_eq_read(s.eq, &event, &out, sizeof(out), 0), -FI_EAVAIL);
	assert_int_equal(fi_eq_read(s.eq, &event, &out, sizeof(out), FI_PEEK), -FI_EAVAIL);

	/* provider buffer */
	assert_int_equal(fi_eq_readerr(s.eq, &err, 0), sizeof(err));
	assert_int_equal(err.err, FI_ECONNREFUSED);
	assert_ptr_equal(err.context, reinterpret_cast<void *>(0x77));
	assert_int_equal(err.data, 9);
	assert_int_equal(err.err_data_size, sizeof(payload));
	assert_memory_equal(err.err_data, payload, sizeof(payload));

	/* the application's buffer, and FI_PEEK leaves the entry */
	char mine[8];
	err = {};
	err.err_data = mine;
	err.err_data_size = sizeof(mine);
	assert_int_equal(fi_eq_readerr(s.eq, &err, FI_PEEK), sizeof(err));
	assert_int_equal(err.err, FI_ETIMEDOUT);
	assert_ptr_equal(err.err_data, mine);
	assert_int_equal(err.err_data_size, sizeof(mine));
	assert_memory_equal(mine, payload, sizeof(mine));
	err = {};
	assert_int_equal(fi_eq_readerr(s.eq, &err, 0), sizeof(err));
	assert_int_equal(err.err, FI_ETIMEDOUT);
	/* a size without a buffer: the provider's buffer, not a write through NULL */
	err = {};
	err.err_data_size = sizeof(mine);
	assert_int_equal(fi_eq_readerr(s.eq, &err, 0), sizeof(err));
	assert_int_equal(err.err, FI_EIO);
	assert_non_null(err.err_data);
	assert_int_equal(err.err_data_size, sizeof(payload));
	assert_memory_equal(err.err_data, payload, sizeof(payload));
	assert_int_equal(fi_close(&s.eq->fid), 0);
	s.eq = nullptr;

	/* an API older than 1.5: always the provider's buffer */
	struct fi_eq_attr a = {};
	assert_int_equal(util::eq_open(&test_prov, &a, &s.eq, nullptr, FI_VERSION(1, 4)), 0);
	q = util::object_of<util::sw_eq>(&s.eq->fid);
	assert_int_equal(q->push_error(error_entry(FI_EIO), payload, sizeof(payload)), 0);
	err = {};
	err.err_data = mine;
	err.err_data_size = sizeof(mine);
	assert_int_equal(fi_eq_readerr(s.eq, &err, 0), sizeof(err));
	assert_ptr_not_equal(err.err_data, mine);
	assert_int_equal(err.err_data_size, sizeof(payload));
	char buf[64];
	assert_ptr_equal(fi_eq_strerror(s.eq, 5, nullptr, buf, sizeof(buf)), buf);
	assert_true(strlen(buf) > 0);
}

void bad_input(void **st)
{
	state &s = st_of(st);
	struct fid_eq *eq = nullptr;
	assert_int_equal(util::eq_open(&test_prov, nullptr, &eq, nullptr), -FI_EINVAL);
	struct fi_eq_attr a = {};
	assert_int_equal(util::eq_open(&test_prov, &a, nullptr, nullptr), -FI_EINVAL);
	a.flags = FI_PEEK;
	assert_int_equal(util::eq_open(&test_prov, &a, &eq, nullptr), -FI_EINVAL);
	a = {};
	set_raw(a.wait_obj, 9);
	assert_int_equal(util::eq_open(&test_prov, &a, &eq, nullptr), -FI_EINVAL);
	a = {};
	a.size = util::eq_max_size + 1;
	assert_int_equal(util::eq_open(&test_prov, &a, &eq, nullptr), -FI_EINVAL);
	assert_null(eq);

	util::sw_eq *q = open_eq(s, FI_WAIT_NONE, 2);
	struct fi_eq_entry in = notify_entry(1);
	uint32_t event;
	struct fi_eq_entry out;
	assert_int_equal(fi_eq_write(s.eq, FI_NOTIFY, nullptr, 8, 0), -FI_EINVAL);
	assert_int_equal(fi_eq_write(s.eq, FI_NOTIFY, &in, 0, 0), -FI_EINVAL);
	assert_int_equal(fi_eq_write(s.eq, FI_NOTIFY, &in, sizeof(in), FI_PEEK), -FI_EINVAL);
	assert_int_equal(fi_eq_read(s.eq, nullptr, &out, sizeof(out), 0), -FI_EINVAL);
	assert_int_equal(fi_eq_read(s.eq, &event, nullptr, sizeof(out), 0), -FI_EINVAL);
	assert_int_equal(fi_eq_read(s.eq, &event, &out, sizeof(out), FI_SEND), -FI_EINVAL);
	assert_int_equal(fi_eq_readerr(s.eq, nullptr, 0), -FI_EINVAL);
	assert_int_equal(fi_eq_sread(s.eq, &event, &out, sizeof(out), 0, 0), -FI_EINVAL);
	/* size 2: the third entry does not fit */
	assert_int_equal(fi_eq_write(s.eq, FI_NOTIFY, &in, sizeof(in), 0), sizeof(in));
	assert_int_equal(q->push(FI_NOTIFY, &in, sizeof(in)), 0);
	assert_int_equal(fi_eq_write(s.eq, FI_NOTIFY, &in, sizeof(in), 0), -FI_EAGAIN);
	assert_int_equal(fi_control(&s.eq->fid, 999, nullptr), -FI_ENOSYS);
	q->hold();
	assert_int_equal(fi_close(&s.eq->fid), -FI_EBUSY);
	q->unhold();
}

/* For each wait object: a timed-out sread (at its deadline, never before), a write from
 * another thread ending an infinite sread (after the write, within bound_ms(0) of it), and
 * sread(-1, FI_PEEK) which leaves the entry queued. */
void each_wait_object(void **st)
{
	state &s = st_of(st);
	for (enum fi_wait_obj w : {FI_WAIT_UNSPEC, FI_WAIT_FD, FI_WAIT_POLLFD, FI_WAIT_MUTEX_COND,
	                           FI_WAIT_YIELD, FI_WAIT_SET}) {
		const util::waiter *waiter = open_eq(s, w)->wait_object();
		uint32_t event;
		struct fi_eq_entry out;
		auto t0 = steady::now();
		assert_int_equal(fi_eq_sread(s.eq, &event, &out, sizeof(out), 200, 0), -FI_EAGAIN);
		long ms = ms_since(t0);
		print_message("wait_obj %d: eq_sread(200 ms) timed out after %ld ms\n", w, ms);
		assert_true(ms >= 200 && ms < bound_ms(200));

		for (uint64_t flags : {uint64_t{0}, uint64_t{FI_PEEK}}) {
			event_time written;
			const util::wake_counts c0 = waiter->counts();
			s.threads.emplace_back([&s, waiter, c0, &written] {
				let_it_sleep(waiter, c0);
				struct fi_eq_entry in = notify_entry(5);
				written.mark();
				fi_eq_write(s.eq, FI_NOTIFY, &in, sizeof(in), 0);
			});
			assert_int_equal(fi_eq_sread(s.eq, &event, &out, sizeof(out), -1, flags),
			                 sizeof(out));
			ms = written.ms_since_mark();
			print_message(
			    "wait_obj %d: fi_eq_write ended sread(-1, 0x%llx) %ld ms after it\n", w,
			    static_cast<unsigned long long>(flags), ms);
			assert_true(ms >= 0 && ms < bound_ms(0));
			assert_int_equal(out.data, 5);
			s.threads.back().join();
			s.threads.clear();
		}
		/* the peeked entry is still there */
		assert_int_equal(fi_eq_read(s.eq, &event, &out, sizeof(out), 0), sizeof(out));
		assert_int_equal(fi_eq_read(s.eq, &event, &out, sizeof(out), 0), -FI_EAGAIN);
		close_eq(s);
	}
}

/* A longer deadline than each_wait_object's, FI_PEEK too: -FI_EAGAIN at it, never before,
 * and the waiter counts the timeout that ended it. 300 ms: not early is exact at any length. */
void sread_deadline(void **st)
{
	state &s = st_of(st);
	const util::waiter *w = open_eq(s, FI_WAIT_FD)->wait_object();
	uint32_t event;
	struct fi_eq_entry out;
	constexpr long deadline = 300;
	for (uint64_t flags : {uint64_t{0}, uint64_t{FI_PEEK}}) {
		const util::wake_counts c0 = w->counts();
		auto t0 = steady::now();
		assert_int_equal(fi_eq_sread(s.eq, &event, &out, sizeof(out), deadline, flags),
		                 -FI_EAGAIN);
		long ms = ms_since(t0);
		print_message("eq_sread(%ld ms, 0x%llx): -FI_EAGAIN after %ld ms\n", deadline,
		              static_cast<unsigned long long>(flags), ms);
		assert_true(ms >= deadline && ms < bound_ms(deadline));
		assert_true(w->counts().since(c0).timeouts >= 1);
	}
}

void getwait_trywait(void **st)
{
	state &s = st_of(st);
	open_eq(s, FI_WAIT_FD);
	int fd = -1;
	assert_int_equal(fi_control(&s.eq->fid, FI_GETWAIT, &fd), 0);
	assert_true(fd >= 0);
	enum fi_wait_obj obj;
	assert_int_equal(fi_control(&s.eq->fid, FI_GETWAITOBJ, &obj), 0);
	assert_int_equal(obj, FI_WAIT_FD);
	struct fid *fids[1] = {&s.eq->fid};
	assert_int_equal(util::trywait(&test_prov, fids, 1), 0);
	struct fi_eq_entry in = notify_entry(1);
	assert_int_equal(fi_eq_write(s.eq, FI_NOTIFY, &in, sizeof(in), 0), sizeof(in));
	assert_int_equal(util::trywait(&test_prov, fids, 1), -FI_EAGAIN);
	close_eq(s);

	open_eq(s, FI_WAIT_SET);
	assert_int_equal(fi_control(&s.eq->fid, FI_GETWAITOBJ, &obj), 0);
	assert_int_equal(obj, FI_WAIT_FD); /* the set's */
	struct fid *both[2] = {&s.eq->fid, &s.set->fid};
	assert_int_equal(util::trywait(&test_prov, both, 2), 0);
	util::waiter *w = nullptr;
	assert_int_equal(util::get_waiter(&s.set->fid, &w), 0);
	event_time written;
	const util::wake_counts c0 = w->counts();
	s.threads.emplace_back([&s, w, c0, &written] {
		let_it_sleep(w, c0);
		struct fi_eq_entry e = notify_entry(2);
		written.mark();
		fi_eq_write(s.eq, FI_NOTIFY, &e, sizeof(e), 0);
	});
	/* a deadline past the bound: 0 within the bound of the write, it was the write */
	assert_int_equal(fi_sets::wait(s.set, 2 * bound_ms(0)), 0);
	const long ms = written.ms_since_mark();
	assert_true(ms >= 0 && ms < bound_ms(0));
	close_eq(s);
}

/* 4 writers x 25000 entries, 2 readers with sread: every entry read exactly once. */
void many_threads(void **st)
{
	state &s = st_of(st);
	open_eq(s, FI_WAIT_FD, 512);
	constexpr uint64_t writers = 4, per_writer = 25000, total = writers * per_writer;
	std::vector<std::atomic<int>> seen(total);
	std::atomic<uint64_t> consumed{0};
	std::atomic<long> bad{0};
	auto t0 = steady::now();
	for (uint64_t w = 0; w < writers; w++)
		s.threads.emplace_back([&s, w] {
			for (uint64_t i = 0; i < per_writer; i++) {
				struct fi_eq_entry e = notify_entry(w * per_writer + i);
				while (fi_eq_write(s.eq, FI_NOTIFY, &e, sizeof(e), 0) == -FI_EAGAIN)
					std::this_thread::yield();
			}
		});
	for (int r = 0; r < 2; r++)
		s.threads.emplace_back([&] {
			while (consumed.load() < total) {
				uint32_t event;
				struct fi_eq_entry e;
				ssize_t n = fi_eq_sread(s.eq, &event, &e, sizeof(e), 100, 0);
				if (n == -FI_EAGAIN)
					continue;
				if (n != sizeof(e) || e.data >= total ||
				    seen[e.data].fetch_add(1) != 0) {
					bad++;
					return;
				}
				consumed++;
			}
		});
	for (auto &t : s.threads)
		t.join();
	s.threads.clear();
	print_message("%lu EQ entries, 4 writers, 2 sread readers: %ld ms\n",
	              static_cast<unsigned long>(total), ms_since(t0));
	assert_int_equal(bad.load(), 0);
	assert_int_equal(consumed.load(), total);
	for (uint64_t i = 0; i < total; i++)
		if (seen[i].load() != 1)
			fail_msg("entry %lu seen %d times", static_cast<unsigned long>(i),
			         seen[i].load());
}

/* The verbs EQ's shape: progress() drains a source into the queue (here a backlog standing in
 * for the rdma_cm channel), discard() releases what unread entries own at close. */
class fed_eq : public util::sw_eq
{
public:
	fed_eq(const struct fi_eq_attr &a, std::atomic<int> *discarded)
	    : util::sw_eq(&test_prov, a, FI_VERSION(1, 17)), discarded_(discarded)
	{
	}
	std::atomic<int> backlog{0};

protected:
	void progress() noexcept override
	{
		while (backlog.load() > 0) {
			struct fi_eq_cm_entry cm = {};
			if (push(FI_CONNECTED, &cm, sizeof(cm)) != 0)
				break;
			backlog--;
		}
	}
	void discard(uint32_t event, const void *, size_t len) noexcept override
	{
		if (event == FI_CONNECTED && len == sizeof(struct fi_eq_cm_entry))
			(*discarded_)++;
	}

private:
	std::atomic<int> *discarded_;
};

void subclass_hooks(void **st)
{
	state &s = st_of(st);
	std::atomic<int> discarded{0};
	struct fi_eq_attr a = {};
	a.wait_obj = FI_WAIT_FD;
	auto obj = std::make_unique<fed_eq>(a, &discarded);
	fed_eq *q = obj.get();
	assert_int_equal(util::eq_install(std::move(obj), &s.eq, nullptr), 0);
	struct fid *fids[1] = {&s.eq->fid};
	q->backlog = 1;
	assert_int_equal(util::trywait(&test_prov, fids, 1), -FI_EAGAIN); /* progress found it */
	uint32_t event = 0;
	struct fi_eq_cm_entry cm;
	assert_int_equal(fi_eq_read(s.eq, &event, &cm, sizeof(cm), 0), sizeof(cm));
	assert_int_equal(event, FI_CONNECTED);
	q->backlog = 1;
	assert_int_equal(fi_eq_sread(s.eq, &event, &cm, sizeof(cm), 1000, 0), sizeof(cm));
	q->backlog = 3;
	assert_int_equal(fi_eq_read(s.eq, &event, &cm, sizeof(cm), FI_PEEK), sizeof(cm));
	/* what fi_eq_write queued belongs to the application: never handed to discard() */
	cm = {};
	cm.info = reinterpret_cast<struct fi_info *>(0x1); /* not a provider's */
	assert_int_equal(fi_eq_write(s.eq, FI_CONNECTED, &cm, sizeof(cm), 0), sizeof(cm));
	assert_int_equal(fi_close(&s.eq->fid), 0);
	s.eq = nullptr;
	assert_int_equal(discarded.load(), 3);
}

/* An endpoint closing takes its queued entries with it (FI_SHUTDOWN queued by a progress
 * thread before the endpoint was closed must not name a closed fid); other fids' entries,
 * errors naming another fid and fi_eq_write's entries stay, in order. */
void remove_fid_events(void **st)
{
	state &s = st_of(st);
	util::sw_eq *q = open_eq(s, FI_WAIT_FD);
	struct fid closing = {}, other = {};
	struct fi_eq_cm_entry a = {}, b = {};
	a.fid = &closing;
	b.fid = &other;
	struct fi_eq_err_entry ea = error_entry(FI_ECONNRESET), eb = error_entry(FI_EIO);
	ea.fid = &closing;
	eb.fid = &other;
	struct fi_eq_entry in = notify_entry(5);
	in.fid = &closing; /* written by the application: its own, never removed */
	assert_int_equal(q->push(FI_CONNECTED, &a, sizeof(a)), 0);
	assert_int_equal(q->push(FI_CONNECTED, &b, sizeof(b)), 0);
	assert_int_equal(q->push(FI_SHUTDOWN, &a, sizeof(a)), 0);
	assert_int_equal(fi_eq_write(s.eq, FI_NOTIFY, &in, sizeof(in), 0), sizeof(in));
	assert_int_equal(q->push_error(ea, nullptr, 0), 0);
	assert_int_equal(q->push_error(eb, nullptr, 0), 0);
	q->remove_fid_events(&closing);
	q->remove_fid_events(nullptr);
	assert_int_equal(q->queued(), 3);
	uint32_t event;
	union {
		struct fi_eq_cm_entry cm;
		struct fi_eq_entry e;
	} out;
	assert_int_equal(fi_eq_read(s.eq, &event, &out, sizeof(out), 0), sizeof(out.cm));
	assert_int_equal(event, FI_CONNECTED);
	assert_ptr_equal(out.cm.fid, &other);
	assert_int_equal(fi_eq_read(s.eq, &event, &out, sizeof(out), 0), sizeof(out.e));
	assert_int_equal(event, FI_NOTIFY);
	assert_int_equal(fi_eq_read(s.eq, &event, &out, sizeof(out), 0), -FI_EAVAIL);
	struct fi_eq_err_entry err = {};
	assert_int_equal(fi_eq_readerr(s.eq, &err, 0), sizeof(err));
	assert_ptr_equal(err.fid, &other);
	assert_int_equal(fi_eq_read(s.eq, &event, &out, sizeof(out), 0), -FI_EAGAIN);
}

/* A full EQ refuses fi_eq_write and push(); push(over_size) still queues (an event already
 * taken from the source below), and room() says 0 until the reader makes some. */
void over_size(void **st)
{
	state &s = st_of(st);
	util::sw_eq *q = open_eq(s, FI_WAIT_FD, 2);
	struct fi_eq_entry in = notify_entry(1);
	assert_int_equal(q->room(), 2);
	assert_int_equal(fi_eq_write(s.eq, FI_NOTIFY, &in, sizeof(in), 0), sizeof(in));
	assert_int_equal(fi_eq_write(s.eq, FI_NOTIFY, &in, sizeof(in), 0), sizeof(in));
	assert_int_equal(q->room(), 0);
	assert_int_equal(fi_eq_write(s.eq, FI_NOTIFY, &in, sizeof(in), 0), -FI_EAGAIN);
	struct fi_eq_cm_entry cm = {};
	assert_int_equal(q->push(FI_SHUTDOWN, &cm, sizeof(cm)), -FI_EAGAIN);
	assert_int_equal(q->push(FI_SHUTDOWN, &cm, sizeof(cm), true), 0);
	assert_int_equal(q->push_error(error_entry(FI_EIO), nullptr, 0), -FI_EAGAIN);
	assert_int_equal(q->push_error(error_entry(FI_EIO), nullptr, 0, true), 0);
	assert_int_equal(q->queued(), 4);
	assert_int_equal(q->room(), 0);
	uint32_t event;
	struct fi_eq_entry out;
	for (int i = 0; i < 2; i++)
		assert_int_equal(fi_eq_read(s.eq, &event, &out, sizeof(out), 0), sizeof(out));
	assert_int_equal(fi_eq_read(s.eq, &event, &cm, sizeof(cm), 0), sizeof(cm));
	assert_int_equal(event, FI_SHUTDOWN);
	assert_int_equal(q->room(), 1);
	struct fi_eq_err_entry err = {};
	assert_int_equal(fi_eq_readerr(s.eq, &err, 0), sizeof(err));
	assert_int_equal(q->room(), 2);
}

/* The verbs EQ's fd source: an eventfd stands in for the rdma_cm channel; each count read
 * from it becomes an FI_CONNECTED entry, in progress(), called by the waiter when it polls
 * readable. */
class channel_eq : public util::sw_eq
{
public:
	channel_eq(const struct fi_eq_attr &a, int fd)
	    : util::sw_eq(&test_prov, a, FI_VERSION(1, 17)), fd_(fd)
	{
	}
	int start() noexcept { return watch(fd_); }

protected:
	void progress() noexcept override
	{
		uint64_t n = 0;
		if (::read(fd_, &n, sizeof(n)) != sizeof(n))
			return;
		for (uint64_t i = 0; i < n; i++) {
			struct fi_eq_cm_entry cm = {};
			push(FI_CONNECTED, &cm, sizeof(cm));
		}
	}

private:
	int fd_;
};

void fd_source(void **st)
{
	state &s = st_of(st);
	for (enum fi_wait_obj w :
	     {FI_WAIT_FD, FI_WAIT_POLLFD, FI_WAIT_MUTEX_COND, FI_WAIT_YIELD, FI_WAIT_SET}) {
		int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		assert_true(efd >= 0);
		struct fi_eq_attr a = {};
		a.wait_obj = w;
		if (w == FI_WAIT_SET) {
			struct fi_wait_attr wa = {};
			wa.wait_obj = FI_WAIT_FD;
			assert_int_equal(util::wait_open(&test_prov, &wa, &s.set), 0);
			a.wait_set = s.set;
		}
		auto obj = std::make_unique<channel_eq>(a, efd);
		channel_eq *q = obj.get();
		assert_int_equal(util::eq_install(std::move(obj), &s.eq, nullptr), 0);
		assert_int_equal(q->start(), 0);
		assert_int_equal(q->start(), -FI_EALREADY);

		/* an event on the channel ends a blocked sread, after the event and within
		 * bound_ms(0) of it (a deadline past the bound: only the event ends it sooner) */
		const util::waiter *waiter = q->wait_object();
		event_time fired;
		util::wake_counts c0 = waiter->counts();
		s.threads.emplace_back([efd, waiter, c0, &fired] {
			let_it_sleep(waiter, c0);
			uint64_t one = 1;
			fired.mark();
			if (::write(efd, &one, sizeof(one)) != sizeof(one))
				abort();
		});
		uint32_t event = 0;
		struct fi_eq_cm_entry cm;
		assert_int_equal(fi_eq_sread(s.eq, &event, &cm, sizeof(cm), 2 * bound_ms(0), 0),
		                 sizeof(cm));
		long ms = fired.ms_since_mark();
		print_message("wait_obj %d: a channel event ended eq_sread %ld ms after it\n", w,
		              ms);
		assert_true(ms >= 0 && ms < bound_ms(0));
		assert_int_equal(event, FI_CONNECTED);
		s.threads.back().join();
		s.threads.clear();

		/* fi_trywait covers the channel: an event pending there means -FI_EAGAIN */
		struct fid *fids[2] = {&s.eq->fid, s.set ? &s.set->fid : nullptr};
		int nfids = s.set ? 2 : 1;
		assert_int_equal(util::trywait(&test_prov, fids, nfids), 0);
		uint64_t two = 2;
		assert_int_equal(::write(efd, &two, sizeof(two)), sizeof(two));
		assert_int_equal(util::trywait(&test_prov, fids, nfids), -FI_EAGAIN);
		assert_int_equal(fi_eq_read(s.eq, &event, &cm, sizeof(cm), 0), sizeof(cm));
		assert_int_equal(fi_eq_read(s.eq, &event, &cm, sizeof(cm), 0), sizeof(cm));

		/* fi_eq_write ends an sread(-1, FI_PEEK) while the channel is watched */
		event_time written;
		c0 = waiter->counts();
		s.threads.emplace_back([&s, waiter, c0, &written] {
			let_it_sleep(waiter, c0);
			struct fi_eq_entry in = notify_entry(7);
			written.mark();
			fi_eq_write(s.eq, FI_NOTIFY, &in, sizeof(in), 0);
		});
		struct fi_eq_entry note;
		assert_int_equal(fi_eq_sread(s.eq, &event, &note, sizeof(note), -1, FI_PEEK),
		                 sizeof(note));
		ms = written.ms_since_mark();
		assert_true(ms >= 0 && ms < bound_ms(0));
		s.threads.back().join();
		s.threads.clear();
		assert_int_equal(fi_eq_read(s.eq, &event, &note, sizeof(note), 0), sizeof(note));
		assert_int_equal(note.data, 7);
		close_eq(s);
		close(efd);
	}
}

/* The fi_poll(3) loop on the EQ's own fd (FI_WAIT_FD: the epoll fd; FI_WAIT_POLLFD: the
 * pollfd array): fi_trywait, then an event on the channel, then poll() -- the event that
 * came between them wakes poll(); once drained, trywait says block again. */
void trywait_then_poll(void **st)
{
	state &s = st_of(st);
	for (enum fi_wait_obj w : {FI_WAIT_FD, FI_WAIT_POLLFD}) {
		int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		assert_true(efd >= 0);
		struct fi_eq_attr a = {};
		a.wait_obj = w;
		auto obj = std::make_unique<channel_eq>(a, efd);
		channel_eq *q = obj.get();
		assert_int_equal(util::eq_install(std::move(obj), &s.eq, nullptr), 0);
		assert_int_equal(q->start(), 0);
		std::vector<struct pollfd> fds;
		if (w == FI_WAIT_FD) {
			int fd = -1;
			assert_int_equal(fi_control(&s.eq->fid, FI_GETWAIT, &fd), 0);
			fds.push_back({fd, POLLIN, 0});
		} else {
			struct fi_wait_pollfd pfd = {};
			assert_int_equal(fi_control(&s.eq->fid, FI_GETWAIT, &pfd), -FI_ETOOSMALL);
			fds.resize(pfd.nfds);
			pfd.fd = fds.data();
			assert_int_equal(fi_control(&s.eq->fid, FI_GETWAIT, &pfd), 0);
			fds.resize(pfd.nfds);
			assert_true(fds.size() >= 2); /* its signal and the channel */
		}
		struct fid *fids[1] = {&s.eq->fid};
		for (int round = 0; round < 3; round++) {
			assert_int_equal(util::trywait(&test_prov, fids, 1), 0);
			for (auto &p : fds)
				p.revents = 0;
			assert_int_equal(poll(fds.data(), fds.size(), 0), 0);
			uint64_t one = 1;
			assert_int_equal(::write(efd, &one, sizeof(one)), sizeof(one));
			/* the event is there already: 2 s is only how long a miss hangs */
			assert_true(poll(fds.data(), fds.size(), 2000) > 0);
			uint32_t event = 0;
			struct fi_eq_cm_entry cm;
			assert_int_equal(fi_eq_read(s.eq, &event, &cm, sizeof(cm), 0), sizeof(cm));
			assert_int_equal(event, FI_CONNECTED);
		}
		close_eq(s);
		close(efd);
	}
}

void bad_input_warnings(void **st)
{
	state &s = st_of(st);
	struct fid_eq *eq = nullptr;
	struct fi_eq_attr a = {};
	expect_warning([&] { return util::eq_open(&test_prov, nullptr, &eq, nullptr); }, -FI_EINVAL,
	               "attr is NULL");
	a.flags = FI_PEEK;
	expect_warning([&] { return util::eq_open(&test_prov, &a, &eq, nullptr); }, -FI_EINVAL,
	               "attr->flags 0x80000");
	a = {};
	set_raw(a.wait_obj, 9);
	expect_warning([&] { return util::eq_open(&test_prov, &a, &eq, nullptr); }, -FI_EINVAL,
	               "attr->wait_obj 9");
	a = {};
	a.size = util::eq_max_size + 1;
	expect_warning([&] { return util::eq_open(&test_prov, &a, &eq, nullptr); }, -FI_EINVAL,
	               "attr->size");
	assert_null(eq);
	open_eq(s, FI_WAIT_NONE);
	struct fi_eq_entry in = notify_entry(1);
	uint32_t event;
	expect_warning([&] { return fi_eq_write(s.eq, FI_NOTIFY, &in, sizeof(in), FI_SEND); },
	               -FI_EINVAL, "flags 0x");
	expect_warning([&] { return fi_eq_write(s.eq, FI_NOTIFY, &in, 5000, 0); }, -FI_EINVAL,
	               "len 5000");
	expect_warning([&] { return fi_eq_read(s.eq, nullptr, &in, sizeof(in), 0); }, -FI_EINVAL,
	               "event is NULL");
	expect_warning([&] { return fi_eq_sread(s.eq, &event, &in, sizeof(in), 0, 0); }, -FI_EINVAL,
	               "FI_WAIT_NONE");
	assert_int_equal(fi_eq_write(s.eq, FI_NOTIFY, &in, sizeof(in), 0), sizeof(in));
	char small[4];
	expect_warning([&] { return fi_eq_read(s.eq, &event, small, sizeof(small), 0); },
	               -FI_ETOOSMALL, "len 4");
}

} // namespace

int main()
{
	vwait_test::init_logging();
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(write_read, setup, teardown),
	    cmocka_unit_test_setup_teardown(any_length, setup, teardown),
	    cmocka_unit_test_setup_teardown(peek, setup, teardown),
	    cmocka_unit_test_setup_teardown(too_small_and_cm, setup, teardown),
	    cmocka_unit_test_setup_teardown(errors, setup, teardown),
	    cmocka_unit_test_setup_teardown(remove_fid_events, setup, teardown),
	    cmocka_unit_test_setup_teardown(bad_input, setup, teardown),
	    cmocka_unit_test_setup_teardown(bad_input_warnings, setup, teardown),
	    cmocka_unit_test_setup_teardown(each_wait_object, setup, teardown),
	    cmocka_unit_test_setup_teardown(sread_deadline, setup, teardown),
	    cmocka_unit_test_setup_teardown(getwait_trywait, setup, teardown),
	    cmocka_unit_test_setup_teardown(many_threads, setup, teardown),
	    cmocka_unit_test_setup_teardown(subclass_hooks, setup, teardown),
	    cmocka_unit_test_setup_teardown(fd_source, setup, teardown),
	    cmocka_unit_test_setup_teardown(over_size, setup, teardown),
	    cmocka_unit_test_setup_teardown(trywait_then_poll, setup, teardown),
	};
	return cmocka_run_group_tests(tests, nullptr, nullptr);
}
