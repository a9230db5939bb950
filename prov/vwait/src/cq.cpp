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

namespace vwait
{

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

cq::cq(domain *dom, verbs::cq hw, enum fi_cq_format format, size_t size)
    : domain_(dom), hw_(std::move(hw)), format_(format), size_(size)
{
	switch (format_) {
	case FI_CQ_FORMAT_MSG:
		entry_size_ = sizeof(struct fi_cq_msg_entry);
		break;
	case FI_CQ_FORMAT_DATA:
		entry_size_ = sizeof(struct fi_cq_data_entry);
		break;
	case FI_CQ_FORMAT_TAGGED:
		entry_size_ = sizeof(struct fi_cq_tagged_entry);
		break;
	default:
		entry_size_ = sizeof(struct fi_cq_entry);
		break;
	}
	domain_->hold();
}

cq::~cq()
{
	hw_.reset();
	domain_->release();
}

void cq::adopt(std::shared_ptr<wr_ring> ring)
{
	std::lock_guard<std::mutex> lock(mutex_);
	orphans_.erase(
	    std::remove_if(orphans_.begin(), orphans_.end(),
	                   [](const std::shared_ptr<wr_ring> &r) { return r->outstanding() == 0; }),
	    orphans_.end());
	if (ring->outstanding() != 0)
		orphans_.push_back(std::move(ring));
}

void cq::write_entry(void *buf, size_t i, const completion &c) const noexcept
{
	uint8_t *at = static_cast<uint8_t *>(buf) + i * entry_size_;
	switch (format_) {
	case FI_CQ_FORMAT_MSG: {
		auto *e = reinterpret_cast<struct fi_cq_msg_entry *>(at);
		e->op_context = c.context;
		e->flags = c.flags;
		e->len = c.len;
		break;
	}
	case FI_CQ_FORMAT_DATA:
	case FI_CQ_FORMAT_TAGGED: {
		auto *e = reinterpret_cast<struct fi_cq_data_entry *>(at);
		e->op_context = c.context;
		e->flags = c.flags;
		e->len = c.len;
		e->buf = nullptr;
		e->data = c.data;
		if (format_ == FI_CQ_FORMAT_TAGGED)
			reinterpret_cast<struct fi_cq_tagged_entry *>(at)->tag = 0;
		break;
	}
	default:
		reinterpret_cast<struct fi_cq_entry *>(at)->op_context = c.context;
		break;
	}
}

/* Polls the hardware once. Successes go to direct[] while it has room and nothing waits in
 * the backlog (order is kept); the rest goes to the backlog. Returns how many were found. */
size_t cq::poll_hw(completion *direct, size_t max, size_t *direct_count)
{
	constexpr int batch = 16;
	struct ibv_wc wc[batch];
	int n = ibv_poll_cq(hw_.get(), batch, wc);
	if (n < 0) {
		FI_WARN(&prov, FI_LOG_CQ, "ibv_poll_cq: %d\n", n);
		return 0;
	}
	for (int i = 0; i < n; i++) {
		completion c;
		if (!translate(wc[i], &c))
			continue;
		if (c.err == 0 && backlog_.empty() && *direct_count < max)
			direct[(*direct_count)++] = c;
		else
			backlog_.push_back(c);
	}
	return static_cast<size_t>(n);
}

ssize_t cq::read(void *buf, size_t count, fi_addr_t *src_addr) noexcept
{
	if (!buf && count) {
		FI_WARN(&prov, FI_LOG_CQ, "fi_cq_read: buf is NULL with count %zu\n", count);
		return -FI_EINVAL;
	}
	std::lock_guard<std::mutex> lock(mutex_);
	if (overrun_.load(std::memory_order_acquire) && !overrun_reported_)
		return -FI_EAVAIL;
	size_t n = 0;
	completion direct[16];
	for (;;) {
		while (n < count && !backlog_.empty() && backlog_.front().err == 0) {
			write_entry(buf, n++, backlog_.front());
			backlog_.pop_front();
		}
		if (n == count || !backlog_.empty())
			break;
		size_t got = 0;
		size_t polled = poll_hw(direct, std::min<size_t>(count - n, 16), &got);
		for (size_t i = 0; i < got; i++)
			write_entry(buf, n++, direct[i]);
		if (polled == 0)
			break;
	}
	if (src_addr)
		for (size_t i = 0; i < n; i++)
			src_addr[i] = FI_ADDR_NOTAVAIL;
	if (n)
		return static_cast<ssize_t>(n);
	if (!backlog_.empty())
		return -FI_EAVAIL;
	/* nothing: now and then, look for an overrun on the device's async fd */
	if (++idle_polls_ >= 256) {
		idle_polls_ = 0;
		domain_->poll_async_events();
		if (overrun_.load(std::memory_order_acquire) && !overrun_reported_)
			return -FI_EAVAIL;
	}
	return -FI_EAGAIN;
}

ssize_t cq::readerr(struct fi_cq_err_entry *entry, uint64_t flags) noexcept
{
	if (!entry) {
		FI_WARN(&prov, FI_LOG_CQ, "fi_cq_readerr: buf is NULL\n");
		return -FI_EINVAL;
	}
	if (flags) {
		FI_WARN(&prov, FI_LOG_CQ, "fi_cq_readerr: flags 0x%llx must be 0\n",
		        static_cast<unsigned long long>(flags));
		return -FI_EBADFLAGS;
	}
	std::lock_guard<std::mutex> lock(mutex_);
	completion c;
	if (overrun_.load(std::memory_order_acquire) && !overrun_reported_) {
		overrun_reported_ = true;
		c.err = FI_EOVERRUN;
		c.status = IBV_WC_GENERAL_ERR;
	} else {
		if (backlog_.empty()) {
			size_t got = 0;
			poll_hw(nullptr, 0, &got);
		}
		if (backlog_.empty() || backlog_.front().err == 0)
			return -FI_EAGAIN;
		c = backlog_.front();
		backlog_.pop_front();
	}
	size_t user_size = entry->err_data_size;
	void *user_data = entry->err_data;
	entry->op_context = c.context;
	entry->flags = c.flags;
	entry->len = c.len;
	entry->buf = nullptr;
	entry->data = c.data;
	entry->tag = 0;
	entry->olen = 0;
	entry->err = c.err;
	entry->prov_errno = c.prov_errno;
	/* err_data: the ibv_wc_status, for fi_cq_strerror */
	int status = c.status;
	if (FI_VERSION_GE(domain_->api_version(), FI_VERSION(1, 5)) && user_size && user_data) {
		size_t n = std::min(user_size, sizeof(status));
		memcpy(user_data, &status, n);
		entry->err_data_size = n;
	} else {
		err_data_.assign(reinterpret_cast<uint8_t *>(&status),
		                 reinterpret_cast<uint8_t *>(&status) + sizeof(status));
		entry->err_data = err_data_.data();
		entry->err_data_size = err_data_.size();
	}
	return 1;
}

namespace
{

int cq_close(struct fid *fid) noexcept
{
	auto *box = reinterpret_cast<cq_box *>(fid);
	if (box->obj->busy()) {
		FI_WARN(&prov, FI_LOG_CQ, "fi_close(cq): endpoints are still bound to it\n");
		return -FI_EBUSY;
	}
	delete box->obj;
	delete box;
	return FI_SUCCESS;
}

ssize_t cq_read(struct fid_cq *fid, void *buf, size_t count) noexcept
{
	return util::owner<cq>(fid)->read(buf, count, nullptr);
}

ssize_t cq_readfrom(struct fid_cq *fid, void *buf, size_t count, fi_addr_t *src_addr) noexcept
{
	return util::owner<cq>(fid)->read(buf, count, src_addr);
}

ssize_t cq_readerr(struct fid_cq *fid, struct fi_cq_err_entry *buf, uint64_t flags) noexcept
{
	return util::owner<cq>(fid)->readerr(buf, flags);
}

ssize_t cq_sread(struct fid_cq *, void *, size_t, const void *, int) noexcept
{
	FI_WARN(&prov, FI_LOG_CQ, "fi_cq_sread: this CQ has no wait object (FI_WAIT_NONE)\n");
	return -FI_ENOSYS;
}

ssize_t cq_sreadfrom(struct fid_cq *, void *, size_t, fi_addr_t *, const void *, int) noexcept
{
	FI_WARN(&prov, FI_LOG_CQ, "fi_cq_sreadfrom: this CQ has no wait object (FI_WAIT_NONE)\n");
	return -FI_ENOSYS;
}

int cq_signal(struct fid_cq *) noexcept
{
	FI_WARN(&prov, FI_LOG_CQ, "fi_cq_signal: this CQ has no wait object (FI_WAIT_NONE)\n");
	return -FI_ENOSYS;
}

/* prov_errno is the vendor error; err_data (when given) holds the ibv_wc_status. */
const char *cq_strerror(struct fid_cq *, int prov_errno, const void *err_data, char *buf,
                        size_t len) noexcept
{
	int status = prov_errno;
	if (err_data)
		memcpy(&status, err_data, sizeof(status));
	const char *str = ibv_wc_status_str(static_cast<enum ibv_wc_status>(status));
	if (buf && len) {
		snprintf(buf, len, "%s", str);
		return buf;
	}
	return str;
}

struct fi_ops cq_fi_ops = {
    .size = sizeof(struct fi_ops),
    .close = cq_close,
    .bind = util::enosys_bind,
    .control = util::enosys_control,
    .ops_open = util::enosys_ops_open,
    .tostr = util::enosys_tostr,
    .ops_set = util::enosys_ops_set,
};

struct fi_ops_cq cq_ops = {
    .size = sizeof(struct fi_ops_cq),
    .read = cq_read,
    .readfrom = cq_readfrom,
    .readerr = cq_readerr,
    .sread = cq_sread,
    .sreadfrom = cq_sreadfrom,
    .signal = cq_signal,
    .strerror = cq_strerror,
};

constexpr size_t default_cq_size = 4096;

} // namespace

int cq_open(struct fid_domain *domain_fid, struct fi_cq_attr *attr, struct fid_cq **out,
            void *context) noexcept
{
	if (!domain_fid || !attr || !out) {
		FI_WARN(&prov, FI_LOG_CQ, "fi_cq_open: %s is NULL\n",
		        !domain_fid ? "domain" : (!attr ? "attr" : "cq"));
		return -FI_EINVAL;
	}
	*out = nullptr;
	if (attr->wait_obj != FI_WAIT_NONE) {
		FI_WARN(&prov, FI_LOG_CQ,
		        "fi_cq_open: wait_obj %d not supported yet (only FI_WAIT_NONE)\n",
		        static_cast<int>(attr->wait_obj));
		return -FI_ENOSYS;
	}
	switch (attr->format) {
	case FI_CQ_FORMAT_UNSPEC:
	case FI_CQ_FORMAT_CONTEXT:
	case FI_CQ_FORMAT_MSG:
	case FI_CQ_FORMAT_DATA:
	case FI_CQ_FORMAT_TAGGED:
		break;
	default:
		FI_WARN(&prov, FI_LOG_CQ, "fi_cq_open: format %d unknown\n",
		        static_cast<int>(attr->format));
		return -FI_ENOSYS;
	}
	if (attr->flags & ~static_cast<uint64_t>(FI_AFFINITY)) {
		FI_WARN(&prov, FI_LOG_CQ, "fi_cq_open: flags 0x%llx not supported\n",
		        static_cast<unsigned long long>(attr->flags));
		return -FI_EBADFLAGS;
	}
	domain *dom = domain_of(domain_fid);
	return guarded([&] {
		size_t max = static_cast<size_t>(dom->device_attr().max_cqe);
		size_t size = attr->size ? attr->size : std::min(default_cq_size, max);
		if (size > max) {
			FI_INFO(&prov, FI_LOG_CQ, "fi_cq_open: size %zu clamped to max_cqe %zu\n",
			        size, max);
			size = max;
		}
		enum fi_cq_format format =
		    attr->format == FI_CQ_FORMAT_UNSPEC ? FI_CQ_FORMAT_CONTEXT : attr->format;
		verbs::cq hw(
		    ibv_create_cq(dom->context(), static_cast<int>(size), nullptr, nullptr, 0));
		if (!hw) {
			int ret = verbs::errno_code();
			FI_WARN(&prov, FI_LOG_CQ, "ibv_create_cq(%zu): %s\n", size,
			        fi_strerror(-ret));
			return ret;
		}
		auto obj = std::make_unique<cq>(dom, std::move(hw), format, size);
		obj->hw()->cq_context = obj.get();
		auto box = std::make_unique<cq_box>();
		box->fid.fid.fclass = FI_CLASS_CQ;
		box->fid.fid.context = context;
		box->fid.fid.ops = &cq_fi_ops;
		box->fid.ops = &cq_ops;
		box->obj = obj.release();
		*out = &box.release()->fid;
		return FI_SUCCESS;
	});
}

} // namespace vwait
