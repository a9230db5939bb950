/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* What libfabric 2.x declares deprecated and vwait still uses on purpose: the one place that
 * spells it, so that the rest of the tree builds with warnings as errors against 1.x and 2.x
 * headers alike, and any other deprecated use still fails such a build.
 *
 * fi_sets: fi_wait_open, fi_wait, fi_poll_open, fi_poll_add, fi_poll_del and fi_poll (2.x marks
 * them FI_DEPRECATED_FUNC). Wait sets and poll sets are what vwait implements, so its tools and
 * tests call them, through these wrappers only, the deprecation warning silenced around these six
 * calls. The wrappers are util/fi_sets.h, public API only, where a program outside the tree can
 * take them from (the tools include it directly); included here for the tests. The provider
 * implements these objects and never calls them.
 *
 * fi_v1: values of the 1.x API that 2.x headers mark deprecated with a warning inside the macro
 * (FI_LOCAL_MR, FI_MR_BASIC, FI_MR_SCALABLE, FI_ORDER_STRICT). The provider must still understand
 * them from an application that asks for an API level below 2.0, and tests send them; their values
 * are part of the ABI and never change (checked against 1.x headers below). */
#pragma once

#include "../../util/fi_sets.h"

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>

#include <cstdint>

namespace fi_v1
{

constexpr uint64_t local_mr = 1ULL << 55; /* FI_LOCAL_MR: mode bit, the pre-1.5 FI_MR_LOCAL */
constexpr int mr_basic = 1 << 0;          /* FI_MR_BASIC: mr_mode before 1.5 */
constexpr int mr_scalable = 1 << 1;       /* FI_MR_SCALABLE: mr_mode before 1.5 */
constexpr uint64_t order_strict = 0x1FF;  /* FI_ORDER_STRICT: comp_order before 2.0 */

#if FI_MAJOR_VERSION < 2
static_assert(local_mr == FI_LOCAL_MR && mr_basic == FI_MR_BASIC && mr_scalable == FI_MR_SCALABLE &&
                  order_strict == FI_ORDER_STRICT,
              "the 1.x API values");
#endif

} // namespace fi_v1
