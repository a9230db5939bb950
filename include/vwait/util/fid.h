/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* The C shim's building block: the fid libfabric sees is the first member of a plain struct
 * that points at the C++ object behind it (no container_of, no offsetof on C++ classes). */
#ifndef VWAIT_UTIL_FID_H
#define VWAIT_UTIL_FID_H

#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

#include <memory>
#include <new>

namespace vwait::util
{

template <typename Fid, typename Obj>
struct fid_box {
	Fid fid; /* first: a pointer to the box, to fid, and to fid.fid (struct fid) are one */
	Obj *obj;
};

/* The object behind a fid that a shim slot received; Fid is the type the box was built with.
 * Valid only for fids vwait itself handed out (the slot's ops table proves that). */
template <typename Obj, typename Fid>
inline Obj *owner(Fid *fid) noexcept
{
	return reinterpret_cast<fid_box<Fid, Obj> *>(fid)->obj;
}
template <typename Obj, typename Fid>
inline Obj *owner_of_fid(struct fid *fid) noexcept
{
	return reinterpret_cast<fid_box<Fid, Obj> *>(fid)->obj;
}

/* The install step every util object (CQ, counter, EQ) shares: its wait object first, then a
 * box of class fclass with fi_ops / ops around it, handed out in *out. On failure obj leaves
 * its waiters and is destroyed, and *out is NULL. Obj has init_wait(), set_context(),
 * set_fid() and close_wait(). */
template <typename Fid, typename Obj, typename Ops>
int box_install(std::unique_ptr<Obj> obj, size_t fclass, struct fi_ops *fi_ops, Ops *ops, Fid **out,
                void *context) noexcept
{
	if (!out)
		return -FI_EINVAL;
	*out = nullptr;
	if (!obj)
		return -FI_EINVAL;
	int ret = obj->init_wait();
	if (ret)
		return ret;
	auto *box = new (std::nothrow) fid_box<Fid, Obj>();
	if (!box) {
		obj->close_wait();
		return -FI_ENOMEM;
	}
	box->fid.fid.fclass = fclass;
	box->fid.fid.context = context;
	box->fid.fid.ops = fi_ops;
	box->fid.ops = ops;
	obj->set_context(context);
	obj->set_fid(&box->fid.fid);
	box->obj = obj.release();
	*out = &box->fid;
	return 0;
}

/* fi_control of a util object: its own control(). */
template <typename Fid, typename Obj>
int box_control(struct fid *f, int command, void *arg) noexcept
{
	return owner_of_fid<Obj, Fid>(f)->control(command, arg);
}

} // namespace vwait::util

#endif
