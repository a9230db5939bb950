/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* The vwait fabric object, opened through the provider's own fabric() entry (no device needed):
 * bad arguments, fi_open_ops for the wait-support query, close; the fi_version vwait reports. */
#include "vwait_cmocka.h"

#include "vwait/fabric.h"
#include "vwait/vwait.h"

#include <rdma/fabric.h>
#include <rdma/fi_ext_vwait.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace
{

struct fid_fabric *open_fabric()
{
	struct fi_fabric_attr attr = {};
	attr.name = const_cast<char *>("IB-0xfe80000000000000");
	attr.api_version = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION);
	struct fid_fabric *fabric = nullptr;
	assert_int_equal(vwait::fabric_open(&attr, &fabric, nullptr), 0);
	assert_non_null(fabric);
	assert_int_equal(fabric->fid.fclass, FI_CLASS_FABRIC);
	return fabric;
}

void open_close(void **)
{
	struct fid_fabric *fabric = open_fabric();
	assert_int_equal(fi_close(&fabric->fid), 0);
}

void bad_arguments(void **)
{
	struct fi_fabric_attr attr = {};
	struct fid_fabric *fabric = nullptr;
	assert_int_equal(vwait::fabric_open(nullptr, &fabric, nullptr), -FI_EINVAL);
	assert_int_equal(vwait::fabric_open(&attr, nullptr, nullptr), -FI_EINVAL);
}

void wait_ops(void **)
{
	struct fid_fabric *fabric = open_fabric();
	void *ops = nullptr;
	assert_int_equal(fi_open_ops(&fabric->fid, FI_VWAIT_WAIT_OPS, 0, &ops, nullptr), 0);
	auto *wait = static_cast<struct fi_vwait_wait_ops *>(ops);
	assert_true(wait->size >= sizeof(struct fi_vwait_wait_ops));
	struct fi_vwait_wait_attr attr;
	memset(&attr, 0, sizeof(attr));
	assert_int_equal(wait->query(&fabric->fid, &attr), 0);
	assert_int_equal(attr.version, FI_VWAIT_WAIT_ATTR_VERSION);
	assert_true(attr.wait_objs[FI_VWAIT_KIND_CQ] & FI_VWAIT_WAIT_BIT(FI_WAIT_NONE));
	assert_int_equal(fi_open_ops(&fabric->fid, "no_such_ops", 0, &ops, nullptr), -FI_ENOSYS);
	assert_int_equal(fi_open_ops(&fabric->fid, FI_VWAIT_WAIT_OPS, 1, &ops, nullptr),
	                 -FI_EINVAL);
	assert_int_equal(fi_open_ops(&fabric->fid, nullptr, 0, &ops, nullptr), -FI_EINVAL);
	assert_int_equal(fi_open_ops(&fabric->fid, FI_VWAIT_WAIT_OPS, 0, nullptr, nullptr),
	                 -FI_EINVAL);
	assert_int_equal(fi_close(&fabric->fid), 0);
}

/* fi_version follows the running libfabric: never below the headers vwait was built with,
 * never above the newest API level it is tested against (2.1). */
void api_version_follows_library(void **)
{
	using vwait::build_api_version;
	using vwait::pick_api_version;
	assert_int_equal(vwait::max_api_version, FI_VERSION(2, 1));
	assert_int_equal(pick_api_version(build_api_version), build_api_version);
	assert_int_equal(pick_api_version(FI_VERSION(1, 5)), build_api_version);
	assert_int_equal(pick_api_version(FI_VERSION(2, 1)),
	                 std::max<uint32_t>(FI_VERSION(2, 1), build_api_version));
	assert_int_equal(pick_api_version(FI_VERSION(2, 0)),
	                 std::max<uint32_t>(FI_VERSION(2, 0), build_api_version));
	assert_int_equal(pick_api_version(FI_VERSION(2, 9)),
	                 std::max<uint32_t>(FI_VERSION(2, 1), build_api_version));
	assert_int_equal(pick_api_version(FI_VERSION(3, 0)),
	                 std::max<uint32_t>(FI_VERSION(2, 1), build_api_version));
	if (build_api_version == FI_VERSION(1, 17)) /* Debian 12's headers, read by Debian 13 */
		assert_int_equal(pick_api_version(FI_VERSION(2, 1)), FI_VERSION(2, 1));
}

} // namespace

int main()
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(open_close),
	    cmocka_unit_test(bad_arguments),
	    cmocka_unit_test(wait_ops),
	    cmocka_unit_test(api_version_follows_library),
	};
	return cmocka_run_group_tests_name("fabric", tests, nullptr, nullptr) == 0 ? 0 : 1;
}
