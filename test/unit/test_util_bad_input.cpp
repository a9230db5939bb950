/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* Bad input at every entry point of the util layer, as one table: fi_cq_*, fi_cntr_*, fi_eq_*,
 * fi_wait_open / fi_wait, fi_poll_open / fi_poll_add / fi_poll_del / fi_poll, fi_trywait and
 * fi_control, called with NULL pointers, wrong fclass, foreign fids (a hand-made struct fid with
 * other ops, one without ops, and the objects of libfabric's own tcp provider when it opens on
 * 127.0.0.1), wrong flags, out-of-range sizes and enum values. Each case must return a negative
 * FI_E* code (the exact one where the man page or the util headers name it) and never crash;
 * the objects stay usable afterwards. The number of cases is printed. Closed fids are not
 * detectable (their memory is gone) and are not tried. */
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

#include <cstdio>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

namespace
{

using namespace vwait;
using vwait_test::set_raw;
using vwait_test::test_prov;

constexpr long any_error = 1; /* any negative FI_E* code */

struct bad_case {
	std::string name;
	std::function<long()> call;
	long want; /* the exact code, or any_error */
};

/* Another provider's object as vwait can meet it: its control answers -FI_ENOSYS. */
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
/* an fi_ops too short to have a control slot */
struct fi_ops short_ops = {.size = sizeof(size_t) + sizeof(void *), .close = foreign_close};

/* libfabric's tcp provider: its fabric, domain and util objects (when it opens on 127.0.0.1). */
struct tcp_objects {
	struct fi_info *info = nullptr;
	struct fid_fabric *fabric = nullptr;
	struct fid_domain *domain = nullptr;
	struct fid_cq *cq = nullptr;
	struct fid_cntr *cntr = nullptr;
	struct fid_eq *eq = nullptr;
	struct fid_wait *wait = nullptr;
	std::vector<struct fid *> fids() const
	{
		std::vector<struct fid *> v;
		for (struct fid *f :
		     {cq ? &cq->fid : nullptr, cntr ? &cntr->fid : nullptr, eq ? &eq->fid : nullptr,
		      wait ? &wait->fid : nullptr, domain ? &domain->fid : nullptr,
		      fabric ? &fabric->fid : nullptr})
			if (f)
				v.push_back(f);
		return v;
	}
	void open()
	{
		struct fi_info *hints = fi_allocinfo();
		hints->ep_attr->type = FI_EP_MSG;
		hints->caps = FI_MSG;
		hints->fabric_attr->prov_name = strdup("tcp");
		int ret = fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", nullptr, 0, hints, &info);
		fi_freeinfo(hints);
		if (ret || fi_fabric(info->fabric_attr, &fabric, nullptr) ||
		    fi_domain(fabric, info, &domain, nullptr))
			return;
		struct fi_cq_attr ca = {};
		ca.wait_obj = FI_WAIT_FD;
		(void)fi_cq_open(domain, &ca, &cq, nullptr);
		struct fi_cntr_attr na = {};
		na.wait_obj = FI_WAIT_FD;
		(void)fi_cntr_open(domain, &na, &cntr, nullptr);
		struct fi_eq_attr ea = {};
		ea.wait_obj = FI_WAIT_FD;
		(void)fi_eq_open(fabric, &ea, &eq, nullptr);
		struct fi_wait_attr wa = {};
		wa.wait_obj = FI_WAIT_FD;
		(void)fi_sets::wait_open(fabric, &wa, &wait);
	}
	~tcp_objects()
	{
		for (struct fid *f :
		     {cq ? &cq->fid : nullptr, cntr ? &cntr->fid : nullptr, eq ? &eq->fid : nullptr,
		      wait ? &wait->fid : nullptr, domain ? &domain->fid : nullptr,
		      fabric ? &fabric->fid : nullptr})
			if (f)
				fi_close(f);
		fi_freeinfo(info);
	}
};

/* The vwait objects the cases run against (each kind of wait object where it matters). */
struct vwait_objects {
	struct fid_wait *set_fd = nullptr;
	struct fid_wait *set_pollfd = nullptr;
	struct fid_poll *pollset = nullptr;
	struct fid_cq *cq_none = nullptr, *cq_fd = nullptr, *cq_member = nullptr;
	struct fid_cntr *cntr_none = nullptr, *cntr_fd = nullptr, *cntr_yield = nullptr;
	struct fid_eq *eq_none = nullptr, *eq_fd = nullptr, *eq_mutex = nullptr;

	void open()
	{
		struct fi_wait_attr wa = {};
		wa.wait_obj = FI_WAIT_FD;
		assert_int_equal(util::wait_open(&test_prov, &wa, &set_fd), 0);
		wa.wait_obj = FI_WAIT_POLLFD;
		assert_int_equal(util::wait_open(&test_prov, &wa, &set_pollfd), 0);
		assert_int_equal(util::poll_open(&test_prov, nullptr, &pollset), 0);
		struct fi_cq_attr ca = {};
		ca.wait_obj = FI_WAIT_NONE;
		assert_int_equal(util::cq_open(&test_prov, &ca, &cq_none, nullptr), 0);
		ca.wait_obj = FI_WAIT_FD;
		assert_int_equal(util::cq_open(&test_prov, &ca, &cq_fd, nullptr), 0);
		ca.wait_obj = FI_WAIT_SET;
		ca.wait_set = set_fd;
		assert_int_equal(util::cq_open(&test_prov, &ca, &cq_member, nullptr), 0);
		struct fi_cntr_attr na = {};
		na.wait_obj = FI_WAIT_NONE;
		assert_int_equal(util::cntr_open(&test_prov, &na, &cntr_none, nullptr), 0);
		na.wait_obj = FI_WAIT_FD;
		assert_int_equal(util::cntr_open(&test_prov, &na, &cntr_fd, nullptr), 0);
		na.wait_obj = FI_WAIT_YIELD;
		assert_int_equal(util::cntr_open(&test_prov, &na, &cntr_yield, nullptr), 0);
		struct fi_eq_attr ea = {};
		ea.wait_obj = FI_WAIT_NONE;
		assert_int_equal(util::eq_open(&test_prov, &ea, &eq_none, nullptr), 0);
		ea.wait_obj = FI_WAIT_FD;
		assert_int_equal(util::eq_open(&test_prov, &ea, &eq_fd, nullptr), 0);
		ea.wait_obj = FI_WAIT_MUTEX_COND;
		assert_int_equal(util::eq_open(&test_prov, &ea, &eq_mutex, nullptr), 0);
		assert_int_equal(fi_sets::poll_add(pollset, &cq_fd->fid, 0), 0);
	}
	void close()
	{
		assert_int_equal(fi_sets::poll_del(pollset, &cq_fd->fid, 0), 0);
		for (struct fid *f :
		     {&cq_none->fid, &cq_fd->fid, &cq_member->fid, &cntr_none->fid, &cntr_fd->fid,
		      &cntr_yield->fid, &eq_none->fid, &eq_fd->fid, &eq_mutex->fid, &pollset->fid,
		      &set_fd->fid, &set_pollfd->fid})
			assert_int_equal(fi_close(f), 0);
	}
};

void add_open_cases(std::vector<bad_case> &t, vwait_objects &v,
                    const std::vector<struct fid *> &foreign)
{
	const int bad_waits[] = {-1, 7, 77, 1 << 30};
	/* fi_cq_open */
	t.push_back({"cq_open attr NULL",
	             [] {
		             struct fid_cq *cq = nullptr;
		             return long(util::cq_open(&test_prov, nullptr, &cq, nullptr));
	             },
	             -FI_EINVAL});
	t.push_back({"cq_open out NULL",
	             [] {
		             struct fi_cq_attr a = {};
		             return long(util::cq_open(&test_prov, &a, nullptr, nullptr));
	             },
	             -FI_EINVAL});
	for (int w : bad_waits) {
		t.push_back({"cq_open wait_obj " + std::to_string(w),
		             [w] {
			             struct fi_cq_attr a = {};
			             set_raw(a.wait_obj, w);
			             struct fid_cq *cq = nullptr;
			             return long(util::cq_open(&test_prov, &a, &cq, nullptr));
		             },
		             -FI_EINVAL});
		t.push_back({"cntr_open wait_obj " + std::to_string(w),
		             [w] {
			             struct fi_cntr_attr a = {};
			             set_raw(a.wait_obj, w);
			             struct fid_cntr *c = nullptr;
			             return long(util::cntr_open(&test_prov, &a, &c, nullptr));
		             },
		             -FI_EINVAL});
		t.push_back({"eq_open wait_obj " + std::to_string(w),
		             [w] {
			             struct fi_eq_attr a = {};
			             set_raw(a.wait_obj, w);
			             struct fid_eq *e = nullptr;
			             return long(util::eq_open(&test_prov, &a, &e, nullptr));
		             },
		             -FI_EINVAL});
		t.push_back({"wait_open wait_obj " + std::to_string(w),
		             [w] {
			             struct fi_wait_attr a = {};
			             set_raw(a.wait_obj, w);
			             struct fid_wait *s = nullptr;
			             return long(util::wait_open(&test_prov, &a, &s));
		             },
		             -FI_EINVAL});
	}
	for (int f : {-1, 5, 99}) {
		t.push_back({"cq_open format " + std::to_string(f),
		             [f] {
			             struct fi_cq_attr a = {};
			             set_raw(a.format, f);
			             struct fid_cq *cq = nullptr;
			             return long(util::cq_open(&test_prov, &a, &cq, nullptr));
		             },
		             -FI_EINVAL});
		t.push_back({"cq_open wait_cond " + std::to_string(f),
		             [f] {
			             struct fi_cq_attr a = {};
			             a.wait_obj = FI_WAIT_FD;
			             set_raw(a.wait_cond, f);
			             struct fid_cq *cq = nullptr;
			             return long(util::cq_open(&test_prov, &a, &cq, nullptr));
		             },
		             -FI_EINVAL});
		t.push_back({"cntr_open events " + std::to_string(f),
		             [f] {
			             struct fi_cntr_attr a = {};
			             set_raw(a.events, f);
			             struct fid_cntr *c = nullptr;
			             return long(util::cntr_open(&test_prov, &a, &c, nullptr));
		             },
		             any_error});
	}
	for (size_t size : {util::cq_max_size + 1, size_t{1} << 62, SIZE_MAX})
		t.push_back({"cq_open size " + std::to_string(size),
		             [size] {
			             struct fi_cq_attr a = {};
			             a.size = size;
			             struct fid_cq *cq = nullptr;
			             return long(util::cq_open(&test_prov, &a, &cq, nullptr));
		             },
		             -FI_EINVAL});
	for (size_t size : {util::eq_max_size + 1, SIZE_MAX})
		t.push_back({"eq_open size " + std::to_string(size),
		             [size] {
			             struct fi_eq_attr a = {};
			             a.size = size;
			             struct fid_eq *e = nullptr;
			             return long(util::eq_open(&test_prov, &a, &e, nullptr));
		             },
		             -FI_EINVAL});
	for (uint64_t flags : {uint64_t{1}, uint64_t{1} << 40, ~uint64_t{0}}) {
		std::string f = std::to_string(flags);
		t.push_back({"cq_open flags " + f,
		             [flags] {
			             struct fi_cq_attr a = {};
			             a.flags = flags;
			             struct fid_cq *cq = nullptr;
			             return long(util::cq_open(&test_prov, &a, &cq, nullptr));
		             },
		             -FI_EINVAL});
		t.push_back({"cntr_open flags " + f,
		             [flags] {
			             struct fi_cntr_attr a = {};
			             a.flags = flags;
			             struct fid_cntr *c = nullptr;
			             return long(util::cntr_open(&test_prov, &a, &c, nullptr));
		             },
		             -FI_EINVAL});
		t.push_back({"eq_open flags " + f,
		             [flags] {
			             struct fi_eq_attr a = {};
			             a.flags = flags | (uint64_t{1} << 50);
			             struct fid_eq *e = nullptr;
			             return long(util::eq_open(&test_prov, &a, &e, nullptr));
		             },
		             -FI_EINVAL});
		t.push_back({"wait_open flags " + f,
		             [flags] {
			             struct fi_wait_attr a = {};
			             a.wait_obj = FI_WAIT_FD;
			             a.flags = flags;
			             struct fid_wait *s = nullptr;
			             return long(util::wait_open(&test_prov, &a, &s));
		             },
		             -FI_EINVAL});
		t.push_back({"poll_open flags " + f,
		             [flags] {
			             struct fi_poll_attr a = {};
			             a.flags = flags;
			             struct fid_poll *p = nullptr;
			             return long(util::poll_open(&test_prov, &a, &p));
		             },
		             -FI_EINVAL});
	}
	t.push_back({"wait_open attr NULL",
	             [] {
		             struct fid_wait *s = nullptr;
		             return long(util::wait_open(&test_prov, nullptr, &s));
	             },
	             -FI_EINVAL});
	t.push_back({"wait_open out NULL",
	             [] {
		             struct fi_wait_attr a = {};
		             a.wait_obj = FI_WAIT_FD;
		             return long(util::wait_open(&test_prov, &a, nullptr));
	             },
	             -FI_EINVAL});
	for (int w : {FI_WAIT_NONE, FI_WAIT_SET})
		t.push_back({"wait_open wait_obj " + std::to_string(w),
		             [w] {
			             struct fi_wait_attr a = {};
			             set_raw(a.wait_obj, w);
			             struct fid_wait *s = nullptr;
			             return long(util::wait_open(&test_prov, &a, &s));
		             },
		             -FI_EINVAL});
	t.push_back({"poll_open out NULL",
	             [] { return long(util::poll_open(&test_prov, nullptr, nullptr)); },
	             -FI_EINVAL});
	t.push_back({"cntr_open attr NULL",
	             [] {
		             struct fid_cntr *c = nullptr;
		             return long(util::cntr_open(&test_prov, nullptr, &c, nullptr));
	             },
	             -FI_EINVAL});
	t.push_back({"eq_open attr NULL",
	             [] {
		             struct fid_eq *e = nullptr;
		             return long(util::eq_open(&test_prov, nullptr, &e, nullptr));
	             },
	             -FI_EINVAL});
	/* FI_WAIT_SET without a set, with a foreign or wrong-class one */
	std::vector<std::pair<std::string, struct fid_wait *>> bad_sets = {{"NULL", nullptr}};
	for (size_t i = 0; i < foreign.size(); i++)
		bad_sets.push_back({"foreign#" + std::to_string(i),
		                    reinterpret_cast<struct fid_wait *>(foreign[i])});
	bad_sets.push_back({"a vwait CQ", reinterpret_cast<struct fid_wait *>(v.cq_fd)});
	bad_sets.push_back({"a vwait poll set", reinterpret_cast<struct fid_wait *>(v.pollset)});
	for (auto &[what, set] : bad_sets) {
		struct fid_wait *s = set;
		t.push_back({"cq_open FI_WAIT_SET " + what,
		             [s] {
			             struct fi_cq_attr a = {};
			             a.wait_obj = FI_WAIT_SET;
			             a.wait_set = s;
			             struct fid_cq *cq = nullptr;
			             return long(util::cq_open(&test_prov, &a, &cq, nullptr));
		             },
		             -FI_EINVAL});
		t.push_back({"cntr_open FI_WAIT_SET " + what,
		             [s] {
			             struct fi_cntr_attr a = {};
			             a.wait_obj = FI_WAIT_SET;
			             a.wait_set = s;
			             struct fid_cntr *c = nullptr;
			             return long(util::cntr_open(&test_prov, &a, &c, nullptr));
		             },
		             -FI_EINVAL});
		t.push_back({"eq_open FI_WAIT_SET " + what,
		             [s] {
			             struct fi_eq_attr a = {};
			             a.wait_obj = FI_WAIT_SET;
			             a.wait_set = s;
			             struct fid_eq *e = nullptr;
			             return long(util::eq_open(&test_prov, &a, &e, nullptr));
		             },
		             -FI_EINVAL});
	}
}

void add_object_cases(std::vector<bad_case> &t, vwait_objects &v)
{
	/* fi_cq_* */
	for (struct fid_cq *cq : {v.cq_none, v.cq_fd, v.cq_member}) {
		std::string n = cq == v.cq_none ? "none" : (cq == v.cq_fd ? "fd" : "member");
		t.push_back({"cq_read buf NULL " + n,
		             [cq] { return long(fi_cq_read(cq, nullptr, 1)); }, -FI_EINVAL});
		t.push_back({"cq_readfrom buf NULL " + n,
		             [cq] {
			             fi_addr_t a;
			             return long(fi_cq_readfrom(cq, nullptr, 3, &a));
		             },
		             -FI_EINVAL});
		t.push_back({"cq_readerr buf NULL " + n,
		             [cq] { return long(fi_cq_readerr(cq, nullptr, 0)); }, -FI_EINVAL});
		for (uint64_t flags : {uint64_t{FI_PEEK}, uint64_t{1}, ~uint64_t{0}})
			t.push_back({"cq_readerr flags " + std::to_string(flags) + " " + n,
			             [cq, flags] {
				             struct fi_cq_err_entry e = {};
				             return long(fi_cq_readerr(cq, &e, flags));
			             },
			             -FI_EINVAL});
		t.push_back({"cq_sread buf NULL " + n,
		             [cq] { return long(fi_cq_sread(cq, nullptr, 1, nullptr, 0)); },
		             any_error});
		for (int ctl :
		     std::initializer_list<int>{-1, 12345, FI_ALIAS, FI_SETOPSFLAG, FI_GETOPSFLAG,
		                                FI_ENABLE, util::ctl_get_waiter})
			t.push_back({"fi_control(cq, " + std::to_string(ctl) + ") " + n,
			             [cq, ctl] {
				             uint64_t arg[4] = {};
				             return long(fi_control(&cq->fid, ctl, arg));
			             },
			             any_error});
		t.push_back(
		    {"fi_control(cq, ctl_get_waitable, NULL) " + n,
		     [cq] { return long(fi_control(&cq->fid, util::ctl_get_waitable, nullptr)); },
		     -FI_EINVAL});
		if (cq != v.cq_none) {
			t.push_back(
			    {"fi_control(cq, FI_GETWAIT, NULL) " + n,
			     [cq] { return long(fi_control(&cq->fid, FI_GETWAIT, nullptr)); },
			     -FI_EINVAL});
			t.push_back(
			    {"fi_control(cq, FI_GETWAITOBJ, NULL) " + n,
			     [cq] { return long(fi_control(&cq->fid, FI_GETWAITOBJ, nullptr)); },
			     -FI_EINVAL});
		}
	}
	t.push_back({"cq_sread FI_WAIT_NONE",
	             [&v] {
		             struct fi_cq_entry e;
		             return long(fi_cq_sread(v.cq_none, &e, 1, nullptr, 0));
	             },
	             -FI_EINVAL});
	t.push_back(
	    {"cq_signal FI_WAIT_NONE", [&v] { return long(fi_cq_signal(v.cq_none)); }, -FI_EINVAL});
	t.push_back({"fi_control(cq, FI_GETWAIT) FI_WAIT_NONE",
	             [&v] {
		             int fd;
		             return long(fi_control(&v.cq_none->fid, FI_GETWAIT, &fd));
	             },
	             -FI_ENODATA});
	t.push_back({"fi_close(cq) in a poll set", [&v] { return long(fi_close(&v.cq_fd->fid)); },
	             -FI_EBUSY});
	t.push_back({"fi_close(wait set) with a member",
	             [&v] { return long(fi_close(&v.set_fd->fid)); }, -FI_EBUSY});
	t.push_back({"fi_close(poll set) with a member",
	             [&v] { return long(fi_close(&v.pollset->fid)); }, -FI_EBUSY});

	/* fi_cntr_* */
	for (struct fid_cntr *c : {v.cntr_none, v.cntr_fd, v.cntr_yield}) {
		std::string n = c == v.cntr_none ? "none" : (c == v.cntr_fd ? "fd" : "yield");
		t.push_back({"fi_control(cntr, FI_SETOPSFLAG, NULL) " + n,
		             [c] { return long(fi_control(&c->fid, FI_SETOPSFLAG, nullptr)); },
		             -FI_EINVAL});
		t.push_back({"fi_control(cntr, FI_GETOPSFLAG, NULL) " + n,
		             [c] { return long(fi_control(&c->fid, FI_GETOPSFLAG, nullptr)); },
		             -FI_EINVAL});
		for (int ctl : std::initializer_list<int>{-1, 999, FI_ALIAS, util::ctl_get_waiter})
			t.push_back({"fi_control(cntr, " + std::to_string(ctl) + ") " + n,
			             [c, ctl] {
				             uint64_t arg[4] = {};
				             return long(fi_control(&c->fid, ctl, arg));
			             },
			             any_error});
	}
	t.push_back({"cntr_wait FI_WAIT_NONE",
	             [&v] { return long(fi_cntr_wait(v.cntr_none, 1, 0)); }, -FI_EINVAL});
	t.push_back({"fi_control(cntr, FI_GETWAITOBJ) FI_WAIT_NONE",
	             [&v] {
		             enum fi_wait_obj o;
		             return long(fi_control(&v.cntr_none->fid, FI_GETWAITOBJ, &o));
	             },
	             -FI_ENODATA});
	t.push_back({"fi_control(cntr, FI_GETWAIT) FI_WAIT_YIELD",
	             [&v] {
		             int fd;
		             return long(fi_control(&v.cntr_yield->fid, FI_GETWAIT, &fd));
	             },
	             -FI_ENODATA});

	/* fi_eq_* */
	for (struct fid_eq *e : {v.eq_none, v.eq_fd, v.eq_mutex}) {
		std::string n = e == v.eq_none ? "none" : (e == v.eq_fd ? "fd" : "mutex_cond");
		t.push_back({"eq_read event NULL " + n,
		             [e] {
			             char buf[64];
			             return long(fi_eq_read(e, nullptr, buf, sizeof(buf), 0));
		             },
		             -FI_EINVAL});
		t.push_back({"eq_read buf NULL " + n,
		             [e] {
			             uint32_t ev;
			             return long(fi_eq_read(e, &ev, nullptr, 64, 0));
		             },
		             -FI_EINVAL});
		for (uint64_t flags : {uint64_t{1}, uint64_t{1} << 40})
			t.push_back({"eq_read flags " + std::to_string(flags) + " " + n,
			             [e, flags] {
				             uint32_t ev;
				             char buf[64];
				             return long(
				                 fi_eq_read(e, &ev, buf, sizeof(buf), flags));
			             },
			             -FI_EINVAL});
		t.push_back({"eq_readerr buf NULL " + n,
		             [e] { return long(fi_eq_readerr(e, nullptr, 0)); }, -FI_EINVAL});
		t.push_back({"eq_readerr flags " + n,
		             [e] {
			             struct fi_eq_err_entry err = {};
			             return long(fi_eq_readerr(e, &err, uint64_t{1} << 33));
		             },
		             -FI_EINVAL});
		t.push_back({"eq_write buf NULL len 8 " + n,
		             [e] { return long(fi_eq_write(e, FI_NOTIFY, nullptr, 8, 0)); },
		             any_error});
		t.push_back({"eq_sread event NULL " + n,
		             [e] {
			             char buf[64];
			             return long(fi_eq_sread(e, nullptr, buf, sizeof(buf), 0, 0));
		             },
		             -FI_EINVAL});
		for (int ctl : std::initializer_list<int>{-1, 999, FI_ALIAS, util::ctl_get_waiter})
			t.push_back({"fi_control(eq, " + std::to_string(ctl) + ") " + n,
			             [e, ctl] {
				             uint64_t arg[4] = {};
				             return long(fi_control(&e->fid, ctl, arg));
			             },
			             any_error});
	}
	t.push_back({"eq_sread FI_WAIT_NONE",
	             [&v] {
		             uint32_t ev;
		             char buf[64];
		             return long(fi_eq_sread(v.eq_none, &ev, buf, sizeof(buf), 0, 0));
	             },
	             -FI_EINVAL});

	/* wait sets */
	for (struct fid_wait *s : {v.set_fd, v.set_pollfd}) {
		std::string n = s == v.set_fd ? "fd" : "pollfd";
		t.push_back({"fi_control(wait set, FI_GETWAIT, NULL) " + n,
		             [s] { return long(fi_control(&s->fid, FI_GETWAIT, nullptr)); },
		             -FI_EINVAL});
		t.push_back(
		    {"fi_control(wait set, ctl_get_waiter, NULL) " + n,
		     [s] { return long(fi_control(&s->fid, util::ctl_get_waiter, nullptr)); },
		     -FI_EINVAL});
		for (int ctl : std::initializer_list<int>{-1, 999, FI_ALIAS, FI_SETOPSFLAG,
		                                          util::ctl_get_waitable})
			t.push_back({"fi_control(wait set, " + std::to_string(ctl) + ") " + n,
			             [s, ctl] {
				             uint64_t arg[4] = {};
				             return long(fi_control(&s->fid, ctl, arg));
			             },
			             any_error});
		t.push_back({"fi_bind(wait set) " + n,
		             [s, &v] { return long(s->fid.ops->bind(&s->fid, &v.cq_fd->fid, 0)); },
		             any_error});
	}
	t.push_back({"fi_control(pollfd set, FI_GETWAIT, nfds 1 fd NULL)",
	             [&v] {
		             struct fi_wait_pollfd p = {};
		             p.nfds = 64;
		             p.fd = nullptr;
		             return long(fi_control(&v.set_pollfd->fid, FI_GETWAIT, &p));
	             },
	             -FI_EINVAL});

	/* poll sets */
	for (int ctl :
	     std::initializer_list<int>{-1, FI_GETWAIT, FI_GETWAITOBJ, util::ctl_get_waitable})
		t.push_back({"fi_control(poll set, " + std::to_string(ctl) + ")",
		             [&v, ctl] {
			             uint64_t arg[4] = {};
			             return long(fi_control(&v.pollset->fid, ctl, arg));
		             },
		             any_error});
	t.push_back({"poll_add NULL",
	             [&v] { return long(fi_sets::poll_add(v.pollset, nullptr, 0)); }, -FI_EINVAL});
	t.push_back({"poll_add an EQ",
	             [&v] { return long(fi_sets::poll_add(v.pollset, &v.eq_fd->fid, 0)); },
	             -FI_EINVAL});
	t.push_back({"poll_add a wait set",
	             [&v] { return long(fi_sets::poll_add(v.pollset, &v.set_fd->fid, 0)); },
	             -FI_EINVAL});
	t.push_back({"poll_add itself",
	             [&v] { return long(fi_sets::poll_add(v.pollset, &v.pollset->fid, 0)); },
	             -FI_EINVAL});
	t.push_back({"poll_add twice",
	             [&v] { return long(fi_sets::poll_add(v.pollset, &v.cq_fd->fid, 0)); },
	             -FI_EALREADY});
	t.push_back({"poll_del not a member",
	             [&v] { return long(fi_sets::poll_del(v.pollset, &v.cq_none->fid, 0)); },
	             -FI_EINVAL});
	t.push_back({"poll_del NULL",
	             [&v] { return long(fi_sets::poll_del(v.pollset, nullptr, 0)); }, -FI_EINVAL});
	t.push_back({"fi_poll context NULL",
	             [&v] { return long(fi_sets::poll(v.pollset, nullptr, 4)); }, any_error});
	for (int count : {-1, -1000})
		t.push_back({"fi_poll count " + std::to_string(count),
		             [&v, count] {
			             void *ctx[4];
			             return long(fi_sets::poll(v.pollset, ctx, count));
		             },
		             any_error});

	/* fi_trywait */
	t.push_back({"trywait fids NULL",
	             [] { return long(util::trywait(&test_prov, nullptr, 1)); }, -FI_EINVAL});
	for (int count : {0, -1, -100})
		t.push_back({"trywait count " + std::to_string(count),
		             [&v, count] {
			             struct fid *f = &v.cq_fd->fid;
			             return long(util::trywait(&test_prov, &f, count));
		             },
		             -FI_EINVAL});
	t.push_back({"trywait a NULL fid",
	             [&v] {
		             struct fid *f[2] = {&v.cq_fd->fid, nullptr};
		             return long(util::trywait(&test_prov, f, 2));
	             },
	             -FI_EINVAL});
	for (struct fid *f : {&v.cq_none->fid, &v.cntr_none->fid, &v.eq_none->fid})
		t.push_back({"trywait FI_WAIT_NONE object",
		             [f] {
			             struct fid *one = f;
			             return long(util::trywait(&test_prov, &one, 1));
		             },
		             -FI_EINVAL});
	t.push_back({"trywait a poll set",
	             [&v] {
		             struct fid *f = &v.pollset->fid;
		             return long(util::trywait(&test_prov, &f, 1));
	             },
	             -FI_EINVAL});
	t.push_back({"trywait FD and MUTEX_COND mixed",
	             [&v] {
		             struct fid *f[2] = {&v.cq_fd->fid, &v.eq_mutex->fid};
		             return long(util::trywait(&test_prov, f, 2));
	             },
	             -FI_EINVAL});
}

void add_foreign_cases(std::vector<bad_case> &t, vwait_objects &v,
                       const std::vector<struct fid *> &foreign)
{
	for (size_t i = 0; i < foreign.size(); i++) {
		struct fid *f = foreign[i];
		std::string n =
		    "foreign#" + std::to_string(i) + " (fclass " + std::to_string(f->fclass) + ")";
		t.push_back({"trywait " + n,
		             [f] {
			             struct fid *one = f;
			             return long(util::trywait(&test_prov, &one, 1));
		             },
		             -FI_EINVAL});
		t.push_back({"trywait vwait CQ + " + n,
		             [f, &v] {
			             struct fid *two[2] = {&v.cq_fd->fid, f};
			             return long(util::trywait(&test_prov, two, 2));
		             },
		             -FI_EINVAL});
		t.push_back({"poll_add " + n,
		             [f, &v] { return long(fi_sets::poll_add(v.pollset, f, 0)); },
		             -FI_EINVAL});
		t.push_back({"poll_del " + n,
		             [f, &v] { return long(fi_sets::poll_del(v.pollset, f, 0)); },
		             -FI_EINVAL});
		t.push_back({"get_waitable " + n,
		             [f] {
			             util::waitable *w = nullptr;
			             return long(util::get_waitable(f, &w));
		             },
		             -FI_ENOSYS});
		t.push_back({"get_waiter " + n,
		             [f] {
			             util::waiter *w = nullptr;
			             long r = util::get_waiter(f, &w);
			             return r == 0 ? 0L : r;
		             },
		             any_error});
	}
}

void table(void **)
{
	/* libfabric reads its environment once, at the first fi_getinfo: the tcp provider's
	 * (vwait_test::init_logging would restrict FI_PROVIDER to none) */
	setenv("FI_LOG_LEVEL", "warn", 1);
	unsetenv("FI_PROVIDER");
	tcp_objects tcp;
	tcp.open();
	std::vector<struct fid *> tcp_fids = tcp.fids();
	vwait_objects v;
	v.open();
	struct fid foreign = {FI_CLASS_CQ, nullptr, &foreign_ops};
	struct fid foreign_wait = {FI_CLASS_WAIT, nullptr, &foreign_ops};
	struct fid short_fid = {FI_CLASS_CNTR, nullptr, &short_ops};
	struct fid no_ops = {FI_CLASS_EQ, nullptr, nullptr};
	std::vector<struct fid *> foreign_fids = {&foreign, &foreign_wait, &short_fid, &no_ops};
	foreign_fids.insert(foreign_fids.end(), tcp_fids.begin(), tcp_fids.end());

	std::vector<bad_case> t;
	add_open_cases(t, v, foreign_fids);
	add_object_cases(t, v);
	add_foreign_cases(t, v, foreign_fids);

	int failed = 0;
	for (const bad_case &c : t) {
		long r = c.call();
		bool ok = c.want == any_error ? (r < 0 && r > -FI_ERRNO_MAX - 10000) : r == c.want;
		if (!ok) {
			failed++;
			print_error("bad input '%s': got %ld (%s), want %s\n", c.name.c_str(), r,
			            fi_strerror(static_cast<int>(r < 0 ? -r : r)),
			            c.want == any_error ? "a negative FI_E* code"
			                                : fi_strerror(static_cast<int>(-c.want)));
		}
	}
	/* still usable: a CQ entry goes through, a counter counts */
	util::cq_entry e;
	e.op_context = &e;
	assert_int_equal(util::object_of<util::sw_cq>(&v.cq_fd->fid)->push(e), 0);
	struct fi_cq_entry out;
	assert_int_equal(fi_cq_read(v.cq_fd, &out, 1), 1);
	assert_ptr_equal(out.op_context, &e);
	assert_int_equal(fi_cntr_add(v.cntr_fd, 2), 0);
	assert_int_equal(fi_cntr_read(v.cntr_fd), 2);
	v.close();
	printf("bad input: %zu cases (%zu foreign fids, %zu of them the tcp provider's), %d "
	       "failed\n",
	       t.size(), foreign_fids.size(), tcp_fids.size(), failed);
	assert_int_equal(failed, 0);
}

} // namespace

int main()
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(table),
	};
	return cmocka_run_group_tests(tests, nullptr, nullptr);
}
