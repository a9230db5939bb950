/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* The vwait fabric object. */
#ifndef VWAIT_FABRIC_H
#define VWAIT_FABRIC_H

#include "vwait/util/fid.h"

#include <rdma/fabric.h>

#include <atomic>
#include <cstdint>
#include <string>

namespace vwait
{

class fabric
{
public:
	fabric(const char *name, uint32_t api_version)
	    : name_(name ? name : ""), api_version_(api_version)
	{
	}

	/* Objects opened from this fabric hold a reference; close fails while any is held. */
	void hold() noexcept { refs_.fetch_add(1, std::memory_order_relaxed); }
	void unhold() noexcept { refs_.fetch_sub(1, std::memory_order_release); }
	bool busy() const noexcept { return refs_.load(std::memory_order_acquire) != 0; }
	const std::string &name() const noexcept { return name_; }
	uint32_t api_version() const noexcept { return api_version_; }

private:
	std::string name_;
	uint32_t api_version_;
	std::atomic<int> refs_{0};
};

using fabric_box = util::fid_box<struct fid_fabric, fabric>;

/* struct fi_provider::fabric */
int fabric_open(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context) noexcept;
/* fi_open_ops on a fabric (and, for the names it does not know itself, on a domain):
 * FI_VWAIT_WAIT_OPS, the wait-object support table (rdma/fi_ext_vwait.h). */
int fabric_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops,
                    void *context) noexcept;

} // namespace vwait

#endif
