/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* The vwait event queue: a util::sw_eq fed from the rdma_cm event channel of the endpoints bound
 * to it. The channel's fd is a source of the EQ's waiter; each rdma_cm event is acknowledged
 * as soon as it has been turned into an entry. */
#include "config.h"

#include "vwait/eq.h"
#include "vwait/util/cq.h"
#include "vwait/util/fd.h"
#include "vwait/util/wait.h"
#include "vwait/vwait.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <system_error>

namespace vwait
{

std::atomic<bool> control_due{false};

namespace
{
/* The open EQs, for the blocking hook and spin_progress: a list through the EQs themselves
 * (verbs_eq::next_), so that nothing here allocates or has a destructor. */
util::mutex eq_registry_mu{lock_level::eq_registry};
verbs_eq *eq_list = nullptr;
/* Set while this thread runs an EQ's progress: a spinning reader's control progress inside it
 * (its own EQ's lock held) would deadlock. */
thread_local bool in_eq_progress = false;
} // namespace

verbs_eq::verbs_eq(fabric *fab, const struct fi_eq_attr &attr, verbs::event_channel_ptr ch)
    : util::sw_eq(&prov, attr, fab->api_version()), fabric_(fab), channel_(std::move(ch))
{
	set_wait_policy(get_params().wait);
}

verbs_eq::~verbs_eq()
{
	closing();
	unwatch(); /* the channel's fd leaves the waiter before it closes */
	channel_.reset();
	int kick = kick_fd_.exchange(-1);
	if (kick >= 0)
		::close(kick);
}

void verbs_eq::kick_thread() noexcept
{
	int fd = kick_fd_.load(std::memory_order_acquire);
	uint64_t one = 1;
	if (fd >= 0 && ::write(fd, &one, sizeof(one)) != sizeof(one))
		FI_WARN(&prov, FI_LOG_EQ, "EQ progress thread: cannot wake it: %s\n",
		        ::strerror(errno));
}

int verbs_eq::start() noexcept
{
	if (int ret = watch(channel_->fd))
		return ret;
	/* a thread asleep in fi_eq_sread wakes on the channel and drains it: no EQ thread for
	 * that (one asleep on a wait set, or on a CQ, counts) */
	if (wait_is_private())
		wait_object()->set_counts_as_blocking(false);
	{
		util::lock_guard<util::mutex> lock(eq_registry_mu);
		next_ = std::exchange(eq_list, this);
		if (next_)
			next_->prev_ = this;
		listed_ = true;
	}
	/* after joining the registry: a first blocking from now on finds this EQ there */
	if (get_params().keepalive_ms > 0 || util::blocking_seen())
		return ensure_thread();
	return 0;
}

int verbs_eq::ensure_thread() noexcept
{
	/* the thread itself comes here (a hold in its progress): it runs, so threaded_ is set,
	 * and a closer may hold thread_mu_ while it joins it */
	if (threaded_.load(std::memory_order_acquire))
		return 0;
	util::lock_guard<util::mutex> lock(thread_mu_);
	if (closed_ || threaded_.load(std::memory_order_relaxed))
		return 0;
	if (kick_fd_.load(std::memory_order_relaxed) < 0) {
		int kick = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (kick < 0) {
			int ret = verbs::errno_code();
			FI_WARN(&prov, FI_LOG_EQ, "eventfd: %s\n", fi_strerror(-ret));
			return ret;
		}
		kick_fd_.store(kick, std::memory_order_release);
	}
	stop_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (stop_fd_ < 0) {
		int ret = verbs::errno_code();
		FI_WARN(&prov, FI_LOG_EQ, "eventfd: %s\n", fi_strerror(-ret));
		return ret;
	}
	threaded_.store(true, std::memory_order_release); /* before the thread runs */
	int ret = thread_.start(
	    "vwait-eq", [this] { auto_progress(); },
	    [this] {
		    uint64_t one = 1;
		    if (::write(stop_fd_, &one, sizeof(one)) != sizeof(one))
			    FI_WARN(&prov, FI_LOG_EQ, "EQ progress thread: cannot stop it: %s\n",
			            ::strerror(errno));
	    });
	if (ret) {
		FI_WARN(&prov, FI_LOG_EQ, "cannot start the EQ progress thread\n");
		threaded_.store(false, std::memory_order_release);
		::close(std::exchange(stop_fd_, -1));
		return ret;
	}
	return 0;
}

void verbs_eq::start_threads() noexcept
{
	util::lock_guard<util::mutex> lock(eq_registry_mu);
	for (verbs_eq *q = eq_list; q; q = q->next_)
		q->ensure_thread(); /* a failure warns; reads and spinners still drain the EQ */
}

void verbs_eq::spin_progress() noexcept
{
	control_due.store(false, std::memory_order_relaxed);
	if (in_eq_progress)
		return;
	std::unique_lock<util::mutex> lock(eq_registry_mu, std::try_to_lock);
	if (!lock.owns_lock())
		return; /* another thread is at it, or an EQ opens or closes */
	for (verbs_eq *q = eq_list; q; q = q->next_)
		if (!q->threaded_.load(std::memory_order_acquire))
			q->progress();
}

void verbs_eq::closing() noexcept
{
	{
		util::lock_guard<util::mutex> lock(eq_registry_mu);
		if (listed_) {
			(prev_ ? prev_->next_ : eq_list) = next_;
			if (next_)
				next_->prev_ = prev_;
			prev_ = next_ = nullptr;
			listed_ = false;
		}
	}
	util::lock_guard<util::mutex> lock(thread_mu_);
	closed_ = true;
	thread_.stop();
	if (stop_fd_ >= 0)
		::close(std::exchange(stop_fd_, -1));
}

void verbs_eq::unprobe(cm_target *t) noexcept
{
	util::lock_guard<util::mutex> lock(probe_mutex_);
	probed_.erase(t);
	shut_.erase(t);
	t->left_eq_ = true;
	auto gone = std::remove_if(holds_.begin(), holds_.end(),
	                           [t](const shutdown_hold &h) { return h.target == t; });
	holds_.erase(gone, holds_.end());
	hold_count_.store(holds_.size(), std::memory_order_release);
}

void verbs_eq::release_holds() noexcept
{
	if (hold_count_.load(std::memory_order_acquire) == 0)
		return;
	const auto now = std::chrono::steady_clock::now();
	util::lock_guard<util::mutex> lock(probe_mutex_);
	for (auto it = holds_.begin(); it != holds_.end();) {
		const bool read = std::all_of(
		    it->marks.begin(), it->marks.end(),
		    [](const cm_target::cq_mark &m) { return m.cq->read_past(m.mark); });
		if (!read && now < it->deadline) {
			++it;
			continue;
		}
		if (!read)
			FI_INFO(&prov, FI_LOG_EP_CTRL,
			        "FI_SHUTDOWN held %d ms; completions from before the disconnect "
			        "are still unread\n",
			        get_params().shutdown_hold_ms);
		try {
			push_cm(FI_SHUTDOWN, it->target->cm_fid(), nullptr, nullptr, 0);
		} catch (...) {
			FI_WARN(&prov, FI_LOG_EQ, "FI_SHUTDOWN lost: no memory\n");
		}
		it = holds_.erase(it);
	}
	hold_count_.store(holds_.size(), std::memory_order_release);
}

void verbs_eq::probe_all() noexcept
{
	util::lock_guard<util::mutex> lock(probe_mutex_);
	for (auto it = probed_.begin(); it != probed_.end();) {
		cm_target *t = *it;
		if (t->probe()) {
			++it;
			continue;
		}
		FI_WARN(&prov, FI_LOG_EP_CTRL, "keepalive: connection broken; FI_SHUTDOWN\n");
		it = probed_.erase(it);
		try {
			push_cm(FI_SHUTDOWN, t->cm_fid(), nullptr, nullptr, 0);
			shut_.insert(t);
		} catch (...) {
			FI_WARN(&prov, FI_LOG_EQ, "keepalive: FI_SHUTDOWN lost: no memory\n");
		}
		t->probe_failed();
	}
}

void verbs_eq::auto_progress() noexcept
{
	struct pollfd p[3] = {{channel_->fd, POLLIN, 0},
	                      {stop_fd_, POLLIN, 0},
	                      {kick_fd_.load(std::memory_order_acquire), POLLIN, 0}};
	const int period = get_params().keepalive_ms; /* 0: no keepalive, no timeout */
	auto next = std::chrono::steady_clock::now() + std::chrono::milliseconds(period);
	for (;;) {
		/* a full EQ: the channel stays readable; look again for room every 10 ms */
		bool full = room() == 0;
		int timeout = full ? 10 : -1;
		const bool holding = hold_count_.load(std::memory_order_acquire) != 0;
		if (period > 0) {
			auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
			    next - std::chrono::steady_clock::now());
			if (left.count() <= 0) {
				probe_all();
				next = std::chrono::steady_clock::now() +
				       std::chrono::milliseconds(period);
				left = std::chrono::milliseconds(period);
			}
			timeout = full ? std::min(10, static_cast<int>(left.count()))
			               : static_cast<int>(left.count());
		}
		if (holding) /* a held FI_SHUTDOWN: look every millisecond */
			timeout = timeout < 0 ? 1 : std::min(timeout, 1);
		int n = ::poll(full ? p + 1 : p, full ? 2 : 3, timeout);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			FI_WARN(&prov, FI_LOG_EQ, "EQ progress thread: poll: %s\n",
			        ::strerror(errno));
			return;
		}
		if (p[1].revents & POLLIN)
			return;
		if (p[2].revents &
		    POLLIN) { /* a hold began elsewhere: the timeout is looked at again */
			uint64_t v;
			if (::read(p[2].fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
				FI_WARN(&prov, FI_LOG_EQ, "EQ progress thread: read: %s\n",
				        ::strerror(errno));
		}
		if (!full && (p[0].revents & POLLIN)) {
			progress();
		} else if (holding) {
			util::lock_guard<util::mutex> lock(progress_mutex_);
			release_holds();
		}
	}
}

/* Unread at fi_close: a connection request nobody read is refused, and its id must go
 * before the channel. */
void verbs_eq::discard(uint32_t event, const void *entry, size_t len) noexcept
{
	if (event != FI_CONNREQ || len < sizeof(struct fi_eq_cm_entry))
		return;
	struct fi_eq_cm_entry cm;
	memcpy(&cm, entry, sizeof(cm));
	connreq::discard(cm.info);
}

void verbs_eq::push_cm(uint32_t event, struct fid *fid, struct fi_info *info, const uint8_t *data,
                       size_t len)
{
	/* the one-byte length of cm_data() bounds len */
	alignas(struct fi_eq_cm_entry) uint8_t raw[sizeof(struct fi_eq_cm_entry) + 256];
	len = std::min(len, sizeof(raw) - sizeof(struct fi_eq_cm_entry));
	struct fi_eq_cm_entry cm = {};
	cm.fid = fid;
	cm.info = info;
	memcpy(raw, &cm, sizeof(cm));
	if (len)
		memcpy(raw + sizeof(cm), data, len);
	/* taken from the channel: queued even past the size a racing fi_eq_write filled */
	if (int ret = push(event, raw, sizeof(cm) + len, true))
		throw std::system_error(-ret, std::generic_category(), "EQ entry");
}

void verbs_eq::push_cm_error(struct fid *fid, int err, int prov_errno, const uint8_t *data,
                             size_t len)
{
	struct fi_eq_err_entry e = {};
	e.fid = fid;
	e.context = fid ? fid->context : nullptr;
	e.err = err;
	e.prov_errno = prov_errno;
	if (int ret = push_error(e, data, len, true))
		throw std::system_error(-ret, std::generic_category(), "EQ error entry");
}

void verbs_eq::connect_failed(struct fid *fid, int err) noexcept
{
	util::lock_guard<util::mutex> lock(progress_mutex_);
	try {
		push_cm_error(fid, err, -err, nullptr, 0);
	} catch (...) {
		FI_WARN(&prov, FI_LOG_EQ, "connection failure (%s) lost: no memory\n",
		        fi_strerror(err));
	}
}

namespace
{

/* The data of a reject the peer's application made (fi_reject), else {nullptr, 0}. IB CM
 * says so with its reject reason; iWARP (iw_cm) with the status of an MPA reject, which only
 * a peer's rdma_reject sends (a port nobody listens on answers with a TCP reset, no data). */
std::pair<const uint8_t *, size_t> reject_data(const struct rdma_cm_event *ev) noexcept
{
	constexpr int consumer_reject = 28; /* IB CM: the peer application rejected */
	const bool iwarp =
	    ev->id && ev->id->verbs && ev->id->verbs->device->transport_type == IBV_TRANSPORT_IWARP;
	const bool by_app = iwarp ? (ev->status == -ECONNRESET || ev->status == -ECONNREFUSED)
	                          : ev->status == consumer_reject;
	if (!by_app)
		return {nullptr, 0};
	return cm_data(ev->param.conn.private_data, ev->param.conn.private_data_len);
}

} // namespace

bool verbs_eq::convert(struct rdma_cm_event *ev)
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
			return false;
		}
		try {
			push_cm(FI_CONNREQ, listener->cm_fid(), info, data.first, data.second);
		} catch (...) {
			/* not queued: the request is refused (its id goes in progress()) */
			connreq::forget(info);
			rdma_reject(ev->id, nullptr, 0);
			throw;
		}
		return true;
	}
	case RDMA_CM_EVENT_ESTABLISHED: {
		if (!target)
			return false;
		if (get_params().keepalive_ms > 0) {
			util::lock_guard<util::mutex> lock(probe_mutex_);
			probed_.insert(target);
		}
		std::pair<const uint8_t *, size_t> data{nullptr, 0};
		if (target->active_side())
			data =
			    cm_data(ev->param.conn.private_data, ev->param.conn.private_data_len);
		push_cm(FI_CONNECTED, target->cm_fid(), nullptr, data.first, data.second);
		return true;
	}
	case RDMA_CM_EVENT_DISCONNECTED: {
		if (!target)
			return false;
		bool told = false;
		std::vector<cm_target::cq_mark> marks;
		{
			util::lock_guard<util::mutex> lock(probe_mutex_);
			probed_.erase(target);
			told = shut_.erase(target) != 0; /* the keepalive gave it FI_SHUTDOWN */
			/* what completed before the disconnect, before the flush (class comment) */
			if (!told && !target->left_eq_ && get_params().shutdown_hold_ms > 0)
				target->unread_marks(marks);
		}
		target->disconnected(ev->id);
		if (told)
			return false;
		if (!marks.empty()) {
			util::lock_guard<util::mutex> lock(probe_mutex_);
			if (!target->left_eq_) {
				const auto deadline =
				    std::chrono::steady_clock::now() +
				    std::chrono::milliseconds(get_params().shutdown_hold_ms);
				try {
					holds_.push_back({target, std::move(marks), deadline});
					hold_count_.store(holds_.size(), std::memory_order_release);
					hold_queued_ = true;
					return false;
				} catch (...) { /* no memory: FI_SHUTDOWN now, unheld */
				}
			}
		}
		push_cm(FI_SHUTDOWN, target->cm_fid(), nullptr, nullptr, 0);
		return true;
	}
	case RDMA_CM_EVENT_REJECTED: {
		if (!target)
			return false;
		auto data = reject_data(ev);
		FI_INFO(&prov, FI_LOG_EQ, "connection rejected (status %d)\n", ev->status);
		push_cm_error(target->cm_fid(), FI_ECONNREFUSED, ev->status, data.first,
		              data.second);
		return true;
	}
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
		if (!target)
			return false;
		FI_WARN(&prov, FI_LOG_EQ, "%s (status %d)\n", rdma_event_str(ev->event),
		        ev->status);
		push_cm_error(target->cm_fid(),
		              ev->event == RDMA_CM_EVENT_UNREACHABLE ? FI_EHOSTUNREACH
		                                                     : FI_ECONNABORTED,
		              ev->status, nullptr, 0);
		return true;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		if (!target)
			return false;
		target->disconnected(ev->id);
		push_cm_error(target->cm_fid(), FI_ENODEV, ev->status, nullptr, 0);
		return true;
	default:
		FI_DBG(&prov, FI_LOG_EQ, "rdma_cm event %s ignored\n", rdma_event_str(ev->event));
		return false;
	}
}

void verbs_eq::progress() noexcept
{
	bool held;
	{
		util::lock_guard<util::mutex> lock(progress_mutex_);
		drain_channel();
		held = std::exchange(hold_queued_, false);
	}
	/* a held FI_SHUTDOWN is let go by time too, which only the thread watches while nobody
	 * reads the EQ; a thread already asleep in poll() without a timeout (this hold began in a
	 * reader's progress: the thread saw no event) is woken to look again */
	if (held) {
		ensure_thread();
		kick_thread();
	}
}

void verbs_eq::drain_channel() noexcept
{
	struct inside {
		bool outer = !std::exchange(in_eq_progress, true);
		~inside()
		{
			if (outer)
				in_eq_progress = false;
		}
	} guard_reentry;
	release_holds();
	/* one event makes at most one entry: never take an event there is no room for */
	while (room() > 0) {
		struct rdma_cm_event *ev = nullptr;
		if (rdma_get_cm_event(channel_.get(), &ev) != 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				FI_WARN_SPARSE(&prov, FI_LOG_EQ, "rdma_get_cm_event: %s\n",
				               ::strerror(errno));
			return;
		}
		bool queued = false;
		try {
			queued = convert(ev);
		} catch (...) {
			FI_WARN(&prov, FI_LOG_EQ, "rdma_cm event %s lost: no memory\n",
			        rdma_event_str(ev->event));
		}
		struct rdma_cm_id *refused = nullptr;
		if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST && !queued)
			refused = ev->id;
		rdma_ack_cm_event(ev);
		if (refused)
			rdma_destroy_id(refused);
	}
}

/* prov_errno is the rdma_cm event status (the IB CM reject reason for a reject). */
std::string verbs_eq::describe_error(int prov_errno, const void *) const
{
	return "rdma_cm status " + std::to_string(prov_errno);
}

int eq_open(struct fid_fabric *fabric_fid, struct fi_eq_attr *attr, struct fid_eq **out,
            void *context) noexcept
{
	if (!fabric_fid || !attr || !out) {
		FI_WARN(&prov, FI_LOG_EQ, "fi_eq_open: %s is NULL\n",
		        !fabric_fid ? "fabric" : (!attr ? "attr" : "eq"));
		return -FI_EINVAL;
	}
	*out = nullptr;
	if (int ret = util::eq_check_attr(&prov, attr))
		return ret;
	return guard([&] {
		verbs::event_channel_ptr ch(rdma_create_event_channel());
		if (!ch) {
			int ret = verbs::errno_code();
			FI_WARN(&prov, FI_LOG_EQ, "rdma_create_event_channel: %s\n",
			        fi_strerror(-ret));
			return ret;
		}
		if (int ret = util::set_nonblock(ch->fd)) {
			FI_WARN(&prov, FI_LOG_EQ, "rdma_cm event channel fd %d: O_NONBLOCK: %s\n",
			        ch->fd, fi_strerror(-ret));
			return ret;
		}
		auto *fab = fabric_box::of(fabric_fid)->obj;
		auto obj = std::make_unique<verbs_eq>(fab, *attr, std::move(ch));
		verbs_eq *raw = obj.get();
		struct fid_eq *fid = nullptr;
		if (int ret = util::eq_install(std::move(obj), &fid, context))
			return ret;
		if (int ret = raw->start()) {
			fi_close(&fid->fid);
			return ret;
		}
		*out = fid;
		return FI_SUCCESS;
	});
}

} // namespace vwait
