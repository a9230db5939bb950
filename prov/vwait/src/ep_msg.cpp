/* vwait MSG endpoints: an RC QP made through rdma_cm. Every work request is signalled and
 * owns a slot of its queue's ring; the CQ drops the entries nobody asked for
 * (FI_SELECTIVE_COMPLETION, fi_inject) and returns the slot, and counts every completion on
 * the counters bound to its direction (so unsignalled-for-the-application work counts too). */
#include "config.h"

#include "vwait/ep.h"
#include "vwait/info.h"
#include "vwait/slots.h"
#include "vwait/util/enosys.h"
#include "vwait/vwait.h"

#include <rdma/fi_atomic.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include <arpa/inet.h>

#include <algorithm>
#include <cinttypes>
#include <cstring>
#include <memory>

namespace vwait
{

int copy_sockaddr(const struct sockaddr *sa, void *addr, size_t *addrlen,
                  const char *what) noexcept;

namespace
{

constexpr size_t default_queue_size = 256;
constexpr size_t max_sge_per_wr = 16;
constexpr uint64_t tx_flag_bits =
    FI_COMPLETION | FI_INJECT | FI_REMOTE_CQ_DATA | FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE |
    FI_INJECT_COMPLETE | FI_FENCE | FI_MORE | FI_MSG | FI_RMA | FI_SEND | FI_WRITE | FI_READ;
constexpr uint64_t rx_flag_bits = FI_COMPLETION | FI_MORE | FI_MSG | FI_RECV;

} // namespace

ep::ep(domain *dom, info_ptr info, verbs::cm_id id, bool from_connreq)
    : domain_(dom), info_(std::move(info)), id_(std::move(id)), passive_(from_connreq)
{
	const struct ibv_device_attr &attr = domain_->device_attr();
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
	inject_size_ = tx ? tx->inject_size : 0;
	tx_flags_ = tx ? tx->op_flags : 0;
	rx_flags_ = rx ? rx->op_flags : 0;
	max_msg_size_ = info_->ep_attr && info_->ep_attr->max_msg_size
	                    ? info_->ep_attr->max_msg_size
	                    : (1ULL << 31);
	tx_ = std::make_shared<wr_ring>(tx_size);
	rx_ = std::make_shared<wr_ring>(rx_size);
	id_->context = static_cast<cm_target *>(this);
	domain_->hold();
}

ep::~ep()
{
	tx_->closed.store(true, std::memory_order_release);
	rx_->closed.store(true, std::memory_order_release);
	{
		/* the QP first (a thread draining the EQ may be in disconnected()), then the id,
		 * which waits for the acknowledgement of any event of it being converted */
		std::lock_guard<std::mutex> lock(qp_mutex_);
		qp_gone_ = true;
		if (id_->qp)
			rdma_destroy_qp(id_.get());
	}
	id_.reset();
	/* no translate() may still be counting on our counters: then they may go */
	for (cq *q : {send_cq_, recv_cq_})
		if (q)
			q->sync();
	drop_feeds();
	for (cntr *c : {send_cntr_, recv_cntr_, read_cntr_, write_cntr_, rwrite_cntr_})
		if (c)
			c->release();
	if (own_cq_) {
		static_cast<util::cq *>(own_cq_.get())->close_hook(); /* as fi_close does */
		own_cq_->close_wait();
		own_cq_.reset();
	}
	if (tx_cq_) {
		tx_cq_->adopt(tx_);
		tx_cq_->adopt(rx_);
		tx_cq_->release();
	}
	if (rx_cq_) {
		rx_cq_->adopt(rx_);
		rx_cq_->adopt(tx_);
		rx_cq_->release();
	}
	if (eq_)
		eq_->release();
	domain_->release();
}

void ep::disconnected(struct rdma_cm_id *id) noexcept
{
	/* moves the QP to the error state: what is still posted flushes */
	std::lock_guard<std::mutex> lock(qp_mutex_);
	if (!qp_gone_)
		rdma_disconnect(id);
}

int ep::bind(struct fid *bfid, uint64_t flags) noexcept
{
	if (!bfid) {
		FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_ep_bind: bfid is NULL\n");
		return -FI_EINVAL;
	}
	std::lock_guard<std::mutex> lock(mutex_);
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
		cq *q = verbs_cq_of(bfid);
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
			tx_cq_ = q;
			q->hold();
			tx_selective_ = flags & FI_SELECTIVE_COMPLETION;
		}
		if (flags & FI_RECV) {
			rx_cq_ = q;
			q->hold();
			rx_selective_ = flags & FI_SELECTIVE_COMPLETION;
		}
		return FI_SUCCESS;
	}
	case FI_CLASS_EQ: {
		if (eq_) {
			FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_ep_bind: an EQ is already bound\n");
			return -FI_EINVAL;
		}
		eq *q = verbs_eq_of(bfid);
		if (!q) {
			FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_ep_bind: fid %p is not a vwait EQ\n",
			        static_cast<void *>(bfid));
			return -FI_EINVAL;
		}
		eq_ = q;
		eq_->hold();
		return FI_SUCCESS;
	}
	case FI_CLASS_CNTR:
		return bind_cntr(bfid, flags);
	default:
		FI_WARN(&prov, FI_LOG_EP_CTRL,
		        "fi_ep_bind: fid class %zu cannot bind to an endpoint\n", bfid->fclass);
		return -FI_EINVAL;
	}
}

int ep::enable() noexcept
{
	std::lock_guard<std::mutex> lock(mutex_);
	if (enabled_)
		return FI_SUCCESS;
	if (!tx_cq_ && !rx_cq_ && !send_cntr_ && !recv_cntr_ && !read_cntr_ && !write_cntr_ &&
	    !rwrite_cntr_) {
		FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_enable: no CQ and no counter bound\n");
		return -FI_ENOCQ;
	}
	if (!eq_) {
		FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_enable: no EQ bound\n");
		return -FI_ENOEQ;
	}
	if (!id_->verbs) {
		FI_WARN(&prov, FI_LOG_EP_CTRL,
		        "fi_enable: endpoint has no local device (open it with src_addr or "
		        "dest_addr)\n");
		return -FI_EOPBADSTATE;
	}
	if (id_->verbs != domain_->context()) {
		FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_enable: address is on %s, domain is %s\n",
		        ibv_get_device_name(id_->verbs->device), domain_->name());
		return -FI_EINVAL;
	}
	cq *send_cq = nullptr, *recv_cq = nullptr;
	if (int ret = enable_cntrs(send_cq, recv_cq))
		return ret;
	struct ibv_qp_init_attr attr = {};
	attr.send_cq = send_cq->hw();
	attr.recv_cq = recv_cq->hw();
	attr.cap.max_send_wr = static_cast<uint32_t>(tx_->slots.size());
	attr.cap.max_recv_wr = static_cast<uint32_t>(rx_->slots.size());
	attr.cap.max_send_sge = static_cast<uint32_t>(tx_iov_limit_);
	attr.cap.max_recv_sge = static_cast<uint32_t>(rx_iov_limit_);
	attr.cap.max_inline_data = static_cast<uint32_t>(inject_size_);
	attr.qp_type = IBV_QPT_RC;
	attr.sq_sig_all = 0;
	std::lock_guard<std::mutex> qp_lock(qp_mutex_);
	if (rdma_create_qp(id_.get(), domain_->pd(), &attr) != 0) {
		int ret = verbs::errno_code();
		FI_WARN(&prov, FI_LOG_EP_CTRL,
		        "rdma_create_qp(send %u, recv %u, sge %u/%u, inline %u): %s\n",
		        attr.cap.max_send_wr, attr.cap.max_recv_wr, attr.cap.max_send_sge,
		        attr.cap.max_recv_sge, attr.cap.max_inline_data, fi_strerror(-ret));
		drop_feeds();
		return ret;
	}
	send_cq_ = send_cq;
	recv_cq_ = recv_cq;
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
		        "or FI_REMOTE_WRITE and nothing else\n",
		        static_cast<unsigned long long>(flags));
		return -FI_EINVAL;
	}
	if (flags & FI_REMOTE_READ) {
		FI_WARN(&prov, FI_LOG_EP_CTRL,
		        "fi_ep_bind(cntr): FI_REMOTE_READ is not supported (verbs never tells the "
		        "target of an RDMA read)\n");
		return -FI_ENOSYS;
	}
	cntr *c = verbs_cntr_of(bfid);
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
		cntr **slot;
	} const slots[] = {
	    {FI_SEND, &send_cntr_},   {FI_RECV, &recv_cntr_},           {FI_READ, &read_cntr_},
	    {FI_WRITE, &write_cntr_}, {FI_REMOTE_WRITE, &rwrite_cntr_},
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
		if (flags & s.flag) {
			*s.slot = c;
			c->hold();
		}
	}
	return FI_SUCCESS;
}

int ep::enable_cntrs(cq *&send_cq, cq *&recv_cq) noexcept
{
	const bool tx_counted = send_cntr_ || read_cntr_ || write_cntr_;
	const bool rx_counted = recv_cntr_ || rwrite_cntr_;
	if (!own_cq_ && ((tx_counted && !tx_cq_) || (rx_counted && !rx_cq_))) {
		/* one entry per work request either queue can have outstanding */
		size_t n = std::min(tx_->slots.size() + rx_->slots.size(),
		                    static_cast<size_t>(domain_->device_attr().max_cqe));
		struct fi_cq_attr a = {};
		a.size = n;
		a.format = FI_CQ_FORMAT_CONTEXT;
		a.wait_obj = FI_WAIT_NONE;
		int ret = guard([&] {
			auto q = std::make_unique<cq>(domain_, a, n);
			q->make_sink();
			if (int r = q->init_wait())
				return r;
			if (int r = q->create_hw())
				return r;
			own_cq_ = std::move(q);
			return 0;
		});
		if (ret) {
			FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_enable: internal CQ for counters: %s\n",
			        fi_strerror(-ret));
			return ret;
		}
	}
	cq *own = own_cq_.get();
	send_cq = tx_cq_ ? tx_cq_ : (own ? own : rx_cq_);
	recv_cq = rx_cq_ ? rx_cq_ : (own ? own : tx_cq_);
	tx_->msg_cntr = send_cntr_;
	tx_->read_cntr = read_cntr_;
	tx_->write_cntr = write_cntr_;
	rx_->msg_cntr = recv_cntr_;
	rx_->write_cntr = rwrite_cntr_;
	const std::pair<cntr *, cq *> wanted[] = {
	    {send_cntr_, send_cq}, {read_cntr_, send_cq},   {write_cntr_, send_cq},
	    {recv_cntr_, recv_cq}, {rwrite_cntr_, recv_cq},
	};
	return guard([&] {
		for (const auto &w : wanted) {
			if (!w.first || std::find(feeds_.begin(), feeds_.end(), w) != feeds_.end())
				continue;
			feeds_.reserve(feeds_.size() + 1);
			if (int ret = w.first->add_feed(w.second)) {
				FI_WARN(&prov, FI_LOG_EP_CTRL,
				        "fi_enable: counter on its CQ's channel: %s\n",
				        fi_strerror(-ret));
				drop_feeds();
				return ret;
			}
			feeds_.push_back(w);
		}
		return 0;
	});
}

void ep::drop_feeds() noexcept
{
	for (const auto &f : feeds_)
		f.first->remove_feed(f.second);
	feeds_.clear();
}

int ep::migrate_to_eq() noexcept
{
	if (id_->channel == eq_->channel())
		return FI_SUCCESS;
	if (rdma_migrate_id(id_.get(), eq_->channel()) != 0) {
		int ret = verbs::errno_code();
		FI_WARN(&prov, FI_LOG_EP_CTRL, "rdma_migrate_id: %s\n", fi_strerror(-ret));
		return ret;
	}
	return FI_SUCCESS;
}

namespace
{

struct rdma_conn_param conn_param(const domain &dom, const std::vector<uint8_t> &data)
{
	struct rdma_conn_param p = {};
	p.private_data = data.data();
	p.private_data_len = static_cast<uint8_t>(data.size());
	p.responder_resources =
	    static_cast<uint8_t>(std::min(dom.device_attr().max_qp_rd_atom, 255));
	p.initiator_depth =
	    static_cast<uint8_t>(std::min(dom.device_attr().max_qp_init_rd_atom, 255));
	p.retry_count = 7;
	p.rnr_retry_count = 7; /* a receiver without buffers makes the sender wait */
	return p;
}

} // namespace

int ep::connect(const void *addr, const void *param, size_t paramlen) noexcept
{
	if (paramlen > cm_connect_data_max || (paramlen && !param)) {
		FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_connect: paramlen %zu (max %zu) or NULL param\n",
		        paramlen, cm_connect_data_max);
		return -FI_EINVAL;
	}
	std::lock_guard<std::mutex> lock(mutex_);
	if (!enabled_ || passive_ || connecting_) {
		FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_connect: endpoint %s\n",
		        !enabled_ ? "not enabled"
		                  : (passive_ ? "was accepted" : "already connecting"));
		return -FI_EOPBADSTATE;
	}
	return guard([&] {
		if (!route_resolved_) {
			if (!addr) {
				FI_WARN(
				    &prov, FI_LOG_EP_CTRL,
				    "fi_connect: addr is NULL and the endpoint has no dest_addr\n");
				return -FI_EINVAL;
			}
			int ms = get_params().cm_timeout_ms;
			auto *dst = static_cast<struct sockaddr *>(const_cast<void *>(addr));
			if (rdma_resolve_addr(id_.get(), nullptr, dst, ms) != 0 ||
			    rdma_resolve_route(id_.get(), ms) != 0) {
				int ret = verbs::errno_code();
				FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_connect: resolving addr: %s\n",
				        fi_strerror(-ret));
				return ret;
			}
			route_resolved_ = true;
		}
		if (int ret = migrate_to_eq())
			return ret;
		std::vector<uint8_t> data = cm_wrap(param, paramlen);
		struct rdma_conn_param p = conn_param(*domain_, data);
		if (rdma_connect(id_.get(), &p) != 0) {
			int ret = verbs::errno_code();
			FI_WARN(&prov, FI_LOG_EP_CTRL, "rdma_connect: %s\n", fi_strerror(-ret));
			return ret;
		}
		connecting_ = true;
		return FI_SUCCESS;
	});
}

int ep::accept(const void *param, size_t paramlen) noexcept
{
	if (paramlen > cm_accept_data_max || (paramlen && !param)) {
		FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_accept: paramlen %zu (max %zu) or NULL param\n",
		        paramlen, cm_accept_data_max);
		return -FI_EINVAL;
	}
	std::lock_guard<std::mutex> lock(mutex_);
	if (!enabled_ || !passive_ || connecting_) {
		FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_accept: endpoint %s\n",
		        !enabled_ ? "not enabled"
		                  : (!passive_ ? "is not from a connection request"
		                               : "already accepted"));
		return -FI_EOPBADSTATE;
	}
	return guard([&] {
		if (int ret = migrate_to_eq())
			return ret;
		std::vector<uint8_t> data = cm_wrap(param, paramlen);
		struct rdma_conn_param p = conn_param(*domain_, data);
		if (rdma_accept(id_.get(), &p) != 0) {
			int ret = verbs::errno_code();
			FI_WARN(&prov, FI_LOG_EP_CTRL, "rdma_accept: %s\n", fi_strerror(-ret));
			return ret;
		}
		connecting_ = true;
		return FI_SUCCESS;
	});
}

int ep::shutdown() noexcept
{
	std::lock_guard<std::mutex> lock(mutex_);
	if (!connecting_)
		return -FI_ENOTCONN;
	if (rdma_disconnect(id_.get()) != 0) {
		int ret = verbs::errno_code();
		FI_INFO(&prov, FI_LOG_EP_CTRL, "rdma_disconnect: %s\n", fi_strerror(-ret));
		return ret;
	}
	return FI_SUCCESS;
}

int ep::getname(void *addr, size_t *addrlen) noexcept
{
	return copy_sockaddr(rdma_get_local_addr(id_.get()), addr, addrlen, "fi_getname");
}

int ep::getpeer(void *addr, size_t *addrlen) noexcept
{
	return copy_sockaddr(rdma_get_peer_addr(id_.get()), addr, addrlen, "fi_getpeer");
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
	std::lock_guard<std::mutex> lock(mutex_);
	if (!enabled_)
		return -FI_EOPBADSTATE;
	return static_cast<ssize_t>(std::min(tx_->credits.load(), tx_->slots.size()));
}

ssize_t ep::rx_size_left() const noexcept
{
	std::lock_guard<std::mutex> lock(mutex_);
	if (!enabled_)
		return -FI_EOPBADSTATE;
	return static_cast<ssize_t>(std::min(rx_->credits.load(), rx_->slots.size()));
}

int ep::check_iov(const char *op, const struct iovec *iov, void **desc, size_t count, size_t limit,
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

ssize_t ep::post_tx_wr(struct ibv_send_wr *wr, void *context, uint64_t cq_flags, size_t len,
                       bool report) noexcept
{
	std::lock_guard<std::mutex> lock(mutex_);
	if (!enabled_) {
		FI_WARN(&prov, FI_LOG_EP_DATA, "transmit on an endpoint that is not enabled\n");
		return -FI_EOPBADSTATE;
	}
	wr_ring &ring = *tx_;
	if (ring.credits.load(std::memory_order_acquire) == 0)
		return -FI_EAGAIN;
	wr_slot &slot = ring.slots[ring.head % ring.slots.size()];
	slot.context = context;
	slot.flags = cq_flags;
	slot.len = len;
	slot.report = report;
	wr->wr_id = reinterpret_cast<uintptr_t>(&slot);
	/* No entry wanted and no counter to count it: unsignalled (a failure still completes),
	 * but never more than half the queue in a row, so that slots keep coming back. */
	const bool counted = ring.msg_cntr || ring.write_cntr || ring.read_cntr;
	const bool quiet = !report && !counted && ring.unsignaled + 1 < ring.slots.size() / 2;
	if (!quiet)
		wr->send_flags |= IBV_SEND_SIGNALED;
	struct ibv_send_wr *bad = nullptr;
	if (int ret = ibv_post_send(id_->qp, wr, &bad)) {
		if (ret == ENOMEM)
			return -FI_EAGAIN;
		FI_WARN(&prov, FI_LOG_EP_DATA, "ibv_post_send: %s\n", strerror(ret));
		return verbs::positive_code(ret);
	}
	ring.head++;
	ring.unsignaled = quiet ? ring.unsignaled + 1 : 0;
	ring.credits.fetch_sub(1, std::memory_order_acq_rel);
	return FI_SUCCESS;
}

ssize_t ep::post_send(const struct iovec *iov, void **desc, size_t count, uint64_t data,
                      void *context, uint64_t flags, bool silent) noexcept
{
	if (flags & ~tx_flag_bits) {
		FI_WARN(&prov, FI_LOG_EP_DATA, "send: flags 0x%" PRIx64 " not supported\n", flags);
		return -FI_EBADFLAGS;
	}
	struct ibv_sge sge[max_sge_per_wr];
	size_t total = 0;
	bool inject = silent || (flags & FI_INJECT);
	if (inject) {
		size_t sum = 0;
		for (size_t i = 0; iov && i < count; i++)
			sum += iov[i].iov_len;
		if (sum > inject_size_) {
			FI_WARN(&prov, FI_LOG_EP_DATA, "inject: len %zu exceeds inject_size %zu\n",
			        sum, inject_size_);
			return -FI_EINVAL;
		}
	}
	/* up to inject_size, data goes inline: no memory key needed */
	size_t sum = 0;
	for (size_t i = 0; iov && i < count && i < tx_iov_limit_; i++)
		sum += iov[i].iov_len;
	bool inl = sum <= inject_size_;
	int n = check_iov("send", iov, desc, count, tx_iov_limit_, !inl, sge, &total);
	if (n < 0)
		return n;
	struct ibv_send_wr wr = {};
	wr.sg_list = sge;
	wr.num_sge = n;
	if (flags & FI_REMOTE_CQ_DATA) {
		wr.opcode = IBV_WR_SEND_WITH_IMM;
		wr.imm_data = htonl(static_cast<uint32_t>(data));
	} else {
		wr.opcode = IBV_WR_SEND;
	}
	if (inl && total)
		wr.send_flags |= IBV_SEND_INLINE;
	if (flags & FI_FENCE)
		wr.send_flags |= IBV_SEND_FENCE;
	bool report = !silent && (!tx_selective_ || (flags & FI_COMPLETION));
	return post_tx_wr(&wr, context, FI_SEND | FI_MSG, total, report);
}

ssize_t ep::post_rma(bool write, const struct iovec *iov, void **desc, size_t count, uint64_t addr,
                     uint64_t key, uint64_t data, void *context, uint64_t flags,
                     bool silent) noexcept
{
	const char *op = write ? "write" : "read";
	if (flags & ~tx_flag_bits) {
		FI_WARN(&prov, FI_LOG_EP_DATA, "%s: flags 0x%" PRIx64 " not supported\n", op,
		        flags);
		return -FI_EBADFLAGS;
	}
	if (key > UINT32_MAX) {
		FI_WARN(&prov, FI_LOG_EP_DATA, "%s: key 0x%" PRIx64 " is not a verbs rkey\n", op,
		        key);
		return -FI_EINVAL;
	}
	if (!write && (flags & FI_REMOTE_CQ_DATA)) {
		FI_WARN(&prov, FI_LOG_EP_DATA, "read: FI_REMOTE_CQ_DATA is for writes\n");
		return -FI_EBADFLAGS;
	}
	size_t sum = 0;
	for (size_t i = 0; iov && i < count && i < rma_iov_limit_; i++)
		sum += iov[i].iov_len;
	bool inl = write && sum <= inject_size_;
	if (silent && !inl) {
		FI_WARN(&prov, FI_LOG_EP_DATA, "inject_write: len %zu exceeds inject_size %zu\n",
		        sum, inject_size_);
		return -FI_EINVAL;
	}
	struct ibv_sge sge[max_sge_per_wr];
	size_t total = 0;
	int n = check_iov(op, iov, desc, count, rma_iov_limit_, !inl, sge, &total);
	if (n < 0)
		return n;
	struct ibv_send_wr wr = {};
	wr.sg_list = sge;
	wr.num_sge = n;
	wr.wr.rdma.remote_addr = addr;
	wr.wr.rdma.rkey = static_cast<uint32_t>(key);
	if (write) {
		if (flags & FI_REMOTE_CQ_DATA) {
			wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
			wr.imm_data = htonl(static_cast<uint32_t>(data));
		} else {
			wr.opcode = IBV_WR_RDMA_WRITE;
		}
		if (inl && total)
			wr.send_flags |= IBV_SEND_INLINE;
	} else {
		wr.opcode = IBV_WR_RDMA_READ;
	}
	if (flags & FI_FENCE)
		wr.send_flags |= IBV_SEND_FENCE;
	bool report = !silent && (!tx_selective_ || (flags & FI_COMPLETION));
	return post_tx_wr(&wr, context, FI_RMA | (write ? FI_WRITE : FI_READ), total, report);
}

ssize_t ep::post_recv(const struct iovec *iov, void **desc, size_t count, void *context,
                      uint64_t flags) noexcept
{
	if (flags & ~rx_flag_bits) {
		FI_WARN(&prov, FI_LOG_EP_DATA, "recv: flags 0x%" PRIx64 " not supported\n", flags);
		return -FI_EBADFLAGS;
	}
	struct ibv_sge sge[max_sge_per_wr];
	size_t total = 0;
	int n = check_iov("recv", iov, desc, count, rx_iov_limit_, true, sge, &total);
	if (n < 0)
		return n;
	std::lock_guard<std::mutex> lock(rx_mutex_);
	if (!enabled_) {
		FI_WARN(&prov, FI_LOG_EP_DATA, "recv on an endpoint that is not enabled\n");
		return -FI_EOPBADSTATE;
	}
	wr_ring &ring = *rx_;
	if (ring.credits.load(std::memory_order_acquire) == 0)
		return -FI_EAGAIN;
	wr_slot &slot = ring.slots[ring.head % ring.slots.size()];
	slot.context = context;
	slot.flags = FI_RECV | FI_MSG;
	slot.len = total;
	slot.report = !rx_selective_ || (flags & FI_COMPLETION);
	struct ibv_recv_wr wr = {};
	wr.wr_id = reinterpret_cast<uintptr_t>(&slot);
	wr.sg_list = sge;
	wr.num_sge = n;
	struct ibv_recv_wr *bad = nullptr;
	if (int ret = ibv_post_recv(id_->qp, &wr, &bad)) {
		if (ret == ENOMEM)
			return -FI_EAGAIN;
		FI_WARN(&prov, FI_LOG_EP_DATA, "ibv_post_recv: %s\n", strerror(ret));
		return verbs::positive_code(ret);
	}
	ring.head++;
	ring.credits.fetch_sub(1, std::memory_order_acq_rel);
	return FI_SUCCESS;
}

namespace
{

using ep_box = util::fid_box<struct fid_ep, ep>;

ep *ep_of(struct fid_ep *fid) noexcept
{
	return util::owner<ep>(fid);
}

ep *ep_of(struct fid *fid) noexcept
{
	return util::owner_of_fid<ep, struct fid_ep>(fid);
}

int ep_close(struct fid *fid) noexcept
{
	auto *box = reinterpret_cast<ep_box *>(fid);
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

int ep_getname(fid_t fid, void *addr, size_t *addrlen) noexcept
{
	return ep_of(fid)->getname(addr, addrlen);
}

int ep_getpeer(struct fid_ep *fid, void *addr, size_t *addrlen) noexcept
{
	return ep_of(fid)->getpeer(addr, addrlen);
}

int ep_connect(struct fid_ep *fid, const void *addr, const void *param, size_t paramlen) noexcept
{
	return ep_of(fid)->connect(addr, param, paramlen);
}

int ep_accept(struct fid_ep *fid, const void *param, size_t paramlen) noexcept
{
	return ep_of(fid)->accept(param, paramlen);
}

int ep_shutdown(struct fid_ep *fid, uint64_t flags) noexcept
{
	(void)flags;
	return ep_of(fid)->shutdown();
}

/* fi_ops_msg */
ssize_t msg_recv(struct fid_ep *fid, void *buf, size_t len, void *desc, fi_addr_t,
                 void *context) noexcept
{
	struct iovec iov = {buf, len};
	ep *e = ep_of(fid);
	return e->post_recv(&iov, &desc, 1, context, e->rx_op_flags());
}

ssize_t msg_recvv(struct fid_ep *fid, const struct iovec *iov, void **desc, size_t count, fi_addr_t,
                  void *context) noexcept
{
	ep *e = ep_of(fid);
	return e->post_recv(iov, desc, count, context, e->rx_op_flags());
}

ssize_t msg_recvmsg(struct fid_ep *fid, const struct fi_msg *msg, uint64_t flags) noexcept
{
	if (!msg) {
		FI_WARN(&prov, FI_LOG_EP_DATA, "fi_recvmsg: msg is NULL\n");
		return -FI_EINVAL;
	}
	return ep_of(fid)->post_recv(msg->msg_iov, msg->desc, msg->iov_count, msg->context, flags);
}

ssize_t msg_send(struct fid_ep *fid, const void *buf, size_t len, void *desc, fi_addr_t,
                 void *context) noexcept
{
	struct iovec iov = {const_cast<void *>(buf), len};
	ep *e = ep_of(fid);
	return e->post_send(&iov, &desc, 1, 0, context, e->tx_op_flags());
}

ssize_t msg_sendv(struct fid_ep *fid, const struct iovec *iov, void **desc, size_t count, fi_addr_t,
                  void *context) noexcept
{
	ep *e = ep_of(fid);
	return e->post_send(iov, desc, count, 0, context, e->tx_op_flags());
}

ssize_t msg_sendmsg(struct fid_ep *fid, const struct fi_msg *msg, uint64_t flags) noexcept
{
	if (!msg) {
		FI_WARN(&prov, FI_LOG_EP_DATA, "fi_sendmsg: msg is NULL\n");
		return -FI_EINVAL;
	}
	return ep_of(fid)->post_send(msg->msg_iov, msg->desc, msg->iov_count, msg->data,
	                             msg->context, flags);
}

ssize_t msg_inject(struct fid_ep *fid, const void *buf, size_t len, fi_addr_t) noexcept
{
	struct iovec iov = {const_cast<void *>(buf), len};
	return ep_of(fid)->post_send(&iov, nullptr, 1, 0, nullptr, 0, true);
}

ssize_t msg_senddata(struct fid_ep *fid, const void *buf, size_t len, void *desc, uint64_t data,
                     fi_addr_t, void *context) noexcept
{
	struct iovec iov = {const_cast<void *>(buf), len};
	ep *e = ep_of(fid);
	return e->post_send(&iov, &desc, 1, data, context, e->tx_op_flags() | FI_REMOTE_CQ_DATA);
}

ssize_t msg_injectdata(struct fid_ep *fid, const void *buf, size_t len, uint64_t data,
                       fi_addr_t) noexcept
{
	struct iovec iov = {const_cast<void *>(buf), len};
	return ep_of(fid)->post_send(&iov, nullptr, 1, data, nullptr, FI_REMOTE_CQ_DATA, true);
}

/* fi_ops_rma */
ssize_t rma_read(struct fid_ep *fid, void *buf, size_t len, void *desc, fi_addr_t, uint64_t addr,
                 uint64_t key, void *context) noexcept
{
	struct iovec iov = {buf, len};
	ep *e = ep_of(fid);
	return e->post_rma(false, &iov, &desc, 1, addr, key, 0, context, e->tx_op_flags());
}

ssize_t rma_readv(struct fid_ep *fid, const struct iovec *iov, void **desc, size_t count, fi_addr_t,
                  uint64_t addr, uint64_t key, void *context) noexcept
{
	ep *e = ep_of(fid);
	return e->post_rma(false, iov, desc, count, addr, key, 0, context, e->tx_op_flags());
}

ssize_t rma_msg(struct fid_ep *fid, const struct fi_msg_rma *msg, uint64_t flags, bool write,
                const char *op) noexcept
{
	if (!msg || (msg->rma_iov_count && !msg->rma_iov) || msg->rma_iov_count > 1) {
		FI_WARN(&prov, FI_LOG_EP_DATA, "%s: msg %p rma_iov_count %zu (rma_iov_limit 1)\n",
		        op, static_cast<const void *>(msg), msg ? msg->rma_iov_count : 0);
		return -FI_EINVAL;
	}
	uint64_t addr = msg->rma_iov_count ? msg->rma_iov[0].addr : 0;
	uint64_t key = msg->rma_iov_count ? msg->rma_iov[0].key : 0;
	return ep_of(fid)->post_rma(write, msg->msg_iov, msg->desc, msg->iov_count, addr, key,
	                            msg->data, msg->context, flags);
}

ssize_t rma_readmsg(struct fid_ep *fid, const struct fi_msg_rma *msg, uint64_t flags) noexcept
{
	return rma_msg(fid, msg, flags, false, "fi_readmsg");
}

ssize_t rma_write(struct fid_ep *fid, const void *buf, size_t len, void *desc, fi_addr_t,
                  uint64_t addr, uint64_t key, void *context) noexcept
{
	struct iovec iov = {const_cast<void *>(buf), len};
	ep *e = ep_of(fid);
	return e->post_rma(true, &iov, &desc, 1, addr, key, 0, context, e->tx_op_flags());
}

ssize_t rma_writev(struct fid_ep *fid, const struct iovec *iov, void **desc, size_t count,
                   fi_addr_t, uint64_t addr, uint64_t key, void *context) noexcept
{
	ep *e = ep_of(fid);
	return e->post_rma(true, iov, desc, count, addr, key, 0, context, e->tx_op_flags());
}

ssize_t rma_writemsg(struct fid_ep *fid, const struct fi_msg_rma *msg, uint64_t flags) noexcept
{
	return rma_msg(fid, msg, flags, true, "fi_writemsg");
}

ssize_t rma_inject(struct fid_ep *fid, const void *buf, size_t len, fi_addr_t, uint64_t addr,
                   uint64_t key) noexcept
{
	struct iovec iov = {const_cast<void *>(buf), len};
	return ep_of(fid)->post_rma(true, &iov, nullptr, 1, addr, key, 0, nullptr, 0, true);
}

ssize_t rma_writedata(struct fid_ep *fid, const void *buf, size_t len, void *desc, uint64_t data,
                      fi_addr_t, uint64_t addr, uint64_t key, void *context) noexcept
{
	struct iovec iov = {const_cast<void *>(buf), len};
	ep *e = ep_of(fid);
	return e->post_rma(true, &iov, &desc, 1, addr, key, data, context,
	                   e->tx_op_flags() | FI_REMOTE_CQ_DATA);
}

ssize_t rma_injectdata(struct fid_ep *fid, const void *buf, size_t len, uint64_t data, fi_addr_t,
                       uint64_t addr, uint64_t key) noexcept
{
	struct iovec iov = {const_cast<void *>(buf), len};
	return ep_of(fid)->post_rma(true, &iov, nullptr, 1, addr, key, data, nullptr,
	                            FI_REMOTE_CQ_DATA, true);
}

struct fi_ops ep_fi_ops = {
    .size = sizeof(struct fi_ops),
    .close = ep_close,
    .bind = ep_bind,
    .control = ep_control,
    .ops_open = util::enosys_ops_open,
    .tostr = util::enosys_tostr,
    .ops_set = util::enosys_ops_set,
};

struct fi_ops_ep ep_ops = {
    .size = sizeof(struct fi_ops_ep),
    .cancel = unsupported{},
    .getopt = ep_getopt,
    .setopt = ep_setopt,
    .tx_ctx = unsupported{},
    .rx_ctx = unsupported{},
    .rx_size_left = ep_rx_size_left,
    .tx_size_left = ep_tx_size_left,
};

struct fi_ops_cm ep_cm_ops = {
    .size = sizeof(struct fi_ops_cm),
    .setname = unsupported{},
    .getname = ep_getname,
    .getpeer = ep_getpeer,
    .connect = ep_connect,
    .listen = unsupported{},
    .accept = ep_accept,
    .reject = unsupported{},
    .shutdown = ep_shutdown,
    .join = unsupported{},
};

struct fi_ops_msg ep_msg_ops = {
    .size = sizeof(struct fi_ops_msg),
    .recv = msg_recv,
    .recvv = msg_recvv,
    .recvmsg = msg_recvmsg,
    .send = msg_send,
    .sendv = msg_sendv,
    .sendmsg = msg_sendmsg,
    .inject = msg_inject,
    .senddata = msg_senddata,
    .injectdata = msg_injectdata,
};

struct fi_ops_rma ep_rma_ops = {
    .size = sizeof(struct fi_ops_rma),
    .read = rma_read,
    .readv = rma_readv,
    .readmsg = rma_readmsg,
    .write = rma_write,
    .writev = rma_writev,
    .writemsg = rma_writemsg,
    .inject = rma_inject,
    .writedata = rma_writedata,
    .injectdata = rma_injectdata,
};

struct fi_ops_tagged ep_tagged_ops = {
    .size = sizeof(struct fi_ops_tagged),
    .recv = unsupported{},
    .recvv = unsupported{},
    .recvmsg = unsupported{},
    .send = unsupported{},
    .sendv = unsupported{},
    .sendmsg = unsupported{},
    .inject = unsupported{},
    .senddata = unsupported{},
    .injectdata = unsupported{},
};

struct fi_ops_atomic ep_atomic_ops = {
    .size = sizeof(struct fi_ops_atomic),
    .write = unsupported{},
    .writev = unsupported{},
    .writemsg = unsupported{},
    .inject = unsupported{},
    .readwrite = unsupported{},
    .readwritev = unsupported{},
    .readwritemsg = unsupported{},
    .compwrite = unsupported{},
    .compwritev = unsupported{},
    .compwritemsg = unsupported{},
    .writevalid = unsupported{},
    .readwritevalid = unsupported{},
    .compwritevalid = unsupported{},
};

} // namespace

int ep_open(struct fid_domain *domain_fid, struct fi_info *info, struct fid_ep **out,
            void *context) noexcept
{
	if (!domain_fid || !info || !out) {
		FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_endpoint: %s is NULL\n",
		        !domain_fid ? "domain" : (!info ? "info" : "ep"));
		return -FI_EINVAL;
	}
	*out = nullptr;
	if (info->ep_attr && util::raw_enum(info->ep_attr->type) != FI_EP_MSG &&
	    util::raw_enum(info->ep_attr->type) != FI_EP_UNSPEC) {
		FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_endpoint: ep type %d is not FI_EP_MSG\n",
		        util::raw_enum(info->ep_attr->type));
		return -FI_EINVAL;
	}
	if (info->handle && info->handle->fclass != FI_CLASS_CONNREQ) {
		FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_endpoint: info->handle class %zu unsupported\n",
		        info->handle->fclass);
		return -FI_EINVAL;
	}
	if (!info->handle) {
		if (int ret = check_sockaddr(info->src_addr, info->src_addrlen, info->addr_format,
		                             "fi_endpoint: info->src_addr"))
			return ret == -FI_ENODATA ? -FI_EINVAL : ret;
		if (int ret = check_sockaddr(info->dest_addr, info->dest_addrlen, info->addr_format,
		                             "fi_endpoint: info->dest_addr"))
			return ret == -FI_ENODATA ? -FI_EINVAL : ret;
	}
	domain *dom = domain_of(domain_fid);
	return guard([&] {
		info_ptr copy(fi_dupinfo(info));
		if (!copy)
			return -FI_ENOMEM;
		copy->handle = nullptr;
		verbs::cm_id id;
		bool from_connreq = info->handle != nullptr;
		if (from_connreq) {
			auto *req = reinterpret_cast<connreq *>(info->handle);
			if (!req->id) {
				FI_WARN(&prov, FI_LOG_EP_CTRL,
				        "fi_endpoint: connection request already taken\n");
				return -FI_EINVAL;
			}
			id.reset(req->id);
			req->id = nullptr;
		} else {
			if (int ret = verbs::create_id(nullptr, nullptr, &id)) {
				FI_WARN(&prov, FI_LOG_EP_CTRL, "rdma_create_id: %s\n",
				        fi_strerror(-ret));
				return ret;
			}
			auto *src = static_cast<struct sockaddr *>(info->src_addr);
			auto *dst = static_cast<struct sockaddr *>(info->dest_addr);
			if (src && !dst && rdma_bind_addr(id.get(), src) != 0) {
				int ret = verbs::errno_code();
				FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_endpoint: rdma_bind_addr: %s\n",
				        fi_strerror(-ret));
				return ret;
			}
			if (dst) {
				int ms = get_params().cm_timeout_ms;
				if (rdma_resolve_addr(id.get(), src, dst, ms) != 0 ||
				    rdma_resolve_route(id.get(), ms) != 0) {
					int ret = verbs::errno_code();
					FI_WARN(&prov, FI_LOG_EP_CTRL,
					        "fi_endpoint: resolving dest_addr: %s\n",
					        fi_strerror(-ret));
					return ret;
				}
			}
		}
		bool resolved = from_connreq || info->dest_addr;
		auto obj = std::make_unique<ep>(dom, std::move(copy), std::move(id), from_connreq);
		obj->set_route_resolved(resolved);
		auto box = std::make_unique<ep_box>();
		box->fid.fid.fclass = FI_CLASS_EP;
		box->fid.fid.context = context;
		box->fid.fid.ops = &ep_fi_ops;
		box->fid.ops = &ep_ops;
		box->fid.cm = &ep_cm_ops;
		box->fid.msg = &ep_msg_ops;
		box->fid.rma = &ep_rma_ops;
		box->fid.tagged = &ep_tagged_ops;
		box->fid.atomic = &ep_atomic_ops;
		obj->set_fid(&box->fid.fid);
		box->obj = obj.release();
		*out = &box.release()->fid;
		if (from_connreq) {
			free(info->handle);
			info->handle = nullptr;
		}
		return FI_SUCCESS;
	});
}

} // namespace vwait
