/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* Ops slots for what an object does not do: each returns -FI_ENOSYS (the value libfabric's
 * callers expect for "not supported"), never crashes. */
#ifndef VWAIT_UTIL_ENOSYS_H
#define VWAIT_UTIL_ENOSYS_H

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>

namespace vwait::util
{

int enosys_bind(struct fid *fid, struct fid *bfid, uint64_t flags) noexcept;
int enosys_control(struct fid *fid, int command, void *arg) noexcept;
int enosys_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops,
                    void *context) noexcept;
int enosys_tostr(const struct fid *fid, char *buf, size_t len) noexcept;
int enosys_ops_set(struct fid *fid, const char *name, uint64_t flags, void *ops,
                   void *context) noexcept;

/* An fi_ops table with close and control (default: -FI_ENOSYS) and -FI_ENOSYS in every other
 * slot: what most objects hand out. */
inline struct fi_ops fi_ops_with(int (*close)(struct fid *),
                                 int (*control)(struct fid *, int,
                                                void *) = enosys_control) noexcept
{
	struct fi_ops ops = {};
	ops.size = sizeof(struct fi_ops);
	ops.close = close;
	ops.bind = enosys_bind;
	ops.control = control;
	ops.ops_open = enosys_ops_open;
	ops.tostr = enosys_tostr;
	ops.ops_set = enosys_ops_set;
	return ops;
}

int enosys_domain(struct fid_fabric *fabric, struct fi_info *info, struct fid_domain **dom,
                  void *context) noexcept;
int enosys_passive_ep(struct fid_fabric *fabric, struct fi_info *info, struct fid_pep **pep,
                      void *context) noexcept;
int enosys_eq_open(struct fid_fabric *fabric, struct fi_eq_attr *attr, struct fid_eq **eq,
                   void *context) noexcept;
int enosys_wait_open(struct fid_fabric *fabric, struct fi_wait_attr *attr,
                     struct fid_wait **waitset) noexcept;
int enosys_trywait(struct fid_fabric *fabric, struct fid **fids, int count) noexcept;

} // namespace vwait::util

#endif
