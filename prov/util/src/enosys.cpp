/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
#include "vwait/util/enosys.h"

namespace vwait::util
{

int enosys_bind(struct fid *, struct fid *, uint64_t) noexcept
{
	return -FI_ENOSYS;
}
int enosys_control(struct fid *, int, void *) noexcept
{
	return -FI_ENOSYS;
}
int enosys_ops_open(struct fid *, const char *, uint64_t, void **, void *) noexcept
{
	return -FI_ENOSYS;
}
int enosys_tostr(const struct fid *, char *, size_t) noexcept
{
	return -FI_ENOSYS;
}
int enosys_ops_set(struct fid *, const char *, uint64_t, void *, void *) noexcept
{
	return -FI_ENOSYS;
}
int enosys_domain(struct fid_fabric *, struct fi_info *, struct fid_domain **, void *) noexcept
{
	return -FI_ENOSYS;
}
int enosys_passive_ep(struct fid_fabric *, struct fi_info *, struct fid_pep **, void *) noexcept
{
	return -FI_ENOSYS;
}
int enosys_eq_open(struct fid_fabric *, struct fi_eq_attr *, struct fid_eq **, void *) noexcept
{
	return -FI_ENOSYS;
}
int enosys_wait_open(struct fid_fabric *, struct fi_wait_attr *, struct fid_wait **) noexcept
{
	return -FI_ENOSYS;
}
int enosys_trywait(struct fid_fabric *, struct fid **, int) noexcept
{
	return -FI_ENOSYS;
}

} // namespace vwait::util
