/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* The endpoint base: work-request rings, binds, counters, fi_enable, the posting of work
 * requests shared by the message and RMA paths, teardown after the QP, the endpoint fid's
 * ops tables that do not depend on its kind, and fi_endpoint. Every work request owns a slot
 * of its queue's ring. A send that wants an entry or a count is signalled; one that wants
 * neither (FI_SELECTIVE_COMPLETION, fi_inject) goes unsignalled, at most half the ring in a
 * row (a failure still completes). The CQ drops the entries nobody asked for, returns the
 * slot of each completion and of the unsignalled sends before it (RC completes a queue in
 * order), and counts every completion on the counters bound to its direction. */
#include "config.h"

#include "vwait/ep.h"
#include "vwait/util/enosys.h"
#include "vwait/vwait.h"

#include <algorithm>
#include <cinttypes>
#include <cstring>
#include <memory>

namespace vwait
{

ep::ep(domain *dom, info_ptr info) : domain_(dom), info_(std::move(info))
{
	const struct ibv_device_attr &attr = domain_->device_attr();
	if (domain_->context()->device->transport_type == IBV_TRANSPORT_IWARP) {
		no_tx_flags_ = FI_REMOTE_CQ_DATA;
		fence_after_read_ = true;
	}
	auto clamp = [](size_t want, size_t dflt, int max) {
		size_t v = want ? want : dflt;
		return std::min(v, static_cast<size_t>(max));
	};
	const struct fi_tx_attr *tx = info_->tx_attr;
	const struct fi_rx_attr *rx = info_->rx_attr;
	size_t tx_size = clamp(tx ? tx->size : 0, default_queue_size, attr.max_qp_wr);
	size_t rx_size = clamp(rx ? rx->size : 0, default_queue_size, attr.max_qp_wr);
	tx_iov_limit_ = clamp(tx ? tx->iov_limit : 0, 4, std::min(attr.max_sge, 16));
	rx_iov_limit_ = clamp(rx ? rx->iov_limit : 0, 4, std::min(attr.max_sge, 16));
	rma_iov_limit_ = tx_iov_limit_;
	read_iov_limit_ =
	    attr.max_sge_rd > 0 ? std::min<size_t>(tx_iov_limit_, attr.max_sge_rd) : tx_iov_limit_;
	inject_size_ = tx ? tx->inject_size : 0;
	tx_flags_ = tx ? tx->op_flags : 0;
	rx_flags_ = rx ? rx->op_flags : 0;
	max_msg_size_ = info_->ep_attr && info_->ep_attr->max_msg_size
	                    ? info_->ep_attr->max_msg_size
	                    : (1ULL << 31);
	tx_ = std::make_shared<wr_ring>(tx_size);
	rx_ = std::make_shared<wr_ring>(rx_size);
}

ep::~ep()
{
	/* the kind destroyed its QP (and what owns it) already */
	close_rings();
	/* no translate() may still be counting on our counters: then they may go */
	for (verbs_cq *q : {send_cq_, recv_cq_})
		if (q)
			q->sync();
	drop_feeds();
	if (own_cq_) {
		own_cq_->close_begin(); /* as fi_close does */
		own_cq_->close_wait();
		own_cq_.reset();
	}
	if (tx_cq_) {
		tx_cq_->adopt(tx_);
		tx_cq_->adopt(rx_);
	}
	if (rx_cq_) {
		rx_cq_->adopt(rx_);
		rx_cq_->adopt(tx_);
	}
	if (eq_) {
		/* the QP and its rdma_cm id are gone: no event for this endpoint comes any more */
		eq_->remove_fid_events(fid_);
	}
	/* the held CQs, counters, EQ and domain let go as members */
}

void ep::close_rings() noexcept
{
	tx_->closed.store(true, std::memory_order_release);
	rx_->closed.store(true, std::memory_order_release);
}

void ep::strand_sends() noexcept
{
	if (!send_cq_)
		return;
	try {
		send_cq_->flush_in_software(tx_);
	} catch (const std::bad_alloc &) {
		FI_WARN(&prov, FI_LOG_EP_CTRL,
		        "no memory to flush the %zu operations still posted: they will not "
		        "complete\n",
		        tx_->outstanding());
	}
}

int ep::bind(struct fid *bfid, uint64_t flags) noexcept
{
	if (!bfid) {
		FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_ep_bind: bfid is NULL\n");
		return -FI_EINVAL;
	}
	util::lock_guard<util::fast_mutex> lock(mutex_);
	if (enabled_) {
		FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_ep_bind: endpoint already enabled\n");
		return -FI_EOPBADSTATE;
	}
	switch (bfid->fclass) {
	case FI_CLASS_CQ: {
		if (flags &
		    ~static_cast<uint64_t>(FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION)) {
			FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_ep_bind(cq): flags 0x%llx unknown\n",
			        static_cast<unsigned long long>(flags));
			return -FI_EBADFLAGS;
		}
		if (!(flags & (FI_TRANSMIT | FI_RECV))) {
			FI_WARN(&prov, FI_LOG_EP_CTRL,
			        "fi_ep_bind(cq): flags need FI_TRANSMIT or FI_RECV\n");
			return -FI_EBADFLAGS;
		}
		verbs_cq *q = util::object_of<verbs_cq>(bfid);
		if (!q) {
			FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_ep_bind: fid %p is not a vwait CQ\n",
			        static_cast<void *>(bfid));
			return -FI_EINVAL;
		}
		if (q->parent() != domain_) {
			FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_ep_bind: CQ of another domain\n");
			return -FI_EINVAL;
		}
		if (((flags & FI_TRANSMIT) && tx_cq_) || ((flags & FI_RECV) && rx_cq_)) {
			FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_ep_bind: a CQ is already bound there\n");
			return -FI_EINVAL;
		}
		if (flags & FI_TRANSMIT) {
			tx_cq_.reset(q);
			tx_selective_ = flags & FI_SELECTIVE_COMPLETION;
		}
		if (flags & FI_RECV) {
			rx_cq_.reset(q);
			rx_selective_ = flags & FI_SELECTIVE_COMPLETION;
		}
		return FI_SUCCESS;
	}
	case FI_CLASS_EQ: {
		if (eq_) {
			FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_ep_bind: an EQ is already bound\n");
			return -FI_EINVAL;
		}
		verbs_eq *q = util::object_of<verbs_eq>(bfid);
		if (!q) {
			FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_ep_bind: fid %p is not a vwait EQ\n",
			        static_cast<void *>(bfid));
			return -FI_EINVAL;
		}
		eq_.reset(q);
		return FI_SUCCESS;
	}
	case FI_CLASS_CNTR:
		return bind_cntr(bfid, flags);
	default:
		return bind_kind(bfid, flags);
	}
}

int ep::bind_kind(struct fid *bfid, uint64_t) noexcept
{
	FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_ep_bind: fid class %zu cannot bind to an endpoint\n",
	        bfid->fclass);
	return -FI_EINVAL;
}

void ep::set_rx_hidden(uintptr_t base, uint32_t stride, uint32_t lkey) noexcept
{
	rx_hidden_base_ = base;
	rx_hidden_stride_ = stride;
	rx_hidden_lkey_ = lkey;
	rx_->hidden = stride;
}

void ep::set_rx_source(uint64_t (*fn)(void *, const void *, uint32_t), void *arg) noexcept
{
	rx_->source = fn;
	rx_->source_arg = arg;
}

/* Holds mutex_ (level endpoint) across the counters' add_feed (cntr_feeds, then the counter's
 * waiter's sources exclusive) and create_qp (qp, rdma_create_qp), against lock_order.h's rule
 * 1; kept so: fi_enable runs once per endpoint, before enabled_ is set, so no posting thread
 * waits behind it, and it keeps a bind or a second fi_enable out of the half-built endpoint.
 * It is an order, not an inversion: nothing takes mutex_ under those locks (the lock check
 * aborts if anything ever does). */
int ep::enable() noexcept
{
	util::lock_guard<util::fast_mutex> lock(mutex_);
	if (enabled_)
		return FI_SUCCESS;
	if (!tx_cq_ && !rx_cq_ && !send_cntr_ && !recv_cntr_ && !read_cntr_ && !write_cntr_ &&
	    !rwrite_cntr_ && !rread_cntr_) {
		FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_enable: no CQ and no counter bound\n");
		return -FI_ENOCQ;
	}
	if (int ret = check_enable())
		return ret;
	verbs_cq *send_cq = nullptr, *recv_cq = nullptr;
	if (int ret = enable_cntrs(send_cq, recv_cq))
		return ret;
	struct ibv_qp_init_attr attr = {};
	attr.send_cq = send_cq->hw();
	attr.recv_cq = recv_cq->hw();
	attr.cap.max_send_wr = static_cast<uint32_t>(tx_->nslots);
	attr.cap.max_recv_wr = static_cast<uint32_t>(rx_->nslots);
	attr.cap.max_send_sge = static_cast<uint32_t>(tx_iov_limit_);
	attr.cap.max_recv_sge = static_cast<uint32_t>(rx_iov_limit_);
	attr.cap.max_inline_data = static_cast<uint32_t>(inject_size_);
	attr.sq_sig_all = 0;
	struct ibv_qp *qp = nullptr;
	if (int ret = create_qp(attr, &qp)) {
		drop_feeds();
		return ret;
	}
	qp_ = qp;
	send_cq_ = send_cq;
	recv_cq_ = recv_cq;
	app_tx_cq_.store(tx_cq_.get(), std::memory_order_release);
	app_rx_cq_.store(rx_cq_.get(), std::memory_order_release);
	enabled_ = true;
	return FI_SUCCESS;
}

int ep::bind_cntr(struct fid *bfid, uint64_t flags) noexcept
{
	constexpr uint64_t known =
	    FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
	if ((flags & ~known) || !flags) {
		FI_WARN(&prov, FI_LOG_EP_CTRL,
		        "fi_ep_bind(cntr): flags 0x%llx: need FI_SEND, FI_RECV, FI_READ, FI_WRITE "
		        "FI_REMOTE_READ or FI_REMOTE_WRITE and nothing else\n",
		        static_cast<unsigned long long>(flags));
		return -FI_EINVAL;
	}
	/* fi_endpoint(3): counting remote reads requires an endpoint made with FI_RMA_EVENT.
	 * Without it the binding is legal and the count simply never moves (applications bind
	 * FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE as one receive counter); with it the
	 * application expects counts that verbs cannot give: the target of a read is never told. */
	if (flags & FI_REMOTE_READ) {
		const uint64_t caps = info_->caps | (info_->rx_attr ? info_->rx_attr->caps : 0);
		if (caps & FI_RMA_EVENT) {
			FI_WARN(
			    &prov, FI_LOG_EP_CTRL,
			    "fi_ep_bind(cntr): FI_REMOTE_READ on an FI_RMA_EVENT endpoint: verbs "
			    "never tells the target of an RDMA read, so it cannot be counted\n");
			return -FI_ENOSYS;
		}
		FI_INFO(&prov, FI_LOG_EP_CTRL,
		        "fi_ep_bind(cntr): FI_REMOTE_READ without FI_RMA_EVENT: remote reads "
		        "are not counted\n");
	}
	verbs_cntr *c = util::object_of<verbs_cntr>(bfid);
	if (!c) {
		FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_ep_bind: fid %p is not a vwait counter\n",
		        static_cast<void *>(bfid));
		return -FI_EINVAL;
	}
	if (c->parent() != domain_) {
		FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_ep_bind: counter of another domain\n");
		return -FI_EINVAL;
	}
	struct {
		uint64_t flag;
		util::held<verbs_cntr> *slot;
	} const slots[] = {
	    {FI_SEND, &send_cntr_},           {FI_RECV, &recv_cntr_},
	    {FI_READ, &read_cntr_},           {FI_WRITE, &write_cntr_},
	    {FI_REMOTE_WRITE, &rwrite_cntr_}, {FI_REMOTE_READ, &rread_cntr_},
	};
	for (const auto &s : slots) {
		if ((flags & s.flag) && *s.slot) {
			FI_WARN(&prov, FI_LOG_EP_CTRL,
			        "fi_ep_bind(cntr): a counter is already bound for flag 0x%llx\n",
			        static_cast<unsigned long long>(s.flag));
			return -FI_EINVAL;
		}
	}
	for (const auto &s : slots) {
		if (flags & s.flag)
			s.slot->reset(c);
	}
	return FI_SUCCESS;
}

int ep::enable_cntrs(verbs_cq *&send_cq, verbs_cq *&recv_cq) noexcept
{
	const bool tx_counted = send_cntr_ || read_cntr_ || write_cntr_;
	const bool rx_counted = recv_cntr_ || rwrite_cntr_ || rread_cntr_;
	if (!own_cq_ && ((tx_counted && !tx_cq_) || (rx_counted && !rx_cq_))) {
		/* one entry per work request either queue can have outstanding */
		size_t n = std::min(tx_->nslots + rx_->nslots,
		                    static_cast<size_t>(domain_->device_attr().max_cqe));
		struct fi_cq_attr a = {};
		a.size = n;
		a.format = FI_CQ_FORMAT_CONTEXT;
		a.wait_obj = FI_WAIT_NONE;
		std::unique_ptr<verbs_cq> q;
		int ret = guard([&] {
			q = std::make_unique<verbs_cq>(domain_, a, n);
			q->make_sink();
			if (int r = q->init_wait())
				return r;
			return q->create_hw();
		});
		if (ret) {
			FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_enable: internal CQ for counters: %s\n",
			        fi_strerror(-ret));
			return ret;
		}
		own_cq_ = std::move(q);
	}
	verbs_cq *own = own_cq_.get();
	send_cq = tx_cq_ ? tx_cq_ : (own ? own : rx_cq_);
	recv_cq = rx_cq_ ? rx_cq_ : (own ? own : tx_cq_);
	tx_->msg_cntr = send_cntr_;
	tx_->read_cntr = read_cntr_;
	tx_->write_cntr = write_cntr_;
	rx_->msg_cntr = recv_cntr_;
	rx_->write_cntr = rwrite_cntr_;
	const std::pair<verbs_cntr *, verbs_cq *> wanted[] = {
	    {send_cntr_, send_cq}, {read_cntr_, send_cq},   {write_cntr_, send_cq},
	    {recv_cntr_, recv_cq}, {rwrite_cntr_, recv_cq},
	};
	/* runs here, under mutex_, but the thread-safety analysis sees a lambda as a function
	 * of its own, called from guard() */
	const int ret = guard([&]() VWAIT_NO_THREAD_SAFETY_ANALYSIS {
		for (const auto &w : wanted) {
			if (!w.first || std::find(feeds_.begin(), feeds_.end(), w) != feeds_.end())
				continue;
			feeds_.reserve(feeds_.size() + 1);
			if (int r = w.first->add_feed(w.second)) {
				FI_WARN(&prov, FI_LOG_EP_CTRL,
				        "fi_enable: counter on its CQ's channel: %s\n",
				        fi_strerror(-r));
				return r;
			}
			feeds_.push_back(w);
		}
		return 0;
	});
	if (ret)
		drop_feeds();
	return ret;
}

void ep::drop_feeds() noexcept
{
	for (const auto &f : feeds_)
		f.first->remove_feed(f.second);
	feeds_.clear();
}

int ep::getopt(int level, int optname, void *optval, size_t *optlen) noexcept
{
	if (level != FI_OPT_ENDPOINT)
		return -FI_ENOPROTOOPT;
	if (!optval || !optlen) {
		FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_getopt: %s is NULL\n",
		        !optval ? "optval" : "optlen");
		return -FI_EINVAL;
	}
	switch (optname) {
	case FI_OPT_CM_DATA_SIZE:
		if (*optlen < sizeof(size_t))
			return -FI_ETOOSMALL;
		*static_cast<size_t *>(optval) = cm_connect_data_max;
		*optlen = sizeof(size_t);
		return FI_SUCCESS;
	default:
		return -FI_ENOPROTOOPT;
	}
}

int ep::setopt(int level, int optname, const void *optval, size_t optlen) noexcept
{
	(void)optval;
	(void)optlen;
	if (level != FI_OPT_ENDPOINT)
		return -FI_ENOPROTOOPT;
	FI_INFO(&prov, FI_LOG_EP_CTRL, "fi_setopt: option %d not supported\n", optname);
	return -FI_ENOPROTOOPT;
}

ssize_t ep::tx_size_left() const noexcept
{
	util::lock_guard<util::fast_mutex> lock(mutex_);
	if (!enabled_)
		return -FI_EOPBADSTATE;
	return static_cast<ssize_t>(tx_->free_slots());
}

ssize_t ep::rx_size_left() const noexcept
{
	util::lock_guard<util::fast_mutex> lock(mutex_);
	if (!enabled_)
		return -FI_EOPBADSTATE;
	return static_cast<ssize_t>(rx_->free_slots());
}

int ep::check_iovs(const char *op, const struct iovec *iov, void **desc, size_t count, size_t limit,
                   bool need_desc, struct ibv_sge *sge, size_t *total) noexcept
{
	if (count > limit) {
		FI_WARN(&prov, FI_LOG_EP_DATA, "%s: iov count %zu exceeds iov_limit %zu\n", op,
		        count, limit);
		return -FI_EINVAL;
	}
	if (count && !iov) {
		FI_WARN(&prov, FI_LOG_EP_DATA, "%s: iov is NULL with count %zu\n", op, count);
		return -FI_EINVAL;
	}
	size_t n = 0;
	*total = 0;
	for (size_t i = 0; i < count; i++) {
		size_t len = iov[i].iov_len;
		if (!len)
			continue;
		if (!iov[i].iov_base) {
			FI_WARN(&prov, FI_LOG_EP_DATA, "%s: iov[%zu] buffer is NULL with len %zu\n",
			        op, i, len);
			return -FI_EINVAL;
		}
		if (len > UINT32_MAX || len > max_msg_size_ || *total + len > max_msg_size_) {
			FI_WARN(&prov, FI_LOG_EP_DATA, "%s: length %zu exceeds max_msg_size %zu\n",
			        op, *total + len, max_msg_size_);
			return -FI_EINVAL;
		}
		uint32_t lkey = 0;
		if (need_desc) {
			if (!desc || !desc[i]) {
				FI_WARN(&prov, FI_LOG_EP_DATA,
				        "%s: desc[%zu] is NULL (FI_MR_LOCAL needs fi_mr_desc)\n",
				        op, i);
				return -FI_EINVAL;
			}
			lkey = mr_lkey(desc[i]);
		}
		sge[n].addr = reinterpret_cast<uintptr_t>(iov[i].iov_base);
		sge[n].length = static_cast<uint32_t>(len);
		sge[n].lkey = lkey;
		n++;
		*total += len;
	}
	return static_cast<int>(n);
}

ep::tx_sges ep::gather_iov(const char *op, const struct iovec *iov, void **desc, size_t count,
                           size_t limit, bool may_inline, bool must_inline,
                           struct ibv_sge *sge) noexcept
{
	size_t sum = 0;
	for (size_t i = 0; iov && i < count && i < limit; i++)
		sum += iov[i].iov_len;
	if (must_inline && sum > inject_size_) {
		FI_WARN(&prov, FI_LOG_EP_DATA, "%s: len %zu exceeds inject_size %zu\n", op, sum,
		        inject_size_);
		return {-FI_EINVAL, false, 0};
	}
	tx_sges out{0, may_inline && sum <= inject_size_, 0};
	out.n = check_iov(op, iov, desc, count, limit, !out.inl, sge, &out.total);
	return out;
}

ssize_t ep::tx_not_enabled() noexcept
{
	FI_WARN(&prov, FI_LOG_EP_DATA, "transmit on an endpoint that is not enabled\n");
	return -FI_EOPBADSTATE;
}

ssize_t ep::tx_post_failed(int ret, bool credited) noexcept
{
	if (credited)
		tx_credits_.untake();
	if (ret == ENOMEM)
		return -FI_EAGAIN;
	FI_WARN(&prov, FI_LOG_EP_DATA, "ibv_post_send: %s\n", strerror(ret));
	return verbs::positive_code(ret);
}

void ep::after_flow_tx(bool priority) noexcept
{
	/* a grant ofi_rxm could not send: again now (not from the credit message's own send) */
	if (grant_owed_.load(std::memory_order_relaxed) && !priority)
		regrant();
}

int ep::enable_credit_flow(uint64_t threshold) noexcept
{
	if (!credit_flow_capable()) {
		FI_WARN(&prov, FI_LOG_EP_CTRL,
		        "flow control: this endpoint (not FI_EP_MSG) cannot do flow control\n");
		return -FI_ENOSYS;
	}
	{
		util::lock_guard<util::fast_mutex> lock(mutex_);
		tx_credits_.enable();
	}
	uint64_t grant;
	{
		/* the receive path counts nothing before: the receives posted so far are the
		 * ring's */
		util::lock_guard<util::fast_mutex> lock(rx_mutex_);
		grant = rx_credits_.enable(threshold, rx_->posted.load(std::memory_order_relaxed));
	}
	FI_DBG(&prov, FI_LOG_EP_CTRL,
	       "flow control on, threshold %" PRIu64 ", granting %" PRIu64 "\n", threshold, grant);
	if (grant)
		grant_credits(grant);
	return FI_SUCCESS;
}

void ep::add_credits(uint64_t credits) noexcept
{
	util::lock_guard<util::fast_mutex> lock(mutex_);
	tx_credits_.add(credits);
}

void ep::grant_credits(uint64_t credits) noexcept
{
	credit_send_fn send = domain_->credit_sender();
	/* the fid_ep begins the box: the same address as its struct fid */
	if (send && send(reinterpret_cast<struct fid_ep *>(fid_), credits) == 0)
		return;
	util::lock_guard<util::fast_mutex> lock(rx_mutex_);
	rx_credits_.not_granted(credits);
	grant_owed_.store(true, std::memory_order_relaxed);
}

void ep::regrant() noexcept
{
	uint64_t credits;
	{
		util::lock_guard<util::fast_mutex> lock(rx_mutex_);
		grant_owed_.store(false, std::memory_order_relaxed);
		credits = rx_credits_.due();
	}
	if (credits)
		grant_credits(credits);
}

namespace
{

int ep_close(struct fid *fid) noexcept
{
	auto *box = ep_box::of(fid);
	delete box->obj;
	delete box;
	return FI_SUCCESS;
}

int ep_bind(struct fid *fid, struct fid *bfid, uint64_t flags) noexcept
{
	return ep_of(fid)->bind(bfid, flags);
}

int ep_control(struct fid *fid, int command, void *arg) noexcept
{
	(void)arg;
	if (command == FI_ENABLE)
		return ep_of(fid)->enable();
	FI_INFO(&prov, FI_LOG_EP_CTRL, "fi_control: command %d not supported\n", command);
	return -FI_ENOSYS;
}

int ep_getopt(fid_t fid, int level, int optname, void *optval, size_t *optlen) noexcept
{
	return ep_of(fid)->getopt(level, optname, optval, optlen);
}

int ep_setopt(fid_t fid, int level, int optname, const void *optval, size_t optlen) noexcept
{
	return ep_of(fid)->setopt(level, optname, optval, optlen);
}

ssize_t ep_tx_size_left(struct fid_ep *fid) noexcept
{
	return ep_of(fid)->tx_size_left();
}

ssize_t ep_rx_size_left(struct fid_ep *fid) noexcept
{
	return ep_of(fid)->rx_size_left();
}

} // namespace

struct fi_ops ep_fi_ops = {
    .size = sizeof(struct fi_ops),
    .close = ep_close,
    .bind = ep_bind,
    .control = ep_control,
    .ops_open = util::unsupported{},
    .tostr = util::unsupported{},
    .ops_set = util::unsupported{},
};

struct fi_ops_ep ep_ops = {
    .size = sizeof(struct fi_ops_ep),
    .cancel = util::unsupported{},
    .getopt = ep_getopt,
    .setopt = ep_setopt,
    .tx_ctx = util::unsupported{},
    .rx_ctx = util::unsupported{},
    .rx_size_left = ep_rx_size_left,
    .tx_size_left = ep_tx_size_left,
};

struct fi_ops_tagged ep_tagged_ops = {
    .size = sizeof(struct fi_ops_tagged),
    .recv = util::unsupported{},
    .recvv = util::unsupported{},
    .recvmsg = util::unsupported{},
    .send = util::unsupported{},
    .sendv = util::unsupported{},
    .sendmsg = util::unsupported{},
    .inject = util::unsupported{},
    .senddata = util::unsupported{},
    .injectdata = util::unsupported{},
};

struct fi_ops_atomic ep_atomic_ops = {
    .size = sizeof(struct fi_ops_atomic),
    .write = util::unsupported{},
    .writev = util::unsupported{},
    .writemsg = util::unsupported{},
    .inject = util::unsupported{},
    .readwrite = util::unsupported{},
    .readwritev = util::unsupported{},
    .readwritemsg = util::unsupported{},
    .compwrite = util::unsupported{},
    .compwritev = util::unsupported{},
    .compwritemsg = util::unsupported{},
    .writevalid = util::unsupported{},
    .readwritevalid = util::unsupported{},
    .compwritevalid = util::unsupported{},
};

ep *vwait_ep(struct fid *fid) noexcept
{
	return ep_box::checked(fid, FI_CLASS_EP, &ep_fi_ops);
}

int ep_install(std::unique_ptr<ep> obj, struct fi_ops_cm *cm, struct fi_ops_msg *msg,
               struct fi_ops_rma *rma, void *context, struct fid_ep **out)
{
	auto box = std::make_unique<ep_box>();
	box->fid.fid.fclass = FI_CLASS_EP;
	box->fid.fid.context = context;
	box->fid.fid.ops = &ep_fi_ops;
	box->fid.ops = &ep_ops;
	box->fid.cm = cm;
	box->fid.msg = msg;
	box->fid.rma = rma;
	box->fid.tagged = &ep_tagged_ops;
	box->fid.atomic = &ep_atomic_ops;
	obj->set_fid(&box->fid.fid);
	box->obj = obj.release();
	*out = &box.release()->fid;
	return FI_SUCCESS;
}

int ep_open(struct fid_domain *domain_fid, struct fi_info *info, struct fid_ep **out,
            void *context) noexcept
{
	if (!domain_fid || !info || !out) {
		FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_endpoint: %s is NULL\n",
		        !domain_fid ? "domain" : (!info ? "info" : "ep"));
		return -FI_EINVAL;
	}
	*out = nullptr;
	int type = info->ep_attr ? util::raw_enum(info->ep_attr->type) : FI_EP_UNSPEC;
	if (type != FI_EP_MSG && type != FI_EP_UNSPEC && type != FI_EP_DGRAM) {
		FI_WARN(&prov, FI_LOG_EP_CTRL,
		        "fi_endpoint: ep type %d is neither FI_EP_MSG nor FI_EP_DGRAM\n", type);
		return -FI_EINVAL;
	}
	domain *dom = domain_of(domain_fid);
	if (type == FI_EP_DGRAM)
		return guard([&] { return ud_ep_open(dom, info, out, context); });
	return guard([&] { return rc_ep_open(dom, info, out, context); });
}

} // namespace vwait
