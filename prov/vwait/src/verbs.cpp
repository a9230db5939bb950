/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* The verbs owners' failure line (verbs.h): a deleter that cannot destroy says so. */
#include "config.h"

#include "vwait/verbs.h"
#include "vwait/vwait.h"

namespace vwait::verbs
{

void destroy_failed(const char *call, int code) noexcept
{
	FI_WARN(&prov, FI_LOG_CORE, "%s: %s\n", call, fi_strerror(-code));
}

} // namespace vwait::verbs
