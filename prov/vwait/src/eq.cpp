/* The vwait event queue: the rdma_cm event channel of the endpoints bound to it. Each
 * rdma_cm event is acknowledged as soon as it has been copied into an entry. */
#include "config.h"

#include "vwait/eq.h"
#include "vwait/util/enosys.h"
#include "vwait/vwait.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace vwait
{

void owned_fd::reset() noexcept
{
	if (fd_ >= 0)
		::close(fd_);
	fd_ = -1;
}

std::pair<const uint8_t *, size_t> cm_data(const void *raw, size_t raw_len) noexcept
{
	if (!raw || raw_len < cm_hdr_size)
		return {nullptr, 0};
	auto *p = static_cast<const uint8_t *>(raw);
	size_t len = p[0];
	if (len > raw_len - cm_hdr_size)
		return {nullptr, 0};
	return {p + cm_hdr_size, len};
}

std::vector<uint8_t> cm_wrap(const void *data, size_t len)
{
	std::vector<uint8_t> v(cm_hdr_size + len);
	v[0] = static_cast<uint8_t>(len);
	if (len)
		memcpy(v.data() + cm_hdr_size, data, len);
	return v;
}

eq::eq(fabric *fab, verbs::event_channel ch, owned_fd wake)
    : fabric_(fab), channel_(std::move(ch)), wake_(std::move(wake))
{
	fabric_->hold();
}

eq::~eq()
{
	for (entry &e : entries_) {
		if (e.event == FI_CONNREQ && !e.error && e.bytes.size() >= sizeof(fi_eq_cm_entry)) {
			/* a request nobody read: refuse it, its id must go before the channel */
			auto *cm = reinterpret_cast<struct fi_eq_cm_entry *>(e.bytes.data());
			if (cm->info && cm->info->handle) {
				auto *req = reinterpret_cast<connreq *>(cm->info->handle);
				if (req->id) {
					rdma_reject(req->id, nullptr, 0);
					rdma_destroy_id(req->id);
				}
				free(req);
				cm->info->handle = nullptr;
			}
			fi_freeinfo(cm->info);
		}
	}
	channel_.reset();
	fabric_->release();
}

void eq::push_cm(uint32_t event, struct fid *fid, struct fi_info *info, const uint8_t *data,
                 size_t len)
{
	entry e;
	e.event = event;
	e.bytes.resize(sizeof(struct fi_eq_cm_entry) + len);
	auto *cm = reinterpret_cast<struct fi_eq_cm_entry *>(e.bytes.data());
	cm->fid = fid;
	cm->info = info;
	if (len)
		memcpy(e.bytes.data() + sizeof(struct fi_eq_cm_entry), data, len);
	entries_.push_back(std::move(e));
}

void eq::push_error(struct fid *fid, int err, int prov_errno, const uint8_t *data, size_t len)
{
	entry e;
	e.error = true;
	e.err.fid = fid;
	e.err.context = fid ? fid->context : nullptr;
	e.err.err = err;
	e.err.prov_errno = prov_errno;
	if (len)
		e.err_data.assign(data, data + len);
	entries_.push_back(std::move(e));
}

void eq::convert(struct rdma_cm_event *ev)
{
	auto *target = static_cast<cm_target *>(ev->id ? ev->id->context : nullptr);
	switch (ev->event) {
	case RDMA_CM_EVENT_CONNECT_REQUEST: {
		auto *listener = static_cast<cm_target *>(ev->listen_id->context);
		auto data = cm_data(ev->param.conn.private_data, ev->param.conn.private_data_len);
		struct fi_info *info = listener->connreq_info(ev->id);
		if (!info) {
			FI_WARN(&prov, FI_LOG_EQ, "connection request dropped: no memory\n");
			rdma_reject(ev->id, nullptr, 0);
			return;
		}
		push_cm(FI_CONNREQ, listener->cm_fid(), info, data.first, data.second);
		return;
	}
	case RDMA_CM_EVENT_ESTABLISHED: {
		if (!target)
			return;
		std::pair<const uint8_t *, size_t> data{nullptr, 0};
		if (target->active_side())
			data =
			    cm_data(ev->param.conn.private_data, ev->param.conn.private_data_len);
		push_cm(FI_CONNECTED, target->cm_fid(), nullptr, data.first, data.second);
		return;
	}
	case RDMA_CM_EVENT_DISCONNECTED:
		if (!target)
			return;
		target->disconnected();
		push_cm(FI_SHUTDOWN, target->cm_fid(), nullptr, nullptr, 0);
		return;
	case RDMA_CM_EVENT_REJECTED: {
		if (!target)
			return;
		constexpr int consumer_reject = 28; /* IB CM: the peer application rejected */
		std::pair<const uint8_t *, size_t> data{nullptr, 0};
		if (ev->status == consumer_reject)
			data =
			    cm_data(ev->param.conn.private_data, ev->param.conn.private_data_len);
		FI_INFO(&prov, FI_LOG_EQ, "connection rejected (status %d)\n", ev->status);
		push_error(target->cm_fid(), FI_ECONNREFUSED, ev->status, data.first, data.second);
		return;
	}
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
		if (!target)
			return;
		FI_WARN(&prov, FI_LOG_EQ, "%s (status %d)\n", rdma_event_str(ev->event),
		        ev->status);
		push_error(target->cm_fid(),
		           ev->event == RDMA_CM_EVENT_UNREACHABLE ? FI_EHOSTUNREACH
		                                                  : FI_ECONNABORTED,
		           ev->status, nullptr, 0);
		return;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		if (!target)
			return;
		target->disconnected();
		push_error(target->cm_fid(), FI_ENODEV, ev->status, nullptr, 0);
		return;
	default:
		FI_DBG(&prov, FI_LOG_EQ, "rdma_cm event %s ignored\n", rdma_event_str(ev->event));
		return;
	}
}

void eq::drain_channel()
{
	struct rdma_cm_event *ev = nullptr;
	while (rdma_get_cm_event(channel_.get(), &ev) == 0) {
		struct rdma_cm_id *reject = nullptr;
		size_t before = entries_.size();
		try {
			convert(ev);
		} catch (...) {
			FI_WARN(&prov, FI_LOG_EQ, "rdma_cm event %s lost: no memory\n",
			        rdma_event_str(ev->event));
		}
		if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST && entries_.size() == before)
			reject = ev->id;
		rdma_ack_cm_event(ev);
		if (reject)
			rdma_destroy_id(reject);
	}
}

ssize_t eq::read(uint32_t *event, void *buf, size_t len, uint64_t flags) noexcept
{
	if (!event || (!buf && len)) {
		FI_WARN(&prov, FI_LOG_EQ, "fi_eq_read: %s is NULL\n", !event ? "event" : "buf");
		return -FI_EINVAL;
	}
	if (flags & ~static_cast<uint64_t>(FI_PEEK)) {
		FI_WARN(&prov, FI_LOG_EQ, "fi_eq_read: flags 0x%llx (only FI_PEEK)\n",
		        static_cast<unsigned long long>(flags));
		return -FI_EBADFLAGS;
	}
	return guard([&]() -> int {
		std::lock_guard<std::mutex> lock(mutex_);
		if (entries_.empty())
			drain_channel();
		if (entries_.empty())
			return -FI_EAGAIN;
		entry &e = entries_.front();
		if (e.error)
			return -FI_EAVAIL;
		if (len < e.bytes.size()) {
			FI_WARN(&prov, FI_LOG_EQ, "fi_eq_read: len %zu < entry size %zu\n", len,
			        e.bytes.size());
			return -FI_ETOOSMALL;
		}
		*event = e.event;
		memcpy(buf, e.bytes.data(), e.bytes.size());
		int n = static_cast<int>(e.bytes.size());
		if (!(flags & FI_PEEK))
			entries_.pop_front();
		return n;
	});
}

ssize_t eq::readerr(struct fi_eq_err_entry *out, uint64_t flags) noexcept
{
	if (!out) {
		FI_WARN(&prov, FI_LOG_EQ, "fi_eq_readerr: buf is NULL\n");
		return -FI_EINVAL;
	}
	if (flags & ~static_cast<uint64_t>(FI_PEEK)) {
		FI_WARN(&prov, FI_LOG_EQ, "fi_eq_readerr: flags 0x%llx (only FI_PEEK)\n",
		        static_cast<unsigned long long>(flags));
		return -FI_EBADFLAGS;
	}
	return guard([&]() -> int {
		std::lock_guard<std::mutex> lock(mutex_);
		if (entries_.empty())
			drain_channel();
		if (entries_.empty() || !entries_.front().error)
			return -FI_EAGAIN;
		entry &e = entries_.front();
		size_t user_size = out->err_data_size;
		void *user_data = out->err_data;
		*out = e.err;
		if (e.err_data.empty()) {
			out->err_data = nullptr;
			out->err_data_size = 0;
		} else if (FI_VERSION_GE(fabric_->api_version(), FI_VERSION(1, 5)) && user_size &&
		           user_data) {
			size_t n = std::min(user_size, e.err_data.size());
			memcpy(user_data, e.err_data.data(), n);
			out->err_data = user_data;
			out->err_data_size = n;
		} else {
			err_data_ = e.err_data;
			out->err_data = err_data_.data();
			out->err_data_size = err_data_.size();
		}
		if (!(flags & FI_PEEK))
			entries_.pop_front();
		return static_cast<int>(sizeof(*out));
	});
}

ssize_t eq::write(uint32_t event, const void *buf, size_t len, uint64_t flags) noexcept
{
	if (!buf && len) {
		FI_WARN(&prov, FI_LOG_EQ, "fi_eq_write: buf is NULL with len %zu\n", len);
		return -FI_EINVAL;
	}
	if (flags) {
		FI_WARN(&prov, FI_LOG_EQ, "fi_eq_write: flags 0x%llx must be 0\n",
		        static_cast<unsigned long long>(flags));
		return -FI_EBADFLAGS;
	}
	return guard([&]() -> int {
		entry e;
		e.event = event;
		e.bytes.assign(static_cast<const uint8_t *>(buf),
		               static_cast<const uint8_t *>(buf) + len);
		{
			std::lock_guard<std::mutex> lock(mutex_);
			entries_.push_back(std::move(e));
		}
		uint64_t one = 1;
		if (::write(wake_.get(), &one, sizeof(one)) < 0 && errno != EAGAIN)
			FI_WARN(&prov, FI_LOG_EQ, "fi_eq_write: eventfd: %s\n", strerror(errno));
		return static_cast<int>(len);
	});
}

ssize_t eq::sread(uint32_t *event, void *buf, size_t len, int timeout, uint64_t flags) noexcept
{
	using clock = std::chrono::steady_clock;
	const auto deadline = clock::now() + std::chrono::milliseconds(timeout < 0 ? 0 : timeout);
	for (;;) {
		ssize_t ret = read(event, buf, len, flags);
		if (ret != -FI_EAGAIN)
			return ret;
		int wait_ms = -1;
		if (timeout >= 0) {
			auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
			    deadline - clock::now());
			if (left.count() <= 0)
				return -FI_EAGAIN;
			wait_ms = static_cast<int>(left.count());
		}
		struct pollfd fds[2] = {{channel_->fd, POLLIN, 0}, {wake_.get(), POLLIN, 0}};
		int n = ::poll(fds, 2, wait_ms);
		if (n < 0 && errno != EINTR)
			return verbs::errno_code();
		if (n > 0 && (fds[1].revents & POLLIN)) {
			uint64_t v;
			if (::read(wake_.get(), &v, sizeof(v)) < 0 && errno != EAGAIN)
				return verbs::errno_code();
		}
	}
}

namespace
{

int eq_close(struct fid *fid) noexcept
{
	auto *box = reinterpret_cast<eq_box *>(fid);
	if (box->obj->busy()) {
		FI_WARN(&prov, FI_LOG_EQ, "fi_close(eq): endpoints are still bound to it\n");
		return -FI_EBUSY;
	}
	delete box->obj;
	delete box;
	return FI_SUCCESS;
}

ssize_t eq_read(struct fid_eq *fid, uint32_t *event, void *buf, size_t len, uint64_t flags) noexcept
{
	return util::owner<eq>(fid)->read(event, buf, len, flags);
}

ssize_t eq_readerr(struct fid_eq *fid, struct fi_eq_err_entry *buf, uint64_t flags) noexcept
{
	return util::owner<eq>(fid)->readerr(buf, flags);
}

ssize_t eq_write(struct fid_eq *fid, uint32_t event, const void *buf, size_t len,
                 uint64_t flags) noexcept
{
	return util::owner<eq>(fid)->write(event, buf, len, flags);
}

ssize_t eq_sread(struct fid_eq *fid, uint32_t *event, void *buf, size_t len, int timeout,
                 uint64_t flags) noexcept
{
	return util::owner<eq>(fid)->sread(event, buf, len, timeout, flags);
}

const char *eq_strerror(struct fid_eq *, int prov_errno, const void *, char *buf,
                        size_t len) noexcept
{
	static thread_local char own[64];
	if (!buf || !len) {
		buf = own;
		len = sizeof(own);
	}
	snprintf(buf, len, "rdma_cm status %d", prov_errno);
	return buf;
}

struct fi_ops eq_fi_ops = {
    .size = sizeof(struct fi_ops),
    .close = eq_close,
    .bind = util::enosys_bind,
    .control = util::enosys_control,
    .ops_open = util::enosys_ops_open,
    .tostr = util::enosys_tostr,
    .ops_set = util::enosys_ops_set,
};

struct fi_ops_eq eq_ops = {
    .size = sizeof(struct fi_ops_eq),
    .read = eq_read,
    .readerr = eq_readerr,
    .write = eq_write,
    .sread = eq_sread,
    .strerror = eq_strerror,
};

int set_nonblocking(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return verbs::errno_code();
	return 0;
}

} // namespace

int eq_open(struct fid_fabric *fabric_fid, struct fi_eq_attr *attr, struct fid_eq **out,
            void *context) noexcept
{
	if (!fabric_fid || !attr || !out) {
		FI_WARN(&prov, FI_LOG_EQ, "fi_eq_open: %s is NULL\n",
		        !fabric_fid ? "fabric" : (!attr ? "attr" : "eq"));
		return -FI_EINVAL;
	}
	*out = nullptr;
	switch (attr->wait_obj) {
	case FI_WAIT_NONE:
	case FI_WAIT_UNSPEC:
	case FI_WAIT_FD:
		break;
	default:
		FI_WARN(&prov, FI_LOG_EQ, "fi_eq_open: wait_obj %d not supported yet\n",
		        static_cast<int>(attr->wait_obj));
		return -FI_ENOSYS;
	}
	if (attr->flags & ~static_cast<uint64_t>(FI_WRITE)) {
		FI_WARN(&prov, FI_LOG_EQ, "fi_eq_open: flags 0x%llx not supported\n",
		        static_cast<unsigned long long>(attr->flags));
		return -FI_EBADFLAGS;
	}
	return guard([&] {
		verbs::event_channel ch(rdma_create_event_channel());
		if (!ch) {
			int ret = verbs::errno_code();
			FI_WARN(&prov, FI_LOG_EQ, "rdma_create_event_channel: %s\n",
			        fi_strerror(-ret));
			return ret;
		}
		if (int ret = set_nonblocking(ch->fd))
			return ret;
		owned_fd wake(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
		if (wake.get() < 0)
			return verbs::errno_code();
		auto *fab = util::owner<fabric>(fabric_fid);
		auto obj = std::make_unique<eq>(fab, std::move(ch), std::move(wake));
		auto box = std::make_unique<eq_box>();
		box->fid.fid.fclass = FI_CLASS_EQ;
		box->fid.fid.context = context;
		box->fid.fid.ops = &eq_fi_ops;
		box->fid.ops = &eq_ops;
		box->obj = obj.release();
		*out = &box.release()->fid;
		return FI_SUCCESS;
	});
}

} // namespace vwait
