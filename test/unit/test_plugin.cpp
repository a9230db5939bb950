/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* The built plugin, loaded the way users load it: by a stock libfabric through
 * FI_PROVIDER_PATH. Checks that libfabric lists vwait, that its parameters are registered, and
 * that fi_getinfo on a machine without a verbs device answers -FI_ENODATA instead of crashing. */
#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

#include "vwait_cmocka.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include <string>

namespace
{

const uint32_t version = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION);

bool host_has_verbs_device()
{
	DIR *dir = opendir("/sys/class/infiniband");
	if (!dir)
		return false;
	bool found = false;
	while (struct dirent *e = readdir(dir))
		if (e->d_name[0] != '.')
			found = true;
	closedir(dir);
	return found;
}

struct fi_info *vwait_hints()
{
	struct fi_info *hints = fi_allocinfo();
	assert_non_null(hints);
	hints->fabric_attr->prov_name = strdup("vwait");
	return hints;
}

/* fi_info -l: libfabric's own listing of loaded providers */
void listed_by_libfabric(void **)
{
	struct fi_info *info = nullptr;
	assert_int_equal(fi_getinfo(version, nullptr, nullptr, FI_PROV_ATTR_ONLY, nullptr, &info),
	                 0);
	bool found = false;
	for (struct fi_info *i = info; i; i = i->next)
		if (i->fabric_attr->prov_name && strcmp(i->fabric_attr->prov_name, "vwait") == 0) {
			found = true;
			assert_int_equal(i->fabric_attr->prov_version, FI_VERSION(0, 1));
		}
	fi_freeinfo(info);
	assert_true(found);
}

/* fi_info -e: the provider's parameters are registered under its name */
void parameters_registered(void **)
{
	struct fi_param *params = nullptr;
	int count = 0;
	assert_int_equal(fi_getparams(&params, &count), 0);
	bool device = false, timeout = false;
	for (int i = 0; i < count; i++) {
		if (strcmp(params[i].name, "FI_VWAIT_DEVICE") == 0)
			device = true;
		if (strcmp(params[i].name, "FI_VWAIT_CM_TIMEOUT") == 0)
			timeout = true;
	}
	fi_freeparams(params);
	assert_true(device);
	assert_true(timeout);
}

/* No verbs device on this host: vwait says so with -FI_ENODATA. */
void no_device_enodata(void **)
{
	if (host_has_verbs_device())
		skip();
	struct fi_info *hints = vwait_hints();
	struct fi_info *info = nullptr;
	int ret = fi_getinfo(version, nullptr, nullptr, 0, hints, &info);
	fi_freeinfo(hints);
	assert_int_equal(ret, -FI_ENODATA);
	assert_null(info);
}

/* Applications asking for an API older than 1.5 get nothing from vwait, and no crash. */
void old_api_refused(void **)
{
	struct fi_info *hints = vwait_hints();
	struct fi_info *info = nullptr;
	int ret = fi_getinfo(FI_VERSION(1, 4), nullptr, nullptr, 0, hints, &info);
	fi_freeinfo(hints);
	assert_int_equal(ret, -FI_ENODATA);
	assert_null(info);
}

/* Applications ask for the API of the headers they were built with, and libfabric skips a
 * provider whose fi_version is below it: vwait answers at the running library's level (up to
 * 2.1), so a client built against this libfabric, or a newer one up to 2.1, sees it. */
void listed_at_running_api(void **)
{
	const uint32_t running = fi_version();
	const uint32_t want = running < FI_VERSION(2, 1) ? running : FI_VERSION(2, 1);
	for (uint32_t v : {version, want}) {
		struct fi_info *info = nullptr;
		assert_int_equal(fi_getinfo(v, nullptr, nullptr, FI_PROV_ATTR_ONLY, nullptr, &info),
		                 0);
		bool found = false;
		for (struct fi_info *i = info; i; i = i->next)
			if (i->fabric_attr->prov_name &&
			    strcmp(i->fabric_attr->prov_name, "vwait") == 0)
				found = true;
		fi_freeinfo(info);
		assert_true(found);
	}
}

} // namespace

int main()
{
	const char *builddir = getenv("VWAIT_BUILDDIR");
	if (!builddir) {
		fprintf(stderr, "VWAIT_BUILDDIR is not set: run through make check\n");
		return 77;
	}
	/* Only the plugin under test: not one that is installed in the system. */
	std::string path = std::string(builddir) + "/.libs";
	setenv("FI_PROVIDER_PATH", path.c_str(), 1);
	unsetenv("FI_PROVIDER");

	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(listed_by_libfabric),   cmocka_unit_test(parameters_registered),
	    cmocka_unit_test(no_device_enodata),     cmocka_unit_test(old_api_refused),
	    cmocka_unit_test(listed_at_running_api),
	};
	int failed = cmocka_run_group_tests_name("plugin", tests, nullptr, nullptr);
	fi_freeinfo(nullptr);
	return failed == 0 ? 0 : 1;
}
