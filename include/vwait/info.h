/* fi_getinfo for vwait: infos built from the verbs devices and their active ports. */
#ifndef VWAIT_INFO_H
#define VWAIT_INFO_H

#include <rdma/fabric.h>

#include <cstdint>

namespace vwait {

/* struct fi_provider::getinfo */
int getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
	    const struct fi_info *hints, struct fi_info **info) noexcept;

} // namespace vwait

#endif
