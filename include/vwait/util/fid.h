/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* The C shim's building block: the fid libfabric sees is the first member of a plain struct
 * that points at the C++ object behind it (no container_of, no offsetof on C++ classes). */
#ifndef VWAIT_UTIL_FID_H
#define VWAIT_UTIL_FID_H

#include <rdma/fabric.h>

#include <memory>

namespace vwait::util
{

template <typename Fid, typename Obj>
struct fid_box {
	Fid fid; /* first: a pointer to the box, to fid, and to fid.fid (struct fid) are one */
	Obj *obj;

	/* The box behind a fid that a slot of the box's own ops table received (f points at
	 * fid, or at the struct fid that begins it): the table proves the kind, so no check. */
	static fid_box *of(const void *f) noexcept
	{
		return reinterpret_cast<fid_box *>(const_cast<void *>(f));
	}
	/* The object behind a fid from outside (an application's argument): nullptr unless it
	 * is of class fclass and carries ops, the table vwait gives this kind of box. */
	static Obj *checked(struct fid *f, size_t fclass, const struct fi_ops *ops) noexcept
	{
		if (!f || f->fclass != fclass || f->ops != ops)
			return nullptr;
		return of(f)->obj;
	}
	/* A new box for obj, handed out through *out: its struct fid's class, context and fi_ops
	 * set, then fill(fid) sets the kind's own fields. Throws std::bad_alloc, obj then still
	 * the caller's. */
	template <typename Fill>
	static void hand_out(std::unique_ptr<Obj> &obj, size_t fclass, void *context,
	                     struct fi_ops *fi_ops, Fid **out, Fill fill)
	{
		auto box = std::make_unique<fid_box>();
		box->fid.fid.fclass = fclass;
		box->fid.fid.context = context;
		box->fid.fid.ops = fi_ops;
		fill(box->fid);
		box->obj = obj.release();
		*out = &box.release()->fid;
	}
};

} // namespace vwait::util

#endif
