/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* The fid_wait of a wait set (fi_wait_open): a util::waiter behind a fid. */
#include "wait_impl.h"

#include "vwait/util/enosys.h"
#include "vwait/util/fid.h"
#include "vwait/util/guard.h"

#include <rdma/fi_errno.h>
#include <rdma/providers/fi_log.h>

#include <cstring>

namespace vwait::util
{

namespace
{

struct wait_set {
	std::unique_ptr<waiter> w;
	std::function<void()> on_close;
};

using wait_box = fid_box<struct fid_wait, wait_set>;

int wait_set_close(struct fid *fid) noexcept
{
	auto *box = wait_box::of(fid);
	size_t n = box->obj->w->member_count();
	if (n) {
		FI_WARN(box->obj->w->provider(), FI_LOG_CORE,
		        "fi_close(wait set): %zu object(s) still bound\n", n);
		return -FI_EBUSY;
	}
	auto on_close = std::move(box->obj->on_close);
	delete box->obj;
	delete box;
	if (on_close)
		on_close();
	return 0;
}

int wait_set_control(struct fid *fid, int command, void *arg) noexcept
{
	auto *box = wait_box::of(fid);
	if (command == ctl_get_waiter) {
		if (!arg)
			return -FI_EINVAL;
		*static_cast<waiter **>(arg) = box->obj->w.get();
		return 0;
	}
	return box->obj->w->control(command, arg);
}

int wait_set_wait(struct fid_wait *fid, int timeout) noexcept
{
	return wait_box::of(fid)->obj->w->wait(timeout);
}

struct fi_ops wait_set_fi_ops = fi_ops_with(wait_set_close, wait_set_control);

struct fi_ops_wait wait_set_ops = {
    .size = sizeof(struct fi_ops_wait),
    .wait = wait_set_wait,
};

} // namespace

int wait_open(const struct fi_provider *prov, struct fi_wait_attr *attr, struct fid_wait **out,
              std::function<void()> on_close, wait_policy policy) noexcept
{
	if (!attr || !out) {
		FI_WARN(prov, FI_LOG_CORE, "fi_wait_open: %s is NULL\n",
		        !attr ? "attr" : "waitset");
		return -FI_EINVAL;
	}
	*out = nullptr;
	if (attr->flags) {
		FI_WARN(prov, FI_LOG_CORE, "fi_wait_open: attr->flags 0x%llx must be 0\n",
		        (unsigned long long)attr->flags);
		return -FI_EINVAL;
	}
	/* as int: an out-of-range value from the application must not be loaded as the enum */
	int wait_obj;
	static_assert(sizeof(wait_obj) == sizeof(attr->wait_obj), "enum fi_wait_obj is an int");
	std::memcpy(&wait_obj, &attr->wait_obj, sizeof(wait_obj));
	if (wait_obj == FI_WAIT_NONE || wait_obj == FI_WAIT_SET) {
		FI_WARN(prov, FI_LOG_CORE,
		        "fi_wait_open: attr->wait_obj %s is not a wait set kind\n",
		        kind_name(wait_obj));
		return -FI_EINVAL;
	}
	return guard([&] {
		auto set = std::make_unique<wait_set>();
		if (int ret = waiter::create(prov, wait_obj, set->w, policy))
			return ret;
		set->on_close = std::move(on_close);
		wait_box::hand_out(set, FI_CLASS_WAIT, nullptr, &wait_set_fi_ops, out,
		                   [](struct fid_wait &f) { f.ops = &wait_set_ops; });
		return 0;
	});
}

int get_waiter(struct fid *fid, waiter **out) noexcept
{
	if (!fid || !out)
		return -FI_EINVAL;
	if (fid->fclass != FI_CLASS_WAIT || fid->ops != &wait_set_fi_ops)
		return -FI_ENOSYS;
	*out = wait_box::of(fid)->obj->w.get();
	return 0;
}

} // namespace vwait::util
