/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* The lock order of vwait: every mutex of prov/util and prov/vwait, in one place.
 *
 * A thread that holds a lock of level N takes only locks of a level greater than N (outermost
 * first, leaves last). Two locks of the same level are never held together. The order below
 * is the one the code uses today, read from every lock site and followed through the calls.
 * Every mutex is an annotated util:: type (util/thread_safety.h, util/fast_mutex.h)
 * constructed with its level from the enum at the end; a build configured with
 * --enable-lock-check (CI's unit, ASan and TSan stages; --enable-debug) aborts on a take out
 * of this order, naming both levels (util/lock_check.h). The fabric and the domain have no
 * lock of their own on any path (domain::async_mutex_ is only ever try-locked, see
 * exceptions).
 *
 * ---- the order, outermost first ----------------------------------------------------------
 *
 * level  mutex                                    guards / taken under it
 *  10    ep::mutex_ (fast_mutex, ep.h)            the endpoint's bindings, enabled_, the tx
 *                                                 ring's posting. Posting: ibv_post_send only.
 *                                                 Control (bind, enable, connect, accept,
 *                                                 getname): enable holds it across
 *                                                 verbs_cntr::add_feed (20..) and
 *                                                 rc_ep::create_qp (50), why: ep::enable.
 *  10    pep::mutex_ (ep.h)                       the passive endpoint's id and its EQ;
 *                                                 rdma_migrate_id / rdma_listen under it, no
 *                                                 vwait lock.
 *  12    waiter::members_mu (shared_mutex,        a waiter's / wait set's members. Shared while
 *        util/wait.h)                             calling into members (their poll/trywait:
 *                                                 a CQ's progress 60, a counter's feeds 20);
 *                                                 exclusive to attach/detach, which take 90.
 *  14    poll_set::members_mu_ (shared_mutex,     a poll set's members; shared while calling
 *        prov/util/src/poll.cpp)                  into them, exclusive to add/del (takes 90).
 *  16    poll_set::polled_mu_ (poll.cpp)          the round-robin over members that do not
 *                                                 notify themselves; calls into them (20, 60).
 *  20    verbs_cntr::feeds_mu_ (cntr.h)           the CQs feeding a counter; under it: the
 *                                                 CQ's progress (60), its event listeners
 *                                                 (62), its cq_events (74), the counter's
 *                                                 waiter's sources (32, exclusive).
 *  30    channel_registry::mu_ (channel.h)        the domain's completion channels per waiter;
 *                                                 creating one adds its fd as a source (32).
 *  32    waiter::sources_mu (shared_mutex,        a waiter's fd sources. Shared while draining
 *        wait.h)                                  them: the drains run the EQ's progress (40),
 *                                                 cq_events (74) and CQ event listeners (62),
 *                                                 the domain's async events (70), notify (90);
 *                                                 exclusive to add/remove; takes 96.
 *  36    eq_registry_mu (eq.cpp)                  the open EQs; under it: 38 (the blocking
 *                                                 hook starts their threads) and 40 (a
 *                                                 spinning reader's control progress, which
 *                                                 only try-locks 36).
 *  38    verbs_eq::thread_mu_ (eq.h)              starting and stopping the EQ's thread; under it
 *                                                 only helper_thread's own locks.
 *  40    verbs_eq::progress_mutex_ (eq.h)         keeps CM events in order; under it: 42, 50
 *                                                 (rc_ep::disconnected), 80 (push), FI_WARN.
 *  42    verbs_eq::probe_mutex_ (eq.h)            the keepalive's endpoints and the held
 *                                                 FI_SHUTDOWNs; under it: 50 (rc_ep::probe),
 *                                                 60 (rc_ep::unread_marks drives a CQ), 80,
 *                                                 90, FI_WARN.
 *  50    rc_ep::qp_mutex_ (ep.h)                  the QP's creation and destruction against
 *                                                 disconnected() and probe(); verbs calls and
 *                                                 FI_WARN only. ~rc_ep destroys the QP under
 *                                                 its EQ's 40 too (verbs_eq::hold_progress).
 *  52    ep::rx_mutex_ (fast_mutex, ep.h)         the rx ring's posting; ibv_post_recv only.
 *  60    verbs_cq::progress_mutex_ (fast_mutex,   the order of completions; under it:
 *        cq.h)                                    62, 70 (try_lock only), 72 (a UD ring's
 *                                                 source, av::source), 74, 80 (queue), then
 *                                                 90 (notify, a counter's wake), FI_WARN.
 *                                                 Held across ibv_destroy_cq at close, why:
 *                                                 verbs_cq::close_begin.
 *  62    verbs_cq::cold_mutex_ (cq.h)             the CQ's cold-path lists: rings of closed
 *                                                 endpoints, and the counters fed by its
 *                                                 events (under it their wake(), 90).
 *  70    domain::async_mutex_ (domain.h)          one reader of the async fd; try_lock only;
 *                                                 under it: a CQ's notify (90), FI_WARN.
 *  72    av::mutex_ (av.h)                        the address table; leaf (ibv_create_ah).
 *  74    cq_events::mu_ (channel.h)               a CQ's armed state and unacked events;
 *                                                 verbs calls and FI_WARN only. event_read
 *                                                 drops it before on_event().
 *  76    util::mr_cache::mu_ (util/mr_cache.h)   a domain's registration cache: lookups,
 *                                                 ibv_reg_mr / ibv_dereg_mr through its
 *                                                 callbacks, then 78 (watch). The monitor's
 *                                                 reader takes neither 76 nor 78.
 *  78    util::mem_monitor::mu_                   opening / closing the uffd, starting and
 *        (util/mem_monitor.h)                     joining its reader, UFFDIO_REGISTER; leaf.
 *  80    util::sw_cq::lock_ (util/cq.h),          the software queues; leaves: notify() runs
 *        util::sw_eq::lock_ (util/eq.h)           after the lock is dropped.
 *  90    waitable::listeners_mu_ (util/waitable.h) a waitable's waiters and poll sets; under
 *                                                 it their notify(): 94, 96 (wake), signals.
 *  94    ready_list::mu_ (fast_mutex,             queued members; leaf.
 *        util/ready_list.h)
 *  96    waiter::blocking_state::mu (wait.h)      the sleepers and leader of a blocking wait,
 *                                                 and for MUTEX_COND the mutex handed out by
 *                                                 FI_GETWAIT; leaf (held across cv waits).
 *  97    helper_thread's registry                 the provider's threads (util/helper_thread.h);
 *        (prov/util/src/helper_thread.cpp)        taken under 96 (starting a MUTEX_COND
 *                                                 helper); under it only 99.
 *  98    pollfd_set::mu_ (fast_mutex,             an fd set; leaf (snapshot under 32).
 *        util/fdset.h)
 *  99    helper_thread::mu_ (helper_thread.h)     one thread's handle; stop() joins under it,
 *                                                 and stop_all (the provider's cleanup, at
 *                                                 fi_fini) under 97 and it: a thread's body
 *                                                 never starts or stops a helper_thread.
 * 100    inline_mutex (prov/vwait/src/           "alone": the per-device max_inline cache;
 *        info_probe.cpp)                          taken with no other lock held, takes none.
 * 100    spare_signals.mu (prov/util/src/wait.cpp) "alone": the eventfds of threads that
 *                                                 ended (thread_signal); taken with no other
 *                                                 lock held, takes none.
 * 100    plugs_mu (prov/vwait/src/verbs.cpp)      "alone": siw's mmap key plugs, by context;
 *                                                 taken with no other lock held, takes none.
 *
 * ---- the rules ----------------------------------------------------------------------------
 *  1. One mutex per object; drop your own lock before calling into another object. The
 *     exceptions are the edges written above (a set calling into its members under its
 *     shared members lock, a counter driving its CQs under feeds_mu_, a CQ's progress
 *     counting and queueing into software objects, the EQ's progress telling endpoints).
 *  2. notify(), wake() and close_wait() of a waitable run with no lock of that object held
 *     (util/waitable.h, item 4); close_wait() drops listeners_mu_ before listener::forget(),
 *     which takes the listener's members lock (12/14) exclusive.
 *  3. Application callbacks and code outside vwait (libfabric's core, another provider's
 *     fid) are called with no vwait lock held. FI_WARN may run under any lock (it only
 *     formats and writes); FI_WARN_SPARSE likewise.
 *  4. FI_WAIT_MUTEX_COND: the application must not hold the FI_GETWAIT mutex (96) while
 *     calling into vwait: notify() takes it to broadcast the cond.
 *  5. A shared_mutex is never taken again, shared, by a thread that holds it (a waiting
 *     writer would deadlock it).
 *
 * ---- checked ------------------------------------------------------------------------------
 * At run time, in a lock-check build: every take of every mutex above against the levels the
 * thread holds (util/lock_check.h; a try_lock is not checked, it never waits).
 * At compile time, by Clang's thread-safety analysis (util/thread_safety.h; every clang
 * build, CI's fuzz stage with -Werror): the members marked VWAIT_GUARDED_BY and the functions
 * marked VWAIT_REQUIRES, for a lock held through util::lock_guard or util::shared_lock. A lock
 * held through std::unique_lock / std::shared_lock (an unlock mid-scope, a cv wait:
 * util::cv_lock) is seen by the run-time check only.
 *
 * ---- known exceptions ----------------------------------------------------------------------
 *  - domain::poll_async_events try-locks async_mutex_ (70) from a CQ's poll_wc, under that
 *    CQ's progress_mutex_ (60), and from the async fd's drain under sources_mu (32): a
 *    thread that finds it held skips the read, so it is never waited for under another lock.
 *  - rc_ep::probe (under probe_mutex_ 42 and qp_mutex_ 50) posts the keepalive probe with
 *    ibv_post_send without ep::mutex_ (10): it uses the send slot reserved for it.
 *
 * ---- decided where they are --------------------------------------------------------------
 * Three spots that hold a lock across calls into other objects or blocking verbs calls, each
 * explained at the code: ep::enable (ep.cpp), verbs_cq::close_begin (cq.cpp) and the
 * rdma_migrate_id calls under an endpoint's lock (rc_ep::migrate_to_eq, cm.cpp; pep.cpp).
 */
#ifndef VWAIT_UTIL_LOCK_ORDER_H
#define VWAIT_UTIL_LOCK_ORDER_H

namespace vwait::lock_level
{

/* The levels above: every mutex is constructed with its own (util/thread_safety.h), and a
 * lock-check build aborts on a take out of this order (util/lock_check.h). */
enum : int {
	endpoint = 10,     /* ep::mutex_, pep::mutex_ */
	wait_members = 12, /* util::waiter::members_mu */
	poll_members = 14, /* poll_set::members_mu_ */
	poll_polled = 16,  /* poll_set::polled_mu_ */
	cntr_feeds = 20,   /* verbs_cntr::feeds_mu_ */
	channels = 30,     /* channel_registry::mu_ */
	wait_sources = 32, /* util::waiter::sources_mu */
	eq_registry = 36,  /* eq_registry_mu (eq.cpp) */
	eq_thread = 38,    /* verbs_eq::thread_mu_ */
	eq_progress = 40,  /* verbs_eq::progress_mutex_ */
	eq_probe = 42,     /* verbs_eq::probe_mutex_ */
	qp = 50,           /* rc_ep::qp_mutex_ */
	rx_post = 52,      /* ep::rx_mutex_ */
	cq_progress = 60,  /* verbs_cq::progress_mutex_ */
	cq_cold = 62,      /* verbs_cq::cold_mutex_ (orphaned rings, event listeners) */
	async_events = 70, /* domain::async_mutex_ (try_lock only) */
	av_table = 72,     /* av::mutex_ */
	cq_events = 74,    /* cq_events::mu_ */
	mr_cache = 76,     /* util::mr_cache::mu_ */
	mem_monitor = 78,  /* util::mem_monitor::mu_ */
	sw_queue = 80,     /* util::sw_cq::lock_, util::sw_eq::lock_ */
	listeners = 90,    /* waitable::listeners_mu_ */
	ready = 94,        /* ready_list::mu_ */
	wait_block = 96,   /* util::waiter::blocking_state::mu */
	threads = 97,      /* helper_thread's registry */
	fdset = 98,        /* pollfd_set::mu_ */
	thread = 99,       /* helper_thread::mu_ */
	alone = 100,       /* taken with no other lock held, takes none: inline_mutex,
	                    * spare_signals.mu, plugs_mu */
};

} // namespace vwait::lock_level

#endif
