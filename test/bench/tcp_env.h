/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* tcp_env: libfabric's tcp provider opened through the public API (fi_getinfo on 127.0.0.1,
 * fabric, domain), the anchor that bench_util and scale_util measure libfabric's own util
 * objects (CQs, wait sets, poll sets) with. */
#ifndef VWAIT_TEST_BENCH_TCP_ENV_H
#define VWAIT_TEST_BENCH_TCP_ENV_H

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include <cstring>

struct tcp_env {
	struct fi_info *info = nullptr;
	struct fid_fabric *fabric = nullptr;
	struct fid_domain *domain = nullptr;
	tcp_env() = default;
	tcp_env(const tcp_env &) = delete;
	tcp_env &operator=(const tcp_env &) = delete;
	~tcp_env()
	{
		if (domain)
			fi_close(&domain->fid);
		if (fabric)
			fi_close(&fabric->fid);
		if (info)
			fi_freeinfo(info);
	}
};

/* Opens e's fabric and domain; 0 or a negative FI_E* code. */
inline int tcp_open(tcp_env &e)
{
	struct fi_info *hints = fi_allocinfo();
	if (!hints)
		return -FI_ENOMEM;
	hints->ep_attr->type = FI_EP_MSG;
	hints->caps = FI_MSG;
	hints->fabric_attr->prov_name = strdup("tcp");
	int ret = fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", nullptr, 0, hints, &e.info);
	fi_freeinfo(hints);
	if (ret)
		return ret;
	ret = fi_fabric(e.info->fabric_attr, &e.fabric, nullptr);
	if (!ret)
		ret = fi_domain(e.fabric, e.info, &e.domain, nullptr);
	return ret;
}

#endif
