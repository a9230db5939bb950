/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* The util layer's event queue: variable-length entries (fi_eq_entry, fi_eq_cm_entry with
 * connection data, application events from fi_eq_write), error entries in order with them,
 * FI_PEEK, every wait object, and the fid_eq shim. The verbs EQ derives from it: its
 * rdma_cm channel fd is an fd source of the EQ's waiter, and progress() drains it, turning CM
 * events into entries through push()/push_error() (see watch()).
 *
 * Choices where fi_eq(3) leaves room:
 *  - fi_eq_write takes flags 0 and 1 to eq_max_entry_size bytes; it does not insist on FI_WRITE
 *    in the open attributes. A full EQ refuses it with -FI_EAGAIN.
 *  - fi_eq_read into a buffer shorter than the entry: -FI_ETOOSMALL (the entry stays), except
 *    FI_CONNREQ / FI_CONNECTED / FI_SHUTDOWN, whose connection data is cut to the room given
 *    (at least sizeof(struct fi_eq_cm_entry)).
 *  - fi_eq_read / fi_eq_readerr / fi_eq_sread take FI_PEEK; an error at the head makes
 *    fi_eq_read -FI_EAVAIL; fi_eq_readerr returns sizeof(struct fi_eq_err_entry).
 *  - fi_eq_readerr hands out its own err_data buffer (valid until the next readerr) when the
 *    application's err_data is NULL or err_data_size is 0, or the API is older than 1.5.
 *  - Bad flags anywhere: -FI_EINVAL.
 *  - fi_eq_sread: one deadline taken at entry, -FI_EAGAIN when it passes; FI_WAIT_NONE:
 *    -FI_EINVAL. */
#ifndef VWAIT_UTIL_EQ_H
#define VWAIT_UTIL_EQ_H

/* before waitable.h, which names struct fi_provider without declaring it */
#include <rdma/providers/fi_prov.h>

#include "vwait/util/object.h"
#include "vwait/util/thread_safety.h"

#include <rdma/fabric.h>
#include <rdma/fi_eq.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace vwait::util
{

/* The largest entry fi_eq_write accepts and an EQ stores, in bytes (an fi_eq_cm_entry with
 * up to 256 bytes of connection data fits many times over). */
constexpr size_t eq_max_entry_size = 4096;
constexpr size_t eq_default_size = 1024;
constexpr size_t eq_max_size = size_t{1} << 20;

int eq_check_attr(const struct fi_provider *prov, const struct fi_eq_attr *attr) noexcept;

class sw_eq : public object
{
public:
	static constexpr size_t fid_class = FI_CLASS_EQ;

	sw_eq(const struct fi_provider *prov, const struct fi_eq_attr &attr, uint32_t api_version);
	~sw_eq() override;
	sw_eq(const sw_eq &) = delete;
	sw_eq &operator=(const sw_eq &) = delete;

	/* fi_eq_* entry points. */
	ssize_t read(uint32_t *event, void *buf, size_t len, uint64_t flags) noexcept;
	ssize_t readerr(struct fi_eq_err_entry *buf, uint64_t flags) noexcept;
	ssize_t write(uint32_t event, const void *buf, size_t len, uint64_t flags) noexcept;
	ssize_t sread(uint32_t *event, void *buf, size_t len, int timeout, uint64_t flags) noexcept;
	/* fi_close, after close_check(): close_begin() stops the subclass's own progress
	 * (closing()) and the source fd leaves the waiter (unwatch(): a wait set outlives the
	 * EQ); close_end(), once the EQ left its waiters, hands unread entries to discard(). */
	void close_begin() noexcept override;
	void close_end() noexcept override;
	void unwatch() noexcept;
	/* An object that reports through this EQ (an endpoint) is closing: its queued entries
	 * (FI_CONNECTED, FI_SHUTDOWN, errors: every entry but fi_eq_write's names its fid first)
	 * go, through discard(), so that no read returns a closed fid. Call it once the object
	 * produces no more events. */
	void remove_fid_events(const struct fid *f) noexcept;

	/* Producer side (the provider's objects, and subclasses from progress()): 0, or
	 * -FI_EAGAIN when the queue is full, -FI_EINVAL when len is out of range.
	 * over_size: queue even when full. For an event already taken from the source below,
	 * which must not be lost: progress() looks at room() before it takes one, so the queue
	 * grows past size() only by what fi_eq_writes racing with it took. */
	int push(uint32_t event, const void *entry, size_t len, bool over_size = false) noexcept;
	int push_error(const struct fi_eq_err_entry &err, const void *err_data, size_t len,
	               bool over_size = false) noexcept;

	size_t queued() const noexcept;
	/* Free entries (0 when full). */
	size_t room() const noexcept;

	/* waitable */
	bool ready() noexcept override;
	/* what is queued: progress() reads the rdma_cm channel, a system call */
	bool peek() noexcept override;
	int trywait() noexcept override;
	/* fi_eq_sread's trywait phase: progress() (its peek phase reads only the queue) */
	int arm_now() noexcept override;

	size_t size() const noexcept { return size_; }

protected:
	/* Extension points for the verbs EQ (called without the EQ's lock held). */
	/* Drains the source below (the rdma_cm channel) into the queue. */
	virtual void progress() noexcept {}
	/* Makes fd (the rdma_cm event channel, non-blocking) a source of the EQ's waiter (its
	 * own, or its wait set's): whenever fd polls readable, whoever waits calls progress().
	 * One fd per EQ; fi_close removes it. 0, or -FI_E* (-FI_EALREADY for a second fd).
	 * Without a waiter (FI_WAIT_NONE) only read/sread/trywait call progress(). */
	int watch(int fd) noexcept;
	/* Arms the source below for fi_trywait; 0, -FI_EAGAIN, or -FI_E*. */
	virtual int arm() noexcept { return FI_SUCCESS; }
	/* fi_close, once close_check() passed, before anything else: what drains the source on
	 * its own (a provider thread) stops here. */
	virtual void closing() noexcept {}
	/* fi_close with entries unread: called for each entry push()ed (not for error entries,
	 * nor for what fi_eq_write queued: the application owns what those point at), before
	 * the EQ is destroyed, so that what an entry owns (the fi_info of an FI_CONNREQ) is
	 * released. */
	virtual void discard(uint32_t event, const void *entry, size_t len) noexcept
	{
		(void)event;
		(void)entry;
		(void)len;
	}

private:
	struct record {
		uint32_t event = 0;
		bool is_error = false;
		bool written = false;       /* by fi_eq_write */
		std::vector<uint8_t> bytes; /* the entry, or the fi_eq_err_entry */
		std::vector<uint8_t> err_data;
	};
	ssize_t read_locked(uint32_t *event, void *buf, size_t len, uint64_t flags) noexcept
	    VWAIT_REQUIRES(lock_);
	int push_record(uint32_t event, const void *entry, size_t len, bool written,
	                bool over_size) noexcept;
	static void drain_source(void *self) noexcept;

	const size_t size_;
	const uint32_t api_version_;

	mutable util::mutex lock_{lock_level::sw_queue};
	std::deque<record> queue_ VWAIT_GUARDED_BY(lock_);
	std::vector<uint8_t> last_err_data_ VWAIT_GUARDED_BY(lock_);
	int watched_fd_ = -1;
};

int eq_install(std::unique_ptr<sw_eq> obj, struct fid_eq **out, void *context) noexcept;
int eq_open(const struct fi_provider *prov, const struct fi_eq_attr *attr, struct fid_eq **out,
            void *context, uint32_t api_version = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION));

} // namespace vwait::util

#endif
