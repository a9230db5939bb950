/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* A debug interface of vwait's, not installed: the adaptive wait policy's decisions in this
 * process, for the project's benchmarks (fi_vwait_bench) to put counts beside their times.
 * fi_open_ops(&fabric->fid, FI_VWAIT_POLICY_STATS_OPS, 0, &ops, NULL); its layout may change
 * with any release. The same counts reach the log at FI_LOG_LEVEL=info when a fabric
 * closes. */
#ifndef VWAIT_POLICY_STATS_H
#define VWAIT_POLICY_STATS_H

#include <stddef.h>
#include <stdint.h>

#include <rdma/fabric.h>

#define FI_VWAIT_POLICY_STATS_OPS "vwait_policy_stats_v2"

/* counts of waits since the process started (a call whose first look found its work is
 * none): begun with a spin (spun) or as a probe while waits were long; begun by arming at
 * once because waits were long; ended and judged short (worth a spin) or long. W, its path and
 * wake-up parts in ns, as the process measured them (0: not yet). */
struct fi_vwait_policy_stats {
	uint64_t spun, probes, armed_long, judged_short, judged_long;
	uint64_t wake_cost_ns, path_ns, wake_ns;
};

struct fi_vwait_policy_stats_ops {
	size_t size;
	int (*query)(struct fid *fid, struct fi_vwait_policy_stats *stats);
};

#endif
