/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* The vwait event queue: rdma_cm events of the endpoints bound to it, turned into libfabric
 * CM events, plus what fi_eq_write adds, on the util layer's EQ. */
#ifndef VWAIT_EQ_H
#define VWAIT_EQ_H

#include "vwait/cm.h"
#include "vwait/fabric.h"
#include "vwait/util/eq.h"
#include "vwait/util/fid.h"
#include "vwait/util/held.h"
#include "vwait/util/helper_thread.h"
#include "vwait/util/thread_safety.h"
#include "vwait/verbs.h"

#include <rdma/fi_eq.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace vwait
{

/* The vwait EQ: the util layer's software EQ (entries of any length, error entries, FI_PEEK,
 * fi_eq_write, every wait object, wait sets, fi_trywait, FI_GETWAIT / FI_GETWAITOBJ) fed from
 * an rdma_cm event channel. The channel's fd (non-blocking) is an fd source of the EQ's
 * waiter: whoever waits on it (fi_eq_sread, fi_wait on a wait set, the MUTEX_COND helper
 * thread) or tries (fi_trywait) drains it through progress(), which turns each rdma_cm event
 * into an entry (FI_CONNREQ, FI_CONNECTED, FI_SHUTDOWN, or an error entry) and acknowledges
 * it at once. Reads drain it too, so FI_WAIT_NONE EQs work by polling.
 * Control progress is FI_PROGRESS_AUTO: a disconnect moves the endpoint's QP to the error state
 * (its posted work flushes into its CQs and counters, whose waiters wake) even when nobody
 * reads or waits on the EQ; the entries wait in the EQ for the application. Who drains the
 * channel then depends on whether anything in the process sleeps:
 *  - a provider thread per EQ, once some thread of the process may sleep (util::
 *    note_blocking: a blocking call past its poll phase, fi_trywait, FI_GETWAIT; not
 *    fi_eq_sread on the EQ's private waiter, whose sleeper drains the channel itself), once a
 *    FI_SHUTDOWN is held (the hold ends by time too), or when keepalive is on: it sleeps in
 *    poll() on the channel and drains it as soon as an event arrives; started at fi_eq_open
 *    or later, ended by fi_close. While the EQ is full, it waits for room;
 *  - before that, the readers that spin: every 4096th empty poll of a verbs CQ marks control
 *    progress due (control_due), and the next fi_cq_read that comes back empty, or
 *    fi_cntr_read, drains the channels of the EQs with no thread (spin_progress). A process
 *    that only spins so never starts a second thread, whose mere existence makes glibc take
 *    slower paths for good (every system call, every uncontended mutex).
 * Keepalive (FI_VWAIT_KEEPALIVE_MS > 0): the thread wakes every period and probes each
 * connected endpoint of this EQ (cm_target::probe); one whose QP went to the error state (the
 * RC retry budget of a probe or of the application's own work ran out) gets FI_SHUTDOWN at
 * once and is disconnected (the DISCONNECTED that follows adds no second FI_SHUTDOWN).
 * Shutdown hold (FI_VWAIT_SHUTDOWN_HOLD_MS > 0): a peer's disconnect first moves what had
 * completed on the endpoint up from its verbs CQs (cm_target::unread_marks), then flushes the
 * QP. When the CQs the application reads then hold entries, FI_SHUTDOWN waits until those
 * have been read (or the hold's time is up): an application that closes the endpoint on
 * FI_SHUTDOWN and only then drains its CQ (ofi_rxm) has seen the messages that arrived before
 * the peer left. The thread looks every millisecond while a hold waits, and so does every
 * read of the EQ; an endpoint that closes drops its hold (no FI_SHUTDOWN names it). */
class verbs_eq final : public util::sw_eq
{
public:
	verbs_eq(fabric *fab, const struct fi_eq_attr &attr, verbs::event_channel_ptr ch);
	~verbs_eq() override;

	/* After util::eq_install set up the wait object: the channel becomes a source of it,
	 * and the thread starts when keepalive is on or the process has blocked already.
	 * 0 or a negative FI_E* code. */
	int start() noexcept;
	/* The EQ's thread, started once (see the class comment): 0, or a negative FI_E* code
	 * with a warning. */
	int ensure_thread() noexcept;
	/* util's blocking hook (util::set_blocking_hook): the thread of every open EQ starts. */
	static void start_threads() noexcept;
	/* A spinning reader's share of control progress: each open EQ with no thread drains its
	 * channel. Called with no provider lock held (control_progress_if_due). */
	static void spin_progress() noexcept;

	struct rdma_event_channel *channel() const noexcept { return channel_.get(); }
	fabric *parent() const noexcept { return fabric_.get(); }
	/* An endpoint that closes leaves the keepalive's list (before its QP goes). */
	void unprobe(cm_target *t) noexcept;
	/* While the lock lives no thread is inside rdma_get_cm_event on this channel. librdmacm
	 * moves an id's QP there, before it hands the event out (to RTR and RTS on a connect
	 * response, to ERR on a reject): an endpoint whose id is on this channel destroys its
	 * QP under this lock, or the move may touch a freed QP. */
	std::unique_lock<util::mutex> hold_progress() noexcept
	{
		return std::unique_lock<util::mutex>(progress_mutex_);
	}
	/* A connection attempt that failed inside fi_connect, where an iWARP device makes its
	 * TCP connection (siw: rdma_connect refuses at once): queued as the error entry that
	 * RoCE's rdma_cm event makes, err a positive FI_E* code. */
	void connect_failed(struct fid *fid, int err) noexcept;

protected:
	void progress() noexcept override;
	std::string describe_error(int prov_errno, const void *err_data) const override;
	void discard(uint32_t event, const void *entry, size_t len) noexcept override;
	void closing() noexcept override;

private:
	/* The AUTO progress thread's loop (see the class comment). */
	void auto_progress() noexcept;
	/* One rdma_cm event into at most one entry (under progress_mutex_): true when it
	 * queued one. Throws when it could not (the event is then lost, with a warning). */
	bool convert(struct rdma_cm_event *ev);
	void push_cm(uint32_t event, struct fid *fid, struct fi_info *info, const uint8_t *data,
	             size_t len);
	void push_cm_error(struct fid *fid, int err, int prov_errno, const uint8_t *data,
	                   size_t len);

	util::held<fabric> fabric_;
	verbs::event_channel_ptr channel_;
	/* keeps events in order across draining threads */
	util::mutex progress_mutex_{lock_level::eq_progress};
	int stop_fd_ = -1; /* eventfd: readable when the thread must end */
	/* eventfd: readable when a hold began in another thread's progress, while the thread may
	 * sleep in poll() without a timeout (made with the thread, closed in ~verbs_eq) */
	std::atomic<int> kick_fd_{-1};
	void kick_thread() noexcept;
	/* keepalive: endpoints connected through this EQ; those already given FI_SHUTDOWN */
	void probe_all() noexcept;
	util::mutex probe_mutex_{lock_level::eq_probe};
	std::set<cm_target *> probed_, shut_;
	/* Shutdown hold: a disconnected endpoint whose FI_SHUTDOWN waits for its CQs to be read
	 * past their marks, or for the deadline (under probe_mutex_). */
	struct shutdown_hold {
		cm_target *target;
		std::vector<cm_target::cq_mark> marks;
		std::chrono::steady_clock::time_point deadline;
	};
	std::vector<shutdown_hold> holds_;
	std::atomic<size_t> hold_count_{0}; /* holds_.size(), read without the lock */
	/* Queues FI_SHUTDOWN for every hold that is over (under progress_mutex_). */
	void release_holds() noexcept;
	/* progress() under progress_mutex_: the holds, then the channel's events */
	void drain_channel() noexcept;
	bool hold_queued_ = false; /* under progress_mutex_: a hold began since progress() looked */
	util::helper_thread thread_;
	util::mutex thread_mu_{lock_level::eq_thread}; /* starting and stopping thread_ */
	bool closed_ = false; /* under thread_mu_: no thread starts any more */
	std::atomic<bool> threaded_{false};
	/* the list of open EQs (eq.cpp), under its lock */
	verbs_eq *prev_ = nullptr, *next_ = nullptr;
	bool listed_ = false;
};

/* Set now and then by an empty poll of a verbs CQ while no thread of the process has slept
 * (verbs_cq::poll_wc); a spinning reader then runs verbs_eq::spin_progress once it holds no
 * lock. */
extern std::atomic<bool> control_due;
inline void control_progress_if_due() noexcept
{
	if (__builtin_expect(control_due.load(std::memory_order_relaxed), 0))
		verbs_eq::spin_progress();
}

/* The vwait EQ behind a fid handed to fi_ep_bind / fi_pep_bind: nullptr for anything else (an
 * EQ of another provider, not an EQ at all). */
/* struct fi_ops_fabric::eq_open */
int eq_open(struct fid_fabric *fabric, struct fi_eq_attr *attr, struct fid_eq **eq,
            void *context) noexcept;

} // namespace vwait

#endif
