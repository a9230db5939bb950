/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* util::object: what the util layer's CQ, counter and EQ share, and the verbs ones through
 * them: the provider they log through, their wait object (private or a wait set), the
 * application's context and the fid handed out, the count of objects bound to them (an
 * endpoint holds its CQs; fi_close refuses while any is held), fi_control, the text of a
 * provider error, the close sequence, and the one fi_ops table of their fids.
 *
 * From a fid to the object behind it, there are two doors and no other:
 *  - a slot of the object's own ops table (the fid_cq read slot, ...): the table proves what
 *    the fid is, so the slot takes fid_box<...>::of(fid) with no check (util/fid.h);
 *  - a fid from outside (a bind argument, a poll-set member, the handle in an fi_info):
 *    object_of<T>(fid) for a CQ, counter or EQ of either layer, and fid_box::checked() for the
 *    verbs layer's other kinds. Both check the class and vwait's own ops table; object_of
 *    then checks the type (a util CQ is no verbs CQ).
 * The waitable behind a fid, for wait sets, poll sets and fi_trywait, is get_waitable()
 * (util/waitable.h): a handshake any waitable can answer, vwait's objects and tests' fakes. */
#ifndef VWAIT_UTIL_OBJECT_H
#define VWAIT_UTIL_OBJECT_H

/* before waitable.h, which names struct fi_provider without declaring it */
#include <rdma/providers/fi_log.h>
#include <rdma/providers/fi_prov.h>

#include "vwait/util/fid.h"
#include "vwait/util/guard.h"
#include "vwait/util/waitable.h"

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

namespace vwait::util
{

/* The value an enum field of an application's attr holds, read as an int: a value outside
 * the enum (a bad argument) must be reported, and loading it as the enum is undefined. */
template <typename E>
int raw_enum(const E &field) noexcept
{
	static_assert(sizeof(E) == sizeof(int), "an enum of int size");
	int v;
	std::memcpy(&v, &field, sizeof(v));
	return v;
}
/* 0, or -FI_EINVAL with one warning line naming who and the value, for a wait_obj that is
 * not one of enum fi_wait_obj (shared by cq, cntr and eq). */
int check_wait_obj(const struct fi_provider *prov, enum fi_log_subsys subsys, const char *who,
                   const enum fi_wait_obj &wait_obj) noexcept;

class object : public waitable
{
public:
	/* kind names the object in warning lines ("CQ", "counter", "EQ"); subsys is its log
	 * subsystem; wait_obj / wait_set are the open attributes' (see open_wait). */
	object(const struct fi_provider *prov, enum fi_log_subsys subsys, const char *kind,
	       enum fi_wait_obj wait_obj, struct fid_wait *wait_set) noexcept;
	~object() override;

	/* Sets up the wait object from the open attributes; called once by the install step. */
	int init_wait() noexcept;

	/* fi_control: the kind's own commands (control_own), then FI_GETWAIT / FI_GETWAITOBJ /
	 * ctl_get_waitable; anything else -FI_ENOSYS with one warning line. */
	int control(int command, void *arg) noexcept;
	/* fi_cq_strerror / fi_eq_strerror: describe_error() into buf (or a thread-local buffer
	 * when buf is NULL or len 0). */
	const char *strerror(int prov_errno, const void *err_data, char *buf, size_t len) noexcept;

	/* An object bound to this one (an endpoint to its CQ, EQ and counters) holds it while
	 * bound and unholds it when it goes; fi_close refuses with -FI_EBUSY while any does. */
	void hold() noexcept { refs_.fetch_add(1, std::memory_order_acq_rel); }
	void unhold() noexcept { refs_.fetch_sub(1, std::memory_order_acq_rel); }
	/* fi_close's checks: -FI_EBUSY while held or in a poll set (one warning line). */
	int close_check() noexcept;
	/* fi_close, once close_check() passed: close_begin() while the object's waiter still
	 * exists (a verbs CQ acks its events and destroys its ibv_cq; an EQ stops its progress
	 * and its fd leaves the waiter), close_wait(), close_end() (an EQ releases what unread
	 * entries own), then the object is destroyed. close_begin is also how an endpoint
	 * closes the internal CQ it owns, and runs again (harmlessly) from a destructor. */
	virtual void close_begin() noexcept {}
	virtual void close_end() noexcept {}

	void *poll_context() const noexcept override { return context_; }
	void *context() const noexcept { return context_; }
	struct fid *fid() const noexcept { return fid_; }
	const struct fi_provider *provider() const noexcept { return prov_; }

	/* Used by the install step only. */
	void set_context(void *ctx) noexcept { context_ = ctx; }
	void set_fid(struct fid *f) noexcept { fid_ = f; }

protected:
	/* A kind's own fi_control commands; -FI_ENOSYS for a command it does not know. */
	virtual int control_own(int command, void *arg) noexcept
	{
		(void)command;
		(void)arg;
		return -FI_ENOSYS;
	}
	/* Provider text for a prov_errno; the default names the FI errno. */
	virtual std::string describe_error(int prov_errno, const void *err_data) const;

	const struct fi_provider *const prov_;
	const enum fi_log_subsys subsys_;

private:
	const char *const kind_;
	const enum fi_wait_obj wait_obj_;
	struct fid_wait *const wait_set_;
	void *context_ = nullptr;
	struct fid *fid_ = nullptr;
	std::atomic<int> refs_{0};
};

/* The fid an object hands out: a fid_cq, fid_cntr or fid_eq, by its class. Each begins with
 * a struct fid, which is read through fid whichever member the install step wrote. */
union object_fid {
	struct fid fid;
	struct fid_cq cq;
	struct fid_cntr cntr;
	struct fid_eq eq;
};
using object_box = fid_box<object_fid, object>;

/* The fi_ops of every object fid: close (the sequence above), control (object::control),
 * -FI_ENOSYS elsewhere. */
extern struct fi_ops object_fi_ops;

/* The strerror slot of fi_ops_cq and fi_ops_eq: object::strerror. */
template <typename Fid>
const char *object_strerror(Fid *f, int prov_errno, const void *err_data, char *buf,
                            size_t len) noexcept
{
	return object_box::of(f)->obj->strerror(prov_errno, err_data, buf, len);
}

/* The install step every kind shares: the wait object first, then a box around obj (class
 * fclass, the kind's ops table ops), its fid in *out. On failure obj leaves its waiters and
 * is destroyed, and *out is NULL. */
int object_install(std::unique_ptr<object> obj, size_t fclass, void *ops, struct fid **out,
                   void *context) noexcept;

/* The same, typed: obj is a util::sw_cq / sw_cntr / sw_eq (or a subclass), *out its fid_cq /
 * fid_cntr / fid_eq (the union's member of that class, at the box's address). */
template <typename Obj, typename Fid, typename Ops>
int object_install(std::unique_ptr<Obj> obj, Ops *ops, Fid **out, void *context) noexcept
{
	if (!out)
		return -FI_EINVAL;
	struct fid *f = nullptr;
	int ret = object_install(std::move(obj), Obj::fid_class, ops, &f, context);
	*out = ret ? nullptr : reinterpret_cast<Fid *>(object_box::of(f));
	return ret;
}

/* The open call of a util kind (fi_cq_open ... of the util layer): out not NULL (else one
 * warning line, "<call>: <name> is NULL"), attr through check_attr, then install(), with
 * exceptions turned into FI_E* codes. */
template <typename Fid, typename Attr, typename Check, typename Install>
int object_open(const struct fi_provider *prov, enum fi_log_subsys subsys, const char *call,
                const char *name, Check check_attr, const Attr *attr, Fid **out,
                Install install) noexcept
{
	if (!out) {
		FI_WARN(prov, subsys, "%s: %s is NULL\n", call, name);
		return -FI_EINVAL;
	}
	*out = nullptr;
	if (int ret = check_attr(prov, attr))
		return ret;
	return guard(install);
}

/* The object of type T behind a fid from outside: T::fid_class, vwait's object_fi_ops, and
 * an object of type T (util::sw_cq, or vwait::verbs_cq derived from it, ...); else nullptr. */
template <typename T>
T *object_of(struct fid *f) noexcept
{
	object *o = object_box::checked(f, T::fid_class, &object_fi_ops);
	return o ? dynamic_cast<T *>(o) : nullptr;
}

} // namespace vwait::util

#endif
