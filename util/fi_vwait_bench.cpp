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
 * 3 when the provider does not support the mode (e.g. a wait object it refuses). */
#include "vwait/fi_deprecated.h"

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_ext_vwait.h>

#include "vwait/policy_stats.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <unistd.h>

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

/* Every fi_cq_read of the benchmark, out of line so that callgrind can count it alone
 * (--toggle-collect=vwait_bench_cq_read); counts the reads that found nothing and the others. */
static unsigned long long bench_reads_empty, bench_reads_full;
extern "C" __attribute__((noinline)) ssize_t vwait_bench_cq_read(struct fid_cq *cq, void *buf,
                                                                 size_t count)
{
	ssize_t n = fi_cq_read(cq, buf, count);
	if (n == -FI_EAGAIN)
		bench_reads_empty++;
	else
		bench_reads_full++;
	return n;
}

/* fi_send and fi_recv of the benchmark, out of line for the same reason
 * (--toggle-collect=vwait_bench_send, vwait_bench_recv) */
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

namespace
{

constexpr int exit_unsupported = 3;

enum class mode { spin, sread, trywait_poll, waitset, pollset, cntr_wait, empty_read };

/* one phase of a think-time run */
struct phase {
	int think_us;
	int iters;
};

struct options {
	std::string prov = "vwait";
	std::string mode_name = "sread-fd";
	mode how = mode::sread;
	enum fi_wait_obj wait_obj = FI_WAIT_FD;
	size_t size = 64;
	int iters = 1000;
	int warmup = 20;
	int members = 1;         /* -N: CQs in the wait set / poll set */
	std::vector<int> thinks; /* -T: think times (us) of a think-time run; empty: none */
	long budget_us = 300000; /* -B: think time per phase at most */
	bool data_first = false; /* -D: the client reads its CQ once the answer's bytes came */
	bool rdm = false;        /* -e rdm: FI_EP_RDM endpoints, no connection */
	int bursts = 0;          /* -R: bursts of warmup + iters rounds; 0: one plain run */
	std::string go_fifo, done_fifo; /* -G go,done: a driver's turns */
	std::string port = "7471";
	std::string server; /* empty: be the server */
	std::string source; /* -A: the server's own address (which device); empty: any */
	int cm_wait_s = 30; /* -C: how long each side waits for a connection event */
	int window = 0;     /* -X: a one-way stream with this many receives posted; 0: none */
};

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

/* The phases of a think-time run: -I rounds at think 0, fewer when the think is long (at most
 * budget_us of think per phase, at least 20 rounds). Both sides compute the same plan. */
std::vector<phase> plan_of(const std::vector<int> &thinks, int iters, long budget_us)
{
	std::vector<phase> p;
	for (int t : thinks) {
		long n = t > 0 ? budget_us / t : iters;
		p.push_back({t, static_cast<int>(std::max<long>(20, std::min<long>(iters, n)))});
	}
	return p;
}

/* The threads of this process now (/proc/self/task): the provider's own show here (vwait's
 * EQ has one). */
/* The error entry a read that returned -FI_EAVAIL left: printed after `what`, its code
 * returned (negative). */
int cq_error(struct fid_cq *cq, const char *what)
{
	struct fi_cq_err_entry err = {};
	fi_cq_readerr(cq, &err, 0);
	fprintf(stderr, "%s: %s (prov_errno %d)\n", what, fi_strerror(err.err), err.prov_errno);
	return -err.err;
}

int thread_count()
{
	int n = 0;
	if (DIR *d = opendir("/proc/self/task")) {
		while (struct dirent *e = readdir(d))
			if (e->d_name[0] != '.')
				n++;
		closedir(d);
	}
	return n;
}

double cpu_now_us()
{
	struct timespec ts = {};
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* the client's think time: a busy wait when short (a sleep would overshoot it), a sleep else */
void think(int us)
{
	if (us <= 0)
		return;
	if (us < 200) {
		auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
		while (std::chrono::steady_clock::now() < until) {
		}
		return;
	}
	struct timespec ts = {us / 1000000, (us % 1000000) * 1000L};
	nanosleep(&ts, nullptr);
}

void usage()
{
	fprintf(stderr, "usage: fi_vwait_bench [-p provider] [-e msg|rdm] [-m mode] [-S size] "
	                "[-I iterations] [-W warmup] [-N set members] [-T think,... [-B us]] [-D] "
	                "[-R bursts [-G go_fifo,done_fifo] [-T think]] [-X window] [-C seconds] "
	                "[-A own address] [-P port] [server address]\nmodes:\n");
	for (const mode_desc &m : modes)
		fprintf(stderr, "  %-13s %s\n", m.name, m.what);
}

#define FI_CALL(call)                                                                              \
	do {                                                                                       \
		int ret_ = static_cast<int>(call);                                                 \
		if (ret_ < 0) {                                                                    \
			fprintf(stderr, "%s:%d: %s: %s (%d)\n", __FILE__, __LINE__, #call,         \
			        fi_strerror(-ret_), ret_);                                         \
			return ret_;                                                               \
		}                                                                                  \
	} while (0)

class bench
{
public:
	explicit bench(const options &o) : opt_(o) {}
	~bench() { teardown(); }
	bench(const bench &) = delete;
	bench &operator=(const bench &) = delete;

	int run()
	{
		FI_CALL(open_fabric());
		if (opt_.how == mode::empty_read)
			return empty_read();
		if (opt_.rdm)
			FI_CALL(opt_.server.empty() ? rdm_server() : rdm_client());
		else
			FI_CALL(opt_.server.empty() ? accept_one() : connect_one());
		return pingpong();
	}

	bool unsupported() const { return unsupported_; }

private:
	int open_fabric()
	{
		struct fi_info *hints = fi_allocinfo();
		if (!hints)
			return -FI_ENOMEM;
		hints->ep_attr->type = opt_.rdm ? FI_EP_RDM : FI_EP_MSG;
		hints->caps = FI_MSG;
		hints->mode = FI_CONTEXT;
		hints->domain_attr->mr_mode =
		    FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
		hints->fabric_attr->prov_name = strdup(opt_.prov.c_str());
		const char *node = opt_.server.empty() ? nullptr : opt_.server.c_str();
		uint64_t flags = opt_.server.empty() ? FI_SOURCE : 0;
		if (opt_.server.empty() && !opt_.source.empty())
			node = opt_.source.c_str();
		if (opt_.how == mode::empty_read) {
			node = nullptr;
			flags = 0;
		}
		int ret =
		    fi_getinfo(FI_VERSION(1, 5), node, opt_.port.c_str(), flags, hints, &info_);
		fi_freeinfo(hints);
		FI_CALL(ret);
		FI_CALL(fi_fabric(info_->fabric_attr, &fabric_, nullptr));
		if (opt_.rdm)
			return 0; /* no connection, no EQ */
		struct fi_eq_attr eq_attr = {};
		eq_attr.wait_obj = FI_WAIT_UNSPEC;
		if (opt_.how == mode::waitset) {
			/* the EQ of the connection is a member of the wait set too */
			struct fi_wait_attr wattr = {};
			wattr.wait_obj = FI_WAIT_FD;
			ret = fi_sets::wait_open(fabric_, &wattr, &waitset_);
			if (ret) {
				fprintf(stderr, "fi_wait_open(FI_WAIT_FD): %s\n",
				        fi_strerror(-ret));
				unsupported_ = ret == -FI_ENOSYS || ret == -FI_EINVAL;
				return ret;
			}
			eq_attr.wait_obj = FI_WAIT_SET;
			eq_attr.wait_set = waitset_;
		}
		ret = fi_eq_open(fabric_, &eq_attr, &eq_, nullptr);
		if (ret) {
			fprintf(stderr, "fi_eq_open(wait_obj %d): %s\n", eq_attr.wait_obj,
			        fi_strerror(-ret));
			unsupported_ = ret == -FI_ENOSYS || ret == -FI_EINVAL;
			return ret;
		}
		return 0;
	}

	/* the next CM event, waited for by fi_eq_sread */
	int cm_event(uint32_t want, struct fi_eq_cm_entry *entry)
	{
		uint32_t event = 0;
		ssize_t n =
		    fi_eq_sread(eq_, &event, entry, sizeof(*entry), opt_.cm_wait_s * 1000, 0);
		if (n == -FI_EAVAIL) {
			struct fi_eq_err_entry err = {};
			fi_eq_readerr(eq_, &err, 0);
			fprintf(stderr, "CM error: %s\n", fi_strerror(err.err));
			return -err.err;
		}
		if (n < 0) {
			fprintf(stderr, "fi_eq_sread: %s\n", fi_strerror(static_cast<int>(-n)));
			return static_cast<int>(n);
		}
		if (event != want) {
			fprintf(stderr, "CM event %u, expected %u\n", event, want);
			return -FI_EOTHER;
		}
		return 0;
	}

	int accept_one()
	{
		FI_CALL(fi_passive_ep(fabric_, info_, &pep_, nullptr));
		FI_CALL(fi_pep_bind(pep_, &eq_->fid, 0));
		FI_CALL(fi_listen(pep_));
		printf("LISTENING prov=%s\n", opt_.prov.c_str()); /* test drivers wait for it */
		fflush(stdout);
		struct fi_eq_cm_entry entry = {};
		FI_CALL(cm_event(FI_CONNREQ, &entry));
		conn_info_ = entry.info;
		FI_CALL(fi_domain(fabric_, conn_info_, &domain_, nullptr));
		FI_CALL(open_cq());
		FI_CALL(fi_endpoint(domain_, conn_info_, &ep_, nullptr));
		FI_CALL(bind_ep());
		FI_CALL(post_recv());
		FI_CALL(fi_accept(ep_, nullptr, 0));
		FI_CALL(cm_event(FI_CONNECTED, &entry));
		return 0;
	}

	int connect_one()
	{
		FI_CALL(fi_domain(fabric_, info_, &domain_, nullptr));
		FI_CALL(open_cq());
		FI_CALL(fi_endpoint(domain_, info_, &ep_, nullptr));
		FI_CALL(bind_ep());
		FI_CALL(post_recv());
		FI_CALL(fi_connect(ep_, info_->dest_addr, nullptr, 0));
		struct fi_eq_cm_entry entry = {};
		FI_CALL(cm_event(FI_CONNECTED, &entry));
		return 0;
	}

	/* -e rdm: the domain, CQ, AV and endpoint, enabled, with receive buffers of at least
	 * name_max bytes (the client's name comes in one) */
	static constexpr size_t name_max = 256;
	int rdm_endpoint()
	{
		FI_CALL(fi_domain(fabric_, info_, &domain_, nullptr));
		FI_CALL(open_cq());
		struct fi_av_attr av_attr = {};
		av_attr.type = FI_AV_TABLE;
		FI_CALL(fi_av_open(domain_, &av_attr, &av_, nullptr));
		FI_CALL(fi_endpoint(domain_, info_, &ep_, nullptr));
		return bind_ep();
	}

	/* the server learns the client's address from its first message */
	int rdm_server()
	{
		FI_CALL(rdm_endpoint());
		FI_CALL(post_recv(name_max));
		printf("LISTENING prov=%s\n", opt_.prov.c_str()); /* test drivers wait for it */
		fflush(stdout);
		FI_CALL(setup_completion(&rctx_));
		FI_CALL(insert_peer(rbuf_.data()));
		return post_recv();
	}

	/* the client sends its name and waits until it went: ofi_rxm connects meanwhile, and
	 * none of it is counted with the ping-pong's calls (plain fi_send and fi_cq_read) */
	int rdm_client()
	{
		FI_CALL(rdm_endpoint());
		FI_CALL(insert_peer(info_->dest_addr));
		FI_CALL(post_recv());
		size_t len = buf_.size();
		FI_CALL(fi_getname(&ep_->fid, buf_.data(), &len));
		for (;;) {
			ssize_t ret =
			    fi_send(ep_, buf_.data(), len, fi_mr_desc(mr_), peer_, &sctx_);
			if (ret == 0)
				break;
			if (ret != -FI_EAGAIN)
				FI_CALL(ret);
			fi_cq_read(cq_, nullptr, 0); /* progress */
		}
		return setup_completion(&sctx_);
	}

	/* -e rdm: spins on fi_cq_read until the completion of ctx, the only one expected */
	int setup_completion(void *ctx)
	{
		for (;;) {
			struct fi_cq_entry e = {};
			ssize_t n = fi_cq_read(cq_, &e, 1);
			if (n == -FI_EAGAIN)
				continue;
			if (n == 1 && e.op_context == ctx)
				return 0;
			if (n == -FI_EAVAIL)
				return cq_error(cq_, "address exchange");
			fprintf(stderr, "address exchange: unexpected completion (%zd)\n", n);
			return n < 0 ? static_cast<int>(n) : -FI_EOTHER;
		}
	}

	int insert_peer(const void *addr)
	{
		int n = fi_av_insert(av_, addr, 1, &peer_, 0, nullptr);
		if (n != 1) {
			fprintf(stderr, "fi_av_insert: %d\n", n);
			return n < 0 ? n : -FI_EINVAL;
		}
		return 0;
	}

	int open_cq()
	{
		struct fi_cq_attr attr = {};
		attr.format = FI_CQ_FORMAT_CONTEXT;
		attr.size = 64;
		attr.wait_obj = opt_.wait_obj;
		if (opt_.how == mode::cntr_wait) {
			/* the CQ stays empty (selective completion): counters tell */
			attr.wait_obj = FI_WAIT_NONE;
			struct fi_cntr_attr cattr = {};
			cattr.events = FI_CNTR_EVENTS_COMP;
			cattr.wait_obj = opt_.wait_obj;
			int ret = fi_cntr_open(domain_, &cattr, &rcntr_, nullptr);
			if (!ret)
				ret = fi_cntr_open(domain_, &cattr, &scntr_, nullptr);
			if (ret) {
				fprintf(stderr, "fi_cntr_open(wait_obj %d): %s\n", cattr.wait_obj,
				        fi_strerror(-ret));
				unsupported_ = ret == -FI_ENOSYS || ret == -FI_EINVAL;
				return ret;
			}
		}
		if (opt_.how == mode::waitset) {
			attr.wait_obj = FI_WAIT_SET;
			attr.wait_set = waitset_;
		}
		int ret = fi_cq_open(domain_, &attr, &cq_, &cq_) /* context: itself */;
		if (ret) {
			fprintf(stderr, "fi_cq_open(wait_obj %d): %s\n", attr.wait_obj,
			        fi_strerror(-ret));
			unsupported_ = ret == -FI_ENOSYS || ret == -FI_EINVAL;
			return ret;
		}
		const bool in_set = opt_.how == mode::pollset || opt_.how == mode::waitset;
		/* idle members: half before the CQ in use, half after it */
		const int idle = in_set ? opt_.members - 1 : 0;
		struct fi_cq_attr idle_attr = attr;
		idle_attr.size = 16;
		for (int i = 0; i < idle; i++) {
			struct fid_cq *c = nullptr;
			FI_CALL(fi_cq_open(domain_, &idle_attr, &c, nullptr));
			idle_.push_back(c);
		}
		if (opt_.how == mode::pollset) {
			struct fi_poll_attr pattr = {};
			ret = fi_sets::poll_open(domain_, &pattr, &pollset_);
			for (int i = 0; !ret && i < idle / 2; i++)
				ret = fi_sets::poll_add(pollset_, &idle_[i]->fid, 0);
			if (!ret)
				ret = fi_sets::poll_add(pollset_, &cq_->fid, 0);
			for (int i = idle / 2; !ret && i < idle; i++)
				ret = fi_sets::poll_add(pollset_, &idle_[i]->fid, 0);
			if (ret) {
				fprintf(stderr, "fi_poll_open/add: %s\n", fi_strerror(-ret));
				unsupported_ = ret == -FI_ENOSYS;
				return ret;
			}
		}
		if (opt_.how == mode::trywait_poll) {
			ret = fi_control(&cq_->fid, FI_GETWAIT, &wait_fd_);
			if (ret) {
				fprintf(stderr, "fi_control(FI_GETWAIT): %s\n", fi_strerror(-ret));
				unsupported_ = true;
				return ret;
			}
		}
		return 0;
	}

	int bind_ep()
	{
		if (opt_.rdm)
			FI_CALL(fi_ep_bind(ep_, &av_->fid, 0));
		else
			FI_CALL(fi_ep_bind(ep_, &eq_->fid, 0));
		if (opt_.how == mode::cntr_wait) {
			FI_CALL(fi_ep_bind(ep_, &cq_->fid,
			                   FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION));
			int ret = fi_ep_bind(ep_, &rcntr_->fid, FI_RECV);
			if (!ret)
				ret = fi_ep_bind(ep_, &scntr_->fid, FI_SEND);
			if (ret) {
				fprintf(stderr, "fi_ep_bind(counter): %s\n", fi_strerror(-ret));
				unsupported_ = ret == -FI_ENOSYS;
				return ret;
			}
		} else {
			FI_CALL(fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV));
		}
		FI_CALL(fi_enable(ep_));
		const size_t bytes = std::max<size_t>(opt_.size, opt_.rdm ? name_max : 1);
		buf_.assign(bytes, 0);
		rbuf_.assign(bytes, 0);
		FI_CALL(
		    fi_mr_reg(domain_, buf_.data(), buf_.size(), FI_SEND, 0, 0, 0, &mr_, nullptr));
		FI_CALL(fi_mr_reg(domain_, rbuf_.data(), rbuf_.size(), FI_RECV, 0, 1, 0, &rmr_,
		                  nullptr));
		return 0;
	}

	int post_recv() { return post_recv(opt_.size); }
	int post_recv(size_t len)
	{
		for (;;) {
			ssize_t ret = vwait_bench_recv(ep_, rbuf_.data(), len, fi_mr_desc(rmr_),
			                               FI_ADDR_UNSPEC, &rctx_);
			if (ret != -FI_EAGAIN)
				return static_cast<int>(ret);
		}
	}

	int post_send()
	{
		for (;;) {
			ssize_t ret = vwait_bench_send(ep_, buf_.data(), opt_.size, fi_mr_desc(mr_),
			                               peer_, &sctx_);
			if (ret != -FI_EAGAIN)
				return static_cast<int>(ret);
			vwait_bench_cq_read(cq_, nullptr, 0); /* progress */
		}
	}

	/* one completion, waited for as the mode says */
	int wait_one(struct fi_cq_entry *e)
	{
		for (;;) {
			ssize_t n;
			switch (opt_.how) {
			case mode::spin:
			case mode::cntr_wait:  /* not used: cntr_round waits on counters */
			case mode::empty_read: /* not used */
				n = vwait_bench_cq_read(cq_, e, 1);
				if (n == -FI_EAGAIN && opt_.bursts && opt_.server.empty() &&
				    opt_.go_fifo.empty())
					backoff();
				else
					empty_run_ = 0;
				break;
			case mode::sread:
				n = fi_cq_sread(cq_, e, 1, nullptr, -1);
				break;
			case mode::trywait_poll: {
				n = vwait_bench_cq_read(cq_, e, 1);
				if (n != -FI_EAGAIN)
					break;
				struct fid *fids[1] = {&cq_->fid};
				if (fi_trywait(fabric_, fids, 1) == FI_SUCCESS) {
					struct pollfd pfd = {wait_fd_, POLLIN, 0};
					poll(&pfd, 1, -1);
				}
				continue;
			}
			case mode::pollset: {
				void *ctx[1] = {nullptr};
				int k = fi_sets::poll(pollset_, ctx, 1);
				if (k < 0) {
					fprintf(stderr, "fi_poll: %s\n", fi_strerror(-k));
					return k;
				}
				if (k == 0)
					continue;
				if (ctx[0] != &cq_) {
					fprintf(stderr,
					        "fi_poll named %p, not the CQ in use (%p)\n",
					        ctx[0], (void *)&cq_);
					return -FI_EOTHER;
				}
				n = vwait_bench_cq_read(cq_, e, 1);
				break;
			}
			case mode::waitset: {
				n = vwait_bench_cq_read(cq_, e, 1);
				if (n != -FI_EAGAIN)
					break;
				int ret = fi_sets::wait(waitset_, -1);
				if (ret && ret != -FI_ETIMEDOUT && ret != -FI_EAGAIN) {
					fprintf(stderr, "fi_wait: %s\n", fi_strerror(-ret));
					return ret;
				}
				continue;
			}
			}
			if (n == 1)
				return 0;
			if (n == -FI_EAGAIN)
				continue;
			if (n == -FI_EAVAIL)
				return cq_error(cq_, "completion error");
			fprintf(stderr, "reading the CQ: %s\n", fi_strerror(static_cast<int>(-n)));
			return static_cast<int>(n);
		}
	}

	/* -R, the server between bursts: after 2 ms without a message, 500 us of sleep per read
	 * (the clock is read once per 256 empty reads, to stay out of the spinning loop) */
	void backoff()
	{
		if (++empty_run_ % 256 != 0)
			return;
		auto now = std::chrono::steady_clock::now();
		if (empty_run_ == 256)
			idle_since_ = now;
		else if (now - idle_since_ > std::chrono::milliseconds(2)) {
			struct timespec ts = {0, 500000};
			nanosleep(&ts, nullptr);
		}
	}

	/* -R: bursts of warmup + iters rounds, each timed apart (the client prints BURST lines);
	 * with -G, each burst waits for the driver's turn */
	int burst_run()
	{
		const bool client = !opt_.server.empty();
		int go = -1, done = -1;
		if (!opt_.go_fifo.empty()) {
			go = open(opt_.go_fifo.c_str(), O_RDONLY | O_CLOEXEC);
			done = open(opt_.done_fifo.c_str(), O_WRONLY | O_CLOEXEC);
			if (go < 0 || done < 0) {
				perror("-G fifo");
				return -FI_EIO;
			}
		}
		/* -T with -R: the client thinks the first think time before every round, and a
		 * burst's latency counts the rounds alone */
		const int think_us = opt_.thinks.empty() ? 0 : opt_.thinks[0];
		int ret = 0, i = 0;
		for (int b = 0; b < opt_.bursts && !ret; b++) {
			char c = 0;
			if (go >= 0 && read(go, &c, 1) != 1) {
				fprintf(stderr, "-G: the driver went away\n");
				ret = -FI_EIO;
				break;
			}
			std::chrono::steady_clock::duration spent{};
			std::chrono::steady_clock::time_point t0;
			for (int k = 0; k < opt_.warmup + opt_.iters && !ret; k++) {
				if (client && think_us)
					think(think_us);
				if (k >= opt_.warmup && (k == opt_.warmup || think_us))
					t0 = std::chrono::steady_clock::now();
				ret = round(client, i++);
				if (k >= opt_.warmup && think_us)
					spent += std::chrono::steady_clock::now() - t0;
			}
			if (ret)
				break;
			if (!think_us)
				spent = std::chrono::steady_clock::now() - t0;
			double usec = std::chrono::duration<double, std::micro>(spent).count();
			if (client)
				printf("BURST prov=%s burst=%d iters=%d lat_us=%.3f\n",
				       opt_.prov.c_str(), b, opt_.iters, usec / opt_.iters / 2);
			if (done >= 0 && write(done, &c, 1) != 1) {
				fprintf(stderr, "-G: the driver went away\n");
				ret = -FI_EIO;
			}
		}
		if (!ret)
			ret = drain(i);
		if (go >= 0)
			close(go);
		if (done >= 0)
			close(done);
		if (!ret && client)
			printf("RESULT prov=%s mode=%s size=%zu bursts=%d iters=%d threads=%d\n",
			       opt_.prov.c_str(), opt_.mode_name.c_str(), opt_.size, opt_.bursts,
			       opt_.iters, thread_count());
		return ret;
	}

	/* cntr-wait: blocks until counter c reaches v (cntr-spin: polls it) */
	int cntr_reach(struct fid_cntr *c, uint64_t v)
	{
		int ret = 0;
		if (opt_.wait_obj == FI_WAIT_NONE) {
			const uint64_t errs = fi_cntr_readerr(c);
			while (fi_cntr_read(c) < v) {
				if (fi_cntr_readerr(c) != errs) {
					ret = -FI_EAVAIL;
					break;
				}
			}
		} else {
			ret = fi_cntr_wait(c, v, -1);
		}
		if (ret == -FI_EAVAIL)
			fprintf(stderr, "counter: %llu operations failed\n",
			        static_cast<unsigned long long>(fi_cntr_readerr(c)));
		else if (ret)
			fprintf(stderr, "fi_cntr_wait: %s\n", fi_strerror(-ret));
		return ret;
	}

	/* one round of the ping-pong, waited for with counters (i counts from 0) */
	int cntr_round(bool client, uint64_t i)
	{
		if (client) {
			memset(buf_.data(), static_cast<int>(i & 0xff), opt_.size);
			FI_CALL(post_send());
			FI_CALL(cntr_reach(rcntr_, i + 1));
			FI_CALL(cntr_reach(scntr_, i + 1));
			if (opt_.size && rbuf_[opt_.size - 1] != static_cast<char>(i & 0xff)) {
				fprintf(stderr, "round %llu: wrong data\n",
				        static_cast<unsigned long long>(i));
				return -FI_EIO;
			}
			return post_recv();
		}
		FI_CALL(cntr_reach(rcntr_, i + 1));
		FI_CALL(cntr_reach(scntr_, i)); /* the previous pong went */
		memcpy(buf_.data(), rbuf_.data(), opt_.size);
		FI_CALL(post_recv());
		return post_send();
	}

	/* waits until both the send and the receive of this round completed */
	int finish_round()
	{
		bool sent = false, received = false;
		while (!sent || !received) {
			struct fi_cq_entry e = {};
			FI_CALL(wait_one(&e));
			if (e.op_context == &sctx_)
				sent = true;
			else if (e.op_context == &rctx_)
				received = true;
		}
		return 0;
	}

	/* one round of the ping-pong (i counts every round from 0): the client sends and waits
	 * for the answer, the server waits for a message and answers it */
	int round(bool client, int i)
	{
		if (opt_.how == mode::cntr_wait)
			return cntr_round(client, static_cast<uint64_t>(i));
		if (client) {
			memset(buf_.data(), i & 0xff, opt_.size);
			FI_CALL(post_send());
			if (opt_.data_first && opt_.size)
				while (__atomic_load_n(&rbuf_[opt_.size - 1], __ATOMIC_ACQUIRE) !=
				       static_cast<char>(i & 0xff)) {
				}
			FI_CALL(finish_round());
			if (opt_.size && rbuf_[opt_.size - 1] != static_cast<char>(i & 0xff)) {
				fprintf(stderr, "round %d: wrong data\n", i);
				return -FI_EIO;
			}
			return post_recv();
		}
		/* wait for the ping (the previous pong's send completion may come before or after
		 * it), repost, answer with the same bytes */
		bool pinged = false;
		while (!pinged || send_pending_) {
			struct fi_cq_entry e = {};
			FI_CALL(wait_one(&e));
			if (e.op_context == &rctx_ && !pinged)
				pinged = true;
			else if (e.op_context == &sctx_ && send_pending_)
				send_pending_ = false;
			else {
				fprintf(stderr, "server: unexpected completion\n");
				return -FI_EOTHER;
			}
		}
		memcpy(buf_.data(), rbuf_.data(), opt_.size);
		FI_CALL(post_recv());
		FI_CALL(post_send());
		send_pending_ = true;
		return 0;
	}

	/* the server's last pong must have gone before it closes */
	int drain(int rounds)
	{
		if (opt_.how == mode::cntr_wait && opt_.server.empty())
			FI_CALL(cntr_reach(scntr_, static_cast<uint64_t>(rounds)));
		while (send_pending_) {
			struct fi_cq_entry e = {};
			FI_CALL(wait_one(&e));
			if (e.op_context == &sctx_)
				send_pending_ = false;
		}
		return 0;
	}

	/* -X: reposts slot i of the stream's receive buffers (i == window: rbuf_) */
	int stream_repost(size_t i)
	{
		if (i == stream_ctx_.size())
			return post_recv();
		for (;;) {
			ssize_t ret = vwait_bench_recv(ep_, &stream_buf_[i * opt_.size], opt_.size,
			                               fi_mr_desc(stream_mr_), FI_ADDR_UNSPEC,
			                               &stream_ctx_[i]);
			if (ret != -FI_EAGAIN)
				return static_cast<int>(ret);
		}
	}

	/* -X: the slot of a receive's context (window: rbuf_'s) */
	size_t stream_slot(void *ctx) const
	{
		if (ctx == &rctx_)
			return stream_ctx_.size();
		return static_cast<size_t>(static_cast<struct fi_context *>(ctx) -
		                           stream_ctx_.data());
	}

	/* -X, the server: one completion, from fi_cq_read, or from fi_cq_sread once the CQ is
	 * found empty (counted in *idle) */
	int stream_wait(struct fi_cq_entry *e, unsigned long long *idle)
	{
		ssize_t n = vwait_bench_cq_read(cq_, e, 1);
		if (n == -FI_EAGAIN) {
			++*idle;
			do
				n = fi_cq_sread(cq_, e, 1, nullptr, -1);
			while (n == -FI_EAGAIN);
		}
		if (n == 1)
			return 0;
		if (n == -FI_EAVAIL)
			return cq_error(cq_, "completion error");
		fprintf(stderr, "fi_cq_sread: %s\n", fi_strerror(static_cast<int>(-n)));
		return n < 0 ? static_cast<int>(n) : -FI_EOTHER;
	}

	/* -X: the one-way stream (see the header): credits in grants of window / 2; the client
	 * counts the server's messages, the last of which says that everything came */
	int stream_run()
	{
		const bool client = !opt_.server.empty();
		const size_t w = static_cast<size_t>(opt_.window),
		             grant = std::max<size_t>(w / 2, 1);
		const unsigned long long total =
		    static_cast<unsigned long long>(opt_.warmup) + opt_.iters;
		stream_buf_.assign(w * opt_.size, 0);
		stream_ctx_.assign(w, fi_context{});
		FI_CALL(fi_mr_reg(domain_, stream_buf_.data(), stream_buf_.size(), FI_RECV, 0, 2, 0,
		                  &stream_mr_, nullptr));
		for (size_t i = 0; i < w; i++)
			FI_CALL(stream_repost(i));
		if (client) {
			/* the server's messages: the first grant (the window), one grant per grant
			 * receives but the last, the last message; their receives are the slots */
			const unsigned long long expected = 2 + (total - 1) / grant;
			unsigned long long sent = 0, sends_done = 0, got = 0;
			size_t credits = 0;
			while (got < expected || sends_done < sent) {
				while (credits > 0 && sent < total) {
					FI_CALL(post_send());
					credits--;
					sent++;
				}
				struct fi_cq_entry e = {};
				ssize_t n = vwait_bench_cq_read(cq_, &e, 1);
				if (n == -FI_EAGAIN)
					continue;
				if (n != 1) {
					fprintf(stderr, "client: reading the CQ: %s\n",
					        fi_strerror(static_cast<int>(-n)));
					return n < 0 ? static_cast<int>(n) : -FI_EOTHER;
				}
				if (e.op_context == &sctx_) {
					sends_done++;
					continue;
				}
				credits += got++ == 0 ? w : grant;
				FI_CALL(stream_repost(stream_slot(e.op_context)));
			}
			printf(
			    "RESULT prov=%s mode=stream size=%zu iters=%d window=%zu sent=%llu\n",
			    opt_.prov.c_str(), opt_.size, opt_.iters, w, sent);
			return 0;
		}
		FI_CALL(post_send()); /* the first grant: the whole window */
		unsigned long long received = 0, completions = 0, idle = 0, idle0 = 0, sends = 1,
		                   sends_done = 0;
		size_t since_grant = 0;
		double cpu0 = 0;
		std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
		while (received < total || sends_done < sends) {
			if (received == static_cast<unsigned long long>(opt_.warmup) && cpu0 == 0) {
				cpu0 = cpu_now_us();
				t0 = std::chrono::steady_clock::now();
				idle0 = idle;
			}
			struct fi_cq_entry e = {};
			FI_CALL(stream_wait(&e, &idle));
			completions++;
			if (e.op_context == &sctx_) {
				sends_done++;
				continue;
			}
			received++;
			FI_CALL(stream_repost(stream_slot(e.op_context)));
			if (received == total || ++since_grant == grant) {
				since_grant = 0; /* a grant, or the last message */
				FI_CALL(post_send());
				sends++;
			}
		}
		const double usec =
		    std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
		        .count();
		const double cpu = cpu_now_us() - cpu0;
		printf("STREAM prov=%s mode=%s size=%zu window=%zu received=%llu completions=%llu "
		       "idle=%llu idle_measured=%llu cpu_us_per_msg=%.2f msgs_per_s=%.0f\n",
		       opt_.prov.c_str(), opt_.mode_name.c_str(), opt_.size, w, received,
		       completions, idle, idle - idle0, cpu / opt_.iters, opt_.iters / usec * 1e6);
		return 0;
	}

	int pingpong()
	{
		if (opt_.window)
			return stream_run();
		if (opt_.bursts)
			return burst_run();
		if (!opt_.thinks.empty())
			return think_run();
		const bool client = !opt_.server.empty();
		struct rusage r0 = {}, r1 = {};
		std::chrono::steady_clock::time_point t0;
		const int rounds = opt_.warmup + opt_.iters;
		for (int i = 0; i < rounds; i++) {
			if (i == opt_.warmup) {
				getrusage(RUSAGE_SELF, &r0);
				t0 = std::chrono::steady_clock::now();
			}
			FI_CALL(round(client, i));
		}
		FI_CALL(drain(rounds));
		auto t1 = std::chrono::steady_clock::now();
		getrusage(RUSAGE_SELF, &r1);
		double usec = std::chrono::duration<double, std::micro>(t1 - t0).count();
		double cpu = (r1.ru_utime.tv_sec - r0.ru_utime.tv_sec) * 1e6 +
		             (r1.ru_utime.tv_usec - r0.ru_utime.tv_usec) +
		             (r1.ru_stime.tv_sec - r0.ru_stime.tv_sec) * 1e6 +
		             (r1.ru_stime.tv_usec - r0.ru_stime.tv_usec);
		const int threads = thread_count();
		if (client)
			printf("RESULT prov=%s mode=%s size=%zu iters=%d members=%d lat_us=%.2f "
			       "cpu_us_per_msg=%.2f reads_empty=%llu reads_full=%llu threads=%d\n",
			       opt_.prov.c_str(), opt_.mode_name.c_str(), opt_.size, opt_.iters,
			       opt_.members, usec / opt_.iters / 2, cpu / opt_.iters / 2,
			       bench_reads_empty, bench_reads_full, threads);
		else
			printf("SERVER prov=%s mode=%s threads=%d cpu_us_per_msg=%.2f\n",
			       opt_.prov.c_str(), opt_.mode_name.c_str(), threads,
			       cpu / opt_.iters / 2);
		return 0;
	}

	/* What vwait's adaptive policy has measured and decided in this process so far,
	 * through vwait's debug ops (vwait/policy_stats.h): false for another provider. */
	bool policy_state(struct fi_vwait_policy_stats &stats)
	{
		struct fi_vwait_policy_stats_ops *ops = nullptr;
		stats = {};
		return fabric_ &&
		       fi_open_ops(&fabric_->fid, FI_VWAIT_POLICY_STATS_OPS, 0,
		                   reinterpret_cast<void **>(&ops), nullptr) == 0 &&
		       ops && ops->query(&fabric_->fid, &stats) == 0;
	}

	/* The policy's decisions between two policy_state() snapshots, as key=value fields */
	static std::string decisions(const struct fi_vwait_policy_stats &a,
	                             const struct fi_vwait_policy_stats &b)
	{
		char buf[256];
		snprintf(buf, sizeof(buf),
		         " spun=%" PRIu64 " probes=%" PRIu64 " armed_long=%" PRIu64
		         " judged_short=%" PRIu64 " judged_long=%" PRIu64,
		         b.spun - a.spun, b.probes - a.probes, b.armed_long - a.armed_long,
		         b.judged_short - a.judged_short, b.judged_long - a.judged_long);
		return buf;
	}

	/* A think-time run: warmup rounds, then per phase one unmeasured round at think 0 (the
	 * server takes its CPU time there, so that the wait for a phase's first message counts
	 * in that phase) and the phase's rounds, and a last round that closes the last phase. */
	int think_run()
	{
		const bool client = !opt_.server.empty();
		const std::vector<phase> plan = plan_of(opt_.thinks, opt_.iters, opt_.budget_us);
		std::vector<double> lat(plan.size()), cpu(plan.size() + 1);
		std::vector<int> wake(plan.size(), -1);
		/* the policy's state at each phase's start, and at the last one's end */
		std::vector<struct fi_vwait_policy_stats> pol(plan.size() + 1);
		std::vector<bool> pol_ok(plan.size() + 1, false);
		int i = 0;
		for (; i < opt_.warmup; i++)
			FI_CALL(round(client, i));
		for (size_t p = 0; p <= plan.size(); p++) {
			FI_CALL(round(client, i++));
			cpu[p] = cpu_now_us();
			pol_ok[p] = policy_state(pol[p]);
			if (p == plan.size())
				break;
			double sum = 0;
			for (int k = 0; k < plan[p].iters; k++) {
				if (client)
					think(plan[p].think_us);
				auto t0 = std::chrono::steady_clock::now();
				FI_CALL(round(client, i++));
				sum += std::chrono::duration<double, std::micro>(
				           std::chrono::steady_clock::now() - t0)
				           .count();
			}
			lat[p] = sum / plan[p].iters / 2;
			struct fi_vwait_policy_stats now;
			wake[p] = policy_state(now)
			              ? static_cast<int>((now.wake_cost_ns + 999) / 1000)
			              : -1;
		}
		FI_CALL(drain(i));
		for (size_t p = 0; p < plan.size(); p++) {
			/* the phase's decisions include its leading round at think 0 */
			const std::string d =
			    pol_ok[p] && pol_ok[p + 1] ? decisions(pol[p], pol[p + 1]) : "";
			if (client)
				printf("PHASE side=client prov=%s mode=%s think_us=%d iters=%d "
				       "lat_us=%.2f wake_us=%d%s\n",
				       opt_.prov.c_str(), opt_.mode_name.c_str(), plan[p].think_us,
				       plan[p].iters, lat[p], wake[p], d.c_str());
			else
				printf("PHASE side=server prov=%s mode=%s think_us=%d iters=%d "
				       "cpu_us_per_msg=%.2f wake_us=%d%s\n",
				       opt_.prov.c_str(), opt_.mode_name.c_str(), plan[p].think_us,
				       plan[p].iters, (cpu[p + 1] - cpu[p]) / plan[p].iters,
				       wake[p], d.c_str());
		}
		return 0;
	}

	/* -m empty-read: -I reads of an empty CQ; the time per read beside the count */
	int empty_read()
	{
		if (opt_.rdm) {
			FI_CALL(rdm_endpoint());
		} else {
			FI_CALL(fi_domain(fabric_, info_, &domain_, nullptr));
			struct fi_cq_attr attr = {};
			attr.format = FI_CQ_FORMAT_CONTEXT;
			attr.size = 64;
			attr.wait_obj = FI_WAIT_NONE;
			FI_CALL(fi_cq_open(domain_, &attr, &cq_, nullptr));
		}
		struct fi_cq_entry e = {};
		auto t0 = std::chrono::steady_clock::now();
		for (int i = 0; i < opt_.iters; i++)
			if (vwait_bench_cq_read(cq_, &e, 1) != -FI_EAGAIN) {
				fprintf(stderr, "empty-read: the CQ is not empty\n");
				return -FI_EOTHER;
			}
		double usec =
		    std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
		        .count();
		printf("RESULT prov=%s mode=%s iters=%d ns_per_read=%.1f reads_empty=%llu "
		       "reads_full=%llu\n",
		       opt_.prov.c_str(), opt_.mode_name.c_str(), opt_.iters,
		       usec * 1e3 / opt_.iters, bench_reads_empty, bench_reads_full);
		return 0;
	}

	void teardown()
	{
		if (ep_)
			fi_close(&ep_->fid);
		if (mr_)
			fi_close(&mr_->fid);
		if (rmr_)
			fi_close(&rmr_->fid);
		if (stream_mr_)
			fi_close(&stream_mr_->fid);
		if (pollset_) {
			if (cq_)
				fi_sets::poll_del(pollset_, &cq_->fid, 0);
			for (struct fid_cq *c : idle_)
				fi_sets::poll_del(pollset_, &c->fid, 0);
			fi_close(&pollset_->fid);
		}
		for (struct fid_cq *c : idle_)
			fi_close(&c->fid);
		if (av_)
			fi_close(&av_->fid);
		if (cq_)
			fi_close(&cq_->fid);
		if (rcntr_)
			fi_close(&rcntr_->fid);
		if (scntr_)
			fi_close(&scntr_->fid);
		if (pep_)
			fi_close(&pep_->fid);
		if (domain_)
			fi_close(&domain_->fid);
		if (eq_)
			fi_close(&eq_->fid);
		if (waitset_)
			fi_close(&waitset_->fid);
		if (fabric_)
			fi_close(&fabric_->fid);
		fi_freeinfo(conn_info_);
		fi_freeinfo(info_);
	}

	const options &opt_;
	bool unsupported_ = false;
	bool send_pending_ = false;
	struct fi_info *info_ = nullptr;
	struct fi_info *conn_info_ = nullptr;
	struct fid_fabric *fabric_ = nullptr;
	struct fid_eq *eq_ = nullptr;
	struct fid_pep *pep_ = nullptr;
	struct fid_domain *domain_ = nullptr;
	struct fid_cq *cq_ = nullptr;
	std::vector<struct fid_cq *> idle_; /* -N: idle members of the set */
	struct fid_wait *waitset_ = nullptr;
	struct fid_poll *pollset_ = nullptr;
	struct fid_cntr *rcntr_ = nullptr; /* cntr-wait: FI_RECV */
	struct fid_cntr *scntr_ = nullptr; /* cntr-wait: FI_SEND */
	struct fid_ep *ep_ = nullptr;
	struct fid_av *av_ = nullptr;     /* -e rdm */
	fi_addr_t peer_ = FI_ADDR_UNSPEC; /* -e rdm: the other side, in av_ */
	struct fid_mr *mr_ = nullptr;
	struct fid_mr *rmr_ = nullptr;
	int wait_fd_ = -1;
	unsigned long empty_run_ = 0; /* -R: the server's empty reads in a row */
	std::chrono::steady_clock::time_point idle_since_; /* -R: when that run reached 256 */
	std::vector<char> buf_, rbuf_;
	struct fi_context sctx_ = {}, rctx_ = {};
	/* -X: receive slots (the server's messages on the client) */
	std::vector<char> stream_buf_;
	std::vector<struct fi_context> stream_ctx_;
	struct fid_mr *stream_mr_ = nullptr;
};

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
	options opt;
	if (!parse(argc, argv, &opt)) {
		usage();
		return 2;
	}
	setvbuf(stdout, nullptr, _IOLBF, 0);
	bench b(opt);
	int ret = b.run();
	if (ret && b.unsupported()) {
		printf("UNSUPPORTED prov=%s mode=%s\n", opt.prov.c_str(), opt.mode_name.c_str());
		return exit_unsupported;
	}
	return ret ? 1 : 0;
}
