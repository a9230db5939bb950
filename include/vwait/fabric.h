/* The vwait fabric object. */
#ifndef VWAIT_FABRIC_H
#define VWAIT_FABRIC_H

#include <rdma/fabric.h>

namespace vwait {

/* struct fi_provider::fabric */
int fabric_open(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context) noexcept;

} // namespace vwait

#endif
