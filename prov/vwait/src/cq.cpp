/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* The vwait completion queue over an ibv_cq. Work completions become completion records
 * (translate); records go to the util ring (progress) or, when the ring is empty, straight
 * into the caller's buffer (read_direct). */
#include "config.h"

#include "vwait/cq.h"
#include "vwait/domain.h"
#include "vwait/eq.h"
#include "vwait/util/cntr.h"
#include "vwait/util/enosys.h"
#include "vwait/util/wait.h"
#include "vwait/vwait.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

namespace vwait
{

namespace
{
/* fi_cq_open with size 0: upstream verbs' default. rxe rounds a CQ of n entries up to the
 * next power of two above n, so 4096 would map 8192 device entries where
 * upstream verbs maps 2048 (memory per CQ: make bench-scale, doc/benchmarks.md). */
constexpr size_t default_cq_size = 1024;
/* work completions taken from the ibv_cq per ibv_poll_cq */
constexpr size_t poll_batch = 16;
/* A CQ that is only polled (no waiter reads the device's async fd) looks at the async fd
 * for an overrun once per this many empty polls, and then only if the domain has not looked
 * for domain::async_poll_interval (a system call: at ~100 ns a poll, 4096 of them take half a
 * millisecond). */
constexpr unsigned idle_polls_per_async_check = 4096;

/* Whether a CQ opened with these attributes blocks on a waiter that polls fds (so that the
 * waiter drains the CQ's completion channel): FD, POLLFD, MUTEX_COND, UNSPEC (= FD), or a
 * wait set of one of those kinds. */
bool waiter_polls_fds(const struct fi_cq_attr &attr) noexcept
{
	int kind = util::raw_enum(attr.wait_obj);
	if (kind == FI_WAIT_SET) {
		util::waiter *set = nullptr;
		if (!attr.wait_set || util::get_waiter(&attr.wait_set->fid, &set) != 0 || !set)
			return false; /* open_wait refuses it */
		kind = set->kind();
	}
	switch (kind) {
	case FI_WAIT_UNSPEC:
	case FI_WAIT_FD:
	case FI_WAIT_POLLFD:
	case FI_WAIT_MUTEX_COND:
		return true;
	default:
		return false;
	}
}
} // namespace

int wc_status_error(enum ibv_wc_status status) noexcept
{
	switch (status) {
	case IBV_WC_SUCCESS:
		return 0;
	case IBV_WC_WR_FLUSH_ERR:
		return FI_ECANCELED;
	case IBV_WC_LOC_LEN_ERR:
		return FI_ETRUNC;
	case IBV_WC_LOC_PROT_ERR:
	case IBV_WC_REM_ACCESS_ERR:
	case IBV_WC_MW_BIND_ERR:
		return FI_EACCES;
	case IBV_WC_REM_INV_REQ_ERR:
		return FI_EINVAL;
	case IBV_WC_RETRY_EXC_ERR:
		return FI_ETIMEDOUT;
	case IBV_WC_RNR_RETRY_EXC_ERR:
		return FI_ENORX;
	case IBV_WC_REM_OP_ERR:
		return FI_EREMOTEIO;
	default:
		return FI_EIO;
	}
}

namespace
{

/* The counter a work completion counts on (see wr_ring): nullptr when none is bound. On error
 * a receive's opcode is undefined: it counts as a receive. */
util::sw_cntr *counter_of(const wr_ring &ring, uint64_t flags, const struct ibv_wc &wc) noexcept
{
	if (wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM)
		return ring.write_cntr;
	if (flags & FI_READ)
		return ring.read_cntr;
	if (flags & FI_WRITE)
		return ring.write_cntr;
	return ring.msg_cntr;
}

} // namespace

namespace
{
/* What translate needs of a slot, read before the slot goes back to its ring: from then on the
 * endpoint may post into it again. Scalars, so that they stay in registers. */
struct slot_view {
	void *context;
	uint64_t flags;
	size_t len;
	const void *buf;
	bool report;
};

/* The slot of a work completion given back to its ring (with the unsignalled ones posted
 * before it: RC completes a queue in order), and what translate needs of it. */
__attribute__((always_inline)) inline slot_view release_slot(const wr_slot &slot,
                                                             wr_ring &ring) noexcept
{
	const slot_view v{slot.context, slot.flags, slot.len, slot.buf, slot.report};
	ring.retire(slot);
	return v;
}

/* A successful work completion of a slot that wants an entry, as a completion record. */
__attribute__((always_inline)) inline bool fill_success(const struct ibv_wc &wc,
                                                        const slot_view &slot, const wr_ring &ring,
                                                        completion *out) noexcept
{
	completion c;
	c.context = slot.context;
	c.flags = slot.flags;
	c.len = slot.len;
	c.data = 0;
	c.err = 0;
	c.prov_errno = 0;
	c.status = IBV_WC_SUCCESS;
	c.src = FI_ADDR_NOTAVAIL;
	c.olen = 0;
	switch (wc.opcode) {
	case IBV_WC_RECV: {
		size_t got = wc.byte_len > ring.hidden ? wc.byte_len - ring.hidden : 0;
		if (got > c.len) {
			/* a datagram longer than the buffers: the rest went to the endpoint's
			 * spill buffer (ep::set_rx_spill), the receive is truncated */
			c.err = FI_ETRUNC;
			c.status = IBV_WC_LOC_LEN_ERR;
			c.olen = got - c.len;
			*out = c;
			return true;
		}
		c.len = got;
		if (ring.source && (wc.wc_flags & IBV_WC_GRH) && slot.buf)
			c.src = ring.source(ring.source_arg, slot.buf, wc.src_qp);
		if (wc.wc_flags & IBV_WC_WITH_IMM) {
			c.flags |= FI_REMOTE_CQ_DATA;
			c.data = ntohl(wc.imm_data);
		}
		break;
	}
	case IBV_WC_RECV_RDMA_WITH_IMM:
		c.flags = FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA;
		c.len = wc.byte_len;
		c.data = ntohl(wc.imm_data);
		break;
	default:
		break; /* send side: flags and len come from the slot */
	}
	*out = c;
	return true;
}

/* translate_wc off its short path: an error, a ring with counters, or one whose endpoint has
 * closed. */
__attribute__((noinline)) bool translate_rare(const struct ibv_wc &wc, const wr_slot &s,
                                              wr_ring &ring, completion *out) noexcept
{
	const slot_view slot = release_slot(s, ring);
	if (ring.closed.load(std::memory_order_acquire))
		return false;
	/* counters: every completion of their kind, whether reported or not (the endpoint keeps
	 * them alive until it closed its rings and passed verbs_cq::sync) */
	if (util::sw_cntr *k = counter_of(ring, slot.flags, wc)) {
		if (wc.status == IBV_WC_SUCCESS)
			k->add(1);
		else
			k->adderr(1);
	}
	if (wc.status != IBV_WC_SUCCESS) {
		completion c = {};
		c.context = slot.context;
		c.flags = slot.flags;
		c.src = FI_ADDR_NOTAVAIL;
		c.err = wc_status_error(wc.status);
		c.status = wc.status;
		c.prov_errno = static_cast<int>(wc.vendor_err);
		*out = c;
		return true;
	}
	return slot.report && fill_success(wc, slot, ring, out);
}

/* translate(), inline in the poll loops. The common case, a success on a ring with no counter
 * whose endpoint is open, costs a few loads. */
__attribute__((always_inline)) inline bool translate_wc(const struct ibv_wc &wc,
                                                        completion *out) noexcept
{
	if (wc.wr_id == probe_wr_id)
		return false;
	const auto &s = *reinterpret_cast<const wr_slot *>(static_cast<uintptr_t>(wc.wr_id));
	wr_ring *ring = s.ring;
	if (__builtin_expect(wc.status != IBV_WC_SUCCESS ||
	                         ring->closed.load(std::memory_order_acquire) || ring->counted(),
	                     0)) {
		completion r; /* through a copy: c of the caller stays out of memory */
		if (!translate_rare(wc, s, *ring, &r))
			return false;
		*out = r;
		return true;
	}
	const slot_view slot = release_slot(s, *ring);
	return slot.report && fill_success(wc, slot, *ring, out);
}
} // namespace

bool translate(const struct ibv_wc &wc, completion *out) noexcept
{
	return translate_wc(wc, out);
}

verbs_cq::verbs_cq(domain *dom, const struct fi_cq_attr &attr, size_t size)
    : util::sw_cq(
          &prov,
          [&] {
	          struct fi_cq_attr a = attr;
	          a.size = size;
	          return a;
          }(),
          dom->api_version()),
      domain_(dom), waiter_drains_(waiter_polls_fds(attr))
{
	set_wait_policy(get_params().wait);
}

verbs_cq::~verbs_cq()
{
	close_begin();
}

int verbs_cq::create_hw() noexcept
{
	/* the channel of its waiter when that waiter polls fds (its own, when the waiter is
	 * its own); otherwise the domain's channel of the CQs with no such waiter, which poll
	 * sets and counters drain */
	util::waiter *w = waiter_drains_ ? wait_object() : nullptr;
	if (int ret = domain_->channels().get(w, channel_, !wait_is_private()))
		return ret;
	channel_->cq_added();
	errno = 0;
	hw_.reset(ibv_create_cq(domain_->context(), static_cast<int>(size()),
	                        static_cast<cq_events *>(this),
	                        channel_ ? channel_->get() : nullptr, 0));
	if (!hw_) {
		int ret = verbs::create_code();
		FI_WARN(&prov, FI_LOG_CQ, "ibv_create_cq(%zu): %s\n", size(), fi_strerror(-ret));
		channel_->cq_removed();
		channel_.reset();
		return ret;
	}
	attach(hw_.get());
	return 0;
}

/* Before the CQ leaves its waiters: no event of it may be left unacked and the channel must
 * leave a private waiter while that waiter still exists. Holds progress_mutex_ across
 * ibv_destroy_cq, which waits for the acks a draining thread still owes: that thread acks
 * under cq_events::mu_ alone (event_read, under the waiter's sources shared), never under
 * progress_mutex_, so the wait ends; held, it keeps progress() off a CQ being destroyed.
 * Whoever acks a CQ event must never take progress_mutex_. */
void verbs_cq::close_begin() noexcept
{
	/* let go of the channel once progress_mutex_ is released (declared before the guard):
	 * its last reference takes it out of a waiter's sources (wait_sources, level 32, an
	 * outer level than cq_progress; the lock-check build aborted on it in the VM tier) */
	std::shared_ptr<comp_channel> channel;
	util::lock_guard<util::fast_mutex> lock(progress_mutex_);
	if (!hw_)
		return;
	begin_close();
	ack_all();
	/* statistics: make bench-scale's streaming section reads this line (FI_LOG_LEVEL=info) */
	FI_INFO(&prov, FI_LOG_CQ, "CQ %p closed: %llu arms, %llu channel events\n",
	        static_cast<void *>(this), static_cast<unsigned long long>(arms()),
	        static_cast<unsigned long long>(events()));
	hw_.reset(); /* waits for any ack a draining thread still owes */
	channel_->cq_removed();
	channel = std::move(channel_);
	util::lock_guard<util::mutex> cold(cold_mutex_);
	orphans_.clear();
}

void verbs_cq::adopt(std::shared_ptr<wr_ring> ring)
{
	util::lock_guard<util::mutex> lock(cold_mutex_);
	orphans_.erase(
	    std::remove_if(orphans_.begin(), orphans_.end(),
	                   [](const std::shared_ptr<wr_ring> &r) { return r->outstanding() == 0; }),
	    orphans_.end());
	if (ring->outstanding() != 0)
		orphans_.push_back(std::move(ring));
}

/* Under progress_mutex_: the device said this CQ overran; queue that once, first. */
void verbs_cq::report_overrun() noexcept
{
	if (!overrun_.load(std::memory_order_acquire) || overrun_reported_)
		return;
	struct fi_cq_err_entry err = {};
	err.err = FI_EOVERRUN;
	err.prov_errno = IBV_WC_GENERAL_ERR;
	int status = IBV_WC_GENERAL_ERR;
	if (push_error(err, &status, sizeof(status)) == 0)
		overrun_reported_ = true;
}

/* Under progress_mutex_: n translated completions into the ring, in order; successes in
 * batches (one wakeup each), an error keeps its place. */
void verbs_cq::queue(const completion *c, size_t n) noexcept
{
	util::cq_entry ok[poll_batch];
	size_t nok = 0;
	for (size_t i = 0; i < n; i++) {
		if (c[i].err == 0) {
			util::cq_entry &e = ok[nok++];
			e = util::cq_entry{};
			e.op_context = c[i].context;
			e.flags = c[i].flags;
			e.len = c[i].len;
			e.data = c[i].data;
			e.src_addr = c[i].src;
			if (nok == poll_batch) {
				push_n(ok, nok);
				nok = 0;
			}
			continue;
		}
		push_n(ok, nok);
		nok = 0;
		struct fi_cq_err_entry err = {};
		err.op_context = c[i].context;
		err.flags = c[i].flags;
		err.err = c[i].err;
		err.prov_errno = c[i].prov_errno;
		err.len = c[i].err == FI_ETRUNC ? c[i].len : 0;
		err.olen = c[i].olen;
		int status = c[i].status;
		push_error(err, &status, sizeof(status));
	}
	push_n(ok, nok);
}

/* Under progress_mutex_: up to max (<= poll_batch) work completions from the ibv_cq into wc;
 * how many, or -1 when ibv_poll_cq failed. */
inline int verbs_cq::poll_wc(struct ibv_wc *wc, size_t max) noexcept
{
	int n = ibv_poll_cq(hw_.get(), static_cast<int>(max), wc);
	if (__builtin_expect(n > 0, 1))
		return n;
	if (n < 0) {
		FI_WARN_SPARSE(&prov, FI_LOG_CQ, "ibv_poll_cq: %d\n", n);
		return -1;
	}
	if (++idle_polls_ >= idle_polls_per_async_check) {
		/* nothing: now and then, look for an overrun on the async fd, and, while no
		 * thread of the process has slept (no EQ thread yet), have the reader drain the
		 * rdma_cm channels once it holds no lock (eq.h) */
		idle_polls_ = 0;
		domain_->poll_async_events_now_and_then();
		if (!util::blocking_seen())
			control_due.store(true, std::memory_order_relaxed);
	}
	return 0;
}

namespace
{
/* n work completions translated into c; how many are to be reported (the others are dropped) */
int translate_all(const struct ibv_wc *wc, int n, completion *c) noexcept
{
	int kept = 0;
	for (int i = 0; i < n; i++)
		if (translate_wc(wc[i], &c[kept]))
			kept++;
	return kept;
}
} // namespace

void verbs_cq::progress() noexcept
{
	util::lock_guard<util::fast_mutex> lock(progress_mutex_);
	if (!hw_)
		return;
	report_overrun();
	for (;;) {
		size_t room = size() - queued();
		if (room == 0)
			return; /* the rest waits in the hardware CQ */
		struct ibv_wc wc[poll_batch];
		int polled = poll_wc(wc, std::min(room, poll_batch));
		if (polled <= 0) {
			if (polled == 0 && stranded_due_.load(std::memory_order_acquire))
				flush_stranded();
			return;
		}
		completion c[poll_batch];
		int kept = translate_all(wc, polled, c);
		if (!sink_) /* an internal CQ: translate() counted, nothing to queue */
			queue(c, static_cast<size_t>(kept));
		if (static_cast<size_t>(polled) < poll_batch) {
			if (stranded_due_.load(std::memory_order_acquire))
				flush_stranded();
			return;
		}
	}
}

void verbs_cq::flush_in_software(std::shared_ptr<wr_ring> ring)
{
	{
		util::lock_guard<util::mutex> lock(cold_mutex_);
		if (std::find(stranded_.begin(), stranded_.end(), ring) == stranded_.end())
			stranded_.push_back(std::move(ring));
		stranded_due_.store(true, std::memory_order_release);
	}
	on_event(); /* a waiter asleep on this CQ looks again */
}

/* Under progress_mutex_, the hardware CQ found empty: what the device left of each stranded
 * ring completes as flushed, through translate() as a device's flush would (counted, its slot
 * retired), oldest first, as far as the software ring has room. Before the hardware CQ was
 * empty, the device's own completions of the ring could still be in it, ahead. */
void verbs_cq::flush_stranded() noexcept
{
	util::lock_guard<util::mutex> lock(cold_mutex_);
	for (auto it = stranded_.begin(); it != stranded_.end();) {
		wr_ring &ring = **it;
		if (ring.closed.load(std::memory_order_acquire)) {
			it = stranded_.erase(it);
			continue;
		}
		/* the ring hands out slots round-robin from 0: work request seq is in slot
		 * seq % nslots */
		while (ring.outstanding() != 0 && queued() < size()) {
			const uint64_t seq = ring.retired.load(std::memory_order_relaxed);
			const wr_slot &s = ring.slots[seq % ring.nslots];
			if (s.seq != seq || s.ring != &ring)
				break; /* not a slot posted in order: leave it to the device */
			struct ibv_wc wc = {};
			wc.wr_id = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(&s));
			wc.status = IBV_WC_WR_FLUSH_ERR;
			completion c;
			if (translate_wc(wc, &c) && !sink_)
				queue(&c, 1);
		}
		++it;
	}
	if (stranded_.empty())
		stranded_due_.store(false, std::memory_order_release);
}

/* Under progress_mutex_, for read_direct: polled work completions in wc, then more while the
 * device gives full batches and the caller has room; what fi_cq_read returns. One work
 * completion at a time, translated in registers and written straight into the caller's
 * buffer: this is the loop of a spinning reader, kept free of copies and calls. */
__attribute__((always_inline)) inline ssize_t
verbs_cq::hand_over(struct ibv_wc *wc, int polled, void *buf, size_t count, fi_addr_t *src) noexcept
{
	auto *out = static_cast<uint8_t *>(buf);
	const enum fi_cq_format fmt = format();
	size_t done = 0;
	bool error = false;
	for (;;) {
		for (int j = 0; j < polled; j++) {
			completion c;
			if (!translate_wc(wc[j], &c))
				continue;
			if (__builtin_expect(c.err != 0, 0)) {
				/* an error: it and the rest go to the ring, in order */
				queue_tail(c, wc + j + 1, polled - j - 1);
				error = true;
				break;
			}
			if (src)
				src[done] = c.src;
			if (fmt == FI_CQ_FORMAT_CONTEXT) { /* the common case, no copy */
				std::memcpy(out + done * sizeof(struct fi_cq_entry), &c.context,
				            sizeof(c.context));
			} else if (fmt == FI_CQ_FORMAT_DATA) { /* ofi_rxm's core CQs */
				struct fi_cq_data_entry d;
				d.op_context = c.context;
				d.flags = c.flags;
				d.len = c.len;
				d.buf = nullptr;
				d.data = c.data;
				std::memcpy(out + done * sizeof(d), &d, sizeof(d));
			} else {
				util::cq_entry e;
				e.op_context = c.context;
				e.flags = c.flags;
				e.len = c.len;
				e.data = c.data;
				util::cq_entry_copy_out(fmt, e,
				                        out + done * util::cq_entry_size(fmt));
			}
			done++;
		}
		if (error || static_cast<size_t>(polled) < poll_batch || done >= count)
			break;
		polled = poll_wc(wc, std::min(count - done, poll_batch));
		if (polled <= 0)
			break;
	}
	if (done)
		return static_cast<ssize_t>(done);
	return queued() != 0 ? -FI_EAVAIL : -FI_EAGAIN;
}

/* fi_cq_read with nothing queued: the completions go from the ibv_cq straight into the
 * caller's buffer (no copy through the ring, no wakeup); the first error and what follows it
 * go to the ring, in order. Anything queued already: the ring path, which keeps the order.
 * Kept short for the empty poll of a spinning reader (one ibv_poll_cq under the lock);
 * hand_over() does the rest. */
verbs_cq::direct_read verbs_cq::read_direct(void *buf, size_t count, fi_addr_t *src) noexcept
{
	ssize_t none;
	{
		util::lock_guard<util::fast_mutex> lock(progress_mutex_);
		if (!hw_ || overrun_.load(std::memory_order_acquire) || queued() != 0 ||
		    stranded_due_.load(std::memory_order_relaxed))
			return direct_read::via_ring();
		struct ibv_wc wc[poll_batch];
		int polled = poll_wc(wc, std::min(count, poll_batch));
		if (polled > 0)
			return direct_read::took(hand_over(wc, polled, buf, count, src));
		none = queued() != 0 ? -FI_EAVAIL : -FI_EAGAIN;
	}
	control_progress_if_due(); /* a spinning reader's share of control progress (eq.h) */
	return direct_read::took(none);
}

/* Under progress_mutex_, for hand_over: the error record first and the rest of its batch
 * after it, into the ring in order. Out of the read loop's way. */
__attribute__((noinline, cold)) void verbs_cq::queue_tail(completion first,
                                                          const struct ibv_wc *rest, int n) noexcept
{
	queue(&first, 1);
	completion c[poll_batch];
	queue(c, static_cast<size_t>(translate_all(rest, n, c)));
}

void verbs_cq::on_event() noexcept
{
	notify();
	util::lock_guard<util::mutex> lock(cold_mutex_);
	for (util::waitable *w : event_listeners_)
		w->wake();
}

void verbs_cq::add_event_listener(util::waitable *w)
{
	util::lock_guard<util::mutex> lock(cold_mutex_);
	event_listeners_.push_back(w);
}

void verbs_cq::remove_event_listener(util::waitable *w) noexcept
{
	util::lock_guard<util::mutex> lock(cold_mutex_);
	auto it = std::find(event_listeners_.begin(), event_listeners_.end(), w);
	if (it != event_listeners_.end())
		event_listeners_.erase(it);
}

bool verbs_cq::events_from(util::event_source &out) const noexcept
{
	if (!channel_)
		return false;
	out.fd = channel_->fd();
	out.drain = comp_channel::drain_source;
	out.arg = channel_.get();
	return true;
}

bool verbs_cq::poll_ready(uint64_t &) noexcept
{
	if (queued() > 0)
		return true;
	progress();
	if (queued() > 0)
		return true;
	/* empty: ask for an event on the next completion, then look once more for one that
	 * came before the arming */
	if (channel_ && cq_events::arm() != 0)
		return true; /* cannot arm: keep it on the list rather than lose it */
	progress();
	return queued() > 0;
}

int verbs_cq::arm() noexcept
{
	if (!channel_)
		return 0;
	return cq_events::arm();
}

/* prov_errno is the vendor error; err_data (when given) holds the ibv_wc_status. */
std::string verbs_cq::describe_error(int prov_errno, const void *err_data) const
{
	int status = prov_errno;
	if (err_data)
		memcpy(&status, err_data, sizeof(status));
	return ibv_wc_status_str(static_cast<enum ibv_wc_status>(status));
}

int cq_open(struct fid_domain *domain_fid, struct fi_cq_attr *attr, struct fid_cq **out,
            void *context) noexcept
{
	if (!domain_fid || !attr || !out) {
		FI_WARN(&prov, FI_LOG_CQ, "fi_cq_open: %s is NULL\n",
		        !domain_fid ? "domain" : (!attr ? "attr" : "cq"));
		return -FI_EINVAL;
	}
	*out = nullptr;
	domain *dom = domain_of(domain_fid);
	/* any size is clamped to the device's max_cqe (rxm asks rxe for more than it has) */
	struct fi_cq_attr clamped = *attr;
	size_t max = static_cast<size_t>(dom->device_attr().max_cqe);
	clamped.size = attr->size ? attr->size : std::min(default_cq_size, max);
	if (clamped.size > max) {
		FI_INFO(&prov, FI_LOG_CQ, "fi_cq_open: size %zu clamped to max_cqe %zu\n",
		        clamped.size, max);
		clamped.size = max;
	}
	if (int ret = util::cq_check_attr(&prov, &clamped))
		return ret;
	return guard([&] {
		auto obj = std::make_unique<verbs_cq>(dom, clamped, clamped.size);
		verbs_cq *raw = obj.get();
		struct fid_cq *fid = nullptr;
		if (int ret = util::cq_install(std::move(obj), &fid, context))
			return ret;
		if (int ret = raw->create_hw()) {
			fi_close(&fid->fid);
			return ret;
		}
		*out = fid;
		return FI_SUCCESS;
	});
}

} // namespace vwait
