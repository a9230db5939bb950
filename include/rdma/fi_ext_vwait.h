/*
 * fi_ext_vwait.h: what an application may ask of the vwait provider beyond the standard
 * libfabric API. Installed with the plugin's -devel package.
 */
#ifndef FI_EXT_VWAIT_H
#define FI_EXT_VWAIT_H

#include <rdma/fabric.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The provider name, as FI_PROVIDER and fi_info->fabric_attr->prov_name spell it. */
#define FI_VWAIT_PROV_NAME "vwait"

#ifdef __cplusplus
}
#endif

#endif /* FI_EXT_VWAIT_H */
