/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* util::trywait: fi_trywait over CQs, counters, EQs and wait sets. */
#include "vwait/util/trywait.h"

#include "vwait/util/wait.h"
#include "vwait/util/waitable.h"

#include <rdma/fi_errno.h>
#include <rdma/providers/fi_log.h>

namespace vwait::util
{

namespace
{

struct target {
	waiter *set = nullptr;   /* a wait set, or an object's private waiter */
	waitable *obj = nullptr; /* a wait-set member: its own trywait */
	enum fi_wait_obj kind = FI_WAIT_NONE;
};

int resolve(const struct fi_provider *prov, int i, struct fid *fid, target &t) noexcept
{
	if (!fid) {
		FI_WARN(prov, FI_LOG_CORE, "fi_trywait: fids[%d] is NULL\n", i);
		return -FI_EINVAL;
	}
	if (fid->fclass == FI_CLASS_WAIT) {
		if (get_waiter(fid, &t.set)) {
			FI_WARN(prov, FI_LOG_CORE,
			        "fi_trywait: fids[%d] %p is not a vwait wait set\n", i,
			        (void *)fid);
			return -FI_EINVAL;
		}
		t.kind = t.set->kind();
		return 0;
	}
	if (fid->fclass != FI_CLASS_CQ && fid->fclass != FI_CLASS_CNTR &&
	    fid->fclass != FI_CLASS_EQ) {
		FI_WARN(
		    prov, FI_LOG_CORE,
		    "fi_trywait: fids[%d] %p has class %zu: not a CQ, counter, EQ or wait set\n", i,
		    (void *)fid, fid->fclass);
		return -FI_EINVAL;
	}
	waitable *w = nullptr;
	if (get_waitable(fid, &w)) {
		FI_WARN(prov, FI_LOG_CORE, "fi_trywait: fids[%d] %p is not a vwait object\n", i,
		        (void *)fid);
		return -FI_EINVAL;
	}
	waiter *wo = w->wait_object();
	if (!wo) {
		FI_WARN(
		    prov, FI_LOG_CORE,
		    "fi_trywait: fids[%d] %p was opened with FI_WAIT_NONE: nothing to wait on\n", i,
		    (void *)fid);
		return -FI_EINVAL;
	}
	t.kind = wo->kind();
	if (w->wait_is_private())
		t.set = wo;
	else
		t.obj = w;
	return 0;
}

} // namespace

int trywait(const struct fi_provider *prov, struct fid **fids, int count) noexcept
{
	if (!fids || count <= 0) {
		FI_WARN(prov, FI_LOG_CORE, "fi_trywait: fids %p / count %d is invalid\n",
		        (void *)fids, count);
		return -FI_EINVAL;
	}
	note_blocking(); /* the caller sleeps on the objects' fds when this returns 0 */
	/* two passes over fids, so that a call allocates nothing: every fid checked first (one
	 * wait object type), then each one tried */
	target first;
	for (int i = 0; i < count; ++i) {
		target t;
		int ret = resolve(prov, i, fids[i], t);
		if (ret)
			return ret;
		if (i == 0)
			first = t;
		if (t.kind != first.kind) {
			FI_WARN(prov, FI_LOG_CORE,
			        "fi_trywait: fids[%d] waits on wait object %d, fids[0] on %d: one "
			        "type per call\n",
			        i, t.kind, first.kind);
			return -FI_EINVAL;
		}
	}
	for (int i = 0; i < count; ++i) {
		target t;
		if (int ret = resolve(prov, i, fids[i], t))
			return ret;
		int ret = t.set ? t.set->trywait() : t.obj->trywait();
		if (ret)
			return ret;
	}
	return 0;
}

} // namespace vwait::util
