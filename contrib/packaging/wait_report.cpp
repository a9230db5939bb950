/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* wait_report: print the wait objects the vwait plugin reports, per object kind, in the form of
 * fi_vwait(7)'s table ("wait-objects <kind>: FI_WAIT_x FI_WAIT_y", or "none"), so that
 * contrib/packaging/check-man.sh can compare the two. It goes through the public libfabric API
 * only: fi_fabric on the provider named vwait (found through FI_PROVIDER_PATH or libfabric's
 * provider directory), then the FI_VWAIT_WAIT_OPS query of <rdma/fi_ext_vwait.h>. No device
 * is needed. Exit status: 0 printed, 1 libfabric or vwait failed. */
#include <rdma/fabric.h>
#include <rdma/fi_ext_vwait.h>

#include <cstdint>
#include <cstdio>

namespace
{

struct wait_name {
	enum fi_wait_obj obj;
	const char *name;
};
const wait_name wait_names[] = {
    {FI_WAIT_NONE, "FI_WAIT_NONE"},
    {FI_WAIT_UNSPEC, "FI_WAIT_UNSPEC"},
    {FI_WAIT_SET, "FI_WAIT_SET"},
    {FI_WAIT_FD, "FI_WAIT_FD"},
    {FI_WAIT_MUTEX_COND, "FI_WAIT_MUTEX_COND"},
    {FI_WAIT_YIELD, "FI_WAIT_YIELD"},
    {FI_WAIT_POLLFD, "FI_WAIT_POLLFD"},
};

const char *const kind_names[FI_VWAIT_KIND_MAX] = {"cq", "cntr", "eq", "wait_set"};

/* One table line; a bit with no FI_WAIT_* name is printed as FI_WAIT_<bit> so that the
 * comparison with the man page fails instead of hiding it. */
void print_kind(const char *kind, uint64_t mask)
{
	printf("wait-objects %s:", kind);
	if (mask == 0)
		printf(" none");
	for (unsigned b = 0; b < 64; b++) {
		if (!(mask & (UINT64_C(1) << b)))
			continue;
		const char *name = nullptr;
		for (const wait_name &w : wait_names)
			if (FI_VWAIT_WAIT_BIT(w.obj) == (UINT64_C(1) << b))
				name = w.name;
		if (name)
			printf(" %s", name);
		else
			printf(" FI_WAIT_%u", b);
	}
	printf("\n");
}

int report()
{
	struct fi_fabric_attr attr = {};
	attr.prov_name = const_cast<char *>(FI_VWAIT_PROV_NAME);
	attr.name = const_cast<char *>("wait_report");
	attr.api_version = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION);
	struct fid_fabric *fabric = nullptr;
	int ret = fi_fabric(&attr, &fabric, nullptr);
	if (ret) {
		fprintf(stderr,
		        "wait_report: fi_fabric(prov_name=vwait): %s (%d); is the plugin on "
		        "FI_PROVIDER_PATH?\n",
		        fi_strerror(-ret), ret);
		return 1;
	}
	void *ops = nullptr;
	ret = fi_open_ops(&fabric->fid, FI_VWAIT_WAIT_OPS, 0, &ops, nullptr);
	struct fi_vwait_wait_attr wait = {};
	if (ret == 0) {
		auto *wait_ops = static_cast<struct fi_vwait_wait_ops *>(ops);
		ret = wait_ops->query(&fabric->fid, &wait);
	}
	fi_close(&fabric->fid);
	if (ret) {
		fprintf(stderr, "wait_report: FI_VWAIT_WAIT_OPS query: %s (%d)\n",
		        fi_strerror(-ret), ret);
		return 1;
	}
	if (wait.version != FI_VWAIT_WAIT_ATTR_VERSION || wait.kinds != FI_VWAIT_KIND_MAX) {
		fprintf(stderr,
		        "wait_report: attribute version %u with %u kinds, expected %u with %u\n",
		        wait.version, wait.kinds, static_cast<unsigned>(FI_VWAIT_WAIT_ATTR_VERSION),
		        static_cast<unsigned>(FI_VWAIT_KIND_MAX));
		return 1;
	}
	for (unsigned k = 0; k < FI_VWAIT_KIND_MAX; k++)
		print_kind(kind_names[k], wait.wait_objs[k]);
	return 0;
}

} // namespace

int main()
{
	return report();
}
