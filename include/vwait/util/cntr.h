/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* The util layer's counter: a success value and an error value, fi_cntr_wait with any number
 * of concurrent waiters at different thresholds, every wait object, and the fid_cntr shim.
 * The verbs counter derives from it and counts completions in progress().
 *
 * Choices where fi_cntr(3) leaves room:
 *  - fi_cntr_wait: 0 once value >= threshold; -FI_EAVAIL as soon as the error value differs
 *    from what it was at entry; -FI_ETIMEDOUT at the deadline (taken once, at entry). Waiters
 *    never reset a shared signal: each re-checks the values after every wakeup, so any
 *    number of them with different thresholds wait at once. FI_WAIT_SET members may wait
 *    too (on the set); FI_WAIT_NONE: -FI_EINVAL.
 *  - Every add / adderr / set / seterr is a change: it wakes waiters, and poll sets report the
 *    counter once per fi_poll that follows a change (a generation per change).
 *  - attr->events other than FI_CNTR_EVENTS_COMP: -FI_ENOSYS; attr->flags must be 0. */
#ifndef VWAIT_UTIL_CNTR_H
#define VWAIT_UTIL_CNTR_H

/* before waitable.h, which names struct fi_provider without declaring it */
#include <rdma/providers/fi_prov.h>

#include "vwait/util/object.h"

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>

#include <atomic>
#include <cstdint>
#include <memory>

namespace vwait::util
{

int cntr_check_attr(const struct fi_provider *prov, const struct fi_cntr_attr *attr) noexcept;

class sw_cntr : public object
{
public:
	static constexpr size_t fid_class = FI_CLASS_CNTR;

	sw_cntr(const struct fi_provider *prov, const struct fi_cntr_attr &attr);
	~sw_cntr() override;
	sw_cntr(const sw_cntr &) = delete;
	sw_cntr &operator=(const sw_cntr &) = delete;

	/* fi_cntr_* entry points. */
	uint64_t read() noexcept;
	uint64_t readerr() noexcept;
	int add(uint64_t value) noexcept;
	int adderr(uint64_t value) noexcept;
	int set(uint64_t value) noexcept;
	int seterr(uint64_t value) noexcept;
	/* 0 once the value is >= threshold, -FI_ETIMEDOUT at the deadline, -FI_EAVAIL when the
	 * error value changed while waiting. */
	int wait(uint64_t threshold, int timeout) noexcept;

	/* waitable. A counter has nothing queued: its changes reach waiters through wake(), and
	 * poll sets through poll_ready(), which reports a change of the success or the error
	 * value since the last fi_poll (cookie: the generation that poll set saw last). */
	bool ready() noexcept override;
	int trywait() noexcept override;
	bool poll_ready(uint64_t &cookie) noexcept override;
	uint64_t poll_cookie() const noexcept override;
	/* fi_cntr_wait's phases: progress(); arm() */
	void poll_now() noexcept override;
	int arm_now() noexcept override;

protected:
	/* Extension points for the verbs counter (called without the counter's lock).
	 * progress(): moves what happened below into the values (add / adderr).
	 * arm(): before a wait blocks (fi_cntr_wait, fi_trywait): arms the sources below so that
	 * their next event wakes the waiter, then looks once more; 0, -FI_EAGAIN (a value moved
	 * meanwhile) or a negative FI_E* code (fi_cntr_wait returns it). */
	virtual void progress() noexcept {}
	virtual int arm() noexcept { return FI_SUCCESS; }
	/* After every change of either value: a new generation, then wake(). */
	void changed() noexcept;
	/* FI_GETOPSFLAG / FI_SETOPSFLAG */
	int control_own(int command, void *arg) noexcept override;

private:
	std::atomic<uint64_t> ops_flags_{0};

	std::atomic<uint64_t> value_{0};
	std::atomic<uint64_t> err_{0};
	/* Every change bumps generation_; each poll set keeps the one it saw last. */
	std::atomic<uint64_t> generation_{0};
};

int cntr_install(std::unique_ptr<sw_cntr> obj, struct fid_cntr **out, void *context) noexcept;
int cntr_open(const struct fi_provider *prov, const struct fi_cntr_attr *attr,
              struct fid_cntr **out, void *context);

} // namespace vwait::util

#endif
