/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* The util layer's event queue and its fid_eq shim. */
#include "config.h"

#include "vwait/util/eq.h"

#include "vwait/util/guard.h"
#include "vwait/util/wait.h"

#include <rdma/fi_errno.h>
#include <rdma/providers/fi_log.h>

#include <poll.h>

#include <algorithm>
#include <cstring>
#include <utility>

namespace vwait::util
{

int eq_check_attr(const struct fi_provider *prov, const struct fi_eq_attr *attr) noexcept
{
	if (!attr) {
		FI_WARN(prov, FI_LOG_EQ, "fi_eq_open: attr is NULL\n");
		return -FI_EINVAL;
	}
	if (attr->size > eq_max_size) {
		FI_WARN(prov, FI_LOG_EQ, "fi_eq_open: attr->size %zu exceeds the maximum %zu\n",
		        attr->size, eq_max_size);
		return -FI_EINVAL;
	}
	if (attr->flags & ~static_cast<uint64_t>(FI_WRITE | FI_AFFINITY)) {
		FI_WARN(prov, FI_LOG_EQ, "fi_eq_open: attr->flags 0x%llx has unknown bits\n",
		        static_cast<unsigned long long>(attr->flags));
		return -FI_EINVAL;
	}
	return check_wait_obj(prov, FI_LOG_EQ, "fi_eq_open", attr->wait_obj);
}

sw_eq::sw_eq(const struct fi_provider *prov, const struct fi_eq_attr &attr, uint32_t api_version)
    : object(prov, FI_LOG_EQ, "EQ", attr.wait_obj, attr.wait_set),
      size_(attr.size ? attr.size : eq_default_size), api_version_(api_version)
{
}

sw_eq::~sw_eq()
{
	unwatch();
}

size_t sw_eq::queued() const noexcept
{
	util::lock_guard<util::mutex> g(lock_);
	return queue_.size();
}

bool sw_eq::ready() noexcept
{
	progress();
	return queued() > 0;
}

bool sw_eq::peek() noexcept
{
	return queued() > 0;
}

int sw_eq::trywait() noexcept
{
	if (queued() > 0)
		return -FI_EAGAIN;
	int ret = arm();
	if (ret)
		return ret;
	progress();
	return queued() > 0 ? -FI_EAGAIN : FI_SUCCESS;
}

size_t sw_eq::room() const noexcept
{
	util::lock_guard<util::mutex> g(lock_);
	return queue_.size() < size_ ? size_ - queue_.size() : 0;
}

int sw_eq::push_record(uint32_t event, const void *entry, size_t len, bool written,
                       bool over_size) noexcept
{
	if (len > eq_max_entry_size || (!entry && len)) {
		FI_WARN(prov_, FI_LOG_EQ, "EQ entry of %zu bytes at %p is out of range (max %zu)\n",
		        len, entry, eq_max_entry_size);
		return -FI_EINVAL;
	}
	int ret = guard([&] {
		record rec;
		rec.event = event;
		rec.written = written;
		if (len)
			rec.bytes.assign(static_cast<const uint8_t *>(entry),
			                 static_cast<const uint8_t *>(entry) + len);
		util::lock_guard<util::mutex> g(lock_);
		if (queue_.size() >= size_ && !over_size)
			return -FI_EAGAIN;
		queue_.push_back(std::move(rec));
		return FI_SUCCESS;
	});
	if (ret == FI_SUCCESS)
		notify();
	return ret;
}

int sw_eq::push(uint32_t event, const void *entry, size_t len, bool over_size) noexcept
{
	return push_record(event, entry, len, false, over_size);
}

int sw_eq::push_error(const struct fi_eq_err_entry &err, const void *err_data, size_t len,
                      bool over_size) noexcept
{
	int ret = guard([&] {
		record rec;
		rec.is_error = true;
		struct fi_eq_err_entry e = err;
		e.err_data = nullptr;
		e.err_data_size = (err_data && len) ? len : 0;
		rec.bytes.resize(sizeof(e));
		std::memcpy(rec.bytes.data(), &e, sizeof(e));
		if (err_data && len)
			rec.err_data.assign(static_cast<const uint8_t *>(err_data),
			                    static_cast<const uint8_t *>(err_data) + len);
		util::lock_guard<util::mutex> g(lock_);
		if (queue_.size() >= size_ && !over_size)
			return -FI_EAGAIN;
		queue_.push_back(std::move(rec));
		return FI_SUCCESS;
	});
	if (ret == FI_SUCCESS)
		notify();
	return ret;
}

namespace
{

/* CM events carry connection data the reader may cut short (fi_eq(3)). */
bool truncatable(uint32_t event) noexcept
{
	return event == FI_CONNREQ || event == FI_CONNECTED || event == FI_SHUTDOWN;
}

} // namespace

ssize_t sw_eq::read_locked(uint32_t *event, void *buf, size_t len, uint64_t flags) noexcept
{
	if (queue_.empty())
		return -FI_EAGAIN;
	record &rec = queue_.front();
	if (rec.is_error)
		return -FI_EAVAIL;
	size_t n = rec.bytes.size();
	if (len < n) {
		if (!truncatable(rec.event) || len < sizeof(struct fi_eq_cm_entry)) {
			FI_WARN(prov_, FI_LOG_EQ,
			        "fi_eq_read: len %zu is too small for the %zu-byte entry of event "
			        "%u\n",
			        len, n, rec.event);
			return -FI_ETOOSMALL;
		}
		n = len;
	}
	*event = rec.event;
	if (n)
		std::memcpy(buf, rec.bytes.data(), n);
	if (!(flags & FI_PEEK))
		queue_.pop_front();
	return static_cast<ssize_t>(n);
}

ssize_t sw_eq::read(uint32_t *event, void *buf, size_t len, uint64_t flags) noexcept
{
	if (!event || (!buf && len)) {
		FI_WARN(prov_, FI_LOG_EQ, "fi_eq_read: %s is NULL\n", !event ? "event" : "buf");
		return -FI_EINVAL;
	}
	if (flags & ~static_cast<uint64_t>(FI_PEEK)) {
		FI_WARN(prov_, FI_LOG_EQ, "fi_eq_read: flags 0x%llx are not supported\n",
		        static_cast<unsigned long long>(flags));
		return -FI_EINVAL;
	}
	progress();
	util::lock_guard<util::mutex> g(lock_);
	return read_locked(event, buf, len, flags);
}

ssize_t sw_eq::readerr(struct fi_eq_err_entry *buf, uint64_t flags) noexcept
{
	if (!buf) {
		FI_WARN(prov_, FI_LOG_EQ, "fi_eq_readerr: buf is NULL\n");
		return -FI_EINVAL;
	}
	if (flags & ~static_cast<uint64_t>(FI_PEEK)) {
		FI_WARN(prov_, FI_LOG_EQ, "fi_eq_readerr: flags 0x%llx are not supported\n",
		        static_cast<unsigned long long>(flags));
		return -FI_EINVAL;
	}
	progress();
	return guard([&]() -> int {
		util::lock_guard<util::mutex> g(lock_);
		if (queue_.empty() || !queue_.front().is_error)
			return -FI_EAGAIN;
		record &rec = queue_.front();
		const bool provider_buffer = FI_VERSION_LT(api_version_, FI_VERSION(1, 5)) ||
		                             buf->err_data_size == 0 || !buf->err_data;
		void *user_data = buf->err_data;
		const size_t user_size = buf->err_data_size;
		std::memcpy(buf, rec.bytes.data(), sizeof(*buf));
		if (provider_buffer) {
			last_err_data_ = rec.err_data;
			buf->err_data = last_err_data_.empty() ? nullptr : last_err_data_.data();
			buf->err_data_size = last_err_data_.size();
		} else {
			const size_t n = std::min(user_size, rec.err_data.size());
			if (n)
				std::memcpy(user_data, rec.err_data.data(), n);
			buf->err_data = user_data;
			buf->err_data_size = n;
		}
		if (!(flags & FI_PEEK))
			queue_.pop_front();
		return static_cast<int>(sizeof(*buf));
	});
}

ssize_t sw_eq::write(uint32_t event, const void *buf, size_t len, uint64_t flags) noexcept
{
	if (flags) {
		FI_WARN(prov_, FI_LOG_EQ, "fi_eq_write: flags 0x%llx are not supported\n",
		        static_cast<unsigned long long>(flags));
		return -FI_EINVAL;
	}
	if (!buf || !len || len > eq_max_entry_size) {
		FI_WARN(prov_, FI_LOG_EQ, "fi_eq_write: buf %p len %zu (1 to %zu bytes expected)\n",
		        buf, len, eq_max_entry_size);
		return -FI_EINVAL;
	}
	int ret = push_record(event, buf, len, true, false);
	return ret ? ret : static_cast<ssize_t>(len);
}

ssize_t sw_eq::sread(uint32_t *event, void *buf, size_t len, int timeout, uint64_t flags) noexcept
{
	const auto until = deadline_after(timeout); /* once, at entry */
	if (!event || (!buf && len)) {
		FI_WARN(prov_, FI_LOG_EQ, "fi_eq_sread: %s is NULL\n", !event ? "event" : "buf");
		return -FI_EINVAL;
	}
	if (flags & ~static_cast<uint64_t>(FI_PEEK)) {
		FI_WARN(prov_, FI_LOG_EQ, "fi_eq_sread: flags 0x%llx are not supported\n",
		        static_cast<unsigned long long>(flags));
		return -FI_EINVAL;
	}
	waiter *w = wait_object();
	if (!w) {
		FI_WARN(prov_, FI_LOG_EQ, "fi_eq_sread: the EQ was opened with FI_WAIT_NONE\n");
		return -FI_EINVAL;
	}
	/* what the call consumes, read inside the phases: an entry another reader takes after a
	 * wakeup does not end this sread before its deadline */
	ssize_t result = -FI_EAGAIN;
	w->wait_for(*this, until, [&]() noexcept {
		util::lock_guard<util::mutex> g(lock_);
		result = read_locked(event, buf, len, flags);
		return result != -FI_EAGAIN;
	});
	return result;
}

int sw_eq::arm_now() noexcept
{
	/* its source needs no arming; reading the rdma_cm channel is a system call, so it is
	 * the trywait phase's look, not the peek's */
	progress();
	return FI_SUCCESS;
}

void sw_eq::drain_source(void *self) noexcept
{
	static_cast<sw_eq *>(self)->progress();
}

int sw_eq::watch(int fd) noexcept
{
	waiter *w = wait_object();
	if (!w)
		return FI_SUCCESS; /* FI_WAIT_NONE: progress() runs from the read calls */
	{
		util::lock_guard<util::mutex> g(lock_);
		if (watched_fd_ >= 0)
			return -FI_EALREADY;
		watched_fd_ = fd;
	}
	int ret = w->add_source(fd, POLLIN, drain_source, this);
	if (ret) {
		FI_WARN(prov_, FI_LOG_EQ, "EQ: cannot watch fd %d: %s\n", fd, fi_strerror(-ret));
		util::lock_guard<util::mutex> g(lock_);
		watched_fd_ = -1;
	}
	return ret;
}

void sw_eq::unwatch() noexcept
{
	int fd;
	{
		util::lock_guard<util::mutex> g(lock_);
		fd = std::exchange(watched_fd_, -1);
	}
	if (fd >= 0 && wait_object())
		wait_object()->remove_source(fd);
}

void sw_eq::close_begin() noexcept
{
	closing();
	unwatch();
}

void sw_eq::close_end() noexcept
{
	std::deque<record> left;
	{
		util::lock_guard<util::mutex> g(lock_);
		left.swap(queue_);
	}
	for (const record &rec : left)
		if (!rec.is_error && !rec.written)
			discard(rec.event, rec.bytes.data(), rec.bytes.size());
}

void sw_eq::remove_fid_events(const struct fid *f) noexcept
{
	if (!f)
		return;
	std::deque<record> gone;
	{
		util::lock_guard<util::mutex> g(lock_);
		for (auto it = queue_.begin(); it != queue_.end();) {
			fid_t named = nullptr;
			if (!it->written && it->bytes.size() >= sizeof(named))
				memcpy(&named, it->bytes.data(), sizeof(named));
			if (named == f) {
				gone.push_back(std::move(*it));
				it = queue_.erase(it);
			} else {
				++it;
			}
		}
	}
	for (const record &rec : gone)
		if (!rec.is_error)
			discard(rec.event, rec.bytes.data(), rec.bytes.size());
}

/* ------------------------------------------------------------------ the fid_eq shim */
namespace
{

/* a slot of eq_ops: the fid is an EQ's object_box */
sw_eq *obj(struct fid_eq *f) noexcept
{
	return static_cast<sw_eq *>(object_box::of(f)->obj);
}

ssize_t eq_read(struct fid_eq *f, uint32_t *event, void *buf, size_t len, uint64_t flags) noexcept
{
	return obj(f)->read(event, buf, len, flags);
}

ssize_t eq_readerr(struct fid_eq *f, struct fi_eq_err_entry *buf, uint64_t flags) noexcept
{
	return obj(f)->readerr(buf, flags);
}

ssize_t eq_write(struct fid_eq *f, uint32_t event, const void *buf, size_t len,
                 uint64_t flags) noexcept
{
	return obj(f)->write(event, buf, len, flags);
}

ssize_t eq_sread(struct fid_eq *f, uint32_t *event, void *buf, size_t len, int timeout,
                 uint64_t flags) noexcept
{
	return obj(f)->sread(event, buf, len, timeout, flags);
}

struct fi_ops_eq eq_ops = {
    .size = sizeof(struct fi_ops_eq),
    .read = eq_read,
    .readerr = eq_readerr,
    .write = eq_write,
    .sread = eq_sread,
    .strerror = object_strerror<struct fid_eq>,
};

} // namespace

int eq_install(std::unique_ptr<sw_eq> o, struct fid_eq **out, void *context) noexcept
{
	return object_install(std::move(o), &eq_ops, out, context);
}

int eq_open(const struct fi_provider *prov, const struct fi_eq_attr *attr, struct fid_eq **out,
            void *context, uint32_t api_version)
{
	return object_open(prov, FI_LOG_EQ, "fi_eq_open", "eq", eq_check_attr, attr, out, [&] {
		return eq_install(std::make_unique<sw_eq>(prov, *attr, api_version), out, context);
	});
}

} // namespace vwait::util
