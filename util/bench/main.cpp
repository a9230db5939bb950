/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* fi_vwait_bench: ping-pong over libfabric MSG endpoints in which both sides wait for their
 * completions the way an application chooses to: spinning on fi_cq_read, or blocking in
 * fi_cq_sread on a CQ of a given wait object, or the fi_trywait + poll() loop of fi_poll(3),
 * or fi_wait on a wait set, or fi_cntr_wait on endpoint counters. Prints latency, and the CPU
 * time each message costs, so that providers (vwait, upstream verbs) and wait modes can be
 * compared in one run.
 *
 *   server: fi_vwait_bench -p vwait -m sread-fd [-S size] [-I iters] [-P port]
 *   client: fi_vwait_bench -p vwait -m sread-fd [-S size] [-I iters] [-P port] <server address>
 *
 * -T thinks (think-time runs, e.g. -T 0,50,500,5000): the client waits that many microseconds
 * before each send, in phases of decreasing iteration counts (-I for think 0, fewer for long
 * thinks, -B microseconds of think per phase at most); server and client give the same -T,
 * -I, -B. The client prints each phase's one-way latency (think time excluded), the server the
 * CPU time (process, user + system) it spent per message, as PHASE lines, each with the
 * wake-up cost vwait's adaptive policy had measured in that process by the phase's end
 * (wake_us; 0: not yet, -1: not vwait) and, for vwait, the policy's decisions in that phase
 * (spun= probes= armed_long= judged_short= judged_long=: counts of waits,
 * vwait/policy_stats.h). The two sides may use different modes (a spinning client
 * against a server blocked in fi_cq_sread).
 *
 * -m empty-read: no peer; fi_cq_read on an empty CQ, -I times (callgrind's instruction count
 * per call; every CQ read of the benchmark goes through vwait_bench_cq_read, a function
 * callgrind can be told to count alone with --toggle-collect=vwait_bench_cq_read). The RESULT
 * line counts the empty and the full reads (reads_empty, reads_full), all of the run's. -D: the
 * client looks for its CQ's completions only once the answer's last byte is in its buffer, so
 * that nearly every read finds one (the cost of a completion read, counted apart).
 *
 * -N members (waitset, pollset): the wait set / poll set holds members CQs, the one in use and
 * members - 1 idle ones added around it, so that the cost of a set that mostly sleeps shows.
 * fi_poll naming an idle CQ is an error (exit 1).
 *
 * -e rdm: reliable datagram endpoints instead of MSG ones (-p "vwait;ofi_rxm" against
 * -p "verbs;ofi_rxm": what each core provider costs under ofi_rxm, as MPI uses them). No EQ, no
 * connection: the client sends its name first, and the server puts it in its AV. Modes spin,
 * sread-* and empty-read only (empty-read opens an endpoint, so that ofi_rxm's progress runs).
 *
 * -A address (server): listen on that address only (FI_SOURCE), so that of several devices the
 * one that holds it serves (rdma_cm picks the device by the address); default: any.
 *
 * -C seconds (-e msg): how long the server waits for the connection request, and either side
 * for each connection event (default 30; a side under valgrind on a busy emulated CPU may take
 * longer than that just to start).
 *
 * -R bursts (any mode but empty-read): the run is that many bursts of -W + -I rounds, and the
 * client times each burst's -I rounds apart (a BURST line each); with -T, the client thinks
 * the first think time before every round, outside the time. With -G go,done (both
 * sides) each side waits for a byte on the fifo go before each burst and writes one to done
 * after it, so that a driver can let several pairs (vwait, upstream verbs; a spinning server
 * and a blocking one) take turns burst by burst in one boot: what the emulated CPU drifts by
 * over a run then falls on all of them alike, and a pair that waits for its turn sleeps in
 * read(2), leaving the CPUs to the one that runs. Without -G a spinning server backs off
 * between bursts (a 500 us sleep between reads after 2 ms without a message).
 *
 * -X window (-e msg, sread-* modes): a one-way stream instead of the ping-pong. The client sends
 * -W + -I messages of -S bytes back to back (gap 0), as fast as the server's credits allow,
 * polling its CQ; both sides keep window + 1 receives posted; the server reads every completion
 * with fi_cq_read and, when that finds none (a transition to idle, counted), with fi_cq_sread, and
 * grants window / 2 credits in one message per window / 2 receives reposted. The server prints
 * STREAM prov=.. received=.. completions=.. idle=.. cpu_us_per_msg=.. msgs_per_s=.. (its
 * counts over the whole stream, warmup included; the rate and CPU over the -I messages).
 *
 * Uses the public libfabric API only. Exit status 0 on success, 1 on any error, 2 on usage,
 * 3 when the provider does not support the mode (e.g. a wait object it refuses).
 *
 * The parts (bench.h): link.cpp, the connection and one round of the ping-pong; pingpong.cpp,
 * stream.cpp and reads.cpp, what each measures. */
#include "bench.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace
{

using vwait_bench::mode;
using vwait_bench::options;

struct mode_desc {
	const char *name;
	mode how;
	enum fi_wait_obj wait_obj;
	const char *what;
};

const mode_desc modes[] = {
    {"spin", mode::spin, FI_WAIT_NONE, "busy-poll fi_cq_read"},
    {"spin-unspec", mode::spin, FI_WAIT_UNSPEC,
     "busy-poll fi_cq_read, FI_WAIT_UNSPEC CQ (what a waitable CQ costs a spinning reader)"},
    {"sread-unspec", mode::sread, FI_WAIT_UNSPEC, "fi_cq_sread, FI_WAIT_UNSPEC CQ"},
    {"sread-fd", mode::sread, FI_WAIT_FD, "fi_cq_sread, FI_WAIT_FD CQ"},
    {"sread-pollfd", mode::sread, FI_WAIT_POLLFD, "fi_cq_sread, FI_WAIT_POLLFD CQ"},
    {"sread-mutex", mode::sread, FI_WAIT_MUTEX_COND, "fi_cq_sread, FI_WAIT_MUTEX_COND CQ"},
    {"sread-yield", mode::sread, FI_WAIT_YIELD, "fi_cq_sread, FI_WAIT_YIELD CQ"},
    {"trywait-poll", mode::trywait_poll, FI_WAIT_FD,
     "fi_trywait + poll() on FI_GETWAIT fd (fi_poll(3) loop)"},
    {"waitset", mode::waitset, FI_WAIT_FD,
     "CQ and the connection's EQ in an FI_WAIT_FD wait set, fi_wait + fi_cq_read"},
    {"pollset", mode::pollset, FI_WAIT_NONE, "CQ in a poll set, fi_poll until it names the CQ"},
    {"cntr-wait", mode::cntr_wait, FI_WAIT_FD,
     "fi_cntr_wait on FI_WAIT_FD send/recv counters, CQ with FI_SELECTIVE_COMPLETION"},
    {"cntr-wait-unspec", mode::cntr_wait, FI_WAIT_UNSPEC,
     "fi_cntr_wait on FI_WAIT_UNSPEC send/recv counters, CQ with FI_SELECTIVE_COMPLETION"},
    {"cntr-spin", mode::cntr_wait, FI_WAIT_NONE,
     "busy-poll fi_cntr_read on FI_WAIT_NONE send/recv counters, CQ with FI_SELECTIVE_COMPLETION"},
    {"empty-read", mode::empty_read, FI_WAIT_NONE,
     "no peer: fi_cq_read on an empty CQ, -I times (instruction counts under callgrind)"},
};

void usage()
{
	fprintf(stderr, "usage: fi_vwait_bench [-p provider] [-e msg|rdm] [-m mode] [-S size] "
	                "[-I iterations] [-W warmup] [-N set members] [-T think,... [-B us]] [-D] "
	                "[-R bursts [-G go_fifo,done_fifo] [-T think]] [-X window] [-C seconds] "
	                "[-A own address] [-P port] [server address]\nmodes:\n");
	for (const mode_desc &m : modes)
		fprintf(stderr, "  %-13s %s\n", m.name, m.what);
}

bool parse(int argc, char **argv, options *o)
{
	int c;
	while ((c = getopt(argc, argv, "p:e:m:S:I:P:W:N:T:B:R:G:C:X:A:Dh")) != -1) {
		switch (c) {
		case 'p':
			o->prov = optarg;
			break;
		case 'e':
			if (strcmp(optarg, "rdm") != 0 && strcmp(optarg, "msg") != 0) {
				fprintf(stderr, "-e: msg or rdm, not '%s'\n", optarg);
				return false;
			}
			o->rdm = strcmp(optarg, "rdm") == 0;
			break;
		case 'm': {
			bool found = false;
			for (const mode_desc &m : modes)
				if (strcmp(m.name, optarg) == 0) {
					o->mode_name = m.name;
					o->how = m.how;
					o->wait_obj = m.wait_obj;
					found = true;
				}
			if (!found) {
				fprintf(stderr, "unknown mode '%s'\n", optarg);
				return false;
			}
			break;
		}
		case 'S':
			o->size = strtoull(optarg, nullptr, 0);
			break;
		case 'I':
			o->iters = atoi(optarg);
			break;
		case 'W':
			o->warmup = atoi(optarg);
			break;
		case 'P':
			o->port = optarg;
			break;
		case 'N':
			o->members = atoi(optarg);
			break;
		case 'T': {
			o->thinks.clear();
			for (char *p = optarg; *p;) {
				char *end = nullptr;
				long t = strtol(p, &end, 10);
				if (end == p || t < 0 || t > 10000000)
					return false;
				o->thinks.push_back(static_cast<int>(t));
				p = *end == ',' ? end + 1 : end;
			}
			break;
		}
		case 'B':
			o->budget_us = atol(optarg);
			break;
		case 'C':
			o->cm_wait_s = atoi(optarg);
			if (o->cm_wait_s <= 0 || o->cm_wait_s > 3600) {
				fprintf(stderr, "-C: 1 to 3600 seconds, not '%s'\n", optarg);
				return false;
			}
			break;
		case 'D':
			o->data_first = true;
			break;
		case 'X':
			o->window = atoi(optarg);
			if (o->window < 2 || o->window > 48)
				return false;
			break;
		case 'A':
			o->source = optarg;
			break;
		case 'R':
			o->bursts = atoi(optarg);
			if (o->bursts <= 0)
				return false;
			break;
		case 'G': {
			const char *comma = strchr(optarg, ',');
			if (!comma || comma == optarg || !comma[1]) {
				fprintf(stderr, "-G: go_fifo,done_fifo\n");
				return false;
			}
			o->go_fifo.assign(optarg, static_cast<size_t>(comma - optarg));
			o->done_fifo = comma + 1;
			break;
		}
		default:
			return false;
		}
	}
	if (optind < argc)
		o->server = argv[optind];
	if (o->rdm && o->how != mode::spin && o->how != mode::sread && o->how != mode::empty_read) {
		fprintf(stderr, "-e rdm: modes spin, sread-* and empty-read only\n");
		return false;
	}
	if (o->bursts && (o->how == mode::empty_read || o->thinks.size() > 1)) {
		fprintf(stderr, "-R: not with empty-read, one -T think time at most\n");
		return false;
	}
	if (o->window && (o->rdm || o->bursts || !o->thinks.empty() ||
	                  (o->server.empty() && o->how != mode::sread) || o->size == 0)) {
		fprintf(stderr, "-X: -e msg, sread-* modes on the server, -S >= 1, no -R or -T\n");
		return false;
	}
	if (!o->go_fifo.empty() && !o->bursts) {
		fprintf(stderr, "-G: with -R only\n");
		return false;
	}
	if (o->rdm && o->data_first) {
		fprintf(stderr, "-e rdm: no -D (ofi_rxm copies the answer in fi_cq_read)\n");
		return false;
	}
	return o->iters > 0 && o->warmup >= 0 && o->members >= 1 && o->budget_us > 0;
}

} // namespace

int main(int argc, char **argv)
{
	vwait_bench::options opt;
	if (!parse(argc, argv, &opt)) {
		usage();
		return 2;
	}
	setvbuf(stdout, nullptr, _IOLBF, 0);
	vwait_bench::link l(opt);
	int ret;
	if (opt.how == mode::empty_read)
		ret = vwait_bench::run_empty_reads(l, opt);
	else if ((ret = l.connect()) == 0)
		ret = opt.window ? vwait_bench::run_stream(l, opt)
		                 : vwait_bench::run_pingpong(l, opt);
	if (ret && l.unsupported()) {
		printf("UNSUPPORTED prov=%s mode=%s\n", opt.prov.c_str(), opt.mode_name.c_str());
		return vwait_bench::exit_unsupported;
	}
	return ret ? 1 : 0;
}
