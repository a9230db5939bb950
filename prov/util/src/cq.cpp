/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* The util layer's software completion queue and its fid_cq shim. */
#include "config.h"

#include "vwait/util/cq.h"

#include "vwait/util/wait.h"

#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>
#include <rdma/providers/fi_log.h>

#include <algorithm>
#include <cstring>

namespace vwait::util
{

size_t cq_entry_size(enum fi_cq_format format) noexcept
{
	switch (format) {
	case FI_CQ_FORMAT_CONTEXT:
		return sizeof(struct fi_cq_entry);
	case FI_CQ_FORMAT_MSG:
		return sizeof(struct fi_cq_msg_entry);
	case FI_CQ_FORMAT_DATA:
		return sizeof(struct fi_cq_data_entry);
	case FI_CQ_FORMAT_TAGGED:
		return sizeof(struct fi_cq_tagged_entry);
	default:
		return 0;
	}
}

void cq_entry_copy_out(enum fi_cq_format format, const cq_entry &e, void *dst) noexcept
{
	switch (format) {
	case FI_CQ_FORMAT_CONTEXT: {
		struct fi_cq_entry out = {e.op_context};
		std::memcpy(dst, &out, sizeof(out));
		break;
	}
	case FI_CQ_FORMAT_MSG: {
		struct fi_cq_msg_entry out = {e.op_context, e.flags, e.len};
		std::memcpy(dst, &out, sizeof(out));
		break;
	}
	case FI_CQ_FORMAT_DATA: {
		struct fi_cq_data_entry out = {e.op_context, e.flags, e.len, e.buf, e.data};
		std::memcpy(dst, &out, sizeof(out));
		break;
	}
	case FI_CQ_FORMAT_TAGGED: {
		struct fi_cq_tagged_entry out = {e.op_context, e.flags, e.len,
		                                 e.buf,        e.data,  e.tag};
		std::memcpy(dst, &out, sizeof(out));
		break;
	}
	default:
		break;
	}
}

int cq_check_attr(const struct fi_provider *prov, const struct fi_cq_attr *attr) noexcept
{
	if (!attr) {
		FI_WARN(prov, FI_LOG_CQ, "fi_cq_open: attr is NULL\n");
		return -FI_EINVAL;
	}
	const int format = raw_enum(attr->format);
	if (format != FI_CQ_FORMAT_UNSPEC &&
	    (format < FI_CQ_FORMAT_CONTEXT || format > FI_CQ_FORMAT_TAGGED)) {
		FI_WARN(prov, FI_LOG_CQ, "fi_cq_open: attr->format %d is not an fi_cq_format\n",
		        format);
		return -FI_EINVAL;
	}
	if (attr->size > cq_max_size) {
		FI_WARN(prov, FI_LOG_CQ, "fi_cq_open: attr->size %zu exceeds the maximum %zu\n",
		        attr->size, cq_max_size);
		return -FI_EINVAL;
	}
	if (attr->flags & ~static_cast<uint64_t>(FI_AFFINITY)) {
		FI_WARN(prov, FI_LOG_CQ, "fi_cq_open: attr->flags 0x%llx has unknown bits\n",
		        static_cast<unsigned long long>(attr->flags));
		return -FI_EINVAL;
	}
	const int cond = raw_enum(attr->wait_cond);
	if (cond != FI_CQ_COND_NONE && cond != FI_CQ_COND_THRESHOLD) {
		FI_WARN(prov, FI_LOG_CQ,
		        "fi_cq_open: attr->wait_cond %d is not an fi_cq_wait_cond\n", cond);
		return -FI_EINVAL;
	}
	return check_wait_obj(prov, FI_LOG_CQ, "fi_cq_open", attr->wait_obj);
}

sw_cq::sw_cq(const struct fi_provider *prov, const struct fi_cq_attr &attr, uint32_t api_version)
    : object(prov, FI_LOG_CQ, "CQ", attr.wait_obj, attr.wait_set),
      format_(attr.format == FI_CQ_FORMAT_UNSPEC ? cq_default_format : attr.format),
      wait_cond_(attr.wait_cond), size_(attr.size ? attr.size : cq_default_size),
      api_version_(api_version)
{
}

sw_cq::~sw_cq() = default;

bool sw_cq::ready() noexcept
{
	progress();
	return queued() > 0;
}

int sw_cq::arm_now() noexcept
{
	return arm();
}

int sw_cq::trywait() noexcept
{
	if (queued() > 0)
		return -FI_EAGAIN;
	int ret = arm();
	if (ret)
		return ret;
	progress();
	return queued() > 0 ? -FI_EAGAIN : FI_SUCCESS;
}

int sw_cq::push(const cq_entry &e) noexcept
{
	{
		util::lock_guard<util::mutex> g(lock_);
		slot *s = tail_slot();
		if (!s)
			return -FI_EAGAIN;
		s->entry = e;
		s->is_error = false;
		++count_;
	}
	notify();
	return FI_SUCCESS;
}

size_t sw_cq::push_n(const cq_entry *entries, size_t n) noexcept
{
	size_t done = 0;
	{
		util::lock_guard<util::mutex> g(lock_);
		for (slot *s; done < n && (s = tail_slot()) != nullptr; done++) {
			s->entry = entries[done];
			s->is_error = false;
			++count_;
		}
	}
	if (done)
		notify();
	return done;
}

int sw_cq::push_error(const struct fi_cq_err_entry &err, const void *err_data, size_t len,
                      fi_addr_t src_addr) noexcept
{
	int ret = guard([&] {
		error_record rec{err, {}};
		if (err_data && len)
			rec.data.assign(static_cast<const uint8_t *>(err_data),
			                static_cast<const uint8_t *>(err_data) + len);
		rec.entry.err_data = nullptr;
		rec.entry.err_data_size = rec.data.size();
		util::lock_guard<util::mutex> g(lock_);
		slot *s = tail_slot();
		if (!s)
			return -FI_EAGAIN;
		errors_.push_back(std::move(rec));
		s->entry = cq_entry{};
		s->entry.op_context = err.op_context;
		s->entry.src_addr = src_addr;
		s->is_error = true;
		++count_;
		return FI_SUCCESS;
	});
	if (ret == FI_SUCCESS)
		notify();
	return ret;
}

/* Under lock_: the slot after the last queued one, or nullptr when size_ entries are queued
 * (or the ring could not grow). The ring starts empty and doubles (from 16) up to size_ as
 * entries queue up: a CQ whose entries are read straight from below (the verbs CQ's
 * read_direct) or that stays idle never holds size_ slots. */
sw_cq::slot *sw_cq::tail_slot() noexcept
{
	const size_t cap = ring_.size();
	if (count_ < cap)
		return &ring_[head_ + count_ < cap ? head_ + count_ : head_ + count_ - cap];
	if (cap >= size_)
		return nullptr;
	const size_t grown = std::min(size_, std::max<size_t>(16, 2 * cap));
	try {
		std::vector<slot> next;
		next.reserve(grown);
		for (size_t i = 0; i < count_; i++)
			next.push_back(ring_[head_ + i < cap ? head_ + i : head_ + i - cap]);
		next.resize(grown);
		ring_.swap(next);
	} catch (const std::bad_alloc &) {
		FI_WARN(prov_, FI_LOG_CQ, "CQ: no memory to grow its queue past %zu entries\n",
		        cap);
		return nullptr;
	}
	head_ = 0;
	return &ring_[count_];
}

ssize_t sw_cq::read_locked(void *buf, size_t count, fi_addr_t *src) noexcept
{
	if (!count_)
		return -FI_EAGAIN;
	if (ring_[head_].is_error)
		return -FI_EAVAIL;
	const size_t esize = cq_entry_size(format_);
	auto *out = static_cast<uint8_t *>(buf);
	size_t n = 0;
	while (n < count && count_ && !ring_[head_].is_error) {
		const slot &s = ring_[head_];
		cq_entry_copy_out(format_, s.entry, out + n * esize);
		if (src)
			src[n] = s.entry.src_addr;
		head_ = head_ + 1 == ring_.size() ? 0 : head_ + 1;
		--count_;
		++n;
	}
	ring_reads_ += n;
	return static_cast<ssize_t>(n);
}

uint64_t sw_cq::unread_mark() const noexcept
{
	util::lock_guard<util::mutex> g(lock_);
	return ring_reads_ + count_.load(std::memory_order_relaxed);
}

bool sw_cq::read_past(uint64_t mark) const noexcept
{
	util::lock_guard<util::mutex> g(lock_);
	return ring_reads_ >= mark;
}

/* read() after read_direct took nothing (or count is 0, or buf NULL) */
ssize_t sw_cq::read_ring(void *buf, size_t count, fi_addr_t *src) noexcept
{
	if (!buf && count) {
		FI_WARN(prov_, FI_LOG_CQ, "fi_cq_read: buf is NULL with count %zu\n", count);
		return -FI_EINVAL;
	}
	progress();
	util::lock_guard<util::mutex> g(lock_);
	if (!count) /* progress only; report the state as a read would */
		return !count_ ? -FI_EAGAIN : ring_[head_].is_error ? -FI_EAVAIL : 0;
	return read_locked(buf, count, src);
}

ssize_t sw_cq::readerr(struct fi_cq_err_entry *buf, uint64_t flags) noexcept
{
	if (!buf) {
		FI_WARN(prov_, FI_LOG_CQ, "fi_cq_readerr: buf is NULL\n");
		return -FI_EINVAL;
	}
	if (flags) {
		FI_WARN(prov_, FI_LOG_CQ, "fi_cq_readerr: flags 0x%llx are not supported\n",
		        static_cast<unsigned long long>(flags));
		return -FI_EINVAL;
	}
	progress();
	return guard([&]() -> int {
		util::lock_guard<util::mutex> g(lock_);
		if (!count_ || !ring_[head_].is_error)
			return -FI_EAGAIN;
		error_record &rec = errors_.front();
		const bool provider_buffer =
		    FI_VERSION_LT(api_version_, FI_VERSION(1, 5)) || buf->err_data_size == 0;
		void *user_data = buf->err_data;
		const size_t user_size = buf->err_data_size;
		*buf = rec.entry;
		if (provider_buffer) {
			last_err_data_ = std::move(rec.data);
			buf->err_data = last_err_data_.empty() ? nullptr : last_err_data_.data();
			buf->err_data_size = last_err_data_.size();
		} else {
			const size_t n = std::min(user_size, rec.data.size());
			if (n)
				std::memcpy(user_data, rec.data.data(), n);
			buf->err_data = user_data;
			buf->err_data_size = n;
		}
		errors_.pop_front();
		head_ = head_ + 1 == ring_.size() ? 0 : head_ + 1;
		--count_;
		++ring_reads_;
		return 1;
	});
}

ssize_t sw_cq::sread(void *buf, size_t count, fi_addr_t *src, const void *cond,
                     int timeout) noexcept
{
	const auto until = deadline_after(timeout); /* once, at entry */
	if (!buf && count) {
		FI_WARN(prov_, FI_LOG_CQ, "fi_cq_sread: buf is NULL with count %zu\n", count);
		return -FI_EINVAL;
	}
	waiter *w = wait_object();
	if (!w) {
		FI_WARN(prov_, FI_LOG_CQ, "fi_cq_sread: the CQ was opened with FI_WAIT_NONE\n");
		return -FI_EINVAL;
	}
	size_t threshold = 1;
	if (wait_cond_ == FI_CQ_COND_THRESHOLD && cond)
		threshold =
		    std::max<size_t>(1, std::min(*static_cast<const size_t *>(cond), size_));
	/* a signal raised while nobody was blocked ends the next sread; one raised while
	 * several are blocked ends all of them */
	const uint64_t raised_at_entry = signals_raised_.load(std::memory_order_acquire);
	const bool pending = raised_at_entry != signals_consumed_.load(std::memory_order_acquire);
	/* What the call consumes, read inside the phases (the waiter polls nothing below for a
	 * CQ: the read does; arm_now() arms): entries another reader takes between a wakeup and
	 * the read never end this sread before its deadline. A signal ends it; so does an error
	 * at the head (the caller must see -FI_EAVAIL). One entry is enough: from below straight
	 * into buf when the subclass can (read_direct), as fi_cq_read does. */
	ssize_t result = -FI_EAGAIN;
	auto consume = [&]() noexcept {
		if (signals_raised_.load(std::memory_order_acquire) != raised_at_entry)
			return true;
		if (threshold == 1 && count) {
			direct_read direct = read_direct(buf, count, src);
			if (direct.taken()) {
				result = direct.result();
				return result != -FI_EAGAIN;
			}
		}
		progress();
		util::lock_guard<util::mutex> g(lock_);
		if (count_ < threshold && !(count_ && ring_[head_].is_error))
			return false;
		result = read_locked(buf, count, src);
		return result != -FI_EAGAIN;
	};
	if (!pending)
		w->wait_for(*this, until, consume, wakes::one);
	const uint64_t raised = signals_raised_.load(std::memory_order_acquire);
	uint64_t consumed = signals_consumed_.load(std::memory_order_acquire);
	while (consumed < raised && !signals_consumed_.compare_exchange_weak(
	                                consumed, raised, std::memory_order_acq_rel))
		;
	if (result != -FI_EAGAIN)
		return result;
	/* deadline or signal: whatever is there (below a threshold too), else -FI_EAGAIN */
	progress();
	util::lock_guard<util::mutex> g(lock_);
	return read_locked(buf, count, src);
}

int sw_cq::signal() noexcept
{
	if (!wait_object()) {
		FI_WARN(prov_, FI_LOG_CQ, "fi_cq_signal: the CQ was opened with FI_WAIT_NONE\n");
		return -FI_EINVAL;
	}
	signals_raised_.fetch_add(1, std::memory_order_acq_rel);
	wake();
	return FI_SUCCESS;
}

/* ------------------------------------------------------------------ the fid_cq shim */
namespace
{

/* a slot of cq_ops: the fid is a CQ's object_box */
sw_cq *obj(struct fid_cq *f) noexcept
{
	return static_cast<sw_cq *>(object_box::of(f)->obj);
}

ssize_t cq_read(struct fid_cq *f, void *buf, size_t count) noexcept
{
	return obj(f)->read(buf, count, nullptr);
}

ssize_t cq_readfrom(struct fid_cq *f, void *buf, size_t count, fi_addr_t *src) noexcept
{
	return obj(f)->read(buf, count, src);
}

ssize_t cq_readerr(struct fid_cq *f, struct fi_cq_err_entry *buf, uint64_t flags) noexcept
{
	return obj(f)->readerr(buf, flags);
}

ssize_t cq_sread(struct fid_cq *f, void *buf, size_t count, const void *cond, int timeout) noexcept
{
	return obj(f)->sread(buf, count, nullptr, cond, timeout);
}

ssize_t cq_sreadfrom(struct fid_cq *f, void *buf, size_t count, fi_addr_t *src, const void *cond,
                     int timeout) noexcept
{
	return obj(f)->sread(buf, count, src, cond, timeout);
}

int cq_signal(struct fid_cq *f) noexcept
{
	return obj(f)->signal();
}

struct fi_ops_cq cq_ops = {
    .size = sizeof(struct fi_ops_cq),
    .read = cq_read,
    .readfrom = cq_readfrom,
    .readerr = cq_readerr,
    .sread = cq_sread,
    .sreadfrom = cq_sreadfrom,
    .signal = cq_signal,
    .strerror = object_strerror<struct fid_cq>,
};

} // namespace

int cq_install(std::unique_ptr<sw_cq> o, struct fid_cq **out, void *context) noexcept
{
	return object_install(std::move(o), &cq_ops, out, context);
}

int cq_open(const struct fi_provider *prov, const struct fi_cq_attr *attr, struct fid_cq **out,
            void *context, uint32_t api_version)
{
	return object_open(prov, FI_LOG_CQ, "fi_cq_open", "cq", cq_check_attr, attr, out, [&] {
		return cq_install(std::make_unique<sw_cq>(prov, *attr, api_version), out, context);
	});
}

} // namespace vwait::util
