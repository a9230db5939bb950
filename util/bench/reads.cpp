/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* What one call costs: every fi_cq_read, fi_send and fi_recv of fi_vwait_bench goes through the
 * functions here, out of line, so that callgrind counts them alone
 * (--toggle-collect=vwait_bench_cq_read, vwait_bench_send, vwait_bench_recv); and -m
 * empty-read, reads of an empty CQ with no peer, the cost of the call that a spinning reader
 * makes most. */
#include "bench.h"

#include <chrono>

namespace vwait_bench
{
unsigned long long reads_empty, reads_full;
} // namespace vwait_bench

using vwait_bench::reads_empty;
using vwait_bench::reads_full;

/* counts the reads that found nothing and the others */
extern "C" __attribute__((noinline)) ssize_t vwait_bench_cq_read(struct fid_cq *cq, void *buf,
                                                                 size_t count)
{
	ssize_t n = fi_cq_read(cq, buf, count);
	if (n == -FI_EAGAIN)
		reads_empty++;
	else
		reads_full++;
	return n;
}

extern "C" __attribute__((noinline)) ssize_t vwait_bench_send(struct fid_ep *ep, const void *buf,
                                                              size_t len, void *desc,
                                                              fi_addr_t dest, void *ctx)
{
	return fi_send(ep, buf, len, desc, dest, ctx);
}

extern "C" __attribute__((noinline)) ssize_t
vwait_bench_recv(struct fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t src, void *ctx)
{
	return fi_recv(ep, buf, len, desc, src, ctx);
}

namespace vwait_bench
{

/* -m empty-read: -I reads of an empty CQ; the time per read beside the count */
int run_empty_reads(link &l, const options &o)
{
	FI_CALL(l.open_alone());
	struct fi_cq_entry e = {};
	auto t0 = std::chrono::steady_clock::now();
	for (int i = 0; i < o.iters; i++)
		if (vwait_bench_cq_read(l.cq(), &e, 1) != -FI_EAGAIN) {
			fprintf(stderr, "empty-read: the CQ is not empty\n");
			return -FI_EOTHER;
		}
	double usec =
	    std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
	        .count();
	printf("RESULT prov=%s mode=%s iters=%d ns_per_read=%.1f reads_empty=%llu "
	       "reads_full=%llu\n",
	       o.prov.c_str(), o.mode_name.c_str(), o.iters, usec * 1e3 / o.iters, reads_empty,
	       reads_full);
	return 0;
}

} // namespace vwait_bench
