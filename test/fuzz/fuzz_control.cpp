/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* libFuzzer target: fi_control (and its neighbours fi_trywait, fi_poll_add / fi_poll_del,
 * fi_wait) on the util layer's fids. Each input opens CQs, counters, EQs with wait objects it
 * picks (every FI_WAIT_* kind, FI_WAIT_SET on a wait set of any kind, out-of-range values),
 * wait sets, a poll set, and two foreign fids (one whose control answers -FI_ENOSYS, one
 * without ops), then runs a sequence of calls with any command (libfabric's, vwait's private
 * ctl_get_waitable / ctl_get_waiter, any int) and any argument: NULL, a buffer of bytes, or
 * the structure the command is documented to take (struct fi_wait_pollfd with any nfds and an
 * fd array of that size or NULL). Everything is closed at the end, which must succeed once
 * members left their poll set (LeakSanitizer checks nothing stays). Every call must return 0
 * or a negative FI_E* code and a FI_GETWAIT / FI_GETWAITOBJ answer must be coherent. */
#include "config.h"

#include "fuzz_common.h"

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

#include <poll.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <vector>

namespace
{

using namespace vwait_fuzz;
namespace util = vwait::util;

/* Another provider's object: its control answers -FI_ENOSYS to everything. */
int foreign_control(struct fid *, int, void *)
{
	return -FI_ENOSYS;
}
int foreign_close(struct fid *)
{
	return 0;
}
struct fi_ops foreign_ops = {
    .size = sizeof(struct fi_ops),
    .close = foreign_close,
    .bind = nullptr,
    .control = foreign_control,
    .ops_open = nullptr,
    .tostr = nullptr,
    .ops_set = nullptr,
};
/* ... and one with an fi_ops too short to hold a control slot */
struct fi_ops short_ops = {.size = sizeof(size_t) + sizeof(void *), .close = foreign_close};

constexpr int wait_kinds[] = {
    FI_WAIT_NONE,  FI_WAIT_UNSPEC, FI_WAIT_SET, FI_WAIT_FD, FI_WAIT_MUTEX_COND,
    FI_WAIT_YIELD, FI_WAIT_POLLFD, -1,          77};

template <typename E>
void set_raw(E &field, int v)
{
	static_assert(sizeof(E) == sizeof(int), "an enum of int size");
	memcpy(&field, &v, sizeof(v));
}

bool is_fi_code(long r)
{
	return r == 0 || (r < 0 && r > -FI_ERRNO_MAX - 1000);
}

struct objects {
	std::vector<struct fid_wait *> sets;
	struct fid_poll *pollset = nullptr;
	std::vector<struct fid_cq *> cqs;
	std::vector<struct fid_cntr *> cntrs;
	std::vector<struct fid_eq *> eqs;
	struct fid foreign = {FI_CLASS_CQ, nullptr, &foreign_ops};
	struct fid short_fid = {FI_CLASS_CNTR, nullptr, &short_ops};
	struct fid no_ops = {FI_CLASS_EQ, nullptr, nullptr};
	std::vector<struct fid *> all; /* every fid above, plus NULL */

	struct fid_wait *some_set(FuzzedDataProvider &in)
	{
		if (sets.empty() || in.ConsumeIntegralInRange<int>(0, 7) == 0)
			return in.ConsumeBool() ? nullptr
			                        : reinterpret_cast<struct fid_wait *>(&foreign);
		return sets[in.ConsumeIntegralInRange<size_t>(0, sets.size() - 1)];
	}
	struct fid *some_fid(FuzzedDataProvider &in)
	{
		return all[in.ConsumeIntegralInRange<size_t>(0, all.size() - 1)];
	}
};

void open_all(FuzzedDataProvider &in, objects &o)
{
	int nsets = in.ConsumeIntegralInRange<int>(0, 2);
	for (int i = 0; i < nsets; i++) {
		struct fi_wait_attr attr = {};
		set_raw(attr.wait_obj, in.PickValueInArray(wait_kinds));
		attr.flags = in.ConsumeIntegralInRange<int>(0, 9) == 0 ? 1 : 0;
		struct fid_wait *w = nullptr;
		long r = util::wait_open(&fuzz_prov, &attr, &w);
		if (!is_fi_code(r) || (r == 0) != (w != nullptr))
			abort();
		if (w)
			o.sets.push_back(w);
	}
	if (in.ConsumeBool()) {
		struct fi_poll_attr attr = {};
		attr.flags = in.ConsumeIntegralInRange<int>(0, 9) == 0 ? 1 : 0;
		long r =
		    util::poll_open(&fuzz_prov, in.ConsumeBool() ? &attr : nullptr, &o.pollset);
		if (!is_fi_code(r) || (r == 0) != (o.pollset != nullptr))
			abort();
	}
	int n = in.ConsumeIntegralInRange<int>(0, 4);
	for (int i = 0; i < n; i++) {
		int kind = in.ConsumeIntegralInRange<int>(0, 2);
		int wait = in.PickValueInArray(wait_kinds);
		struct fid_wait *set = o.some_set(in);
		long r;
		if (kind == 0) {
			struct fi_cq_attr attr = {};
			set_raw(attr.wait_obj, wait);
			attr.wait_set = set;
			/* sizes up to util::cq_max_size are valid, and the ring is allocated at
			 * open (64 bytes a slot): keep valid sizes small, try the invalid ones */
			attr.size = in.ConsumeBool()
			                ? in.ConsumeIntegralInRange<size_t>(0, 4096)
			                : pick<size_t>(in, {util::cq_max_size + 1, SIZE_MAX,
			                                    size_t{1} << 40});
			set_raw(attr.format,
			        pick<int>(in, {FI_CQ_FORMAT_UNSPEC, FI_CQ_FORMAT_CONTEXT,
			                       FI_CQ_FORMAT_TAGGED, 9}));
			struct fid_cq *cq = nullptr;
			r = util::cq_open(&fuzz_prov, &attr, &cq, nullptr);
			if (cq)
				o.cqs.push_back(cq);
			if ((r == 0) != (cq != nullptr))
				abort();
		} else if (kind == 1) {
			struct fi_cntr_attr attr = {};
			set_raw(attr.wait_obj, wait);
			attr.wait_set = set;
			struct fid_cntr *c = nullptr;
			r = util::cntr_open(&fuzz_prov, &attr, &c, nullptr);
			if (c)
				o.cntrs.push_back(c);
			if ((r == 0) != (c != nullptr))
				abort();
		} else {
			struct fi_eq_attr attr = {};
			set_raw(attr.wait_obj, wait);
			attr.wait_set = set;
			struct fid_eq *e = nullptr;
			r = util::eq_open(&fuzz_prov, &attr, &e, nullptr);
			if (e)
				o.eqs.push_back(e);
			if ((r == 0) != (e != nullptr))
				abort();
		}
		if (!is_fi_code(r))
			abort();
	}
	for (auto *w : o.sets)
		o.all.push_back(&w->fid);
	if (o.pollset)
		o.all.push_back(&o.pollset->fid);
	for (auto *c : o.cqs)
		o.all.push_back(&c->fid);
	for (auto *c : o.cntrs)
		o.all.push_back(&c->fid);
	for (auto *e : o.eqs)
		o.all.push_back(&e->fid);
	o.all.push_back(&o.foreign);
	o.all.push_back(&o.short_fid);
	o.all.push_back(&o.no_ops);
	o.all.push_back(nullptr);
}

bool vwait_fid(const objects &o, struct fid *f)
{
	return f && f != &o.foreign && f != &o.short_fid && f != &o.no_ops;
}

void one_control(FuzzedDataProvider &in, objects &o)
{
	struct fid *f = o.some_fid(in);
	if (!vwait_fid(o, f))
		return; /* fi_control(foreign) calls the foreign provider: not ours to test */
	int command =
	    pick<int>(in, {FI_GETFIDFLAG, FI_SETFIDFLAG, FI_GETOPSFLAG, FI_SETOPSFLAG, FI_ALIAS,
	                   FI_GETWAIT, FI_ENABLE, FI_BACKLOG, FI_GETWAITOBJ, FI_GET_VAL, FI_SET_VAL,
	                   FI_EXPORT_FID, util::ctl_get_waitable, util::ctl_get_waiter, -1});
	/* the kind FI_GETWAIT answers for decides what the argument is */
	int kind = -1;
	bool has_kind = fi_control(f, FI_GETWAITOBJ, &kind) == 0;
	alignas(16) uint8_t buf[256];
	in.ConsumeData(buf, sizeof(buf));
	std::vector<struct pollfd> fds;
	struct fi_wait_pollfd pfd = {};
	struct fid *alias_target = nullptr;
	struct fi_alias alias = {&alias_target, 0};
	void *arg = buf;
	switch (in.ConsumeIntegralInRange<int>(0, 3)) {
	case 0:
		arg = nullptr;
		break;
	default:
		if (command == FI_GETWAIT && has_kind && kind == FI_WAIT_POLLFD) {
			fds.resize(in.ConsumeIntegralInRange<size_t>(0, 8));
			pfd.nfds = static_cast<int>(fds.size());
			pfd.fd = fds.empty() && in.ConsumeBool() ? nullptr : fds.data();
			arg = &pfd;
		} else if (command == FI_ALIAS) {
			alias.flags = in.ConsumeIntegral<uint64_t>();
			arg = &alias;
		}
		break;
	}
	long r = fi_control(f, command, arg);
	if (!is_fi_code(r))
		abort();
	if (r == 0 && command == FI_GETWAITOBJ && arg) {
		int got;
		memcpy(&got, arg, sizeof(got));
		if (got != kind)
			abort();
	}
	if (r == 0 && command == FI_GETWAIT && arg == &pfd &&
	    static_cast<size_t>(pfd.nfds) > fds.size())
		abort();
	if (r == 0 && command == FI_GETWAIT && has_kind && kind == FI_WAIT_FD) {
		int fd;
		memcpy(&fd, arg, sizeof(fd));
		if (fd < 0)
			abort();
	}
}

void one_step(FuzzedDataProvider &in, objects &o)
{
	switch (in.ConsumeIntegralInRange<int>(0, 5)) {
	case 0:
	case 1:
		one_control(in, o);
		return;
	case 2: { /* fi_trywait over any fids */
		std::vector<struct fid *> fids(in.ConsumeIntegralInRange<size_t>(0, 4));
		for (auto &f : fids)
			f = o.some_fid(in);
		int count = pick<int>(in, {static_cast<int>(fids.size()), 0, -1});
		if (count > static_cast<int>(fids.size()))
			count = static_cast<int>(fids.size());
		long r = util::trywait(
		    &fuzz_prov, fids.empty() && in.ConsumeBool() ? nullptr : fids.data(), count);
		if (!is_fi_code(r))
			abort();
		return;
	}
	case 3: { /* poll set membership */
		if (!o.pollset)
			return;
		struct fid *f = o.some_fid(in);
		long r = in.ConsumeBool() ? fi_sets::poll_add(o.pollset, f, 0)
		                          : fi_sets::poll_del(o.pollset, f, 0);
		if (!is_fi_code(r))
			abort();
		void *ctx[4];
		r = fi_sets::poll(o.pollset, ctx, in.ConsumeIntegralInRange<int>(-1, 4));
		if (r > 4 || (r < 0 && !is_fi_code(r)))
			abort();
		return;
	}
	case 4: { /* something happens: an entry, a signal, a counter change */
		if (!o.cqs.empty() && in.ConsumeBool()) {
			auto *c = o.cqs[in.ConsumeIntegralInRange<size_t>(0, o.cqs.size() - 1)];
			util::cq_entry e;
			(void)util::object_of<util::sw_cq>(&c->fid)->push(e);
		}
		if (!o.cntrs.empty() && in.ConsumeBool())
			fi_cntr_add(
			    o.cntrs[in.ConsumeIntegralInRange<size_t>(0, o.cntrs.size() - 1)], 1);
		if (!o.eqs.empty() && in.ConsumeBool()) {
			uint64_t v = 0;
			fi_eq_write(o.eqs[in.ConsumeIntegralInRange<size_t>(0, o.eqs.size() - 1)],
			            FI_NOTIFY, &v, sizeof(v), 0);
		}
		return;
	}
	default: { /* fi_wait that must not block, and draining reads */
		for (auto *w : o.sets) {
			long r = fi_sets::wait(w, 0);
			if (r != 0 && r != -FI_ETIMEDOUT && !is_fi_code(r))
				abort();
		}
		for (auto *c : o.cqs) {
			struct fi_cq_tagged_entry e[2];
			fi_cq_read(c, e, 2);
		}
		return;
	}
	}
}

void close_all(objects &o)
{
	if (o.pollset)
		for (struct fid *f : o.all)
			if (vwait_fid(o, f))
				fi_sets::poll_del(o.pollset, f, 0);
	auto must_close = [](struct fid *f) {
		if (fi_close(f) != 0)
			abort();
	};
	for (auto *c : o.cqs)
		must_close(&c->fid);
	for (auto *c : o.cntrs)
		must_close(&c->fid);
	for (auto *e : o.eqs)
		must_close(&e->fid);
	if (o.pollset)
		must_close(&o.pollset->fid);
	for (auto *w : o.sets)
		must_close(&w->fid);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	FuzzedDataProvider in(data, size);
	objects o;
	open_all(in, o);
	int steps = 0;
	while (in.remaining_bytes() > 0 && steps++ < 64)
		one_step(in, o);
	close_all(o);
	return 0;
}
