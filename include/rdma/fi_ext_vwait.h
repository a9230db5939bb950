/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * fi_ext_vwait.h: what an application may ask of the vwait provider beyond the standard
 * libfabric API. Installed with the plugin's -devel package.
 *
 * libfabric has no standard field that says which wait objects a provider supports, so vwait
 * reports them three ways:
 *   1. fi_info->nic: a struct fid_nic whose fi_tostr() output (fi_info -v) lists the supported
 *      wait objects per object kind, and whose prov_attr points at a struct fi_vwait_nic_attr
 *      (below). Copies of the fid_nic made by other code (ofi_rxm, fi_dupinfo in older
 *      libfabrics) may carry a NULL prov_attr: use 2. then.
 *   2. fi_open_ops(&fabric->fid or &domain->fid, FI_VWAIT_WAIT_OPS, 0, &ops, NULL) gives a
 *      struct fi_vwait_wait_ops whose query() fills a struct fi_vwait_wait_attr.
 *   3. fi_info -e lists vwait's parameters (FI_VWAIT_*).
 * Opening an object with a wait object it does not support returns -FI_ENOSYS.
 */
#ifndef FI_EXT_VWAIT_H
#define FI_EXT_VWAIT_H

#include <stdint.h>

#include <rdma/fabric.h>
#include <rdma/fi_eq.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The provider name, as FI_PROVIDER and fi_info->fabric_attr->prov_name spell it. */
#define FI_VWAIT_PROV_NAME "vwait"

/* The bit that stands for wait object w (enum fi_wait_obj) in a wait-object mask. */
#define FI_VWAIT_WAIT_BIT(w) (UINT64_C(1) << (unsigned)(w))

/* The object kinds whose wait objects are reported. */
enum fi_vwait_kind {
	FI_VWAIT_KIND_CQ,       /* fi_cq_open: fi_cq_attr.wait_obj */
	FI_VWAIT_KIND_CNTR,     /* fi_cntr_open: fi_cntr_attr.wait_obj */
	FI_VWAIT_KIND_EQ,       /* fi_eq_open: fi_eq_attr.wait_obj */
	FI_VWAIT_KIND_WAIT_SET, /* fi_wait_open: fi_wait_attr.wait_obj */
	FI_VWAIT_KIND_MAX
};

/* Features of the blocking API (bits of fi_vwait_wait_attr.features). */
#define FI_VWAIT_FEAT_WAIT_SET (UINT64_C(1) << 0) /* fi_wait_open, fi_wait */
#define FI_VWAIT_FEAT_POLL_SET (UINT64_C(1) << 1) /* fi_poll_open, fi_poll */
#define FI_VWAIT_FEAT_TRYWAIT (UINT64_C(1) << 2)  /* fi_trywait */

/* How vwait's blocking calls (fi_cq_sread, fi_cntr_wait, fi_eq_sread, fi_wait) wait
 * (fi_vwait_wait_attr.wait_policy; set with FI_VWAIT_WAIT_POLICY, fi_vwait(7)). */
enum fi_vwait_wait_policy {
	FI_VWAIT_POLICY_ADAPTIVE, /* spin up to what a sleep costs (<= spin_us) while waits
	                             are short */
	FI_VWAIT_POLICY_BLOCK,    /* never spin: arm and sleep at once */
	FI_VWAIT_POLICY_FIXED,    /* spin spin_us, then arm and sleep */
};

#define FI_VWAIT_WAIT_ATTR_VERSION 6

struct fi_vwait_wait_attr {
	uint32_t version; /* FI_VWAIT_WAIT_ATTR_VERSION */
	uint32_t kinds;   /* entries of wait_objs filled: FI_VWAIT_KIND_MAX */
	/* per enum fi_vwait_kind: FI_VWAIT_WAIT_BIT(FI_WAIT_x) for each supported FI_WAIT_x */
	uint64_t wait_objs[FI_VWAIT_KIND_MAX];
	uint64_t features; /* FI_VWAIT_FEAT_* */
	/* what FI_WAIT_UNSPEC stands for (an enum fi_wait_obj value) */
	int32_t unspec_is;
	/* since version 2: the wait policy in force (enum fi_vwait_wait_policy) and its spin
	 * budget in microseconds (FI_VWAIT_SPIN_US) */
	uint32_t wait_policy;
	uint32_t spin_us;
	/* since version 3: the wake-up cost adaptive measured in this process (arm, sleep,
	 * wake-up, drain: fi_vwait(7)), in microseconds, rounded up; 0: not measured yet (no
	 * blocking call of this process has slept past its first sleeps) */
	uint32_t wake_us;
	/* Versions 4 and 5 carried the adaptive policy's decision counters here; version 6
	 * removed them (they explain a heuristic, not what a user acts on): the log has
	 * them (fi_vwait(7), "Diagnostics"). */
};

/* What fi_info->nic->prov_attr points at in infos vwait returns. */
#define FI_VWAIT_NIC_MAGIC UINT64_C(0x7677616974000001) /* "vwait" 1 */
struct fi_vwait_nic_attr {
	uint64_t magic; /* FI_VWAIT_NIC_MAGIC */
	struct fi_vwait_wait_attr wait;
};

/* fi_open_ops name for struct fi_vwait_wait_ops, on a vwait fabric or domain fid. */
#define FI_VWAIT_WAIT_OPS "vwait_wait_ops_v1"

struct fi_vwait_wait_ops {
	size_t size;
	/* Fills *attr; -FI_EINVAL if attr is NULL. */
	int (*query)(struct fid *fid, struct fi_vwait_wait_attr *attr);
};

#ifdef __cplusplus
}
#endif

#endif /* FI_EXT_VWAIT_H */
