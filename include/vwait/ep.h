/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* vwait endpoints: the base every kind shares, the MSG endpoint (an RC QP through rdma_cm)
 * and passive endpoints. */
#ifndef VWAIT_EP_H
#define VWAIT_EP_H

#include "vwait/cm.h"
#include "vwait/cntr.h"
#include "vwait/cq.h"
#include "vwait/domain.h"
#include "vwait/eq.h"
#include "vwait/fabric.h"
#include "vwait/flow_ctrl.h"
#include "vwait/info.h"
#include "vwait/util/fast_mutex.h"
#include "vwait/util/fid.h"
#include "vwait/util/held.h"
#include "vwait/verbs.h"
#include "vwait/wr_ring.h"

#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace vwait
{

class pep final : public cm_target
{
public:
	pep(fabric *fab, info_ptr info, verbs::cm_id_ptr id);
	~pep() override;

	struct fid *cm_fid() noexcept override { return fid_; }
	bool active_side() const noexcept override { return false; }
	struct fi_info *connreq_info(struct rdma_cm_id *id) noexcept override;
	void disconnected(struct rdma_cm_id *) noexcept override {}

	int bind(struct fid *bfid, uint64_t flags) noexcept;
	int listen() noexcept;
	int getname(void *addr, size_t *addrlen) noexcept;
	int setname(void *addr, size_t addrlen) noexcept;
	int reject(struct fid *handle, const void *param, size_t paramlen) noexcept;
	int getopt(int level, int optname, void *optval, size_t *optlen) noexcept;

	/* fi_endpoint with info->handle this passive endpoint: its id (bound by fi_setname or
	 * src_addr) moves to the active endpoint, synchronous until that endpoint connects; the
	 * passive endpoint refuses everything after but fi_close. A listening one, or one whose
	 * id is gone already, refuses. restore_id gives it back when fi_endpoint fails after. */
	int take_id(verbs::cm_id_ptr *out) noexcept;
	void restore_id(verbs::cm_id_ptr id) noexcept;

	void set_fid(struct fid *fid) noexcept { fid_ = fid; }
	fabric *parent() const noexcept { return fabric_.get(); }

private:
	bool given_away(const char *call) const noexcept;

	util::held<fabric> fabric_;
	info_ptr info_;
	verbs::cm_id_ptr id_;
	util::held<verbs_eq> eq_;
	bool bound_ = false;
	bool listening_ = false;
	struct fid *fid_ = nullptr;
	util::mutex mutex_{lock_level::endpoint};
};

/* The endpoint base: what every endpoint kind shares. It owns the work-request rings (one per
 * queue of its QP), the CQ, EQ and counter binds, fi_enable's counter plumbing, the posting of
 * work requests (msg.cpp, rma.cpp) and the teardown after the QP. A kind (rc_ep) adds its QP:
 * its checks before fi_enable, its creation, its destruction (first thing in its destructor,
 * after close_rings()). */
class ep
{
public:
	ep(domain *dom, info_ptr info);
	virtual ~ep();
	ep(const ep &) = delete;
	ep &operator=(const ep &) = delete;

	int bind(struct fid *bfid, uint64_t flags) noexcept;
	int enable() noexcept;
	int getopt(int level, int optname, void *optval, size_t *optlen) noexcept;
	int setopt(int level, int optname, const void *optval, size_t optlen) noexcept;
	ssize_t tx_size_left() const noexcept;
	ssize_t rx_size_left() const noexcept;

	/* Data transfer. iov/desc/count describe local memory; flags are FI_* op flags;
	 * silent: fi_inject*, never a completion entry (errors aside). post_send and post_recv
	 * are msg.cpp's alone, inline there: each fi_ops_msg slot is one function that calls
	 * nothing on its way but ibv_post_send or ibv_post_recv. */
	inline ssize_t post_send(const struct iovec *iov, void **desc, size_t count, uint64_t data,
	                         void *context, uint64_t flags, bool silent = false) noexcept;
	inline ssize_t post_recv(const struct iovec *iov, void **desc, size_t count, void *context,
	                         uint64_t flags) noexcept;
	/* fi_inject / fi_injectdata (flags: 0 or FI_REMOTE_CQ_DATA): a buffer that fits inline
	 * goes straight to post_tx_wr (what ofi_rxm sends a short message with); anything else
	 * is post_send's, silent. */
	ssize_t inject(const void *buf, size_t len, uint64_t data, uint64_t flags) noexcept;
	ssize_t post_rma(bool write, const struct iovec *iov, void **desc, size_t count,
	                 uint64_t addr, uint64_t key, uint64_t data, void *context, uint64_t flags,
	                 bool silent = false) noexcept;

	uint64_t tx_op_flags() const noexcept { return tx_flags_; }
	uint64_t rx_op_flags() const noexcept { return rx_flags_; }

	/* ofi_rxm's credit-based flow control (flow_ctrl.h, the ops in flow_ctrl.cpp): whether
	 * this kind of endpoint can do it (an RC endpoint: every receive is its own), start it
	 * (threshold: grant credits once that many receives were posted again; the receives
	 * posted so far are granted now if they reach it), the peer's grant. Once started, a
	 * transmit that consumes a peer receive (send, write with immediate data) takes a credit
	 * or is refused with -FI_EAGAIN; each receive posted counts towards the next grant, which
	 * goes out through the domain's send handler, outside the endpoint's locks. */
	virtual bool credit_flow_capable() const noexcept { return false; }
	int enable_credit_flow(uint64_t threshold) noexcept;
	void add_credits(uint64_t credits) noexcept;

	void set_fid(struct fid *fid) noexcept { fid_ = fid; }
	domain *parent() const noexcept { return domain_.get(); }

protected:
	/* fi_enable, under mutex_, once a CQ or counter is bound: what the kind needs before
	 * its QP can be made (0 or a negative FI_E* code). */
	virtual int check_enable() noexcept = 0;
	/* fi_enable: the kind's QP on these CQs, from attr (caps filled in); *qp set. */
	virtual int create_qp(struct ibv_qp_init_attr &attr, struct ibv_qp **qp) noexcept = 0;
	/* No completion may count any more: first thing in a kind's destructor. */
	void close_rings() noexcept;
	/* The device will complete nothing more of the send queue (siw, after this side
	 * disconnected): the send CQ completes what is posted there as flushed
	 * (verbs_cq::flush_in_software). */
	void strand_sends() noexcept;
	/* fi_ep_bind of a class the base does not know (CQ, EQ and counters it binds itself). */
	virtual int bind_kind(struct fid *bfid, uint64_t flags) noexcept;
	/* Receives learn their sender through fn(arg, receive buffer, source QPN) (FI_SOURCE on
	 * a DGRAM endpoint): before fi_enable. */
	void set_rx_source(uint64_t (*fn)(void *, const void *, uint32_t), void *arg) noexcept;
	/* Every receive gets sge as its last entry: what does not fit in the application's
	 * buffers lands there and the receive completes with FI_ETRUNC (UD would otherwise fail
	 * the receive and, on some devices, the QP). Before fi_enable. */
	void set_rx_spill(const struct ibv_sge &sge) noexcept { rx_spill_ = sge; }
	/* Every receive starts with stride bytes of base + slot * stride (lkey), which the
	 * application does not see (a GRH kept by the provider). Before fi_enable. */
	void set_rx_hidden(uintptr_t base, uint32_t stride, uint32_t lkey) noexcept;
	size_t rx_depth() const noexcept { return rx_->nslots; }
	/* iov/desc as sges, checked against limit and max_msg_size (lkeys from desc when
	 * need_desc); how many, or -FI_EINVAL with a warning naming op. */
	int check_iov(const char *op, const struct iovec *iov, void **desc, size_t count,
	              size_t limit, bool need_desc, struct ibv_sge *sge, size_t *total) noexcept
	{
		/* the common case, one buffer that passes every check: no loop, no call */
		if (count == 1 && limit && iov && iov[0].iov_base &&
		    (!need_desc || (desc && desc[0]))) {
			const size_t len = iov[0].iov_len;
			if (len && len <= max_msg_size_ && len <= UINT32_MAX) {
				sge[0].addr = reinterpret_cast<uintptr_t>(iov[0].iov_base);
				sge[0].length = static_cast<uint32_t>(len);
				sge[0].lkey = need_desc ? mr_lkey(desc[0]) : 0;
				*total = len;
				return 1;
			}
		}
		return check_iovs(op, iov, desc, count, limit, need_desc, sge, total);
	}
	int check_iovs(const char *op, const struct iovec *iov, void **desc, size_t count,
	               size_t limit, bool need_desc, struct ibv_sge *sge, size_t *total) noexcept;
	/* The local buffers of one transmit as sges (the send queue's iov limit applies):
	 * inline when may_inline and the whole fits in inject_size (no memory key then),
	 * -FI_EINVAL when must_inline (fi_inject*, FI_INJECT) and it does not fit. Sixteen
	 * bytes, so that it comes back in registers. */
	struct tx_sges {
		int n;        /* sges filled, or a negative FI_E* code */
		bool inl;     /* IBV_SEND_INLINE */
		size_t total; /* bytes */
	};
	tx_sges gather_tx(const char *op, const struct iovec *iov, void **desc, size_t count,
	                  size_t limit, bool may_inline, bool must_inline,
	                  struct ibv_sge *sge) noexcept
	{
		/* the common case, one buffer that passes every check: inline when it fits (a
		 * short fi_send, fi_inject: no memory key), else with its descriptor's key (a
		 * 4 KiB fi_send); what gather_iov finds, without its loops or a call */
		if (count == 1 && limit && iov && iov[0].iov_base) {
			const size_t len = iov[0].iov_len;
			if (len && len <= max_msg_size_ && len <= UINT32_MAX) {
				const bool inl = may_inline && len <= inject_size_;
				if (inl || (!must_inline && desc && desc[0])) {
					sge[0].addr = reinterpret_cast<uintptr_t>(iov[0].iov_base);
					sge[0].length = static_cast<uint32_t>(len);
					sge[0].lkey = inl ? 0 : mr_lkey(desc[0]);
					return {1, inl, len};
				}
			}
		}
		return gather_iov(op, iov, desc, count, limit, may_inline, must_inline, sge);
	}
	tx_sges gather_iov(const char *op, const struct iovec *iov, void **desc, size_t count,
	                   size_t limit, bool may_inline, bool must_inline,
	                   struct ibv_sge *sge) noexcept;
	/* Posts wr on the send queue: its slot, its signalling, the fence after a read, ofi_rxm's
	 * credits (priority: a credit message of ofi_rxm's, credit_priority_flags, which may take
	 * the last credit). Inline (below the class), so that a transmit calls nothing on its
	 * way but ibv_post_send: without flow control, the credits cost one test of a field the
	 * path loads anyway; what fails or runs with credits is out of line (ep.cpp). */
	inline ssize_t post_tx_wr(struct ibv_send_wr *wr, void *context, uint64_t cq_flags,
	                          size_t len, bool report, bool priority = false) noexcept;

	util::held<domain> domain_;
	info_ptr info_;
	util::held<verbs_eq> eq_;
	struct fid *fid_ = nullptr;
	/* a futex: the posting path takes it per operation */
	mutable util::fast_mutex mutex_{lock_level::endpoint};
	std::atomic<bool> enabled_{false};

	/* The CQs the application reads (bound with fi_ep_bind; not the internal one), published
	 * by fi_enable for a thread that may not take mutex_: the EQ's, at a disconnect (rc_ep::
	 * unread_marks). Bound CQs stay as long as the endpoint. */
	std::atomic<verbs_cq *> app_tx_cq_{nullptr};
	std::atomic<verbs_cq *> app_rx_cq_{nullptr};

	bool tx_selective_ = false;
	size_t inject_size_ = 0;
	size_t max_msg_size_ = 0;
	size_t tx_iov_limit_ = 1;

private:
	int bind_cntr(struct fid *bfid, uint64_t flags) noexcept;
	/* fi_enable's counter part: the internal CQ (if needed), the rings' counters, the feeds */
	int enable_cntrs(verbs_cq *&send_cq, verbs_cq *&recv_cq) noexcept VWAIT_REQUIRES(mutex_);
	void drop_feeds() noexcept VWAIT_REQUIRES(mutex_);

	util::held<verbs_cq> tx_cq_ VWAIT_GUARDED_BY(mutex_);
	util::held<verbs_cq> rx_cq_ VWAIT_GUARDED_BY(mutex_);
	/* Counters by fi_ep_bind flag (each bound one is held). FI_REMOTE_READ: verbs never
	 * tells the target of a read, so rread_cntr_ is only held, never fed (vwait offers no
	 * FI_RMA_EVENT; an endpoint that asks for it has the binding refused). */
	util::held<verbs_cntr> send_cntr_ VWAIT_GUARDED_BY(mutex_);
	util::held<verbs_cntr> recv_cntr_ VWAIT_GUARDED_BY(mutex_);
	util::held<verbs_cntr> read_cntr_ VWAIT_GUARDED_BY(mutex_);
	util::held<verbs_cntr> write_cntr_ VWAIT_GUARDED_BY(mutex_);
	util::held<verbs_cntr> rwrite_cntr_ VWAIT_GUARDED_BY(mutex_);
	util::held<verbs_cntr> rread_cntr_ VWAIT_GUARDED_BY(mutex_);
	/* A direction with a counter and no CQ gets this internal CQ (FI_WAIT_NONE, a sink:
	 * it only counts), made at fi_enable, polled by the counters it feeds; it also serves
	 * a direction with neither. It dies with the endpoint, after the QP. */
	std::unique_ptr<verbs_cq> own_cq_ VWAIT_GUARDED_BY(mutex_);
	/* (counter, CQ) pairs registered with verbs_cntr::add_feed at fi_enable */
	std::vector<std::pair<verbs_cntr *, verbs_cq *>> feeds_ VWAIT_GUARDED_BY(mutex_);
	verbs_cq *send_cq_ = nullptr; /* the QP's CQs, set by fi_enable */
	verbs_cq *recv_cq_ = nullptr;
	struct ibv_qp *qp_ = nullptr; /* set by fi_enable, destroyed by the kind */
	bool rx_selective_ = false;
	uint64_t tx_flags_ = 0;
	/* transmit flags this endpoint's device cannot honour: FI_REMOTE_CQ_DATA on iWARP (no
	 * immediate data; its infos say cq_data_size 0) */
	uint64_t no_tx_flags_ = 0;
	/* iWARP: a send or write posted while an RDMA read is outstanding is fenced behind it.
	 * iWARP completes a send or write once transmitted but a read only when its response
	 * comes (siw), so without the fence a later operation completes first, and the ring's
	 * in-order retire (wr_ring) would hand out the read's slot while the read still runs. */
	bool fence_after_read_ = false;
	uint64_t rx_flags_ = 0;
	struct ibv_sge rx_spill_ = {};
	uintptr_t rx_hidden_base_ = 0;
	uint32_t rx_hidden_stride_ = 0;
	uint32_t rx_hidden_lkey_ = 0;
	size_t rx_iov_limit_ = 1;
	size_t rma_iov_limit_ = 1;
	/* a read's local buffers: fewer on devices whose reads scatter less (max_sge_rd: siw 1) */
	size_t read_iov_limit_ = 1;
	std::shared_ptr<wr_ring> tx_;
	std::shared_ptr<wr_ring> rx_;
	util::fast_mutex rx_mutex_{lock_level::rx_post};
	/* ofi_rxm's flow control: credits for the peer's receives, and this side's receives not
	 * yet granted to the peer */
	send_credits tx_credits_ VWAIT_GUARDED_BY(mutex_);
	recv_credits rx_credits_ VWAIT_GUARDED_BY(rx_mutex_);
	/* hands credits to the domain's send handler (no lock held); if it cannot send them,
	 * they are owed: granted with the next receive posted or the next transmit (regrant) */
	void grant_credits(uint64_t credits) noexcept;
	void regrant() noexcept;
	std::atomic<bool> grant_owed_{false};
	/* post_tx_wr's part under mutex_; *flow: ofi_rxm's flow control is on (read there) */
	inline ssize_t post_tx_locked(struct ibv_send_wr *wr, void *context, uint64_t cq_flags,
	                              size_t len, bool report, bool priority, bool *flow) noexcept;
	/* post_tx_wr's cold parts (ep.cpp): the endpoint is not enabled; ibv_post_send failed
	 * (credited: a credit was taken for it); after a transmit with flow control on, a grant
	 * ofi_rxm could not send goes again (unless the transmit was that credit message) */
	__attribute__((cold)) ssize_t tx_not_enabled() noexcept;
	__attribute__((cold)) ssize_t tx_post_failed(int ret, bool credited) noexcept
	    VWAIT_REQUIRES(mutex_);
	void after_flow_tx(bool priority) noexcept;
};

/* Transmits that consume a receive of the peer: with ofi_rxm's flow control, each takes a credit */
inline bool consumes_peer_rx(enum ibv_wr_opcode op) noexcept
{
	return op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM || op == IBV_WR_RDMA_WRITE_WITH_IMM;
}

__attribute__((always_inline)) inline ssize_t ep::post_tx_locked(struct ibv_send_wr *wr,
                                                                 void *context, uint64_t cq_flags,
                                                                 size_t len, bool report,
                                                                 bool priority, bool *flow) noexcept
{
	util::lock_guard<util::fast_mutex> lock(mutex_);
	if (__builtin_expect(!enabled_, 0))
		return tx_not_enabled();
	/* ofi_rxm's flow control, once on: no credit, no message that needs a peer receive */
	*flow = tx_credits_.enabled();
	wr_ring &ring = *tx_;
	wr_slot *slot = ring.claim();
	if (!slot)
		return -FI_EAGAIN;
	const bool credited = __builtin_expect(*flow, 0) && consumes_peer_rx(wr->opcode);
	if (credited && !tx_credits_.take(priority))
		return -FI_EAGAIN;
	slot->context = context;
	slot->flags = cq_flags;
	slot->len = len;
	slot->report = report;
	wr->wr_id = reinterpret_cast<uintptr_t>(slot);
	/* No entry wanted and no counter to count it: unsignalled (a failure still completes),
	 * but never more than half the queue in a row, so that slots keep coming back. */
	const bool quiet = !report && !ring.counted() && ring.unsignaled + 1 < ring.nslots / 2;
	if (!quiet)
		wr->send_flags |= IBV_SEND_SIGNALED;
	if (fence_after_read_) {
		/* completions in posting order, as the ring's retire needs (ep.h) */
		if (wr->opcode == IBV_WR_RDMA_READ)
			ring.reads_until = slot->seq + 1;
		else if (ring.reads_until > ring.retired.load(std::memory_order_acquire))
			wr->send_flags |= IBV_SEND_FENCE;
	}
	struct ibv_send_wr *bad = nullptr;
	if (int ret = ibv_post_send(qp_, wr, &bad); __builtin_expect(ret != 0, 0))
		return tx_post_failed(ret, credited);
	ring.commit();
	ring.unsignaled = quiet ? ring.unsignaled + 1 : 0;
	return FI_SUCCESS;
}

__attribute__((always_inline)) inline ssize_t ep::post_tx_wr(struct ibv_send_wr *wr, void *context,
                                                             uint64_t cq_flags, size_t len,
                                                             bool report, bool priority) noexcept
{
	bool flow = false;
	const ssize_t ret = post_tx_locked(wr, context, cq_flags, len, report, priority, &flow);
	if (__builtin_expect(flow, 0))
		after_flow_tx(priority);
	return ret;
}

/* An FI_EP_MSG endpoint: an RC QP made through rdma_cm (ep_rc.cpp); its connection
 * management is in cm.cpp. */
class rc_ep final : public ep, public cm_target
{
public:
	rc_ep(domain *dom, info_ptr info, verbs::cm_id_ptr id, bool from_connreq);
	~rc_ep() override;

	struct fid *cm_fid() noexcept override { return fid_; }
	bool active_side() const noexcept override { return !passive_; }
	struct fi_info *connreq_info(struct rdma_cm_id *) noexcept override { return nullptr; }
	void disconnected(struct rdma_cm_id *id) noexcept override;
	void unread_marks(std::vector<cq_mark> &marks) noexcept override;
	bool probe() noexcept override;
	void probe_failed() noexcept override;

	int connect(const void *addr, const void *param, size_t paramlen) noexcept;
	int accept(const void *param, size_t paramlen) noexcept;
	int shutdown() noexcept;
	int getname(void *addr, size_t *addrlen) noexcept;
	int getpeer(void *addr, size_t *addrlen) noexcept;

	bool credit_flow_capable() const noexcept override { return true; }

	/* opened with a dest_addr (resolved then) or from a connection request */
	void set_route_resolved(bool yes) noexcept { route_resolved_ = yes; }

protected:
	int check_enable() noexcept override;
	int create_qp(struct ibv_qp_init_attr &attr, struct ibv_qp **qp) noexcept override;

private:
	int migrate_to_eq() noexcept;

	verbs::cm_id_ptr id_;
	bool passive_;
	bool connecting_ = false;
	bool route_resolved_ = false;
	/* the QP's creation and destruction against disconnected() */
	util::mutex qp_mutex_{lock_level::qp};
	bool qp_gone_ = false;
	/* keepalive: when the port was first seen down (0: up), in steady_clock ns */
	int64_t port_down_since_ = 0;
	int64_t last_probe_ = 0;   /* when the last probe went out, steady_clock ns */
	bool budget_told_ = false; /* the QP's retry budget was logged (first probe) */
};

/* The ops tables of an endpoint fid (ep.cpp, msg.cpp, rma.cpp, cm.cpp). */
extern struct fi_ops ep_fi_ops;
extern struct fi_ops_ep ep_ops;
extern struct fi_ops_msg ep_msg_ops;
extern struct fi_ops_rma ep_rma_ops;
extern struct fi_ops_tagged ep_tagged_ops;
extern struct fi_ops_atomic ep_atomic_ops;
extern struct fi_ops_cm rc_ep_cm_ops;

/* fi_ops_msg's receive slots, the same for every endpoint kind (msg.cpp). */
ssize_t ep_recv(struct fid_ep *fid, void *buf, size_t len, void *desc, fi_addr_t src,
                void *context) noexcept;
ssize_t ep_recvv(struct fid_ep *fid, const struct iovec *iov, void **desc, size_t count,
                 fi_addr_t src, void *context) noexcept;
ssize_t ep_recvmsg(struct fid_ep *fid, const struct fi_msg *msg, uint64_t flags) noexcept;

/* The endpoint behind a fid of class FI_CLASS_EP that vwait handed out (inline: every data
 * call starts here). */
using ep_box = util::fid_box<struct fid_ep, ep>;
inline ep *ep_of(struct fid_ep *fid) noexcept
{
	return ep_box::of(fid)->obj;
}
inline ep *ep_of(struct fid *fid) noexcept
{
	return ep_box::of(fid)->obj;
}

/* Boxes obj in a new fid_ep with the base ops tables and the kind's cm, msg and rma; *out
 * set. */
int ep_install(std::unique_ptr<ep> obj, struct fi_ops_cm *cm, struct fi_ops_msg *msg,
               struct fi_ops_rma *rma, void *context, struct fid_ep **out);

/* fi_endpoint for FI_EP_MSG (ep_rc.cpp) and FI_EP_DGRAM (ep_dgram.cpp): info already
 * checked by ep_open. */
int rc_ep_open(domain *dom, struct fi_info *info, struct fid_ep **out, void *context);
int ud_ep_open(domain *dom, struct fi_info *info, struct fid_ep **out, void *context);

/* struct fi_ops_domain::endpoint */
int ep_open(struct fid_domain *domain, struct fi_info *info, struct fid_ep **ep,
            void *context) noexcept;
/* struct fi_ops_fabric::passive_ep */
int pep_open(struct fid_fabric *fabric, struct fi_info *info, struct fid_pep **pep,
             void *context) noexcept;
/* fid as a vwait endpoint, or NULL when it is none (another class, another provider) */
ep *vwait_ep(struct fid *fid) noexcept;
/* fid as a vwait passive endpoint, or NULL when it is none (another class, another provider) */
pep *vwait_pep(struct fid *fid) noexcept;

} // namespace vwait

#endif
