/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* cq_fds: what an idle CQ costs a process, through the public API, for any provider: opens up
 * to N CQs of one wait object (fd, unspec, set: bound to one FI_WAIT_FD wait set, none) on one
 * domain and prints the descriptors and the memory (RSS) they took, per CQ, and the first
 * error when a limit (descriptors, device, memory) stops it before N. Then closes them in a
 * random order and prints the descriptors left.
 *
 *   cq_fds -p vwait|verbs [-w fd|unspec|set|none] [-N count] [-s cq size] [-e]
 *
 * -e: each CQ's FI_GETWAIT fd also goes into one epoll set of the application's, as the
 * fi_poll(3) trywait loop does (an EPOLL_CTL_ADD refused is the first error; the kernel
 * refuses one when a file shared by the CQs' fds sits under too many epoll sets).
 *
 * RESULT prov=.. wait=.. asked=N opened=M fds_per_cq=.. rss_kb_per_cq=.. anon_kb_per_cq=..
 * file_kb_per_cq=.. heap_b_per_cq=.. first_error=..
 * fds_left=.. (descriptors after closing everything, against those before the first CQ; a
 * first CQ is opened before the count and closed with the others, see warm)
 * set_fds=.. (-w set: the descriptors the wait set itself holds). rss, anon, file: from
 * /proc/self/smaps_rollup (exact; proc_self.h): anon the process's own memory (the provider's
 * and libibverbs' allocations), file the rest (file mappings: the device's queues, which a
 * verbs provider maps from the uverbs device, are counted there); heap: the bytes malloc holds
 * (mallinfo2), in the anon part. status_file_kb_per_cq: RssFile of /proc/self/status, which
 * Linux before 6.2 lets lag (proc_self.h), beside it.
 * Exit 0 when every CQ opened or a limit stopped it with a clear error, 1 on anything else. */
#include "proc_self.h"
#include "vwait/fi_deprecated.h"

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#include <dirent.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace
{

} // namespace

int main(int argc, char **argv)
{
	std::string prov = "vwait", wait = "fd";
	int n = 1024;
	size_t size = 16;
	bool in_epoll = false;
	int c;
	while ((c = getopt(argc, argv, "p:w:N:s:e")) != -1) {
		switch (c) {
		case 'e':
			in_epoll = true;
			break;
		case 'p':
			prov = optarg;
			break;
		case 'w':
			wait = optarg;
			break;
		case 'N':
			n = atoi(optarg);
			break;
		case 's':
			size = static_cast<size_t>(atol(optarg));
			break;
		default:
			fprintf(
			    stderr,
			    "usage: %s [-p prov] [-w fd|unspec|set|none] [-N n] [-s size] [-e]\n",
			    argv[0]);
			return 2;
		}
	}
	enum fi_wait_obj obj = FI_WAIT_FD;
	if (wait == "unspec")
		obj = FI_WAIT_UNSPEC;
	else if (wait == "set")
		obj = FI_WAIT_SET;
	else if (wait == "none")
		obj = FI_WAIT_NONE;
	else if (wait != "fd")
		return 2;

	struct fi_info *hints = fi_allocinfo();
	hints->ep_attr->type = FI_EP_MSG;
	hints->caps = FI_MSG;
	hints->mode = ~0ULL;
	hints->domain_attr->mr_mode =
	    FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	hints->fabric_attr->prov_name = strdup(prov.c_str());
	struct fi_info *info = nullptr;
	int ret = fi_getinfo(FI_VERSION(1, 5), nullptr, nullptr, 0, hints, &info);
	fi_freeinfo(hints);
	if (ret) {
		fprintf(stderr, "fi_getinfo(%s): %s\n", prov.c_str(), fi_strerror(-ret));
		return 1;
	}
	struct fid_fabric *fabric = nullptr;
	struct fid_domain *domain = nullptr;
	struct fid_wait *set = nullptr;
	int set_fds = 0;
	if ((ret = fi_fabric(info->fabric_attr, &fabric, nullptr)) ||
	    (ret = fi_domain(fabric, info, &domain, nullptr))) {
		fprintf(stderr, "fi_fabric/fi_domain: %s\n", fi_strerror(-ret));
		return 1;
	}
	if (obj == FI_WAIT_SET) {
		struct fi_wait_attr wa = {};
		wa.wait_obj = FI_WAIT_FD;
		set_fds = -proc_open_fds();
		if ((ret = fi_sets::wait_open(fabric, &wa, &set))) {
			printf("RESULT prov=%s wait=%s asked=%d opened=0 first_error=%s\n",
			       prov.c_str(), wait.c_str(), n, fi_strerror(-ret));
			return 0;
		}
		set_fds += proc_open_fds();
	}
	/* one CQ of the kind first, not counted (closed with the others): the provider's code
	 * that opening such a CQ runs is paged in (file-backed RSS) before the count starts, so
	 * that a run stopped early by a limit does not charge it to its few CQs */
	const int fds_before = proc_open_fds();
	struct fid_cq *warm = nullptr;
	{
		struct fi_cq_attr attr = {};
		attr.size = size;
		attr.format = FI_CQ_FORMAT_CONTEXT;
		attr.wait_obj = obj;
		attr.wait_set = set;
		if ((ret = fi_cq_open(domain, &attr, &warm, nullptr)) != 0) {
			printf("RESULT prov=%s wait=%s asked=%d opened=0 first_error=%s\n",
			       prov.c_str(), wait.c_str(), n, fi_strerror(-ret));
			return 0;
		}
	}
	/* a descriptor kept spare, closed before counting: a run that ends at the descriptor
	 * limit can still open /proc/self/fd */
	int spare = open("/dev/null", O_RDONLY | O_CLOEXEC);
	const int fds0 = proc_open_fds() - (spare >= 0 ? 1 : 0);
	const proc_rss m0 = proc_rss_exact();
	const long status_file0 = proc_status_kb("RssFile:");
	const long long heap0 = proc_heap_bytes();
	std::vector<struct fid_cq *> cqs;
	int first_error = 0;
	std::string epoll_error;
	int epfd = in_epoll ? epoll_create1(EPOLL_CLOEXEC) : -1;
	for (int i = 0; i < n; ++i) {
		struct fi_cq_attr attr = {};
		attr.size = size;
		attr.format = FI_CQ_FORMAT_CONTEXT;
		attr.wait_obj = obj;
		attr.wait_set = set;
		struct fid_cq *cq = nullptr;
		ret = fi_cq_open(domain, &attr, &cq, nullptr);
		if (ret) {
			first_error = ret;
			break;
		}
		cqs.push_back(cq);
		if (obj == FI_WAIT_FD || obj == FI_WAIT_UNSPEC) {
			/* what an application does with it: take its fd */
			int fd = -1;
			fi_control(&cq->fid, FI_GETWAIT, &fd);
			struct epoll_event ev = {};
			ev.events = EPOLLIN;
			if (epfd >= 0 && epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
				epoll_error = "epoll_ctl(ADD)_of_CQ_" + std::to_string(i + 1) +
				              ":_" + strerror(errno);
				break;
			}
		}
	}
	if (epfd >= 0)
		close(epfd);
	if (spare >= 0)
		close(spare);
	const int fds1 = proc_open_fds();
	const proc_rss m1 = proc_rss_exact();
	const long status_file1 = proc_status_kb("RssFile:");
	const long long heap1 = proc_heap_bytes();
	const size_t opened = cqs.size();
	std::shuffle(cqs.begin(), cqs.end(), std::mt19937(37));
	int close_errors = 0;
	for (struct fid_cq *cq : cqs)
		close_errors += fi_close(&cq->fid) != 0;
	fi_close(&warm->fid);
	const int fds2 = proc_open_fds();
	double per = opened ? static_cast<double>(fds1 - fds0) / static_cast<double>(opened) : 0;
	auto per_cq = [opened](double d) { return opened ? d / static_cast<double>(opened) : 0; };
	printf("RESULT prov=%s wait=%s asked=%d opened=%zu fds_per_cq=%.2f rss_kb_per_cq=%.1f "
	       "anon_kb_per_cq=%.1f file_kb_per_cq=%.1f heap_b_per_cq=%.0f "
	       "first_error=%s fds_left=%d close_errors=%d set_fds=%d status_file_kb_per_cq=%.1f\n",
	       prov.c_str(), wait.c_str(), n, opened, per,
	       per_cq(static_cast<double>(m1.all - m0.all)),
	       per_cq(static_cast<double>(m1.anon - m0.anon)),
	       per_cq(static_cast<double>(m1.file - m0.file)),
	       per_cq(static_cast<double>(heap1 - heap0)),
	       !epoll_error.empty() ? epoll_error.c_str()
	       : first_error        ? fi_strerror(-first_error)
	                            : "none",
	       fds2 - fds_before, close_errors, set_fds,
	       per_cq(static_cast<double>(status_file1 - status_file0)));
	if (set)
		fi_close(&set->fid);
	fi_close(&domain->fid);
	fi_close(&fabric->fid);
	fi_freeinfo(info);
	return close_errors || fds2 != fds_before ? 1 : 0;
}
