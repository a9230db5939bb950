/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* The software completion queue of the util layer: a bounded ring of completions in the
 * application's fi_cq_format, error entries in order with them, every wait object, and the
 * fid_cq shim. The verbs CQ derives from it: it feeds ibv_poll_cq results in progress()
 * through push()/push_error(), and arms ibv_req_notify_cq in arm().
 *
 * Choices where fi_cq(3) leaves room:
 *  - FI_CQ_FORMAT_UNSPEC is FI_CQ_FORMAT_CONTEXT.
 *  - fi_cq_read with count 0 drives progress and answers 0, -FI_EAVAIL (an error at the head)
 *    or -FI_EAGAIN (empty).
 *  - fi_cq_readerr takes flags 0 only; it returns the error entry at the head, -FI_EAGAIN when
 *    the head is not an error.
 *  - fi_cq_sread: one deadline taken at entry; an error at the head ends it with -FI_EAVAIL;
 *    with FI_CQ_COND_THRESHOLD it returns once cond entries are queued, or at the deadline with
 *    what is there. FI_WAIT_SET members may block in sread too (on the set). FI_WAIT_NONE:
 *    -FI_EINVAL.
 *  - fi_cq_signal ends every sread blocked at that moment with -FI_EAGAIN (if nothing is
 *    queued); raised while none is blocked, it ends the next one. FI_WAIT_NONE: -FI_EINVAL.
 *  - A full ring refuses push() with -FI_EAGAIN: the producer keeps the completion (the verbs
 *    CQ leaves it in the hardware CQ) and retries after the application read.
 *  - FI_GETWAIT / FI_GETWAITOBJ: the private wait object, the wait set's for a member,
 *    -FI_ENODATA for FI_WAIT_NONE (util::waitable::answer_control). */
#ifndef VWAIT_UTIL_CQ_H
#define VWAIT_UTIL_CQ_H

/* before waitable.h, which names struct fi_provider without declaring it */
#include <rdma/providers/fi_log.h>
#include <rdma/providers/fi_prov.h>

#include "vwait/util/guard.h"
#include "vwait/util/object.h"
#include "vwait/util/thread_safety.h"

#include <rdma/fabric.h>
#include <rdma/fi_eq.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <list>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

namespace vwait::util
{

/* One completion as the queue stores it: the widest format (tagged) plus the source. */
struct cq_entry {
	void *op_context = nullptr;
	uint64_t flags = 0;
	size_t len = 0;
	void *buf = nullptr;
	uint64_t data = 0;
	uint64_t tag = 0;
	fi_addr_t src_addr = FI_ADDR_NOTAVAIL;
};

/* Sizes and defaults. */
constexpr size_t cq_default_size = 1024;
constexpr size_t cq_max_size = size_t{1} << 24;
constexpr enum fi_cq_format cq_default_format = FI_CQ_FORMAT_CONTEXT;

/* Bytes one entry of format takes in the application's buffer; 0 for an invalid format. */
size_t cq_entry_size(enum fi_cq_format format) noexcept;
/* Writes e at dst in format (which must be valid). */
void cq_entry_copy_out(enum fi_cq_format format, const cq_entry &e, void *dst) noexcept;
/* Checks an attr; one warning line through prov naming the bad field; 0 or -FI_E*. */
int cq_check_attr(const struct fi_provider *prov, const struct fi_cq_attr *attr) noexcept;

class sw_cq : public object
{
public:
	static constexpr size_t fid_class = FI_CLASS_CQ;

	/* attr must have passed cq_check_attr. api_version: the fabric's (err_data rules). */
	sw_cq(const struct fi_provider *prov, const struct fi_cq_attr &attr, uint32_t api_version);
	~sw_cq() override;
	sw_cq(const sw_cq &) = delete;
	sw_cq &operator=(const sw_cq &) = delete;

	/* fi_cq_* entry points; src may be NULL. read: a subclass's read_direct first (the
	 * polling path, inline in the fid shim), then the ring (read_ring). */
	ssize_t read(void *buf, size_t count, fi_addr_t *src) noexcept
	{
		if (__builtin_expect(count != 0 && buf != nullptr, 1)) {
			direct_read direct = read_direct(buf, count, src);
			if (direct.taken())
				return direct.result();
		}
		return read_ring(buf, count, src);
	}
	ssize_t readerr(struct fi_cq_err_entry *buf, uint64_t flags) noexcept;
	ssize_t sread(void *buf, size_t count, fi_addr_t *src, const void *cond,
	              int timeout) noexcept;
	int signal() noexcept;

	/* Producer side, used by endpoints and by subclasses from progress(). 0, or -FI_EAGAIN
	 * when the ring is full (the caller keeps the completion and retries later). */
	int push(const cq_entry &e) noexcept;
	/* Up to n completions in order, one wakeup for all (the verbs CQ's ibv_poll_cq batch):
	 * returns how many were queued (fewer than n when the ring filled up). */
	size_t push_n(const cq_entry *entries, size_t n) noexcept;
	/* An error completion: err->err positive; err_data (len bytes) is copied. */
	int push_error(const struct fi_cq_err_entry &err, const void *err_data, size_t len,
	               fi_addr_t src_addr = FI_ADDR_NOTAVAIL) noexcept;

	/* entries and error entries in the ring */
	size_t queued() const noexcept
	{
		/* count_ changes under lock_; this is a snapshot, as the lock would give */
		return count_.load(std::memory_order_acquire);
	}

	/* Entries the application has taken off the ring, counted from the start: unread_mark()
	 * is that count plus what is queued now, and read_past(mark) says whether every entry
	 * queued when the mark was taken has been read (fi_cq_read or fi_cq_readerr) since.
	 * Reads that bypass the ring (read_direct) happen only while it is empty. The EQ holds
	 * a disconnected endpoint's FI_SHUTDOWN on these (vwait/eq.h). */
	uint64_t unread_mark() const noexcept;
	bool read_past(uint64_t mark) const noexcept;

	/* waitable: progress(), then "not empty"; trywait: -FI_EAGAIN if something is queued,
	 * else arm(), progress() and check once more. */
	bool ready() noexcept override;
	int trywait() noexcept override;
	/* sread's trywait phase: arm() (its read then polls below) */
	int arm_now() noexcept override;

	enum fi_cq_format format() const noexcept { return format_; }
	size_t size() const noexcept { return size_; }

protected:
	/* Extension points for the verbs CQ (called without the CQ's lock held). */
	/* Moves completions from below (hardware) into the ring via push()/push_error(). */
	virtual void progress() noexcept {}
	/* Arms the source below so that its next completion wakes the waiter; 0, -FI_EAGAIN if
	 * something arrived meanwhile, or -FI_E*. */
	virtual int arm() noexcept { return FI_SUCCESS; }
	/* fi_cq_read / readfrom's shortcut (count > 0): a subclass that can, while nothing is
	 * queued, write completions from below straight into the caller's buffer (in format(),
	 * src[i] = FI_ADDR_NOTAVAIL) does so and returns direct_read::took(how many, -FI_EAGAIN
	 * for none, or -FI_EAVAIL when an error entry it queued is at the head). Whatever it
	 * cannot hand over (entries behind an error) it queues, in order. direct_read::via_ring()
	 * (the default): it took nothing; the ordinary path runs, progress() then the ring. */
	class direct_read
	{
	public:
		static constexpr direct_read via_ring() noexcept { return direct_read(false, 0); }
		static constexpr direct_read took(ssize_t result) noexcept
		{
			return direct_read(true, result);
		}
		/* false: nothing was read, the ring must answer */
		constexpr bool taken() const noexcept { return taken_; }
		/* what fi_cq_read returns (only when taken()) */
		constexpr ssize_t result() const noexcept { return result_; }

	private:
		constexpr direct_read(bool taken, ssize_t result) noexcept
		    : taken_(taken), result_(result)
		{
		}
		bool taken_;
		ssize_t result_;
	};
	virtual direct_read read_direct(void *buf, size_t count, fi_addr_t *src) noexcept
	{
		(void)buf;
		(void)count;
		(void)src;
		return direct_read::via_ring();
	}

private:
	ssize_t read_ring(void *buf, size_t count, fi_addr_t *src) noexcept;
	ssize_t read_locked(void *buf, size_t count, fi_addr_t *src) noexcept VWAIT_REQUIRES(lock_);
	struct slot;
	slot *tail_slot() noexcept VWAIT_REQUIRES(lock_);

	const enum fi_cq_format format_;
	const enum fi_cq_wait_cond wait_cond_;
	const size_t size_;
	const uint32_t api_version_;

	struct slot {
		cq_entry entry;
		bool is_error = false;
	};
	struct error_record {
		struct fi_cq_err_entry entry;
		std::vector<uint8_t> data;
	};

	mutable util::mutex lock_{lock_level::sw_queue};
	std::vector<slot> ring_ VWAIT_GUARDED_BY(lock_);  /* up to size_ slots (tail_slot) */
	size_t head_ VWAIT_GUARDED_BY(lock_) = 0;         /* oldest */
	std::atomic<size_t> count_{0};                    /* occupied; written under lock_ only */
	uint64_t ring_reads_ VWAIT_GUARDED_BY(lock_) = 0; /* entries read off the ring, ever */
	/* error payloads, oldest first (a list: nothing allocated while there is none) */
	std::list<error_record> errors_ VWAIT_GUARDED_BY(lock_);
	/* provider-owned err_data of the last readerr */
	std::vector<uint8_t> last_err_data_ VWAIT_GUARDED_BY(lock_);

	/* fi_cq_signal: raised counts every signal, consumed the ones an sread returned for. */
	std::atomic<uint64_t> signals_raised_{0};
	std::atomic<uint64_t> signals_consumed_{0};
};

/* Wraps obj in a fid_cq with the util ops (set up its wait object first); the verbs CQ
 * calls this with its subclass. On failure obj is destroyed and *out is NULL. */
int cq_install(std::unique_ptr<sw_cq> obj, struct fid_cq **out, void *context) noexcept;
/* A plain software CQ (fi_cq_open of the util layer). */
int cq_open(const struct fi_provider *prov, const struct fi_cq_attr *attr, struct fid_cq **out,
            void *context, uint32_t api_version = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION));

} // namespace vwait::util

#endif
