/* The C shim's building block: the fid libfabric sees is the first member of a plain struct
 * that points at the C++ object behind it (no container_of, no offsetof on C++ classes). */
#ifndef VWAIT_UTIL_FID_H
#define VWAIT_UTIL_FID_H

#include <rdma/fabric.h>

namespace vwait::util {

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

} // namespace vwait::util

#endif
