/* vwait provider: the provider object, its parameters and shared helpers. Internal header. */
#ifndef VWAIT_VWAIT_H
#define VWAIT_VWAIT_H

#include <rdma/fabric.h>
#include <rdma/providers/fi_log.h>
#include <rdma/providers/fi_prov.h>

#include "vwait/util/guard.h"
#include "vwait/util/wait_policy.h"

#include <cstddef>
#include <cstdint>
#include <new>
#include <string>

namespace vwait
{

/* The provider as libfabric knows it; every log line goes through it. */
extern struct fi_provider prov;

constexpr const char *prov_name = "vwait";
/* The API version vwait is written for: the one in the headers it is built against. */
constexpr uint32_t api_version = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION);
/* The oldest API version an application may ask for (Open MPI 4.1 asks for 1.5). */
constexpr uint32_t min_api_version = FI_VERSION(1, 5);

/* Run-time parameters (fi_info -e lists them as FI_VWAIT_*), read once in fi_prov_ini. */
struct params {
	std::string device;       /* only this verbs device; empty: all */
	int cm_timeout_ms = 2000; /* rdma_resolve_addr / rdma_resolve_route */
	util::wait_policy wait;   /* FI_VWAIT_WAIT_POLICY, FI_VWAIT_SPIN_US */
};
const params &get_params() noexcept;

/* nothing throws across the ABI: see util::guard */
using util::guard;

} // namespace vwait

#endif
