/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* util::object: what the CQ, counter and EQ share, and the one fi_ops table of their fids. */
#include "config.h"

#include "vwait/util/object.h"

#include "vwait/util/enosys.h"

#include <rdma/fi_errno.h>

#include <algorithm>
#include <new>

namespace vwait::util
{

int check_wait_obj(const struct fi_provider *prov, enum fi_log_subsys subsys, const char *who,
                   const enum fi_wait_obj &wait_obj) noexcept
{
	const int v = raw_enum(wait_obj);
	if (v < FI_WAIT_NONE || v > FI_WAIT_POLLFD) {
		FI_WARN(prov, subsys, "%s: attr->wait_obj %d is not an fi_wait_obj\n", who, v);
		return -FI_EINVAL;
	}
	return FI_SUCCESS;
}

object::object(const struct fi_provider *prov, enum fi_log_subsys subsys, const char *kind,
               enum fi_wait_obj wait_obj, struct fid_wait *wait_set) noexcept
    : prov_(prov), subsys_(subsys), kind_(kind), wait_obj_(wait_obj), wait_set_(wait_set)
{
}

object::~object() = default;

int object::init_wait() noexcept
{
	return open_wait(prov_, wait_obj_, wait_set_);
}

int object::control(int command, void *arg) noexcept
{
	int ret = control_own(command, arg);
	if (ret == -FI_ENOSYS)
		ret = answer_control(command, arg);
	if (ret == -FI_ENOSYS)
		FI_WARN(prov_, subsys_, "fi_control(%s): command %d is not supported\n", kind_,
		        command);
	return ret;
}

std::string object::describe_error(int prov_errno, const void *) const
{
	return std::string("provider error ") + std::to_string(prov_errno) + ": " +
	       fi_strerror(prov_errno < 0 ? -prov_errno : prov_errno);
}

const char *object::strerror(int prov_errno, const void *err_data, char *buf, size_t len) noexcept
{
	try {
		static thread_local std::string text;
		text = describe_error(prov_errno, err_data);
		if (buf && len) {
			const size_t n = std::min(len - 1, text.size());
			std::memcpy(buf, text.data(), n);
			buf[n] = '\0';
			return buf;
		}
		return text.c_str();
	} catch (...) {
		return fi_strerror(FI_ENOMEM);
	}
}

int object::close_check() noexcept
{
	const int refs = refs_.load(std::memory_order_acquire);
	if (refs) {
		FI_WARN(prov_, subsys_, "fi_close(%s): %d objects still bound\n", kind_, refs);
		return -FI_EBUSY;
	}
	if (in_poll_set()) {
		FI_WARN(prov_, subsys_, "fi_close(%s): still in a poll set (fi_poll_del it)\n",
		        kind_);
		return -FI_EBUSY;
	}
	return FI_SUCCESS;
}

namespace
{

int object_close(struct fid *f) noexcept
{
	object_box *box = object_box::of(f);
	if (int ret = box->obj->close_check())
		return ret;
	box->obj->close_begin();
	box->obj->close_wait();
	box->obj->close_end();
	delete box->obj;
	delete box;
	return FI_SUCCESS;
}

int object_control(struct fid *f, int command, void *arg) noexcept
{
	return object_box::of(f)->obj->control(command, arg);
}

} // namespace

struct fi_ops object_fi_ops = fi_ops_with(object_close, object_control);

int object_install(std::unique_ptr<object> obj, size_t fclass, void *ops, struct fid **out,
                   void *context) noexcept
{
	if (!out)
		return -FI_EINVAL;
	*out = nullptr;
	if (!obj)
		return -FI_EINVAL;
	if (int ret = obj->init_wait())
		return ret;
	auto *box = new (std::nothrow) object_box();
	if (!box) {
		obj->close_wait();
		return -FI_ENOMEM;
	}
	const struct fid head = {fclass, context, &object_fi_ops};
	switch (fclass) {
	case FI_CLASS_CQ:
		box->fid.cq = {head, static_cast<struct fi_ops_cq *>(ops)};
		break;
	case FI_CLASS_CNTR:
		box->fid.cntr = {head, static_cast<struct fi_ops_cntr *>(ops)};
		break;
	default:
		box->fid.eq = {head, static_cast<struct fi_ops_eq *>(ops)};
		break;
	}
	obj->set_context(context);
	obj->set_fid(&box->fid.fid);
	box->obj = obj.release();
	*out = &box->fid.fid;
	return FI_SUCCESS;
}

} // namespace vwait::util
