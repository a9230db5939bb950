/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* util::waitable: what a CQ, a counter or an EQ is to a waiter (wait object or wait set) and to
 * a poll set. util-objects derive their software CQ / counter / EQ from it; the verbs layer
 * derives its hardware-backed objects from it too.
 *
 * An object that derives from waitable:
 *  1. implements ready(), trywait() and poll_context() (and, for a counter, poll_ready() and
 *     poll_cookie());
 *  2. answers fi_control(fid, ctl_get_waitable, waitable **) with itself (answer_control()
 *     below does that, plus FI_GETWAIT / FI_GETWAITOBJ); anything that is not a vwait
 *     waitable answers -FI_ENOSYS, so fids of foreign providers are refused safely;
 *  3. in its open call: open_wait(prov, attr->wait_obj, attr->wait_set) -- a private waiter of
 *     that kind, the wait set (FI_WAIT_SET), or nothing (FI_WAIT_NONE);
 *  4. after every change of its software state, with NO lock of its own held:
 *       notify()  -- something was queued (a CQ entry, an EQ event): marks it on the ready
 *                    lists of its waiter/wait set and poll sets and wakes blocked waiters;
 *       wake()    -- an explicit signal that has nothing queued (fi_cq_signal, a counter that
 *                    changed, fi_eq signal): wakes blocked waiters, ends one fi_wait on its
 *                    wait set, makes the next fi_trywait on its wait object return -FI_EAGAIN,
 *                    and marks it on poll sets' ready lists too;
 *  5. blocks in sread / cntr_wait / eq_sread with wait_object()->wait_for(*this, deadline,
 *     consume): the waiter calls the phases (poll_now() then consume(): peek; arm_now() then
 *     consume(): trywait; see util::waiter::wait_for), the object supplies what its call
 *     consumes (the deadline from util::deadline_after(timeout) computed once at entry;
 *     -FI_ETIMEDOUT at the deadline, which sread / eq_sread turn into -FI_EAGAIN);
 *     FI_WAIT_MUTEX_COND: never call notify()/wake() while holding the mutex handed out by
 *     FI_GETWAIT (notify takes it to broadcast the cond);
 *  6. FIRST THING in its close (before any member is destroyed): if in_poll_set() refuse with
 *     -FI_EBUSY if it wants to, then close_wait(). After close_wait() returns no waiter or poll
 *     set calls it again.
 *
 * Lock order: include/vwait/util/lock_order.h (every mutex, its level and what it may take). A
 * member never holds its own lock while calling notify()/wake()/close_wait().
 */
#ifndef VWAIT_UTIL_WAITABLE_H
#define VWAIT_UTIL_WAITABLE_H

#include <rdma/fabric.h>
#include <rdma/fi_eq.h>
#include <rdma/providers/fi_prov.h>

#include "vwait/util/thread_safety.h"
#include "vwait/util/wait_policy.h"

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace vwait::util
{

class waitable;
class waiter;

/* A drain callback: called when its fd polls readable (or by anyone who wants the events
 * behind it); must not block. */
using drain_fn = void (*)(void *arg) noexcept;

/* An fd whose events a waitable learns about only when somebody drains it (a verbs
 * completion channel): a poll set or a counter that wants the waitable's events drains it
 * (non-blocking) or watches it. */
struct event_source {
	int fd = -1;
	drain_fn drain = nullptr;
	void *arg = nullptr;
};

/* Private fi_control commands, far above libfabric's own (FI_GETFIDFLAG...FI_EXPORT_FID < 64).
 * Every vwait CQ / counter / EQ answers ctl_get_waitable with (waitable **)arg = itself; every
 * vwait wait set answers ctl_get_waiter with (waiter **)arg. Anything else: -FI_ENOSYS. */
constexpr int ctl_get_waitable = 0x76770001; /* "vw" 1 */
constexpr int ctl_get_waiter = 0x76770002;   /* "vw" 2 */

/* A waiter or a poll set: someone a waitable reports to. */
class listener
{
public:
	/* Called by waitable::notify()/wake() with the waitable's listener lock held: take
	 * only leaf locks, never call back into the waitable. */
	virtual void notify(waitable *w, bool wake) noexcept = 0;
	/* The waitable is closing: drop it from the member list; when this returns the listener
	 * never calls w again. Called with no lock held. */
	virtual void forget(waitable *w) noexcept = 0;

protected:
	~listener() = default;
};

class waitable
{
public:
	waitable() noexcept;
	waitable(const waitable &) = delete;
	waitable &operator=(const waitable &) = delete;
	virtual ~waitable();

	/* ---- what the object implements ---- */

	/* Non-blocking: make progress, then "is there something to report?" (CQ/EQ: not empty). */
	virtual bool ready() noexcept = 0;
	/* The poll phase of a blocking call (fi_wait on a wait set): "is there something to
	 * report?" without arming and without a system call. Default: ready(); an object whose
	 * progress() makes a system call (an EQ reading its rdma_cm channel) answers from what
	 * is queued. */
	virtual bool peek() noexcept { return ready(); }
	/* -FI_EAGAIN if something is queued; otherwise arm the native side so that the next event
	 * wakes the waiter, check once more, and return 0 only when blocking is safe. */
	virtual int trywait() noexcept = 0;
	/* The context fi_poll returns for this member (the fid's context). */
	virtual void *poll_context() const noexcept = 0;
	/* fi_poll's test. cookie is this poll set's private memory for this member, initialised
	 * with poll_cookie() when the member was added. Default: ready(). A counter overrides both
	 * to report "success or error value changed since the last fi_poll" (compare, then store
	 * the new generation in cookie). */
	virtual bool poll_ready(uint64_t &cookie) noexcept
	{
		(void)cookie;
		return ready();
	}
	virtual uint64_t poll_cookie() const noexcept { return 0; }
	/* true (default): every new event reaches notify()/wake() (software objects, and verbs CQs
	 * armed on a completion channel). false: the object must be polled to learn about events,
	 * so poll sets and waiters check it on every fi_poll / wait pass (a scan: avoid). */
	virtual bool self_notifying() const noexcept { return true; }
	/* For an object whose events arrive on an fd that its own waiter may not watch (a verbs
	 * CQ: its completion channel): that fd and how to drain it, so that a poll set can
	 * drain it and learn of the object's events without a scan. Such an object's
	 * poll_ready() must arm it (ask for the next event) whenever it answers false. false
	 * (default): nothing to drain, the object notifies by itself or is polled. */
	virtual bool events_from(event_source &out) const noexcept
	{
		(void)out;
		return false;
	}
	/* The two phases of a blocking call on this object (waiter::wait_for), before the
	 * waiter asks the call what it consumes:
	 *   poll_now()  peek: bring in what is below without arming and without a system call.
	 *               Default: nothing (a CQ's read polls below itself; an EQ's source is a
	 *               system call).
	 *   arm_now()   trywait: arm the source below so that its next event reaches the
	 *               waiter, then bring in what came before the arming: 0 or -FI_EAGAIN
	 *               (look), another -FI_E* ends the call. Default: 0. */
	virtual void poll_now() noexcept {}
	virtual int arm_now() noexcept { return 0; }

	/* ---- what the object calls ---- */

	void notify() noexcept { report(false); }
	void wake() noexcept { report(true); }

	/* Sets up the wait object from the open attributes:
	 *   FI_WAIT_NONE                    no waiter: wait_object() is nullptr
	 *   FI_WAIT_UNSPEC                  a private waiter of kind FI_WAIT_FD (documented choice)
	 *   FI_WAIT_FD / POLLFD / MUTEX_COND / YIELD   a private waiter of that kind
	 *   FI_WAIT_SET                     joins wait_set (must be a vwait wait set, not NULL)
	 * Returns 0, -FI_EINVAL (bad wait_obj, NULL or foreign wait_set: one warning line), or
	 * -FI_ENOMEM / -FI_EMFILE... Call once, before handing the fid out. wait_obj is an
	 * enum fi_wait_obj value taken as int: an application's out-of-range value is refused,
	 * not loaded as an enum (which would be undefined behaviour). */
	int open_wait(const struct fi_provider *prov, int wait_obj,
	              struct fid_wait *wait_set) noexcept;
	/* The wait policy of the private waiter open_wait creates (default: adaptive with the
	 * default spin; a wait-set member follows its set's). Call before open_wait. */
	void set_wait_policy(const wait_policy &p) noexcept { policy_ = p; }
	/* The waiter this object blocks on (private or the wait set's), nullptr for FI_WAIT_NONE.
	 */
	waiter *wait_object() const noexcept { return waiter_; }
	/* true when wait_object() is this object's own (not a wait set). */
	bool wait_is_private() const noexcept { return static_cast<bool>(own_); }
	/* The kind fi_control(FI_GETWAITOBJ) reports: FI_WAIT_NONE, the private waiter's kind, or
	 * FI_WAIT_SET when bound to a wait set. */
	enum fi_wait_obj wait_obj() const noexcept;
	/* Leaves every waiter, wait set and poll set, destroys the private waiter. Idempotent. */
	void close_wait() noexcept;
	/* Whether some poll set still holds this object. */
	bool in_poll_set() const noexcept;

	/* FI_GETWAIT / FI_GETWAITOBJ / ctl_get_waitable for the object's control slot; -FI_ENOSYS
	 * for any other command (the object handles its own first). FI_GETWAIT / FI_GETWAITOBJ
	 * answer for the private waiter or, for a wait-set member, for the wait set (its fd, its
	 * kind); with FI_WAIT_NONE they return -FI_ENODATA. */
	int answer_control(int command, void *arg) noexcept;

	/* ---- used by util::waiter and util::poll_set only ---- */
	void add_listener(listener *l);
	void remove_listener(listener *l) noexcept;

private:
	void report(bool wake) noexcept;

	mutable mutex listeners_mu_{lock_level::listeners};
	std::vector<listener *> listeners_;
	std::unique_ptr<waiter> own_; /* private waiter (destroyed in close_wait) */
	wait_policy policy_;          /* of own_ */
	waiter *waiter_ = nullptr;    /* own_.get() or the wait set's waiter */
};

/* The waitable behind a fid, found through fi_control(ctl_get_waitable): 0 and *out, or
 * -FI_EINVAL for NULL, -FI_ENOSYS for anything that is not a vwait CQ/counter/EQ. */
int get_waitable(struct fid *fid, waitable **out) noexcept;

} // namespace vwait::util

#endif
