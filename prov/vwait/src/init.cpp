/* vwait provider entry point: fi_prov_ini, parameters, cleanup. */
#include "config.h"

#include "vwait/fabric.h"
#include "vwait/info.h"
#include "vwait/vwait.h"

#include <cstdlib>

namespace vwait
{

namespace
{

params the_params;

void read_params() noexcept
{
	fi_param_define(&prov, "device", FI_PARAM_STRING,
	                "Use only the verbs device of this name (for example rxe0); "
	                "default: every device with an active port.");
	fi_param_define(&prov, "cm_timeout", FI_PARAM_INT,
	                "Milliseconds rdma_cm may take to resolve an address or a route "
	                "(default: %d).",
	                the_params.cm_timeout_ms);

	char *device = nullptr;
	if (fi_param_get_str(&prov, "device", &device) == FI_SUCCESS && device)
		the_params.device = device;
	int timeout = 0;
	if (fi_param_get_int(&prov, "cm_timeout", &timeout) == FI_SUCCESS) {
		if (timeout > 0)
			the_params.cm_timeout_ms = timeout;
		else
			FI_WARN(&prov, FI_LOG_CORE,
			        "FI_VWAIT_CM_TIMEOUT=%d is not a positive number of milliseconds; "
			        "using %d\n",
			        timeout, the_params.cm_timeout_ms);
	}
}

/* libfabric calls this once, at fi_fini; vwait keeps no global state beyond the parameters. */
void cleanup() noexcept
{
	the_params = params{};
}

} // namespace

const params &get_params() noexcept
{
	return the_params;
}

struct fi_provider prov = {
    .version = FI_VERSION(0, 1),
    .fi_version = api_version,
    .context = {},
    .name = prov_name,
    .getinfo = getinfo,
    .fabric = fabric_open,
    .cleanup = cleanup,
};

} // namespace vwait

extern "C" {

FI_EXT_INI
{
	vwait::read_params();
	return &vwait::prov;
}

} // extern "C"
