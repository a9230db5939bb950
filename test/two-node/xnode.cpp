/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* test/two-node/xnode.cpp - the two-node tier's client/server program (public libfabric API,
 * FI_EP_MSG over FI_PROVIDER, default vwait), one role per process:
 *
 *   xnode cm-server PORT          accepts a connection whose private data it checks, with
 *                                 private data of its own; then rejects one, with data
 *   xnode cm-client ADDR PORT     the other side: checks the accept data, a message each way,
 *                                 then the reject (FI_ECONNREFUSED) and its data
 *   xnode waiter (-l PORT | -c ADDR -p PORT) [-r R] [-n OK] [-e] [-E] [-R FILE]
 *                                 two connections; R receives posted on each (default 64); then
 *                                 threads block until every receive completed: fi_cq_sread on
 *                                 connection 0's CQ, fi_cntr_wait on its receive counter, fi_wait
 *                                 on a wait set holding connection 1's CQ, fi_eq_sread on the EQ
 *                                 (waits for both FI_SHUTDOWN; -E: no EQ reader at all, the EQ is
 *                                 never read once connected). Each receive must complete exactly
 *                                 once, successfully (its data checked: message j lands in
 *                                 receive j) or with an error; -n OK: exactly OK successes per
 *                                 connection; -e: at least one error per connection. -R FILE:
 *                                 created once the receives are posted.
 *                                 -k ROUNDS (soak): R receives per round on each connection,
 *                                 re-posted when all completed, the same waiter threads' kinds
 *                                 each round (message k*R+i lands in receive i of round k);
 *                                 from after round 2 to after round ROUNDS - 1 (-k 4 or more)
 *                                 no more fds (eventfds and timerfds: at most soak_threads
 *                                 more each) and RSS within 4 MiB. The feeder then sends
 *                                 R*ROUNDS (-n).
 *                                 -P (paced, with -k): once a round's receives are posted
 *                                 again, a message (a "go") to the feeder on each connection.
 *   xnode feeder (-l PORT | -c ADDR -p PORT) [-n K] [-i MS] [-t sleep|exit] [-R FILE]
 *                                 two connections; K messages on each (default 16), one every MS
 *                                 ms (default 0), each send completion read; then sleeps until
 *                                 killed (-t sleep, default) or shuts down and exits (-t exit).
 *                                 -R FILE: created once the first messages went out.
 *                                 -P -r R: before each R-th message after the first R, waits
 *                                 for the waiter's go on that connection (iWARP has no RNR
 *                                 retry to pace a feeder: a message that finds no receive
 *                                 ends the connection).
 *
 * waiter and feeder: -L FILE: created once listening (with -l).
 *
 * ADDR is the peer's IPv4 address; a listener binds RXE_ADDR. Exit 0 pass, 1 fail, 2 usage.
 * On iWARP the side that connects must send first (MPA; fi_vwait(7)): a message the accepting
 * side sends at once can reach the connecting side with the MPA reply, and siw there fails the
 * connection (FI_ECONNABORTED). The feeder sends first, so on iWARP the tests run the waiter
 * with -l and the feeder with -c (test/two-node/common.sh, tn_feed). */
#include "vwait/fi_deprecated.h"

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#include <dirent.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

namespace
{

#define CHECK(call)                                                                                \
	do {                                                                                       \
		int ret_ = static_cast<int>(call);                                                 \
		if (ret_) {                                                                        \
			fprintf(stderr, "FAIL: %s: %s (%d) at line %d\n", #call,                   \
			        fi_strerror(-ret_), ret_, __LINE__);                               \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

[[noreturn]] void die(const char *what)
{
	fprintf(stderr, "FAIL: %s\n", what);
	exit(1);
}

double now()
{
	return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
	    .count();
}

void touch(const char *path)
{
	if (!path)
		return;
	FILE *f = fopen(path, "w");
	if (f)
		fclose(f);
}

constexpr size_t msg_size = 64;

size_t count_fds()
{
	size_t n = 0;
	if (DIR *d = opendir("/proc/self/fd")) {
		while (readdir(d))
			n++;
		closedir(d);
	}
	return n;
}

/* the open fds by what they are: "anon_inode:[eventfd]", "/dev/infiniband/uverbs0", "socket"
 * (the number in "socket:[123]" or "pipe:[45]" dropped) */
std::map<std::string, int> fd_kinds()
{
	std::map<std::string, int> kinds;
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return kinds;
	while (struct dirent *e = readdir(d)) {
		if (e->d_name[0] == '.')
			continue;
		char link[PATH_MAX];
		const std::string path = std::string("/proc/self/fd/") + e->d_name;
		ssize_t n = readlink(path.c_str(), link, sizeof(link) - 1);
		if (n < 0)
			continue;
		std::string kind(link, static_cast<size_t>(n));
		const size_t colon = kind.find(":[");
		if (colon != std::string::npos && kind.compare(0, 10, "anon_inode") != 0)
			kind.resize(colon);
		kinds[kind]++;
	}
	closedir(d);
	return kinds;
}

/* What vwait keeps for blocking is made at a thread's first sleep and kept: a signal (an
 * eventfd) per sleeping thread, pooled for reuse when the thread ends, and a calibration
 * timerfd for the thread's life. A thread may first sleep in any round, so over a soak the
 * waiter's eventfds and timerfds may each grow by one per thread that can sleep: its main
 * thread (-P), the EQ reader, the three waiters, and vwait's EQ thread. */
constexpr int soak_threads = 6;

/* true when b holds more fds of a kind than a: more than soak_threads more eventfds or
 * timerfds, or any more of another kind */
bool fds_grew(const std::map<std::string, int> &a, const std::map<std::string, int> &b)
{
	for (const auto &[kind, n] : b) {
		const auto was = a.find(kind);
		const int more = n - (was == a.end() ? 0 : was->second);
		const bool per_thread =
		    kind == "anon_inode:[eventfd]" || kind == "anon_inode:[timerfd]";
		if (more > (per_thread ? soak_threads : 0))
			return true;
	}
	return false;
}

/* what changed from a to b: "+3 anon_inode:[eventfd], -1 socket" (empty: nothing) */
std::string fd_change(const std::map<std::string, int> &a, const std::map<std::string, int> &b)
{
	std::map<std::string, int> diff;
	for (const auto &[kind, n] : b)
		diff[kind] += n;
	for (const auto &[kind, n] : a)
		diff[kind] -= n;
	std::string out;
	for (const auto &[kind, n] : diff) {
		if (!n)
			continue;
		if (!out.empty())
			out += ", ";
		out += (n > 0 ? "+" : "") + std::to_string(n) + " " + kind;
	}
	return out;
}

long rss_kib()
{
	long pages = 0, rss = 0;
	if (FILE *f = fopen("/proc/self/statm", "r")) {
		if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
			rss = 0;
		fclose(f);
	}
	return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

struct base {
	struct fi_info *info = nullptr;
	struct fid_fabric *fab = nullptr;
	struct fid_domain *dom = nullptr;
	struct fid_eq *eq = nullptr;
	struct fid_pep *pep = nullptr;
	bool listening = false;
};

/* fabric, domain and EQ; a listener on RXE_ADDR:port (listening: a file created once it
 * listens), or the info to connect to addr:port */
void open_base(base &b, const char *addr, const char *port, const char *listening = nullptr)
{
	struct fi_info *hints = fi_allocinfo();
	hints->ep_attr->type = FI_EP_MSG;
	hints->caps = FI_MSG;
	hints->mode = FI_CONTEXT;
	hints->domain_attr->mr_mode =
	    FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_VIRT_ADDR | FI_MR_PROV_KEY;
	const char *prov = getenv("FI_PROVIDER");
	hints->fabric_attr->prov_name = strdup(prov && *prov ? prov : "vwait");
	b.listening = !addr;
	const char *self = getenv("RXE_ADDR");
	int ret = b.listening ? fi_getinfo(fi_version(), self, port, FI_SOURCE, hints, &b.info)
	                      : fi_getinfo(fi_version(), addr, port, 0, hints, &b.info);
	fi_freeinfo(hints);
	if (ret) {
		fprintf(stderr, "FAIL: fi_getinfo(%s:%s): %s\n", b.listening ? self : addr, port,
		        fi_strerror(-ret));
		exit(1);
	}
	CHECK(fi_fabric(b.info->fabric_attr, &b.fab, nullptr));
	struct fi_eq_attr ea = {};
	ea.size = 64;
	ea.wait_obj = FI_WAIT_UNSPEC;
	CHECK(fi_eq_open(b.fab, &ea, &b.eq, nullptr));
	CHECK(fi_domain(b.fab, b.info, &b.dom, nullptr));
	if (b.listening) {
		CHECK(fi_passive_ep(b.fab, b.info, &b.pep, nullptr));
		CHECK(fi_pep_bind(b.pep, &b.eq->fid, 0));
		CHECK(fi_listen(b.pep));
		touch(listening);
	}
}

/* the next EQ event, blocking; error entries are returned as -err with *err filled */
int eq_next(base &b, struct fi_eq_cm_entry *cm, std::vector<uint8_t> &data,
            struct fi_eq_err_entry *err = nullptr)
{
	alignas(struct fi_eq_cm_entry) uint8_t buf[sizeof(struct fi_eq_cm_entry) + 256];
	uint32_t event = 0;
	ssize_t n = fi_eq_sread(b.eq, &event, buf, sizeof(buf), -1, 0);
	if (n == -FI_EAVAIL) {
		static uint8_t err_data[256];
		struct fi_eq_err_entry e = {};
		e.err_data = err_data;
		e.err_data_size = sizeof(err_data);
		if (fi_eq_readerr(b.eq, &e, 0) < 0)
			die("fi_eq_readerr");
		if (err)
			*err = e;
		data.assign(err_data, err_data + std::min(e.err_data_size, sizeof(err_data)));
		return -e.err;
	}
	if (n < 0) {
		fprintf(stderr, "FAIL: fi_eq_sread: %s\n", fi_strerror(static_cast<int>(-n)));
		exit(1);
	}
	memcpy(cm, buf, sizeof(*cm));
	data.assign(buf + sizeof(*cm), buf + n);
	return static_cast<int>(event);
}

struct conn {
	struct fid_ep *ep = nullptr;
	struct fid_cq *txcq = nullptr, *rxcq = nullptr;
	struct fid_cntr *rxcntr = nullptr;
	struct fid_mr *mr = nullptr;
	std::vector<uint8_t> buf; /* R receive slots, then one send slot per message */
	std::vector<struct fi_context> ctx;
};

/* an endpoint with its CQs (rx CQ in ws when given, else FI_WAIT_UNSPEC), an optional receive
 * counter and slots registered buffers */
void open_conn(base &b, conn &c, struct fi_info *info, struct fid_wait *ws, bool counter,
               size_t slots)
{
	CHECK(fi_endpoint(b.dom, info, &c.ep, nullptr));
	struct fi_cq_attr ca = {};
	ca.format = FI_CQ_FORMAT_MSG;
	ca.size = 1024;
	ca.wait_obj = FI_WAIT_UNSPEC;
	CHECK(fi_cq_open(b.dom, &ca, &c.txcq, nullptr));
	if (ws) {
		ca.wait_obj = FI_WAIT_SET;
		ca.wait_set = ws;
	}
	CHECK(fi_cq_open(b.dom, &ca, &c.rxcq, nullptr));
	CHECK(fi_ep_bind(c.ep, &c.txcq->fid, FI_TRANSMIT));
	CHECK(fi_ep_bind(c.ep, &c.rxcq->fid, FI_RECV));
	if (counter) {
		struct fi_cntr_attr na = {};
		na.events = FI_CNTR_EVENTS_COMP;
		na.wait_obj = FI_WAIT_UNSPEC;
		CHECK(fi_cntr_open(b.dom, &na, &c.rxcntr, nullptr));
		CHECK(fi_ep_bind(c.ep, &c.rxcntr->fid, FI_RECV));
	}
	CHECK(fi_ep_bind(c.ep, &b.eq->fid, 0));
	CHECK(fi_enable(c.ep));
	c.buf.assign(slots * msg_size, 0);
	c.ctx.assign(slots, fi_context{});
	CHECK(fi_mr_reg(b.dom, c.buf.data(), c.buf.size(), FI_SEND | FI_RECV, 0, 0, 0, &c.mr,
	                nullptr));
}

void post_recvs(conn &c, size_t r)
{
	for (size_t i = 0; i < r; i++)
		CHECK(
		    fi_recv(c.ep, &c.buf[i * msg_size], msg_size, fi_mr_desc(c.mr), 0, &c.ctx[i]));
}

/* connect (private data out, accept data back) or accept the next request */
void establish(base &b, conn &c, struct fid_wait *ws, bool counter, size_t slots, size_t recvs,
               const std::string &pdata, std::string *peer_data = nullptr)
{
	struct fi_eq_cm_entry cm = {};
	std::vector<uint8_t> data;
	if (b.listening) {
		int ev = eq_next(b, &cm, data);
		if (ev != FI_CONNREQ)
			die("expected FI_CONNREQ");
		if (peer_data)
			peer_data->assign(data.begin(), data.end());
		open_conn(b, c, cm.info, ws, counter, slots);
		fi_freeinfo(cm.info);
		post_recvs(c, recvs);
		CHECK(fi_accept(c.ep, pdata.data(), pdata.size()));
	} else {
		open_conn(b, c, b.info, ws, counter, slots);
		post_recvs(c, recvs);
		CHECK(fi_connect(c.ep, b.info->dest_addr, pdata.data(), pdata.size()));
	}
	struct fi_eq_err_entry err = {};
	int ev = eq_next(b, &cm, data, &err);
	if (ev != FI_CONNECTED) {
		fprintf(stderr, "FAIL: expected FI_CONNECTED, got %d (%s; provider errno %d: %s)\n",
		        ev, ev < 0 ? fi_strerror(-ev) : "event", ev < 0 ? err.prov_errno : 0,
		        ev < 0 ? fi_eq_strerror(b.eq, err.prov_errno, err.err_data, nullptr, 0)
		               : "-");
		exit(1);
	}
	if (!b.listening && peer_data)
		peer_data->assign(data.begin(), data.end());
}

/* message j: its number, then bytes (j + k) & 0xff */
void fill(uint8_t *p, uint32_t j)
{
	memcpy(p, &j, sizeof(j));
	for (size_t k = sizeof(j); k < msg_size; k++)
		p[k] = static_cast<uint8_t>(j + k);
}

bool check(const uint8_t *p, uint32_t j)
{
	uint32_t got;
	memcpy(&got, p, sizeof(got));
	if (got != j)
		return false;
	for (size_t k = sizeof(j); k < msg_size; k++)
		if (p[k] != static_cast<uint8_t>(j + k))
			return false;
	return true;
}

/* one completion of cq (ctx: the one expected), blocking; 0 or a negative error */
int cq_wait(struct fid_cq *cq, void *ctx)
{
	struct fi_cq_msg_entry e;
	for (;;) {
		ssize_t n = fi_cq_sread(cq, &e, 1, nullptr, -1);
		if (n == 1)
			return e.op_context == ctx ? 0 : -FI_EOTHER;
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry err = {};
			fi_cq_readerr(cq, &err, 0);
			return -err.err;
		}
		if (n != -FI_EAGAIN)
			return static_cast<int>(n);
	}
}

int send_msg(conn &c, size_t recv_slots, uint32_t j)
{
	size_t slot = recv_slots + (j % (c.ctx.size() - recv_slots));
	uint8_t *p = &c.buf[slot * msg_size];
	fill(p, j);
	ssize_t ret;
	while ((ret = fi_send(c.ep, p, msg_size, fi_mr_desc(c.mr), 0, &c.ctx[slot])) == -FI_EAGAIN)
		;
	if (ret)
		return static_cast<int>(ret);
	return cq_wait(c.txcq, &c.ctx[slot]);
}

/* ------------------------------------------------------------------ cm */
int cm_server(const char *port)
{
	base b;
	open_base(b, nullptr, port);
	conn c;
	std::string got;
	establish(b, c, nullptr, false, 2, 1, "welcome from b", &got);
	if (got != "hello from a")
		die(("connect private data: '" + got + "'").c_str());
	printf("accepted with private data '%s'\n", got.c_str());
	struct fi_cq_msg_entry e;
	while (fi_cq_sread(c.rxcq, &e, 1, nullptr, -1) != 1)
		;
	if (!check(c.buf.data(), 7))
		die("message from a");
	CHECK(send_msg(c, 1, 8));
	/* the second request: rejected with data */
	struct fi_eq_cm_entry cm = {};
	std::vector<uint8_t> data;
	int ev = eq_next(b, &cm, data);
	if (ev == FI_SHUTDOWN) /* the first connection went first */
		ev = eq_next(b, &cm, data);
	if (ev != FI_CONNREQ)
		die("expected a second FI_CONNREQ");
	if (std::string(data.begin(), data.end()) != "please reject")
		die("second request's private data");
	static const char why[] = "rejected by b";
	CHECK(fi_reject(b.pep, cm.info->handle, why, strlen(why)));
	fi_freeinfo(cm.info);
	printf("rejected the second request with private data '%s'\n", why);
	sleep(1); /* slack: fi_reject has sent the reject before it returns */
	return 0;
}

int cm_client(const char *addr, const char *port)
{
	base b;
	open_base(b, addr, port);
	conn c;
	std::string got;
	establish(b, c, nullptr, false, 2, 1, "hello from a", &got);
	if (got != "welcome from b")
		die(("accept private data: '" + got + "'").c_str());
	printf("connected; accept data '%s'\n", got.c_str());
	CHECK(send_msg(c, 1, 7));
	struct fi_cq_msg_entry e;
	while (fi_cq_sread(c.rxcq, &e, 1, nullptr, -1) != 1)
		;
	if (!check(c.buf.data(), 8))
		die("message from b");
	printf("one message each way, data checked\n");
	conn c2;
	open_conn(b, c2, b.info, nullptr, false, 1);
	static const char please[] = "please reject";
	CHECK(fi_connect(c2.ep, b.info->dest_addr, please, strlen(please)));
	struct fi_eq_cm_entry cm = {};
	std::vector<uint8_t> data;
	struct fi_eq_err_entry err = {};
	int ev = eq_next(b, &cm, data, &err);
	if (ev != -FI_ECONNREFUSED) {
		fprintf(stderr, "FAIL: expected FI_ECONNREFUSED, got %d\n", ev);
		return 1;
	}
	std::string why(data.begin(), data.end());
	if (why != "rejected by b")
		die(("reject data: '" + why + "'").c_str());
	printf("rejected: FI_ECONNREFUSED with private data '%s'\n", why.c_str());
	return 0;
}

/* ------------------------------------------------------------------ waiter / feeder */
struct opts {
	const char *listen_port = nullptr, *addr = nullptr, *port = nullptr, *ready = nullptr,
	           *listening = nullptr;
	size_t r = 64, n = 16, rounds = 1;
	long expect_ok = -1;
	bool expect_error = false, no_eq = false, paced = false;
	int interval_ms = 0;
	std::string then = "sleep";
};

/* completions of one connection's receives: each context at most once */
struct tally {
	std::vector<int> seen;
	size_t ok = 0, err = 0, bad = 0, twice = 0;
	uint32_t base = 0; /* the number of the message receive 0 gets (rounds: k * R) */
	bool done(size_t r) const { return ok + err >= r; }
	void mark(conn &c, void *ctx, bool good, size_t r)
	{
		auto *fc = static_cast<struct fi_context *>(ctx);
		if (fc < c.ctx.data() || fc >= c.ctx.data() + r) {
			bad++;
			return;
		}
		size_t i = static_cast<size_t>(fc - c.ctx.data());
		if (seen[i]++) {
			twice++;
			return;
		}
		if (!good) {
			err++;
			return;
		}
		/* RC: receive j gets message j */
		if (!check(&c.buf[i * msg_size], base + static_cast<uint32_t>(i)))
			bad++;
		ok++;
	}
};

int waiter(const opts &o)
{
	base b;
	open_base(b, o.addr, o.port ? o.port : o.listen_port, o.listening);
	struct fid_wait *ws = nullptr;
	struct fi_wait_attr wa = {};
	wa.wait_obj = FI_WAIT_UNSPEC;
	CHECK(fi_sets::wait_open(b.fab, &wa, &ws));
	conn c[2];
	establish(b, c[0], nullptr, true, o.r + 1, o.r, "waiter");
	establish(b, c[1], ws, false, o.r + 1, o.r, "waiter");
	tally t[2];
	t[0].seen.assign(o.r, 0);
	t[1].seen.assign(o.r, 0);
	printf("READY: %zu receives posted on each of 2 connections\n", o.r);
	fflush(stdout);
	touch(o.ready);
	double t0 = now();
	std::atomic<int> failures{0};
	double end[4] = {0, 0, 0, 0};
	uint64_t cntr_ok = 0, cntr_err = 0;
	int shutdowns = 0, eq_errors = 0;
	tally total[2];

	std::thread eq;
	if (!o.no_eq)
		eq = std::thread([&] { /* fi_eq_sread until both connections are shut down */
			               while (shutdowns + eq_errors < 2) {
				               struct fi_eq_cm_entry cm;
				               std::vector<uint8_t> data;
				               int ev = eq_next(b, &cm, data);
				               if (ev == FI_SHUTDOWN)
					               shutdowns++;
				               else if (ev < 0)
					               eq_errors++;
			               }
			               end[3] = now();
		});
	/* fds and RSS after round 2 (the baseline) and after round ROUNDS - 1 (-k 4 or more).
	 * Not after round 1: nobody may have slept in it (the feeder sends it unasked, so its
	 * messages can all be there before the round's threads start). Not after the last: once
	 * the feeder has sent it, it shuts down, and the EQ reader ends with what it kept for
	 * blocking; the feeder cannot send the last round before its receives are posted (RNR
	 * retry, or no "go" with -P). See soak_threads for the eventfds and timerfds. */
	const size_t base_round = 1, last_round = o.rounds >= 4 ? o.rounds - 2 : 0;
	size_t fds_first = 0, fds0 = 0;
	std::map<std::string, int> kinds_first, kinds0;
	long rss0 = 0;
	for (size_t k = 0; k < o.rounds; k++) {
		if (k) { /* the next round: fresh receives, the same waiters */
			for (int i = 0; i < 2; i++) {
				total[i].ok += t[i].ok;
				total[i].err += t[i].err;
				total[i].bad += t[i].bad;
				total[i].twice += t[i].twice;
				t[i].ok = t[i].err = t[i].bad = t[i].twice = 0;
				t[i].seen.assign(o.r, 0);
				t[i].base = static_cast<uint32_t>(k * o.r);
				post_recvs(c[i], o.r);
				/* -P: the round's receives are posted, the feeder may send it */
				int ret =
				    o.paced ? send_msg(c[i], o.r, static_cast<uint32_t>(k)) : 0;
				if (ret) {
					fprintf(stderr,
					        "FAIL: round %zu's go on connection %d: %s\n", k, i,
					        fi_strerror(-ret));
					failures++;
				}
			}
			if (failures)
				break;
		}
		std::thread sread(
		    [&] { /* fi_cq_sread on connection 0 */
			  while (!t[0].done(o.r)) {
				  struct fi_cq_msg_entry e;
				  ssize_t n = fi_cq_sread(c[0].rxcq, &e, 1, nullptr, -1);
				  if (n == 1) {
					  t[0].mark(c[0], e.op_context, true, o.r);
				  } else if (n == -FI_EAVAIL) {
					  struct fi_cq_err_entry err = {};
					  if (fi_cq_readerr(c[0].rxcq, &err, 0) == 1)
						  t[0].mark(c[0], err.op_context, false, o.r);
				  } else if (n != -FI_EAGAIN) {
					  fprintf(stderr, "FAIL: fi_cq_sread: %s\n",
					          fi_strerror((int)-n));
					  failures++;
					  break;
				  }
			  }
			  end[0] = now();
		    });
		std::thread cntr(
		    [&] { /* fi_cntr_wait on connection 0's receive counter */
			  for (;;) {
				  cntr_ok = fi_cntr_read(c[0].rxcntr);
				  cntr_err = fi_cntr_readerr(c[0].rxcntr);
				  if (cntr_ok + cntr_err >= (k + 1) * o.r)
					  break;
				  int ret = fi_cntr_wait(c[0].rxcntr, (k + 1) * o.r - cntr_err, -1);
				  if (ret && ret != -FI_EAVAIL && ret != -FI_ETIMEDOUT) {
					  fprintf(stderr, "FAIL: fi_cntr_wait: %s\n",
					          fi_strerror(-ret));
					  failures++;
					  break;
				  }
				  if (ret == -FI_EAVAIL &&
				      fi_cntr_readerr(c[0].rxcntr) == cntr_err &&
				      fi_cntr_read(c[0].rxcntr) == cntr_ok)
					  usleep(1000); /* -FI_EAVAIL with nothing new: look again
					                   shortly */
			  }
			  end[1] = now();
		    });
		std::thread wait(
		    [&] { /* fi_wait on the set holding connection 1's CQ */
			  while (!t[1].done(o.r)) {
				  struct fi_cq_msg_entry e;
				  ssize_t n;
				  while ((n = fi_cq_read(c[1].rxcq, &e, 1)) == 1 ||
				         n == -FI_EAVAIL) {
					  if (n == 1) {
						  t[1].mark(c[1], e.op_context, true, o.r);
					  } else {
						  struct fi_cq_err_entry err = {};
						  if (fi_cq_readerr(c[1].rxcq, &err, 0) == 1)
							  t[1].mark(c[1], err.op_context, false,
							            o.r);
					  }
				  }
				  if (t[1].done(o.r))
					  break;
				  int ret = fi_sets::wait(ws, -1);
				  if (ret && ret != -FI_EAGAIN && ret != -FI_ETIMEDOUT) {
					  fprintf(stderr, "FAIL: fi_wait: %s\n", fi_strerror(-ret));
					  failures++;
					  break;
				  }
			  }
			  end[2] = now();
		    });
		sread.join();
		cntr.join();
		wait.join();
		if (failures || t[0].err || t[1].err)
			break;
		if (last_round && k == 0) {
			fds_first = count_fds();
			kinds_first = fd_kinds();
		}
		if (last_round && k == base_round) {
			fds0 = count_fds();
			kinds0 = fd_kinds();
			rss0 = rss_kib();
		}
		if (last_round && k == last_round) {
			const size_t fds = count_fds();
			const std::map<std::string, int> kinds = fd_kinds();
			const long rss = rss_kib();
			const std::string early = fd_change(kinds_first, kinds0),
			                  late = fd_change(kinds0, kinds);
			printf("SOAK %zu rounds x %zu receives x 2 connections: "
			       "fds %zu after round 1, %zu after round 2 (%s), "
			       "%zu after round %zu (%s); rss %ld -> %ld KiB\n",
			       o.rounds, o.r, fds_first, fds0,
			       early.empty() ? "same" : early.c_str(), fds, k + 1,
			       late.empty() ? "same" : late.c_str(), rss0, rss);
			if (fds_grew(kinds0, kinds) || rss - rss0 > 4096) {
				printf("FAIL: fds or memory grew over the soak\n");
				failures++;
			}
		}
		if (o.rounds > 1 && !last_round && k + 1 == o.rounds)
			printf(
			    "SOAK %zu rounds x %zu receives x 2 connections: fewer than 4 rounds, "
			    "fds and RSS not compared\n",
			    o.rounds, o.r);
	}
	for (int i = 0; i < 2; i++) {
		t[i].ok += total[i].ok;
		t[i].err += total[i].err;
		t[i].bad += total[i].bad;
		t[i].twice += total[i].twice;
	}
	if (eq.joinable())
		eq.join();
	printf("COUNT conn0 (fi_cq_sread): ok=%zu err=%zu; conn1 (fi_wait): ok=%zu err=%zu; "
	       "counter (fi_cntr_wait): ok=%llu err=%llu; EQ (fi_eq_sread): %s shutdown=%d "
	       "error=%d\n",
	       t[0].ok, t[0].err, t[1].ok, t[1].err, (unsigned long long)cntr_ok,
	       (unsigned long long)cntr_err, o.no_eq ? "not read," : "", shutdowns, eq_errors);
	printf(
	    "RETURNED after READY: sread %.2f s, cntr_wait %.2f s, wait %.2f s, eq_sread %.2f s\n",
	    end[0] - t0, end[1] - t0, end[2] - t0, o.no_eq ? 0.0 : end[3] - t0);
	int bad = failures;
	for (int i = 0; i < 2; i++) {
		if (t[i].ok + t[i].err != o.r * o.rounds || t[i].twice || t[i].bad) {
			printf("FAIL: connection %d: %zu+%zu of %zu receives, %zu twice, %zu bad\n",
			       i, t[i].ok, t[i].err, o.r * o.rounds, t[i].twice, t[i].bad);
			bad++;
		}
		if (o.expect_ok >= 0 && t[i].ok != (size_t)o.expect_ok) {
			printf("FAIL: connection %d: %zu successes, expected %ld\n", i, t[i].ok,
			       o.expect_ok);
			bad++;
		}
		if (o.expect_error && t[i].err == 0) {
			printf("FAIL: connection %d: no error completion\n", i);
			bad++;
		}
	}
	if (cntr_ok != t[0].ok || cntr_err != t[0].err) {
		printf("FAIL: the counter (%llu+%llu) disagrees with the CQ (%zu+%zu)\n",
		       (unsigned long long)cntr_ok, (unsigned long long)cntr_err, t[0].ok,
		       t[0].err);
		bad++;
	}
	if (bad)
		return 1;
	printf("PASS: every receive completed exactly once\n");
	fflush(stdout);
	_exit(0); /* no orderly teardown: the point was the waiters */
}

int feeder(const opts &o)
{
	base b;
	open_base(b, o.addr, o.port ? o.port : o.listen_port, o.listening);
	conn c[2];
	const size_t recvs = o.paced ? 1 : 0, slots = 8 + recvs; /* -P: one receive for the go */
	establish(b, c[0], nullptr, false, slots, recvs, "feeder");
	establish(b, c[1], nullptr, false, slots, recvs, "feeder");
	size_t ok[2] = {0, 0}, err[2] = {0, 0};
	for (uint32_t j = 0; j < o.n; j++) {
		for (int i = 0; i < 2; i++) {
			if (o.paced && j && j % o.r == 0) { /* the waiter's go for round j / R */
				int ret = cq_wait(c[i].rxcq, &c[i].ctx[0]);
				if (!ret && !check(c[i].buf.data(), j / static_cast<uint32_t>(o.r)))
					ret = -FI_EOTHER; /* not this round's go */
				if (ret) {
					printf("FAIL: no go for round %zu on connection %d: %s\n",
					       j / o.r, i, fi_strerror(-ret));
					return 1;
				}
				post_recvs(c[i], 1);
			}
			int ret = send_msg(c[i], recvs, j);
			(ret ? err : ok)[i]++;
			if (ret)
				printf("send %u on connection %d: %s\n", j, i, fi_strerror(-ret));
		}
		if (j == 0)
			touch(o.ready);
		if (o.interval_ms)
			usleep(o.interval_ms * 1000);
	}
	printf("SENT conn0 ok=%zu err=%zu; conn1 ok=%zu err=%zu\n", ok[0], err[0], ok[1], err[1]);
	fflush(stdout);
	if (o.then == "exit") {
		for (auto &x : c)
			fi_shutdown(x.ep, 0);
		sleep(1); /* slack: fi_shutdown has sent the disconnect before it returns */
		return err[0] + err[1] ? 1 : 0;
	}
	for (;;)
		pause();
}

[[noreturn]] void usage()
{
	fprintf(stderr, "usage: xnode cm-server PORT | cm-client ADDR PORT |\n"
	                "       xnode waiter|feeder (-l PORT | -c ADDR -p PORT) [-r R] [-n N] "
	                "[-e] [-E] [-i MS] [-t sleep|exit] [-R FILE] [-k ROUNDS] [-P] [-L FILE]\n");
	exit(2);
}

} // namespace

int main(int argc, char **argv)
{
	setvbuf(stdout, nullptr, _IOLBF, 0);
	if (argc < 2)
		usage();
	std::string role = argv[1];
	if (role == "cm-server" && argc == 3)
		return cm_server(argv[2]);
	if (role == "cm-client" && argc == 4)
		return cm_client(argv[2], argv[3]);
	if (role != "waiter" && role != "feeder")
		usage();
	opts o;
	int ch;
	optind = 2;
	while ((ch = getopt(argc, argv, "l:c:p:r:n:eEi:t:R:k:PL:")) != -1) {
		switch (ch) {
		case 'l':
			o.listen_port = optarg;
			break;
		case 'c':
			o.addr = optarg;
			break;
		case 'p':
			o.port = optarg;
			break;
		case 'r':
			o.r = strtoul(optarg, nullptr, 0);
			break;
		case 'n':
			o.n = strtoul(optarg, nullptr, 0);
			o.expect_ok = atol(optarg);
			break;
		case 'e':
			o.expect_error = true;
			break;
		case 'E':
			o.no_eq = true;
			break;
		case 'i':
			o.interval_ms = atoi(optarg);
			break;
		case 't':
			o.then = optarg;
			break;
		case 'R':
			o.ready = optarg;
			break;
		case 'k':
			o.rounds = strtoul(optarg, nullptr, 0);
			break;
		case 'P':
			o.paced = true;
			break;
		case 'L':
			o.listening = optarg;
			break;
		default:
			usage();
		}
	}
	if (!o.listen_port == !(o.addr && o.port))
		usage();
	return role == "waiter" ? waiter(o) : feeder(o);
}
