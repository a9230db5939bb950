/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* mr_reg_cost: what fi_mr_reg + fi_close of one buffer costs on a provider's domain (public API
 * only; run in the VM by test/bench/mr-cache.sh).
 *
 *   mr_reg_cost [-p PROV] [-n N] [-S SIZE] same|alt
 * same: the same buffer N times (with vwait's registration cache: one miss, then hits);
 * alt: two buffers in turn (with FI_MR_CACHE_MAX_COUNT=1: every call a miss that evicts the
 * other's registration). Prints the median and mean ns per fi_mr_reg + fi_close, the first
 * call's, and whether consecutive calls on one buffer shared a descriptor (cached). Under
 * callgrind (--instr-atstart=no) only the N timed calls are instrumented. */
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#endif
#endif
#ifndef CALLGRIND_START_INSTRUMENTATION
#define CALLGRIND_START_INSTRUMENTATION
#define CALLGRIND_STOP_INSTRUMENTATION
#endif

int main(int argc, char **argv)
{
	std::string prov = "vwait";
	size_t n = 1000, size = 1 << 20;
	int c;
	while ((c = getopt(argc, argv, "p:n:S:")) != -1) {
		switch (c) {
		case 'p':
			prov = optarg;
			break;
		case 'n':
			n = strtoul(optarg, nullptr, 10);
			break;
		case 'S':
			size = strtoul(optarg, nullptr, 0);
			break;
		default:
			return 2;
		}
	}
	if (optind >= argc || n == 0)
		return 2;
	const bool alt = strcmp(argv[optind], "alt") == 0;

	struct fi_info *hints = fi_allocinfo(), *info = nullptr;
	hints->ep_attr->type = FI_EP_MSG;
	hints->caps = FI_MSG;
	hints->mode = ~0ULL;
	hints->domain_attr->mr_mode =
	    FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	hints->fabric_attr->prov_name = strdup(prov.c_str());
	int ret = fi_getinfo(FI_VERSION(1, 5), nullptr, nullptr, 0, hints, &info);
	fi_freeinfo(hints);
	if (ret) {
		printf("SKIP: fi_getinfo(%s): %s\n", prov.c_str(), fi_strerror(-ret));
		return 77;
	}
	struct fid_fabric *fabric = nullptr;
	struct fid_domain *domain = nullptr;
	if ((ret = fi_fabric(info->fabric_attr, &fabric, nullptr)) ||
	    (ret = fi_domain(fabric, info, &domain, nullptr))) {
		fprintf(stderr, "fi_fabric/fi_domain: %s\n", fi_strerror(-ret));
		return 1;
	}
	char *bufs[2];
	for (auto &b : bufs) {
		void *m =
		    mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (m == MAP_FAILED)
			return 1;
		b = static_cast<char *>(m);
		memset(b, 1, size);
	}
	const uint64_t access = FI_SEND | FI_RECV | FI_READ | FI_REMOTE_READ;
	auto one = [&](size_t i, void **desc) {
		struct fid_mr *mr = nullptr;
		int r =
		    fi_mr_reg(domain, bufs[alt ? i % 2 : 0], size, access, 0, 0, 0, &mr, nullptr);
		if (r) {
			fprintf(stderr, "fi_mr_reg: %s\n", fi_strerror(-r));
			exit(1);
		}
		*desc = fi_mr_desc(mr);
		fi_close(&mr->fid);
	};
	using clk = std::chrono::steady_clock;
	void *desc = nullptr, *first_desc = nullptr;
	const auto f0 = clk::now();
	one(0, &first_desc);
	const double first = std::chrono::duration<double, std::nano>(clk::now() - f0).count();
	std::vector<double> ns(n);
	/* how often a call's descriptor was not the one before it: with vwait's cache, once (the
	 * first registration of a buffer is not kept: the cache keeps from the second on) */
	size_t changes = 0;
	void *prev = first_desc;
	CALLGRIND_START_INSTRUMENTATION;
	for (size_t i = 0; i < n; i++) {
		const auto t0 = clk::now();
		one(alt ? i + 1 : i, &desc);
		ns[i] = std::chrono::duration<double, std::nano>(clk::now() - t0).count();
		changes += desc != prev;
		prev = desc;
	}
	CALLGRIND_STOP_INSTRUMENTATION;
	double sum = 0;
	for (double v : ns)
		sum += v;
	std::sort(ns.begin(), ns.end());
	char what[64];
	if (alt)
		snprintf(what, sizeof(what), "two buffers in turn");
	else if (changes <= 1)
		snprintf(what, sizeof(what), "one descriptor%s (cached)",
		         changes ? " from the second call on" : "");
	else
		snprintf(what, sizeof(what), "new descriptors (%zu changes)", changes);
	printf("%s %s %zu B x %zu: median %.0f ns, mean %.0f ns per fi_mr_reg + fi_close; "
	       "first %.0f ns; %s\n",
	       prov.c_str(), alt ? "alt" : "same", size, n, ns[n / 2], sum / n, first, what);
	fi_close(&domain->fid);
	fi_close(&fabric->fid);
	fi_freeinfo(info);
	return 0;
}
