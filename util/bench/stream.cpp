/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* -X: a one-way stream instead of the ping-pong (main.cpp's header): messages per second, the
 * receiver's CPU per message, and how often its CQ ran dry (a transition to idle, after which
 * it waits in fi_cq_sread). */
#include "bench.h"

#include <algorithm>
#include <chrono>

namespace vwait_bench
{

namespace
{

/* -X, the server: one completion, from fi_cq_read, or from fi_cq_sread once the CQ is
 * found empty (counted in *idle) */
int stream_wait(struct fid_cq *cq, struct fi_cq_entry *e, unsigned long long *idle)
{
	ssize_t n = vwait_bench_cq_read(cq, e, 1);
	if (n == -FI_EAGAIN) {
		++*idle;
		do
			n = fi_cq_sread(cq, e, 1, nullptr, -1);
		while (n == -FI_EAGAIN);
	}
	if (n == 1)
		return 0;
	if (n == -FI_EAVAIL)
		return cq_error(cq, "completion error");
	fprintf(stderr, "fi_cq_sread: %s\n", fi_strerror(static_cast<int>(-n)));
	return n < 0 ? static_cast<int>(n) : -FI_EOTHER;
}

} // namespace

/* -X: the one-way stream (see the header): credits in grants of window / 2; the client
 * counts the server's messages, the last of which says that everything came */
int run_stream(link &l, const options &o)
{
	const bool client = l.client();
	const size_t w = static_cast<size_t>(o.window), grant = std::max<size_t>(w / 2, 1);
	const unsigned long long total = static_cast<unsigned long long>(o.warmup) + o.iters;
	FI_CALL(l.add_recv_slots(w));
	if (client) {
		/* the server's messages: the first grant (the window), one grant per grant
		 * receives but the last, the last message; their receives are the slots */
		const unsigned long long expected = 2 + (total - 1) / grant;
		unsigned long long sent = 0, sends_done = 0, got = 0;
		size_t credits = 0;
		while (got < expected || sends_done < sent) {
			while (credits > 0 && sent < total) {
				FI_CALL(l.post_send());
				credits--;
				sent++;
			}
			struct fi_cq_entry e = {};
			ssize_t n = vwait_bench_cq_read(l.cq(), &e, 1);
			if (n == -FI_EAGAIN)
				continue;
			if (n != 1) {
				fprintf(stderr, "client: reading the CQ: %s\n",
				        fi_strerror(static_cast<int>(-n)));
				return n < 0 ? static_cast<int>(n) : -FI_EOTHER;
			}
			if (l.is_send(e.op_context)) {
				sends_done++;
				continue;
			}
			credits += got++ == 0 ? w : grant;
			FI_CALL(l.post_slot(l.slot_of(e.op_context)));
		}
		printf("RESULT prov=%s mode=stream size=%zu iters=%d window=%zu sent=%llu\n",
		       o.prov.c_str(), o.size, o.iters, w, sent);
		return 0;
	}
	FI_CALL(l.post_send()); /* the first grant: the whole window */
	unsigned long long received = 0, completions = 0, idle = 0, idle0 = 0, sends = 1,
	                   sends_done = 0;
	size_t since_grant = 0;
	double cpu0 = 0;
	std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
	while (received < total || sends_done < sends) {
		if (received == static_cast<unsigned long long>(o.warmup) && cpu0 == 0) {
			cpu0 = cpu_now_us();
			t0 = std::chrono::steady_clock::now();
			idle0 = idle;
		}
		struct fi_cq_entry e = {};
		FI_CALL(stream_wait(l.cq(), &e, &idle));
		completions++;
		if (l.is_send(e.op_context)) {
			sends_done++;
			continue;
		}
		received++;
		FI_CALL(l.post_slot(l.slot_of(e.op_context)));
		if (received == total || ++since_grant == grant) {
			since_grant = 0; /* a grant, or the last message */
			FI_CALL(l.post_send());
			sends++;
		}
	}
	const double usec =
	    std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
	        .count();
	const double cpu = cpu_now_us() - cpu0;
	printf("STREAM prov=%s mode=%s size=%zu window=%zu received=%llu completions=%llu "
	       "idle=%llu idle_measured=%llu cpu_us_per_msg=%.2f msgs_per_s=%.0f\n",
	       o.prov.c_str(), o.mode_name.c_str(), o.size, w, received, completions, idle,
	       idle - idle0, cpu / o.iters, o.iters / usec * 1e6);
	return 0;
}

} // namespace vwait_bench
