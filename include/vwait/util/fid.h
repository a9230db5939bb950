/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* The C shim's building block: the fid libfabric sees is the first member of a plain struct
 * that points at the C++ object behind it (no container_of, no offsetof on C++ classes). */
#ifndef VWAIT_UTIL_FID_H
#define VWAIT_UTIL_FID_H

#include <rdma/fabric.h>

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
};

} // namespace vwait::util

#endif
