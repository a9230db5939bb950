/* The vwait event queue: rdma_cm events of the endpoints bound to it, turned into libfabric
 * CM events, plus what fi_eq_write adds. */
#ifndef VWAIT_EQ_H
#define VWAIT_EQ_H

#include "vwait/fabric.h"
#include "vwait/util/fid.h"
#include "vwait/verbs.h"

#include <rdma/fi_eq.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <utility>
#include <vector>

namespace vwait
{

/* What an rdma_cm id's context points at: the endpoint or passive endpoint that owns it. */
class cm_target
{
public:
	virtual ~cm_target() = default;
	virtual struct fid *cm_fid() noexcept = 0;
	/* The connecting side: its CONNECTED event carries the peer's accept data. */
	virtual bool active_side() const noexcept = 0;
	/* A connection request arrived for this listener; the info for it (handle set), or
	 * nullptr when the request cannot be described (it is then rejected). */
	virtual struct fi_info *connreq_info(struct rdma_cm_id *id) noexcept = 0;
	/* The peer (or this side) disconnected: outstanding work must flush. */
	virtual void disconnected() noexcept = 0;
};

/* The private data of connect, accept and reject goes behind a one-byte length, because
 * rdma_cm pads it to the transport's fixed size. */
constexpr size_t cm_hdr_size = 1;
constexpr size_t cm_connect_data_max = 56 - cm_hdr_size;
constexpr size_t cm_accept_data_max = 196 - cm_hdr_size;
constexpr size_t cm_reject_data_max = 148 - cm_hdr_size;
/* The private data inside what rdma_cm delivered (nullptr, 0 when malformed). */
std::pair<const uint8_t *, size_t> cm_data(const void *raw, size_t raw_len) noexcept;
/* header + data, ready for rdma_connect / rdma_accept / rdma_reject. */
std::vector<uint8_t> cm_wrap(const void *data, size_t len);

/* The FI_CONNREQ handle: a fid of class FI_CLASS_CONNREQ that owns the new id until an
 * endpoint takes it (fi_endpoint) or fi_reject drops it. */
struct connreq {
	struct fid fid;
	struct rdma_cm_id *id;
};

/* A move-only owner of a file descriptor. */
class owned_fd
{
public:
	explicit owned_fd(int fd = -1) noexcept : fd_(fd) {}
	~owned_fd() { reset(); }
	owned_fd(owned_fd &&o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
	owned_fd &operator=(owned_fd &&o) noexcept
	{
		if (this != &o) {
			reset();
			fd_ = o.fd_;
			o.fd_ = -1;
		}
		return *this;
	}
	owned_fd(const owned_fd &) = delete;
	owned_fd &operator=(const owned_fd &) = delete;
	int get() const noexcept { return fd_; }
	void reset() noexcept;

private:
	int fd_;
};

class eq
{
public:
	eq(fabric *fab, verbs::event_channel ch, owned_fd wake);
	~eq();
	eq(const eq &) = delete;
	eq &operator=(const eq &) = delete;

	ssize_t read(uint32_t *event, void *buf, size_t len, uint64_t flags) noexcept;
	ssize_t readerr(struct fi_eq_err_entry *entry, uint64_t flags) noexcept;
	ssize_t write(uint32_t event, const void *buf, size_t len, uint64_t flags) noexcept;
	ssize_t sread(uint32_t *event, void *buf, size_t len, int timeout, uint64_t flags) noexcept;

	struct rdma_event_channel *channel() const noexcept { return channel_.get(); }
	fabric *parent() const noexcept { return fabric_; }

	void hold() noexcept { refs_.fetch_add(1, std::memory_order_relaxed); }
	void release() noexcept { refs_.fetch_sub(1, std::memory_order_release); }
	bool busy() const noexcept { return refs_.load(std::memory_order_acquire) != 0; }

private:
	struct entry {
		uint32_t event = 0;
		std::vector<uint8_t> bytes; /* what fi_eq_read copies out */
		bool error = false;
		struct fi_eq_err_entry err {
		};
		std::vector<uint8_t> err_data;
	};
	/* Moves every pending rdma_cm event into entries_ (the caller holds mutex_). */
	void drain_channel();
	void convert(struct rdma_cm_event *ev);
	void push_cm(uint32_t event, struct fid *fid, struct fi_info *info, const uint8_t *data,
	             size_t len);
	void push_error(struct fid *fid, int err, int prov_errno, const uint8_t *data, size_t len);

	fabric *fabric_;
	verbs::event_channel channel_;
	owned_fd wake_; /* eventfd: fi_eq_write wakes fi_eq_sread */
	std::mutex mutex_;
	std::deque<entry> entries_;
	std::vector<uint8_t> err_data_; /* err_data handed out by readerr */
	std::atomic<int> refs_{0};
};

using eq_box = util::fid_box<struct fid_eq, eq>;

/* struct fi_ops_fabric::eq_open */
int eq_open(struct fid_fabric *fabric, struct fi_eq_attr *attr, struct fid_eq **eq,
            void *context) noexcept;

} // namespace vwait

#endif
