/* The vwait completion queue over an ibv_cq. Translation of a work completion into a
 * completion record (translate()) is kept apart from the queueing of records, so that a
 * software queue with wait objects can take the records later. */
#ifndef VWAIT_CQ_H
#define VWAIT_CQ_H

#include "vwait/util/fid.h"
#include "vwait/verbs.h"

#include <rdma/fi_eq.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

namespace vwait
{

class domain;
struct wr_ring;

/* What vwait remembers of one posted work request; wr_id points at it. */
struct wr_slot {
	void *context = nullptr;
	uint64_t flags = 0; /* FI_SEND | FI_MSG, FI_RMA | FI_WRITE, ... */
	size_t len = 0;
	bool report = true; /* false: no completion entry unless it fails */
	wr_ring *ring = nullptr;
};

/* The slots of one queue (send or receive) of one QP. RC completes a queue in order, so
 * slots are handed out round-robin; credits count the free ones. The CQs an endpoint was
 * bound to keep the ring alive after the endpoint closed (late flushes still point at it). */
struct wr_ring {
	explicit wr_ring(size_t n) : slots(n), credits(n)
	{
		for (wr_slot &s : slots)
			s.ring = this;
	}
	std::vector<wr_slot> slots;
	std::atomic<size_t> credits;
	std::atomic<bool> closed{false};
	size_t head = 0; /* under the endpoint's lock */

	size_t outstanding() const noexcept
	{
		return slots.size() - credits.load(std::memory_order_acquire);
	}
};

/* One completion, independent of the CQ format it will be written in. */
struct completion {
	void *context = nullptr;
	uint64_t flags = 0;
	size_t len = 0;
	uint64_t data = 0;
	int err = 0;        /* positive FI_E* value; 0: success */
	int prov_errno = 0; /* vendor_err */
	int status = 0;     /* enum ibv_wc_status */
};

/* A work completion as a completion record; false when nothing is to be reported (a
 * successful unsignalled operation, or one of an endpoint that has closed). Returns the slot
 * to its ring in every case. */
bool translate(const struct ibv_wc &wc, completion *out) noexcept;

/* The FI_E* value for a work completion status. */
int wc_status_error(enum ibv_wc_status status) noexcept;

class cq
{
public:
	cq(domain *dom, verbs::cq hw, enum fi_cq_format format, size_t size);
	~cq();
	cq(const cq &) = delete;
	cq &operator=(const cq &) = delete;

	ssize_t read(void *buf, size_t count, fi_addr_t *src_addr) noexcept;
	ssize_t readerr(struct fi_cq_err_entry *entry, uint64_t flags) noexcept;

	struct ibv_cq *hw() const noexcept { return hw_.get(); }
	domain *parent() const noexcept { return domain_; }
	size_t size() const noexcept { return size_; }

	void hold() noexcept { refs_.fetch_add(1, std::memory_order_relaxed); }
	void release() noexcept { refs_.fetch_sub(1, std::memory_order_release); }
	bool busy() const noexcept { return refs_.load(std::memory_order_acquire) != 0; }

	/* An endpoint bound to this CQ closed: keep its ring until its late completions are
	 * polled (or this CQ closes). */
	void adopt(std::shared_ptr<wr_ring> ring);
	/* The device reported IBV_EVENT_CQ_ERR for this CQ; true the first time. */
	bool set_overrun() noexcept { return !overrun_.exchange(true, std::memory_order_acq_rel); }

private:
	size_t poll_hw(completion *direct, size_t max, size_t *direct_count);
	void write_entry(void *buf, size_t i, const completion &c) const noexcept;

	domain *domain_;
	verbs::cq hw_;
	enum fi_cq_format format_;
	size_t entry_size_;
	size_t size_;
	std::mutex mutex_;
	std::deque<completion> backlog_; /* polled, not yet read; errors wait here */
	std::vector<std::shared_ptr<wr_ring>> orphans_;
	std::atomic<bool> overrun_{false};
	bool overrun_reported_ = false;
	unsigned idle_polls_ = 0;
	std::vector<uint8_t> err_data_; /* err_data handed out by readerr */
	std::atomic<int> refs_{0};
};

using cq_box = util::fid_box<struct fid_cq, cq>;

/* struct fi_ops_domain::cq_open */
int cq_open(struct fid_domain *domain, struct fi_cq_attr *attr, struct fid_cq **cq,
            void *context) noexcept;

} // namespace vwait

#endif
