/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* The util layer's counter and its fid_cntr shim. */
#include "config.h"

#include "vwait/util/cntr.h"

#include "vwait/util/guard.h"
#include "vwait/util/wait.h"

#include <rdma/fi_errno.h>
#include <rdma/providers/fi_log.h>

namespace vwait::util
{

int cntr_check_attr(const struct fi_provider *prov, const struct fi_cntr_attr *attr) noexcept
{
	if (!attr) {
		FI_WARN(prov, FI_LOG_CNTR, "fi_cntr_open: attr is NULL\n");
		return -FI_EINVAL;
	}
	if (raw_enum(attr->events) != FI_CNTR_EVENTS_COMP) {
		FI_WARN(prov, FI_LOG_CNTR, "fi_cntr_open: attr->events %d is not supported\n",
		        raw_enum(attr->events));
		return -FI_ENOSYS;
	}
	if (attr->flags) {
		FI_WARN(prov, FI_LOG_CNTR, "fi_cntr_open: attr->flags 0x%llx must be 0\n",
		        static_cast<unsigned long long>(attr->flags));
		return -FI_EINVAL;
	}
	return check_wait_obj(prov, FI_LOG_CNTR, "fi_cntr_open", attr->wait_obj);
}

sw_cntr::sw_cntr(const struct fi_provider *prov, const struct fi_cntr_attr &attr)
    : object(prov, FI_LOG_CNTR, "counter", attr.wait_obj, attr.wait_set)
{
}

sw_cntr::~sw_cntr() = default;

void sw_cntr::changed() noexcept
{
	generation_.fetch_add(1, std::memory_order_acq_rel);
	wake();
}

uint64_t sw_cntr::read() noexcept
{
	progress();
	return value_.load(std::memory_order_acquire);
}

uint64_t sw_cntr::readerr() noexcept
{
	progress();
	return err_.load(std::memory_order_acquire);
}

int sw_cntr::add(uint64_t value) noexcept
{
	value_.fetch_add(value, std::memory_order_acq_rel);
	changed();
	return FI_SUCCESS;
}

int sw_cntr::adderr(uint64_t value) noexcept
{
	err_.fetch_add(value, std::memory_order_acq_rel);
	changed();
	return FI_SUCCESS;
}

int sw_cntr::set(uint64_t value) noexcept
{
	value_.store(value, std::memory_order_release);
	changed();
	return FI_SUCCESS;
}

int sw_cntr::seterr(uint64_t value) noexcept
{
	err_.store(value, std::memory_order_release);
	changed();
	return FI_SUCCESS;
}

int sw_cntr::wait(uint64_t threshold, int timeout) noexcept
{
	const auto until = deadline_after(timeout); /* once, at entry */
	waiter *w = wait_object();
	if (!w) {
		FI_WARN(prov_, FI_LOG_CNTR,
		        "fi_cntr_wait: the counter was opened with FI_WAIT_NONE\n");
		return -FI_EINVAL;
	}
	const uint64_t err0 = err_.load(std::memory_order_acquire);
	/* what the call consumes: the value reaching threshold, or a new error, decided on the
	 * values that ended the wait (the waiter runs progress() and arm() around it) */
	int result = -FI_ETIMEDOUT;
	const int ret = w->wait_for(*this, until, [&]() noexcept {
		if (value_.load(std::memory_order_acquire) >= threshold)
			result = FI_SUCCESS;
		else if (err_.load(std::memory_order_acquire) != err0)
			result = -FI_EAVAIL;
		return result != -FI_ETIMEDOUT;
	});
	return ret == FI_SUCCESS ? result : ret;
}

void sw_cntr::poll_now() noexcept
{
	progress();
}

int sw_cntr::arm_now() noexcept
{
	/* the sources below (verbs CQs) raise an event on their next completion; arm() looks
	 * once more for what came before the arming */
	return arm();
}

bool sw_cntr::ready() noexcept
{
	progress();
	return false;
}

bool sw_cntr::poll_ready(uint64_t &cookie) noexcept
{
	progress();
	const uint64_t now = generation_.load(std::memory_order_acquire);
	if (now == cookie)
		return false;
	cookie = now;
	return true;
}

uint64_t sw_cntr::poll_cookie() const noexcept
{
	return generation_.load(std::memory_order_acquire);
}

int sw_cntr::trywait() noexcept
{
	/* changes already reached the waiter through wake(); only the source below is left */
	return arm();
}

int sw_cntr::control_own(int command, void *arg) noexcept
{
	if (command != FI_GETOPSFLAG && command != FI_SETOPSFLAG)
		return -FI_ENOSYS;
	if (!arg) {
		FI_WARN(prov_, FI_LOG_CNTR, "fi_control(counter, %s): arg is NULL\n",
		        command == FI_GETOPSFLAG ? "FI_GETOPSFLAG" : "FI_SETOPSFLAG");
		return -FI_EINVAL;
	}
	if (command == FI_GETOPSFLAG)
		*static_cast<uint64_t *>(arg) = ops_flags_.load(std::memory_order_acquire);
	else
		ops_flags_.store(*static_cast<uint64_t *>(arg), std::memory_order_release);
	return FI_SUCCESS;
}

/* ------------------------------------------------------------------ the fid_cntr shim */
namespace
{

/* a slot of cntr_ops: the fid is a counter's object_box */
sw_cntr *obj(struct fid_cntr *f) noexcept
{
	return static_cast<sw_cntr *>(object_box::of(f)->obj);
}

uint64_t cntr_read(struct fid_cntr *f) noexcept
{
	return obj(f)->read();
}

uint64_t cntr_readerr(struct fid_cntr *f) noexcept
{
	return obj(f)->readerr();
}

int cntr_add(struct fid_cntr *f, uint64_t value) noexcept
{
	return obj(f)->add(value);
}

int cntr_set(struct fid_cntr *f, uint64_t value) noexcept
{
	return obj(f)->set(value);
}

int cntr_wait(struct fid_cntr *f, uint64_t threshold, int timeout) noexcept
{
	return obj(f)->wait(threshold, timeout);
}

int cntr_adderr(struct fid_cntr *f, uint64_t value) noexcept
{
	return obj(f)->adderr(value);
}

int cntr_seterr(struct fid_cntr *f, uint64_t value) noexcept
{
	return obj(f)->seterr(value);
}

struct fi_ops_cntr cntr_ops = {
    .size = sizeof(struct fi_ops_cntr),
    .read = cntr_read,
    .readerr = cntr_readerr,
    .add = cntr_add,
    .set = cntr_set,
    .wait = cntr_wait,
    .adderr = cntr_adderr,
    .seterr = cntr_seterr,
};

} // namespace

int cntr_install(std::unique_ptr<sw_cntr> o, struct fid_cntr **out, void *context) noexcept
{
	return object_install(std::move(o), &cntr_ops, out, context);
}

int cntr_open(const struct fi_provider *prov, const struct fi_cntr_attr *attr,
              struct fid_cntr **out, void *context)
{
	return object_open(
	    prov, FI_LOG_CNTR, "fi_cntr_open", "cntr", cntr_check_attr, attr, out,
	    [&] { return cntr_install(std::make_unique<sw_cntr>(prov, *attr), out, context); });
}

} // namespace vwait::util
