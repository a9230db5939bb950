/* The vwait completion queue over an ibv_cq (FI_WAIT_NONE). Work completions become
 * completion records (translate), records become entries of the CQ's format (write_entry). */
#include "config.h"

#include "vwait/cq.h"
#include "vwait/domain.h"
#include "vwait/util/enosys.h"
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
constexpr size_t default_cq_size = 4096;
}

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

bool translate(const struct ibv_wc &wc, completion *out) noexcept
{
	auto *slot = reinterpret_cast<wr_slot *>(static_cast<uintptr_t>(wc.wr_id));
	wr_ring *ring = slot->ring;
	completion c;
	c.context = slot->context;
	c.flags = slot->flags;
	c.len = slot->len;
	bool report = slot->report;
	/* the slot may be reused from here on */
	ring->credits.fetch_add(1, std::memory_order_acq_rel);
	if (ring->closed.load(std::memory_order_acquire))
		return false;
	if (wc.status != IBV_WC_SUCCESS) {
		c.err = wc_status_error(wc.status);
		c.status = wc.status;
		c.prov_errno = static_cast<int>(wc.vendor_err);
		c.len = 0;
		*out = c;
		return true;
	}
	if (!report)
		return false;
	switch (wc.opcode) {
	case IBV_WC_RECV:
		c.len = wc.byte_len;
		if (wc.wc_flags & IBV_WC_WITH_IMM) {
			c.flags |= FI_REMOTE_CQ_DATA;
			c.data = ntohl(wc.imm_data);
		}
		break;
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

cq::cq(domain *dom, const struct fi_cq_attr &attr, size_t size)
    : util::cq(
          &prov,
          [&] {
	          struct fi_cq_attr a = attr;
	          a.size = size;
	          return a;
          }(),
          dom->api_version()),
      domain_(dom)
{
	domain_->hold();
	held_domain_ = true;
}

cq::~cq()
{
	close_hook();
	if (held_domain_)
		domain_->release();
}

int cq::create_hw() noexcept
{
	if (util::waiter *w = wait_object()) {
		if (int ret = domain_->channels().get(w, channel_))
			return ret;
	}
	hw_.reset(ibv_create_cq(domain_->context(), static_cast<int>(size()),
	                        static_cast<cq_events *>(this),
	                        channel_ ? channel_->get() : nullptr, 0));
	if (!hw_) {
		int ret = verbs::errno_code();
		FI_WARN(&prov, FI_LOG_CQ, "ibv_create_cq(%zu): %s\n", size(), fi_strerror(-ret));
		channel_.reset();
		return ret;
	}
	attach(hw_.get());
	return 0;
}

/* Before the CQ leaves its waiters (util::cq_close): no event of it may be left unacked and
 * the channel must leave a private waiter while that waiter still exists. */
void cq::close_hook() noexcept
{
	std::lock_guard<std::mutex> lock(progress_mutex_);
	if (!hw_)
		return;
	begin_close();
	ack_all();
	hw_.reset(); /* waits for any ack a draining thread still owes */
	channel_.reset();
	std::lock_guard<std::mutex> orphans(orphans_mutex_);
	orphans_.clear();
}

void cq::adopt(std::shared_ptr<wr_ring> ring)
{
	std::lock_guard<std::mutex> lock(orphans_mutex_);
	orphans_.erase(
	    std::remove_if(orphans_.begin(), orphans_.end(),
	                   [](const std::shared_ptr<wr_ring> &r) { return r->outstanding() == 0; }),
	    orphans_.end());
	if (ring->outstanding() != 0)
		orphans_.push_back(std::move(ring));
}

void cq::progress() noexcept
{
	std::lock_guard<std::mutex> lock(progress_mutex_);
	if (!hw_)
		return;
	if (overrun_.load(std::memory_order_acquire) && !overrun_reported_) {
		struct fi_cq_err_entry err = {};
		err.err = FI_EOVERRUN;
		err.prov_errno = IBV_WC_GENERAL_ERR;
		int status = IBV_WC_GENERAL_ERR;
		if (push_error(err, &status, sizeof(status)) == 0)
			overrun_reported_ = true;
	}
	constexpr size_t batch = 16;
	for (;;) {
		size_t room = size() - queued();
		if (room == 0)
			return; /* the rest waits in the hardware CQ */
		struct ibv_wc wc[batch];
		int n = ibv_poll_cq(hw_.get(), static_cast<int>(std::min(room, batch)), wc);
		if (n < 0) {
			FI_WARN_SPARSE(&prov, FI_LOG_CQ, "ibv_poll_cq: %d\n", n);
			return;
		}
		/* successes go in batches (one wakeup each); an error keeps its place */
		util::cq_entry ok[batch];
		size_t nok = 0;
		for (int i = 0; i < n; i++) {
			completion c;
			if (!translate(wc[i], &c))
				continue;
			if (c.err == 0) {
				util::cq_entry &e = ok[nok++];
				e = util::cq_entry{};
				e.op_context = c.context;
				e.flags = c.flags;
				e.len = c.len;
				e.data = c.data;
				continue;
			}
			push_n(ok, nok);
			nok = 0;
			struct fi_cq_err_entry err = {};
			err.op_context = c.context;
			err.flags = c.flags;
			err.err = c.err;
			err.prov_errno = c.prov_errno;
			int status = c.status;
			push_error(err, &status, sizeof(status));
		}
		push_n(ok, nok);
		if (n == 0) {
			/* nothing: now and then, look for an overrun on the async fd */
			if (++idle_polls_ >= 256) {
				idle_polls_ = 0;
				domain_->poll_async_events();
			}
			return;
		}
		if (static_cast<size_t>(n) < batch)
			return;
	}
}

int cq::arm() noexcept
{
	if (!channel_)
		return 0;
	return cq_events::arm();
}

/* prov_errno is the vendor error; err_data (when given) holds the ibv_wc_status. */
std::string cq::describe_error(int prov_errno, const void *err_data) const
{
	int status = prov_errno;
	if (err_data)
		memcpy(&status, err_data, sizeof(status));
	return ibv_wc_status_str(static_cast<enum ibv_wc_status>(status));
}

cq *verbs_cq_of(struct fid *fid) noexcept
{
	if (!fid || fid->fclass != FI_CLASS_CQ)
		return nullptr;
	util::waitable *w = nullptr;
	if (util::get_waitable(fid, &w) != 0 || !w)
		return nullptr;
	return dynamic_cast<cq *>(w);
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
		auto obj = std::make_unique<cq>(dom, clamped, clamped.size);
		cq *raw = obj.get();
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
