/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* Faults on a real verbs device (soft-RoCE in the VM): what vwait must survive.
 *
 *   dp_fault peer-killed    a peer process killed mid-transfer (sends, RMA writes and reads,
 *                           receives; the send queue kept full): every posted operation
 *                           completes exactly once (counted per context), FI_SHUTDOWN on the
 *                           EQ within seconds, then a new connection on the same domain and
 *                           EQ carries data
 *   dp_fault spin-killed    the same kill seen by a process that only spins (fi_cq_read, EQ
 *                           read once connected, never a sleep in the provider): its receives
 *                           flush, FI_SHUTDOWN waits on the EQ, and it never has a second thread
 *   dp_fault exhaustion     posting past tx_size / rx_size: -FI_EAGAIN; memory regions until
 *                           the device refuses (VWAIT_MR_LIMITED=1: run under a small
 *                           RLIMIT_MEMLOCK without CAP_IPC_LOCK): -FI_ENOMEM; data moves again
 *                           once they are closed
 *   dp_fault waiter-closer  threads blocked in fi_cq_sread / fi_eq_sread / fi_wait while
 *                           another thread signals, writes, disconnects the peer, closes an
 *                           endpoint or a wait-set member: every waiter returns
 *   dp_fault race           signal vs completion vs re-arm vs trywait on verbs CQs, for
 *                           VWAIT_RACE_SECONDS (default 60): every message received once,
 *                           no wait that runs out while messages are due
 *   dp_fault device-gone    `rdma link delete RXE_DEV` while endpoints are open and threads
 *                           are blocked (the .test script re-adds the device)
 *   dp_fault sendrecv       one connection, 1 MiB verified (after the device came back)
 *
 * Needs FI_PROVIDER_PATH (the built plugin) and RXE_ADDR. Exit 0 pass, 77 skip, 1 fail. */
#include "vwait/fi_deprecated.h"

#include "../unit/test_tasks.h"
#include "harness.h"

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace
{

using namespace vwait_it;

const char *self_path = nullptr;

/* A listener and a connected pair on one stack. */
struct conn {
	struct fi_info *info = nullptr;  /* FI_SOURCE: the listener's */
	struct fi_info *cinfo = nullptr; /* the client's: dest_addr is the listener */
	struct fid_pep *pep = nullptr;
	side cli, srv;
	struct sockaddr_storage srv_addr = {};
};

void close_conn(conn &c)
{
	close_side(c.cli);
	close_side(c.srv);
	close_fid(c.pep ? &c.pep->fid : nullptr);
	fi_freeinfo(c.info);
	fi_freeinfo(c.cinfo);
	c = conn{};
}

int open_cq(stack &st, struct fid_cq **cq, enum fi_wait_obj wait = FI_WAIT_FD,
            struct fid_wait *set = nullptr, size_t size = 0)
{
	struct fi_cq_attr ca = {};
	ca.format = FI_CQ_FORMAT_DATA;
	ca.wait_obj = wait;
	ca.wait_set = set;
	ca.size = size;
	return fi_cq_open(st.domain, &ca, cq, nullptr);
}

/* dp_fault's sides: CQs of wait (FI_WAIT_FD unless told), the client's send CQ of tx_cq_size,
 * rx_cntr (when given) counting receives. */
int open_side(stack &st, struct fi_info *info, side &s, size_t bufsize,
              enum fi_wait_obj wait = FI_WAIT_FD, size_t tx_cq_size = 0,
              struct fid_cntr *rx_cntr = nullptr)
{
	side_cfg cfg;
	cfg.wait = wait;
	cfg.tx_size = tx_cq_size;
	if (rx_cntr)
		cfg.cntrs = {{rx_cntr, FI_RECV}};
	return vwait_it::open_side(st, info, s, cfg, bufsize);
}

/* A listener on RXE_ADDR:service of st's domain, and a pair connected through it. The client
 * is opened from an info whose dest_addr is the listener: vwait resolves an endpoint's
 * dest_addr when it opens it, and fi_connect then goes there whatever its addr says. */
int connect_pair(stack &st, conn &c, const char *service, size_t bufsize,
                 enum fi_wait_obj wait = FI_WAIT_FD, size_t cli_tx_cq_size = 0,
                 struct fid_cntr *srv_rx_cntr = nullptr)
{
	struct fi_info *hints = msg_hints();
	int ret = fi_getinfo(version, rxe_addr, service, FI_SOURCE, hints, &c.info);
	if (!ret)
		ret = fi_getinfo(version, rxe_addr, service, 0, hints, &c.cinfo);
	fi_freeinfo(hints);
	if (ret)
		return ret;
	if ((ret = listen_on(st, c.info, &c.pep, &c.srv_addr, sizeof(c.srv_addr))))
		return ret;
	side_cfg cc, sc;
	cc.wait = sc.wait = wait;
	cc.tx_size = cli_tx_cq_size;
	if (srv_rx_cntr)
		sc.cntrs = {{srv_rx_cntr, FI_RECV}};
	return connect_sides(st, c.pep, c.cinfo, &c.srv_addr, c.cli, cc, c.srv, sc, bufsize);
}

/* One completion within ms: 1 (*e), -FI_EAVAIL (*err read), -FI_EAGAIN (timeout) or -FI_E*. */
long sread_one(struct fid_cq *cq, struct fi_cq_data_entry *e, struct fi_cq_err_entry *err, int ms)
{
	ssize_t n = fi_cq_sread(cq, e, 1, nullptr, ms);
	if (n == -FI_EAVAIL) {
		struct fi_cq_err_entry tmp;
		if (!err)
			err = &tmp;
		*err = {};
		ssize_t r = fi_cq_readerr(cq, err, 0);
		EXPECT(r == 1, r);
	}
	return n;
}

/* cli sends len bytes to srv, data verified: true when it arrived intact. */
bool transfer(conn &c, size_t len, unsigned seed)
{
	memset(c.srv.buf.data(), 0, len);
	fill(c.cli.buf.data(), len, seed);
	if (!EXPECT(fi_recv(c.srv.ep, c.srv.buf.data(), len, c.srv.desc(), 0, nullptr) == 0, 0) ||
	    !EXPECT(fi_send(c.cli.ep, c.cli.buf.data(), len, c.cli.desc(), 0, nullptr) == 0, 0))
		return false;
	struct fi_cq_data_entry e;
	struct fi_cq_err_entry err;
	long a = sread_one(c.cli.tx, &e, &err, timeout_ms);
	long b = sread_one(c.srv.rx, &e, &err, timeout_ms);
	EXPECT(a == 1, a);
	EXPECT(b == 1 && e.len == len, b);
	return a == 1 && b == 1 && EXPECT(verify(c.srv.buf.data(), len, seed), 0);
}

/* Runs fn in a thread, watched: the process fails (exit 1) if it is still blocked after
 * limit_s. */
void watchdog(int limit_s, const char *what)
{
	static const char *current = nullptr;
	current = what;
	signal(SIGALRM, [](int) {
		printf("  FAILED: hang: %s still blocked after its watchdog\n",
		       current ? current : "?");
		fflush(stdout);
		_exit(1);
	});
	alarm(static_cast<unsigned>(limit_s));
}

/* ------------------------------------------------------------------ peer-killed */

/* What the server of peer-killed hands the client in its accept data. */
struct rma_target {
	uint64_t addr;
	uint64_t key;
};

constexpr size_t pk_bufsize = 1u << 20;
constexpr size_t pk_msg = 65536;

/* The server, in its own process: listens on RXE_ADDR:port, accepts with its buffer's
 * address and key, posts receives, writes one byte to fd 3 when connected, waits to die. */
int serve_until_killed(const char *port)
{
	stack st;
	conn c;
	struct fi_info *hints = msg_hints();
	int ret = fi_getinfo(version, rxe_addr, port, FI_SOURCE, hints, &st.info);
	fi_freeinfo(hints);
	if (ret || open_stack_from(st, FI_WAIT_FD))
		return 2;
	if (fi_passive_ep(st.fabric, st.info, &c.pep, nullptr) ||
	    fi_pep_bind(c.pep, &st.eq->fid, 0) || fi_listen(c.pep))
		return 3;
	cm_buf ent;
	uint32_t ev;
	if (eq_event(st.eq, &ev, ent.raw, sizeof(ent.raw)) <= 0 || ev != FI_CONNREQ)
		return 4;
	if (open_side(st, ent.e()->info, c.srv, pk_bufsize))
		return 5;
	rma_target t = {reinterpret_cast<uintptr_t>(c.srv.buf.data()), fi_mr_key(c.srv.mr)};
	for (int i = 0; i < 64; i++)
		fi_recv(c.srv.ep, c.srv.buf.data(), pk_msg, c.srv.desc(), 0, nullptr);
	if (fi_accept(c.srv.ep, &t, sizeof(t)))
		return 6;
	if (eq_event(st.eq, &ev, ent.raw, sizeof(ent.raw)) <= 0 || ev != FI_CONNECTED)
		return 7;
	if (write(3, "u", 1) != 1)
		return 8;
	for (;;)
		pause();
}

/* A client of serve_until_killed (another process): its fabric, domain, EQ and endpoint,
 * connected, and the server's buffer. */
struct killable {
	pid_t child = -1;
	int up_fd = -1; /* the server writes one byte here once connected */
	stack st;
	side cli;
	rma_target t{};

	void kill_server()
	{
		if (child > 0) {
			kill(child, SIGKILL);
			waitpid(child, nullptr, 0);
			child = -1;
		}
	}
	void close_all()
	{
		kill_server();
		if (up_fd >= 0)
			close(std::exchange(up_fd, -1));
		close_side(cli);
		close_stack(st);
	}
};

/* One EQ event within the harness's timeout: fi_eq_sread, or with poll_only fi_eq_read in a loop
 * (the thread never sleeps in the provider). Its size, or a negative code. */
long next_event(struct fid_eq *eq, uint32_t *ev, cm_buf &ent, bool poll_only)
{
	if (!poll_only)
		return eq_event(eq, ev, ent.raw, sizeof(ent.raw));
	auto end = clock_type::now() + std::chrono::milliseconds(timeout_ms);
	long n;
	while ((n = fi_eq_read(eq, ev, ent.raw, sizeof(ent.raw), 0)) == -FI_EAGAIN &&
	       clock_type::now() < end)
		std::this_thread::sleep_for(std::chrono::milliseconds(1));
	return n;
}

/* Starts serve_until_killed on port and connects k.cli to it (EQ events as next_event reads
 * them). 0, or nonzero with everything closed and the server gone. */
int connect_killable(const char *port, killable &k, bool poll_only)
{
	int pipefd[2];
	if (!EXPECT(pipe(pipefd) == 0, 0))
		return 1;
	k.child = fork();
	if (k.child == 0) {
		dup2(pipefd[1], 3);
		execl(self_path, self_path, "serve-until-killed", port,
		      static_cast<char *>(nullptr));
		_exit(127);
	}
	close(pipefd[1]);
	k.up_fd = pipefd[0];
	int ret = -FI_EOTHER;
	struct fi_info *hints = msg_hints();
	for (int i = 0; i < 100 && ret; i++) {
		std::this_thread::sleep_for(std::chrono::milliseconds(100));
		fi_freeinfo(k.st.info);
		k.st.info = nullptr;
		ret = fi_getinfo(version, rxe_addr, port, 0, hints, &k.st.info);
	}
	fi_freeinfo(hints);
	if (EXPECT_OK(ret) || EXPECT_OK(open_stack_from(k.st, FI_WAIT_FD)) ||
	    EXPECT_OK(open_side(k.st, k.st.info, k.cli, pk_bufsize))) {
		k.close_all();
		return 1;
	}
	cm_buf ent;
	uint32_t ev = 0;
	long n = -FI_EOTHER;
	for (int i = 0; i < 50; i++) {
		/* until the server listens: a refused connect is retried on a new endpoint */
		EXPECT_OK(fi_connect(k.cli.ep, nullptr, nullptr, 0));
		n = next_event(k.st.eq, &ev, ent, poll_only);
		if (n != -FI_EAVAIL)
			break;
		struct fi_eq_err_entry err = {};
		fi_eq_readerr(k.st.eq, &err, 0);
		close_side(k.cli);
		std::this_thread::sleep_for(std::chrono::milliseconds(100));
		if (EXPECT_OK(open_side(k.st, k.st.info, k.cli, pk_bufsize))) {
			k.close_all();
			return 1;
		}
	}
	if (!EXPECT(n == sizeof(struct fi_eq_cm_entry) + sizeof(rma_target) && ev == FI_CONNECTED,
	            n)) {
		k.close_all();
		return 1;
	}
	memcpy(&k.t, ent.data(), sizeof(k.t));
	char u;
	EXPECT(read(k.up_fd, &u, 1) == 1, 0);
	return 0;
}

/* The server is another process, killed while the client keeps its send queue full of sends,
 * RMA writes and RMA reads and has receives posted: every one completes exactly once (success
 * before the kill, an error after), FI_SHUTDOWN arrives within seconds, then a new connection
 * on the same fabric, domain and EQ moves data. */
void test_peer_killed()
{
	killable k;
	if (connect_killable("7476", k, false))
		return;
	stack &st = k.st;
	side &cli = k.cli;
	const rma_target &t = k.t;
	pid_t child = k.child;
	cm_buf ent;
	uint32_t ev = 0;
	long n;

	/* one context per operation: every one must come back exactly once */
	constexpr int max_ops = 20000, nrecv = 16;
	std::vector<int> done(max_ops + nrecv, 0);
	std::vector<uint8_t> kind(max_ops, 0);
	std::vector<struct fi_context> ctx(max_ops + nrecv);
	auto index_of = [&](void *op) -> long {
		auto *p = static_cast<struct fi_context *>(op);
		if (p < ctx.data() || p >= ctx.data() + ctx.size())
			return -1;
		return p - ctx.data();
	};
	/* receives that no one will match: they flush when the connection goes */
	for (int i = 0; i < nrecv; i++)
		EXPECT_OK(fi_recv(cli.ep, cli.buf.data() + pk_msg * (i % 8), pk_msg, cli.desc(), 0,
		                  &ctx[max_ops + i]));
	int posted = 0, ok = 0, errors = 0, rx_errors = 0, strays = 0, dups = 0;
	int first_err = 0;
	bool killed = false, shutdown_seen = false;
	double t_shutdown = -1, t_last = -1;
	clock_type::time_point t_kill{};
	auto account = [&](long idx, bool success, int err) {
		if (idx < 0) {
			strays++;
			return;
		}
		if (done[static_cast<size_t>(idx)]++ != 0)
			dups++;
		if (success) {
			ok++;
		} else {
			if (!first_err)
				first_err = err;
			if (idx >= max_ops)
				rx_errors++;
			else
				errors++;
		}
		if (killed)
			t_last = since(t_kill);
	};
	auto end = clock_type::now() + std::chrono::seconds(60);
	int outstanding_tx = 0;
	while (clock_type::now() < end) {
		/* keep the send queue full until the kill */
		while (!killed && posted < max_ops) {
			struct fi_context *c = &ctx[posted];
			uint8_t *local = cli.buf.data() + pk_msg * (posted % 8);
			uint64_t remote = t.addr + pk_msg * static_cast<uint64_t>(posted % 8);
			ssize_t r;
			switch (posted % 3) {
			case 0:
				r = fi_send(cli.ep, local, pk_msg, cli.desc(), 0, c);
				break;
			case 1:
				r = fi_write(cli.ep, local, pk_msg, cli.desc(), 0, remote, t.key,
				             c);
				break;
			default:
				r = fi_read(cli.ep, local, pk_msg, cli.desc(), 0, remote, t.key, c);
				break;
			}
			if (r == -FI_EAGAIN)
				break;
			if (!EXPECT(r == 0, r))
				break;
			kind[static_cast<size_t>(posted)] = static_cast<uint8_t>(posted % 3);
			posted++;
			outstanding_tx++;
		}
		struct fi_cq_data_entry e;
		struct fi_cq_err_entry err;
		long r = sread_one(cli.tx, &e, &err, 50);
		if (r == 1) {
			account(index_of(e.op_context), true, 0);
			outstanding_tx--;
		} else if (r == -FI_EAVAIL) {
			account(index_of(err.op_context), false, err.err);
			outstanding_tx--;
		}
		struct fi_cq_data_entry re;
		struct fi_cq_err_entry rerr;
		r = fi_cq_read(cli.rx, &re, 1);
		if (r == 1) {
			account(index_of(re.op_context), true, 0);
		} else if (r == -FI_EAVAIL) {
			rerr = {};
			if (fi_cq_readerr(cli.rx, &rerr, 0) == 1)
				account(index_of(rerr.op_context), false, rerr.err);
		}
		if (!killed && ok >= 48) {
			kill(child, SIGKILL);
			t_kill = clock_type::now();
			killed = true;
			printf(
			    "  killed the server with %d operations outstanding (%d completed)\n",
			    outstanding_tx, ok);
		}
		n = fi_eq_read(st.eq, &ev, ent.raw, sizeof(ent.raw), 0);
		if (n >= static_cast<long>(sizeof(struct fi_eq_cm_entry)) && ev == FI_SHUTDOWN &&
		    ent.e()->fid == &cli.ep->fid && !shutdown_seen) {
			shutdown_seen = true;
			t_shutdown = since(t_kill);
		}
		if (n == -FI_EAVAIL) {
			struct fi_eq_err_entry eerr = {};
			fi_eq_readerr(st.eq, &eerr, 0);
			printf("  EQ error: %s\n", fi_strerror(eerr.err));
		}
		if (killed && shutdown_seen && ok + errors + rx_errors == posted + nrecv)
			break;
	}
	int missing = 0;
	for (int i = 0; i < posted; i++)
		missing += done[static_cast<size_t>(i)] == 0;
	for (int i = 0; i < nrecv; i++)
		missing += done[static_cast<size_t>(max_ops + i)] == 0;
	int sends = 0, writes = 0, reads = 0;
	for (int i = 0; i < posted; i++)
		(kind[static_cast<size_t>(i)] == 0
		     ? sends
		     : (kind[static_cast<size_t>(i)] == 1 ? writes : reads))++;
	printf("  posted %d (%d sends, %d writes, %d reads) + %d receives: %d completed, %d tx "
	       "errors, %d rx errors (first: %s), %d missing, %d twice, %d unknown\n",
	       posted, sends, writes, reads, nrecv, ok, errors, rx_errors,
	       first_err ? fi_strerror(first_err) : "none", missing, dups, strays);
	printf("  FI_SHUTDOWN %s %.2f s after the kill; last completion at %.2f s\n",
	       shutdown_seen ? "seen" : "NOT seen", t_shutdown, t_last);
	if (missing) {
		/* which ones: per kind, and the first and last missing in posting order */
		int miss[4] = {0, 0, 0, 0}, lo = -1, hi = -1;
		for (int i = 0; i < posted + nrecv; i++) {
			size_t at = static_cast<size_t>(i < posted ? i : max_ops + i - posted);
			if (done[at])
				continue;
			miss[i < posted ? kind[at] : 3]++;
			if (i < posted) {
				lo = lo < 0 ? i : lo;
				hi = i;
			}
		}
		printf("  missing: %d sends, %d writes, %d reads, %d receives; operations %d to %d "
		       "of %d\n",
		       miss[0], miss[1], miss[2], miss[3], lo, hi, posted);
	}
	EXPECT(killed, 0);
	EXPECT(errors > 0, errors);
	EXPECT(rx_errors == nrecv, rx_errors);
	EXPECT(missing == 0, missing);
	EXPECT(dups == 0, dups);
	EXPECT(strays == 0, strays);
	EXPECT(shutdown_seen, 0);
	/* 10x the second a killed peer's disconnect takes in the emulated guest; a hang runs
	 * into the loop's 60 s */
	EXPECT(t_shutdown >= 0 && t_shutdown < 10, static_cast<long>(t_shutdown * 1000));
	EXPECT(t_last < 10, static_cast<long>(t_last * 1000));
	k.kill_server(); /* reaps it */
	close(std::exchange(k.up_fd, -1));
	close_side(cli);

	/* what is left on the EQ of the dead connection */
	for (;;) {
		n = fi_eq_read(st.eq, &ev, ent.raw, sizeof(ent.raw), 0);
		if (n == -FI_EAVAIL) {
			struct fi_eq_err_entry eerr = {};
			fi_eq_readerr(st.eq, &eerr, 0);
			printf("  left on the EQ: error %s\n", fi_strerror(eerr.err));
		} else if (n >= 0) {
			printf("  left on the EQ: event %u\n", ev);
		} else {
			break;
		}
	}
	/* the survivor's fabric, domain and EQ take a new connection, and data moves */
	conn c;
	if (!EXPECT_OK(connect_pair(st, c, "7477", pk_bufsize))) {
		bool moved = transfer(c, pk_bufsize, 11);
		printf("  new connection after the kill: 1 MiB %s\n",
		       moved ? "verified" : "FAILED");
	}
	close_conn(c);
	close_stack(st);
}

/* The same kill, seen by a process that only spins: connected through fi_eq_read, it posts
 * receives and polls its CQ with fi_cq_read, never reading its EQ and never sleeping in the
 * provider. Control progress is still automatic: the receives flush within seconds (with no
 * EQ thread, the CQ's empty reads drain the EQ's channel now and then), FI_SHUTDOWN waits on
 * the EQ, and no progress thread ever started (one starts only where something sleeps; the
 * registration cache's reader, which a refused and retried connect can start, is not one). */
void test_spin_killed()
{
	killable k;
	if (connect_killable("7487", k, true))
		return;
	constexpr int nrecv = 16;
	std::vector<struct fi_context> ctx(nrecv);
	std::vector<int> done(nrecv, 0);
	for (int i = 0; i < nrecv; i++)
		EXPECT_OK(fi_recv(k.cli.ep, k.cli.buf.data() + pk_msg * (i % 8), pk_msg,
		                  k.cli.desc(), 0, &ctx[static_cast<size_t>(i)]));
	/* the registration cache's reader ("vwait-mr") watches released buffers whether or not
	 * anything sleeps: it is not counted (it names itself as its first step: 2 s for that) */
	const int threads_connected = tasks_named_reaching(1, 2000, "vwait-mr", false);
	k.kill_server();
	auto t_kill = clock_type::now();
	int flushed = 0, other = 0;
	double t_last = -1;
	long polls = 0;
	while (flushed + other < nrecv && since(t_kill) < 20) {
		struct fi_cq_data_entry e;
		ssize_t r = fi_cq_read(k.cli.rx, &e, 1);
		polls++;
		if (r == 1) {
			other++;
			continue;
		}
		struct fi_cq_err_entry err = {};
		if (r != -FI_EAVAIL || fi_cq_readerr(k.cli.rx, &err, 0) != 1)
			continue;
		long idx = static_cast<struct fi_context *>(err.op_context) - ctx.data();
		if (idx >= 0 && idx < nrecv && done[static_cast<size_t>(idx)]++ == 0)
			flushed++;
		else
			other++;
		t_last = since(t_kill);
	}
	const int threads_flushed = tasks_named_reaching(1, 2000, "vwait-mr", false);
	printf("  %d of %d receives flushed (%d other completions), the last %.2f s after the "
	       "kill, %ld reads; threads: %d connected, %d after, besides %d vwait-mr\n",
	       flushed, nrecv, other, t_last, polls, threads_connected, threads_flushed,
	       tasks_named("vwait-mr"));
	EXPECT(flushed == nrecv, flushed);
	EXPECT(other == 0, other);
	/* 10x the second the flush takes in the emulated guest, half the loop's 20 s */
	EXPECT(t_last >= 0 && t_last < 10, static_cast<long>(t_last * 1000));
	EXPECT(threads_connected == 1, threads_connected);
	EXPECT(threads_flushed == 1, threads_flushed);
	cm_buf ent;
	uint32_t ev = 0;
	long n = next_event(k.st.eq, &ev, ent, true);
	EXPECT(n >= static_cast<long>(sizeof(struct fi_eq_cm_entry)) && ev == FI_SHUTDOWN &&
	           ent.e()->fid == &k.cli.ep->fid,
	       n);
	printf("  then FI_SHUTDOWN %s on the EQ\n",
	       n > 0 && ev == FI_SHUTDOWN ? "read" : "NOT read");
	k.close_all();
}

/* ------------------------------------------------------------------ exhaustion */

/* Posting past tx_size / rx_size, memory regions until the device refuses; data moves once
 * they are freed. */
void test_exhaustion()
{
	stack st;
	conn c;
	if (EXPECT_OK(open_stack(st, FI_WAIT_FD)) ||
	    EXPECT_OK(connect_pair(st, c, "7478", 1u << 20))) {
		close_conn(c);
		close_stack(st);
		return;
	}
	size_t tx_size = st.info->tx_attr->size, rx_size = st.info->rx_attr->size;
	/* the server's receive queue: rx_size receives, then -FI_EAGAIN */
	size_t rposted = 0;
	ssize_t r = 0;
	while (rposted < rx_size + 8 &&
	       (r = fi_recv(c.srv.ep, c.srv.buf.data(), 64, c.srv.desc(), 0, nullptr)) == 0)
		rposted++;
	printf("  receives posted: %zu of rx_size %zu, then %s\n", rposted, rx_size,
	       fi_strerror(static_cast<int>(-r)));
	EXPECT(rposted == rx_size && r == -FI_EAGAIN, rposted);
	/* the client's send queue: tx_size sends (none read back yet), then -FI_EAGAIN */
	size_t posted = 0;
	while (posted < tx_size + 8 &&
	       (r = fi_send(c.cli.ep, c.cli.buf.data(), 64, c.cli.desc(), 0, nullptr)) == 0)
		posted++;
	printf("  sends posted: %zu of tx_size %zu, then %s\n", posted, tx_size,
	       fi_strerror(static_cast<int>(-r)));
	EXPECT(posted == std::min(tx_size, rx_size) && r == -FI_EAGAIN, posted);
	/* reading the completions gives the slots back */
	struct fi_cq_data_entry e[64];
	size_t got = 0, rgot = 0;
	auto end = clock_type::now() + std::chrono::seconds(20);
	while ((got < posted || rgot < posted) && clock_type::now() < end) {
		ssize_t n = fi_cq_read(c.cli.tx, e, 64);
		if (n > 0)
			got += static_cast<size_t>(n);
		n = fi_cq_read(c.srv.rx, e, 64);
		if (n > 0)
			rgot += static_cast<size_t>(n);
		EXPECT(n > 0 || n == -FI_EAGAIN, n);
	}
	EXPECT(got == posted && rgot == posted, got);
	/* and the queues take work again */
	EXPECT_OK(fi_recv(c.srv.ep, c.srv.buf.data(), 64, c.srv.desc(), 0, nullptr));
	EXPECT_OK(fi_send(c.cli.ep, c.cli.buf.data(), 64, c.cli.desc(), 0, nullptr));
	long a = sread_one(c.cli.tx, e, nullptr, timeout_ms);
	long b = sread_one(c.srv.rx, e, nullptr, timeout_ms);
	EXPECT(a == 1, a);
	EXPECT(b == 1, b);
	/* cancel what is left on the server's receive queue: a new connection below */
	close_conn(c);

	/* CQ entries: a send CQ of one entry, a reader blocked in fi_cq_sread on it while far
	 * more completes: the overrun (the device's IBV_EVENT_CQ_ERR on the async fd, a source
	 * of the CQ's waiter) ends the read with FI_EOVERRUN within seconds, not at its deadline */
	if (!EXPECT_OK(connect_pair(st, c, "7484", 4096, FI_WAIT_FD, 1))) {
		for (int i = 0; i < 200; i++)
			fi_recv(c.srv.ep, c.srv.buf.data(), 64, c.srv.desc(), 0, nullptr);
		std::atomic<int> ogot{0};
		int overrun_err = 0;
		double took = -1;
		std::thread reader([&] {
			auto t0 = clock_type::now();
			for (;;) {
				struct fi_cq_data_entry ce;
				struct fi_cq_err_entry cerr;
				long n = sread_one(c.cli.tx, &ce, &cerr, 30000);
				if (n == 1) {
					ogot++;
					continue;
				}
				if (n == -FI_EAVAIL)
					overrun_err = cerr.err;
				break;
			}
			took = since(t0);
		});
		std::this_thread::sleep_for(std::chrono::milliseconds(100));
		int sent = 0;
		for (int i = 0; i < 200; i++)
			sent +=
			    fi_send(c.cli.ep, c.cli.buf.data(), 8, c.cli.desc(), 0, nullptr) == 0;
		reader.join();
		printf(
		    "  %d sends on a send CQ of 1 entry, reader blocked in fi_cq_sread: %d read, "
		    "then %s after %.2f s\n",
		    sent, ogot.load(), overrun_err ? fi_strerror(overrun_err) : "nothing", took);
		EXPECT(overrun_err == FI_EOVERRUN, overrun_err);
		/* ended by the overrun: 10 s, a third of the sread's deadline */
		EXPECT(took < 10, static_cast<long>(took * 1000));
	}
	close_conn(c);

	/* memory regions until the device refuses */
	const bool limited = getenv("VWAIT_MR_LIMITED") && atoi(getenv("VWAIT_MR_LIMITED"));
	const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
	const size_t cap = limited ? 100000 : 2000;
	/* page aligned: one page pinned per region */
	std::unique_ptr<uint8_t, decltype(&free)> region(
	    static_cast<uint8_t *>(aligned_alloc(page, page * 64)), &free);
	std::vector<struct fid_mr *> mrs;
	int ret = 0;
	auto t0 = clock_type::now();
	while (mrs.size() < cap) {
		struct fid_mr *mr = nullptr;
		ret = fi_mr_reg(st.domain, region.get() + page * (mrs.size() % 64), page,
		                FI_SEND | FI_RECV, 0, 0, 0, &mr, nullptr);
		if (ret)
			break;
		mrs.push_back(mr);
	}
	printf("  %zu memory regions registered in %.2f s, then %s\n", mrs.size(), since(t0),
	       ret ? fi_strerror(-ret) : "(cap reached)");
	if (limited)
		EXPECT(ret == -FI_ENOMEM || ret == -FI_ENOSPC || ret == -FI_EAGAIN, ret);
	else
		printf("  (VWAIT_MR_LIMITED unset: registration may not reach the limit)\n");
	for (struct fid_mr *mr : mrs)
		close_fid(&mr->fid);
	/* freed: a new connection registers its buffers and moves data */
	if (!EXPECT_OK(connect_pair(st, c, "7479", 1u << 20)))
		printf("  after freeing them: 1 MiB %s\n",
		       transfer(c, 1u << 20, 5) ? "verified" : "FAILED");
	close_conn(c);
	close_stack(st);
}

/* ------------------------------------------------------------------ waiter-closer */

/* A blocked call in its own thread; ret and the time it took are read after join. */
struct blocked {
	std::thread t;
	std::atomic<bool> started{false};
	long ret = 0;
	double took = -1;
	template <typename F>
	void start(F fn)
	{
		t = std::thread([this, fn] {
			auto t0 = clock_type::now();
			started = true;
			ret = fn();
			took = since(t0);
		});
		while (!started)
			std::this_thread::yield();
		/* let it block */
		std::this_thread::sleep_for(std::chrono::milliseconds(200));
	}
	void join() { t.join(); }
};

void test_waiter_closer()
{
	stack st;
	conn c;
	if (EXPECT_OK(open_stack(st, FI_WAIT_FD)) ||
	    EXPECT_OK(connect_pair(st, c, "7480", 1u << 16))) {
		close_conn(c);
		close_stack(st);
		return;
	}
	/* a hang: each wait below ends in seconds when it ends as it should, its deadline
	 * (30 s at most) when not; the .test's timeout is larger, so this names the hang */
	watchdog(120, "waiter-closer");
	struct fi_cq_data_entry e;
	struct fi_cq_err_entry err;

	/* 1. fi_cq_sread forever, fi_cq_signal from another thread: -FI_EAGAIN */
	{
		blocked b;
		b.start([&] { return fi_cq_sread(c.cli.tx, &e, 1, nullptr, -1); });
		EXPECT_OK(fi_cq_signal(c.cli.tx));
		b.join();
		printf("  fi_cq_sread(-1) vs fi_cq_signal: %s after %.3f s\n",
		       fi_strerror(static_cast<int>(-b.ret)), b.took);
		EXPECT(b.ret == -FI_EAGAIN, b.ret);
	}
	/* 2. fi_eq_sread forever, fi_eq_write: the entry */
	{
		blocked b;
		uint32_t ev = 0;
		struct fi_eq_entry ent = {};
		b.start([&] { return fi_eq_sread(st.eq, &ev, &ent, sizeof(ent), -1, 0); });
		struct fi_eq_entry w = {};
		w.context = &w;
		EXPECT(fi_eq_write(st.eq, FI_NOTIFY, &w, sizeof(w), 0) == sizeof(w), 0);
		b.join();
		printf("  fi_eq_sread(-1) vs fi_eq_write: %ld after %.3f s\n", b.ret, b.took);
		EXPECT(b.ret == sizeof(ent) && ev == FI_NOTIFY && ent.context == &w, b.ret);
	}
	/* 3. fi_wait forever on a wait set of verbs CQs, fi_cq_signal of a member: 0; and a
	 * bounded fi_wait while another member is closed: returns at its deadline */
	{
		struct fid_wait *set = nullptr;
		struct fi_wait_attr wa = {FI_WAIT_FD, 0};
		struct fid_cq *m1 = nullptr, *m2 = nullptr;
		if (!EXPECT_OK(fi_sets::wait_open(st.fabric, &wa, &set)) &&
		    !EXPECT_OK(open_cq(st, &m1, FI_WAIT_SET, set)) &&
		    !EXPECT_OK(open_cq(st, &m2, FI_WAIT_SET, set))) {
			blocked b;
			b.start([&] { return fi_sets::wait(set, -1); });
			EXPECT_OK(fi_cq_signal(m1));
			b.join();
			printf("  fi_wait(-1) vs fi_cq_signal(member): %ld after %.3f s\n", b.ret,
			       b.took);
			EXPECT(b.ret == 0, b.ret);
			blocked b2;
			b2.start([&] { return fi_sets::wait(set, 1500); });
			close_fid(&m2->fid);
			m2 = nullptr;
			b2.join();
			printf("  fi_wait(1500 ms) vs fi_close(other member): %s after %.3f s\n",
			       fi_strerror(static_cast<int>(-b2.ret)), b2.took);
			EXPECT(b2.ret == -FI_ETIMEDOUT || b2.ret == 0, b2.ret);
			/* at its deadline, not hung on the closed member: 10x the 1.5 s */
			EXPECT(b2.took < 15, static_cast<long>(b2.took * 1000));
		}
		close_fid(m1 ? &m1->fid : nullptr);
		close_fid(m2 ? &m2->fid : nullptr);
		close_fid(set ? &set->fid : nullptr);
	}
	/* 4. the peer disconnects while the server blocks in fi_cq_sread on its receive CQ
	 * (receives posted) and another thread in fi_eq_sread: the EQ thread gets FI_SHUTDOWN,
	 * the QP flushes, the CQ waiter gets the flushed receives as errors */
	for (int i = 0; i < 4; i++)
		EXPECT_OK(fi_recv(c.srv.ep, c.srv.buf.data(), 64, c.srv.desc(), 0, nullptr));
	for (int i = 0; i < 4; i++)
		EXPECT_OK(fi_recv(c.cli.ep, c.cli.buf.data(), 64, c.cli.desc(), 0, nullptr));
	{
		blocked cqw, eqw;
		cqw.start([&] { return sread_one(c.srv.rx, &e, &err, 30000); });
		std::vector<uint32_t> events;
		eqw.start([&] {
			/* both sides' FI_SHUTDOWN */
			long ret = 0;
			for (int k = 0; k < 2; k++) {
				uint32_t ev = 0;
				cm_buf ent;
				ret = fi_eq_sread(st.eq, &ev, ent.raw, sizeof(ent.raw), 30000, 0);
				if (ret < 0)
					return ret;
				events.push_back(ev);
			}
			return ret;
		});
		EXPECT_OK(fi_shutdown(c.cli.ep, 0));
		cqw.join();
		eqw.join();
		printf("  peer disconnects: server's fi_cq_sread -> %s (%s) after %.3f s; "
		       "fi_eq_sread -> %zu events after %.3f s\n",
		       fi_strerror(static_cast<int>(-cqw.ret)),
		       cqw.ret == -FI_EAVAIL ? fi_strerror(err.err) : "-", cqw.took, events.size(),
		       eqw.took);
		EXPECT(cqw.ret == -FI_EAVAIL && err.err == FI_ECANCELED, cqw.ret);
		/* ended by the flush (10x the second a disconnect takes in the emulated guest),
		 * not at the sread's 30 s deadline */
		EXPECT(cqw.took < 10, static_cast<long>(cqw.took * 1000));
		EXPECT(events.size() == 2 && events[0] == FI_SHUTDOWN && events[1] == FI_SHUTDOWN,
		       events.size());
	}
	/* 5. a waiter on a receive CQ (receives posted) while another thread closes the
	 * endpoint that feeds it, still connected: what a closed endpoint had posted is not
	 * reported, the wait ends at its deadline; the peer gets FI_SHUTDOWN */
	{
		conn c2;
		if (!EXPECT_OK(connect_pair(st, c2, "7485", 4096))) {
			for (int i = 0; i < 4; i++)
				EXPECT_OK(fi_recv(c2.cli.ep, c2.cli.buf.data(), 64, c2.cli.desc(),
				                  0, nullptr));
			blocked idle;
			struct fi_cq_data_entry ie;
			struct fi_cq_err_entry ierr;
			idle.start([&] { return sread_one(c2.cli.rx, &ie, &ierr, 1500); });
			close_fid(&c2.cli.ep->fid);
			c2.cli.ep = nullptr;
			idle.join();
			printf(
			    "  fi_cq_sread(1500 ms) vs fi_close(its endpoint): %s after %.3f s\n",
			    fi_strerror(static_cast<int>(-idle.ret)), idle.took);
			EXPECT(idle.ret == -FI_EAGAIN || idle.ret == -FI_EAVAIL, idle.ret);
			/* at its deadline, not hung on the closed endpoint: 10x the 1.5 s */
			EXPECT(idle.took < 15, static_cast<long>(idle.took * 1000));
			uint32_t ev = 0;
			cm_buf ent;
			long n = eq_event(st.eq, &ev, ent.raw, sizeof(ent.raw), 5000);
			printf("  the peer of the closed endpoint: %s\n",
			       n >= 0 && ev == FI_SHUTDOWN ? "FI_SHUTDOWN" : "no FI_SHUTDOWN");
			EXPECT(n >= 0 && ev == FI_SHUTDOWN, n);
		}
		close_conn(c2);
	}
	/* 6. fi_cntr_wait on a verbs receive counter (FI_WAIT_FD), forever: a message that
	 * arrives ends it; fi_cntr_add from another thread ends it; the peer disconnecting
	 * (the EQ read by another thread, the receives left flush) ends a wait for more than
	 * will ever come with -FI_EAVAIL */
	{
		struct fid_cntr *cntr = nullptr;
		struct fi_cntr_attr ca = {};
		ca.events = FI_CNTR_EVENTS_COMP;
		ca.wait_obj = FI_WAIT_FD;
		conn c3;
		if (!EXPECT_OK(fi_cntr_open(st.domain, &ca, &cntr, nullptr)) &&
		    !EXPECT_OK(connect_pair(st, c3, "7486", 4096, FI_WAIT_FD, 0, cntr))) {
			for (int i = 0; i < 4; i++)
				EXPECT_OK(fi_recv(c3.srv.ep, c3.srv.buf.data(), 64, c3.srv.desc(),
				                  0, nullptr));
			blocked b1;
			b1.start([&] { return static_cast<long>(fi_cntr_wait(cntr, 1, -1)); });
			EXPECT_OK(
			    fi_send(c3.cli.ep, c3.cli.buf.data(), 8, c3.cli.desc(), 0, nullptr));
			b1.join();
			printf("  fi_cntr_wait(1, -1) vs a message: %ld after %.3f s\n", b1.ret,
			       b1.took);
			EXPECT(b1.ret == 0, b1.ret);
			blocked b2;
			b2.start([&] { return static_cast<long>(fi_cntr_wait(cntr, 100, -1)); });
			EXPECT_OK(fi_cntr_add(cntr, 99));
			b2.join();
			printf("  fi_cntr_wait(100, -1) vs fi_cntr_add(99): %ld after %.3f s\n",
			       b2.ret, b2.took);
			EXPECT(b2.ret == 0, b2.ret);
			blocked b3, eqw;
			b3.start(
			    [&] { return static_cast<long>(fi_cntr_wait(cntr, 1000, 30000)); });
			eqw.start([&] {
				long ret = 0;
				for (int k = 0; k < 2 && ret >= 0; k++) {
					uint32_t ev = 0;
					cm_buf ent;
					ret = fi_eq_sread(st.eq, &ev, ent.raw, sizeof(ent.raw),
					                  30000, 0);
				}
				return ret;
			});
			EXPECT_OK(fi_shutdown(c3.cli.ep, 0));
			b3.join();
			eqw.join();
			printf(
			    "  fi_cntr_wait(1000, 30 s) vs the peer disconnecting: %s after %.3f s "
			    "(error value %llu)\n",
			    fi_strerror(static_cast<int>(-b3.ret)), b3.took,
			    static_cast<unsigned long long>(fi_cntr_readerr(cntr)));
			EXPECT(b3.ret == -FI_EAVAIL, b3.ret);
			/* ended by the disconnect, as cqw above, not at the 30 s deadline */
			EXPECT(b3.took < 10, static_cast<long>(b3.took * 1000));
		}
		close_conn(c3);
		close_fid(cntr ? &cntr->fid : nullptr);
	}
	alarm(0);
	close_conn(c);
	close_stack(st);
}

/* ------------------------------------------------------------------ race */

/* Messages (sequence number as remote CQ data) from cli to srv for VWAIT_RACE_SECONDS.
 * On the server's receive CQ (FI_WAIT_FD): one thread in fi_cq_sread, one in
 * fi_trywait + poll(FI_GETWAIT fd) + fi_cq_read, one raising fi_cq_signal at random; the
 * receives are reposted as they complete. Every sequence number must arrive exactly once and
 * no wait may run out (2 s) while messages are due. */
void test_race()
{
	stack st;
	conn c;
	constexpr size_t slots = 64;
	if (EXPECT_OK(open_stack(st, FI_WAIT_FD)) ||
	    EXPECT_OK(connect_pair(st, c, "7481", slots * 64))) {
		close_conn(c);
		close_stack(st);
		return;
	}
	double seconds = getenv("VWAIT_RACE_SECONDS") ? atof(getenv("VWAIT_RACE_SECONDS")) : 60;
	int fd = -1;
	EXPECT_OK(fi_control(&c.srv.rx->fid, FI_GETWAIT, &fd));
	std::mutex post_mu;
	std::vector<struct fi_context> rctx(slots);
	auto repost = [&](void *op) {
		auto i = static_cast<size_t>(static_cast<struct fi_context *>(op) - rctx.data());
		std::lock_guard<std::mutex> lock(post_mu);
		return fi_recv(c.srv.ep, c.srv.buf.data() + 64 * i, 64, c.srv.desc(), 0, &rctx[i]);
	};
	for (size_t i = 0; i < slots; i++)
		EXPECT_OK(repost(&rctx[i]));

	std::atomic<bool> sending_done{false}, stop{false};
	std::atomic<uint64_t> sent{0}, received{0}, stalls{0}, dups{0}, bad{0}, signals{0},
	    sread_calls{0}, trywait_calls{0}, trywait_eagain{0}, signal_returns{0};
	std::vector<std::atomic<uint8_t>> seen(1u << 24);
	auto take = [&](const struct fi_cq_data_entry &e) {
		if (!(e.flags & FI_REMOTE_CQ_DATA) || e.data >= seen.size()) {
			bad++;
			return;
		}
		if (seen[e.data].fetch_add(1) != 0)
			dups++;
		received++;
		if (repost(e.op_context) != 0)
			bad++;
	};
	auto due = [&] { return received.load() < sent.load(); };
	/* a wait that ran out while messages were due all along: a lost wakeup */
	auto consumer_sread = [&] {
		struct fi_cq_data_entry e[8];
		while (!stop) {
			bool was_due = due();
			auto t0 = clock_type::now();
			ssize_t n = fi_cq_sread(c.srv.rx, e, 8, nullptr, 2000);
			sread_calls++;
			if (n > 0) {
				for (ssize_t i = 0; i < n; i++)
					take(e[i]);
			} else if (n == -FI_EAGAIN) {
				/* a wake that comes takes milliseconds; a lost one the whole 2 s */
				if (since(t0) >= 1.9 && was_due && due())
					stalls++;
				else
					signal_returns++;
			} else {
				bad++;
			}
		}
	};
	auto consumer_trywait = [&] {
		struct fi_cq_data_entry e[8];
		struct fid *fids[1] = {&c.srv.rx->fid};
		while (!stop) {
			trywait_calls++;
			if (fi_trywait(st.fabric, fids, 1) == 0) {
				bool was_due = due();
				struct pollfd p = {fd, POLLIN, 0};
				int pr = poll(&p, 1, 2000);
				if (pr == 0 && was_due && due())
					stalls++;
			} else {
				trywait_eagain++;
			}
			ssize_t n = fi_cq_read(c.srv.rx, e, 8);
			for (ssize_t i = 0; i < n; i++)
				take(e[i]);
			if (n < 0 && n != -FI_EAGAIN)
				bad++;
		}
	};
	auto signaller = [&] {
		std::mt19937 rng(7);
		while (!stop) {
			std::this_thread::sleep_for(std::chrono::microseconds(rng() % 500));
			fi_cq_signal(c.srv.rx);
			signals++;
		}
	};
	/* the sender keeps at most slots / 2 messages ahead of the receiver */
	auto sender = [&] {
		auto end = clock_type::now() + std::chrono::duration<double>(seconds);
		struct fi_cq_data_entry e[16];
		std::mt19937 rng(3);
		while (clock_type::now() < end) {
			uint64_t window = 1 + rng() % (slots / 2);
			while (sent.load() - received.load() >= window && !stop)
				std::this_thread::yield();
			uint64_t seq = sent.load();
			if (seq >= seen.size())
				break;
			ssize_t r = fi_senddata(c.cli.ep, c.cli.buf.data(), 8, c.cli.desc(), seq, 0,
			                        nullptr);
			if (r == -FI_EAGAIN) {
				fi_cq_read(c.cli.tx, e, 16);
				continue;
			}
			if (r != 0) {
				bad++;
				break;
			}
			sent++;
			ssize_t n = fi_cq_read(c.cli.tx, e, 16);
			if (n < 0 && n != -FI_EAGAIN)
				bad++;
		}
		sending_done = true;
	};
	auto t0 = clock_type::now();
	std::thread ts(sender), c1(consumer_sread), c2(consumer_sread), c3(consumer_trywait),
	    sg(signaller);
	ts.join();
	auto drain_end = clock_type::now() + std::chrono::seconds(10);
	while (due() && clock_type::now() < drain_end)
		std::this_thread::sleep_for(std::chrono::milliseconds(10));
	stop = true;
	fi_cq_signal(c.srv.rx);
	sg.join();
	c1.join();
	c2.join();
	c3.join();
	double dt = since(t0);
	uint64_t missing = 0;
	for (uint64_t i = 0; i < sent.load(); i++)
		missing += seen[i].load() == 0;
	printf("  %.1f s: %llu messages sent, %llu received, %llu missing, %llu twice, "
	       "%llu stalls, %llu bad; %llu fi_cq_signal, %llu sreads (%llu ended by a signal), "
	       "%llu trywaits (%llu -FI_EAGAIN)\n",
	       dt, (unsigned long long)sent.load(), (unsigned long long)received.load(),
	       (unsigned long long)missing, (unsigned long long)dups.load(),
	       (unsigned long long)stalls.load(), (unsigned long long)bad.load(),
	       (unsigned long long)signals.load(), (unsigned long long)sread_calls.load(),
	       (unsigned long long)signal_returns.load(), (unsigned long long)trywait_calls.load(),
	       (unsigned long long)trywait_eagain.load());
	EXPECT(sent.load() > 0, sent.load());
	EXPECT(received.load() == sent.load(), received.load());
	EXPECT(missing == 0, missing);
	EXPECT(dups.load() == 0, dups.load());
	EXPECT(stalls.load() == 0, stalls.load());
	EXPECT(bad.load() == 0, bad.load());
	close_conn(c);
	close_stack(st);
}

/* ------------------------------------------------------------------ device-gone */

/* `rdma link delete RXE_DEV` while a connection is open, receives are posted and threads
 * block in fi_cq_sread (a CQ with receives posted, an idle one), fi_eq_sread and fi_wait.
 *
 * What soft-RoCE does (Linux 6.1): rxe cannot disassociate a user context, so the delete
 * removes the device from rdma_cm at once (RDMA_CM_EVENT_DEVICE_REMOVAL on every id) and then
 * blocks until no process holds the verbs device: no IBV_EVENT_DEVICE_FATAL reaches the async
 * fd, and since librdmacm keeps its device contexts open, the delete ends when this process
 * exits (the .test script waits for that, then adds the device again). What vwait makes of
 * it: an FI_ENODEV error on the EQ for every endpoint and listener; as the EQ reads it, an
 * endpoint's QP is moved to the error state, so its posted work flushes as error completions
 * (FI_ECANCELED) that wake the CQ's waiters; a CQ with nothing posted has nothing to report
 * and its waiters end at their timeout (or on fi_cq_signal, as here once the EQ said the
 * device is gone). Every close succeeds afterwards. */
void test_device_gone()
{
	const char *dev = getenv("RXE_DEV");
	if (!dev || !*dev) {
		printf("  SKIP: RXE_DEV is not set\n");
		return;
	}
	stack st;
	conn c;
	struct fid_wait *set = nullptr;
	struct fid_cq *idle = nullptr, *member = nullptr;
	struct fi_wait_attr wa = {FI_WAIT_FD, 0};
	if (EXPECT_OK(open_stack(st, FI_WAIT_FD)) ||
	    EXPECT_OK(connect_pair(st, c, "7482", 1u << 16)) || EXPECT_OK(open_cq(st, &idle)) ||
	    EXPECT_OK(fi_sets::wait_open(st.fabric, &wa, &set)) ||
	    EXPECT_OK(open_cq(st, &member, FI_WAIT_SET, set))) {
		close_fid(member ? &member->fid : nullptr);
		close_fid(set ? &set->fid : nullptr);
		close_fid(idle ? &idle->fid : nullptr);
		close_conn(c);
		close_stack(st);
		return;
	}
	EXPECT(transfer(c, 4096, 1), 0);
	for (int i = 0; i < 8; i++) {
		EXPECT_OK(fi_recv(c.srv.ep, c.srv.buf.data(), 64, c.srv.desc(), 0, nullptr));
		EXPECT_OK(fi_recv(c.cli.ep, c.cli.buf.data(), 64, c.cli.desc(), 0, nullptr));
	}
	watchdog(150, "device-gone");
	constexpr int wait_ms = 30000;
	struct fi_cq_data_entry e1, e2;
	struct fi_cq_err_entry err1 = {}, err2 = {};
	blocked rxw, idlew, setw, eqw;
	std::vector<std::pair<uint32_t, int>> eq_events; /* event, error (0: none) */
	std::atomic<int> enodev{0};
	rxw.start([&] { return sread_one(c.srv.rx, &e1, &err1, wait_ms); });
	idlew.start([&] { return sread_one(idle, &e2, &err2, wait_ms); });
	setw.start([&] { return fi_sets::wait(set, wait_ms); });
	eqw.start([&] {
		/* every event until both endpoints and the listener reported the device gone */
		auto end = clock_type::now() + std::chrono::milliseconds(wait_ms);
		while (enodev < 3 && clock_type::now() < end) {
			uint32_t ev = 0;
			cm_buf ent;
			long n = fi_eq_sread(st.eq, &ev, ent.raw, sizeof(ent.raw), 1000, 0);
			if (n == -FI_EAVAIL) {
				struct fi_eq_err_entry err = {};
				fi_eq_readerr(st.eq, &err, 0);
				eq_events.emplace_back(0, err.err);
				if (err.err == FI_ENODEV)
					enodev++;
			} else if (n >= 0) {
				eq_events.emplace_back(ev, 0);
			}
		}
		return static_cast<long>(enodev.load());
	});
	auto t0 = clock_type::now();
	pid_t del = fork();
	if (del == 0) {
		execlp("rdma", "rdma", "link", "delete", dev, static_cast<char *>(nullptr));
		_exit(127);
	}
	printf("  rdma link delete %s started (pid %d)\n", dev, static_cast<int>(del));
	eqw.join();
	double t_eq = since(t0);
	printf("  EQ: %d FI_ENODEV errors within %.2f s; events:", enodev.load(), t_eq);
	for (auto &ev : eq_events)
		printf(" %s", ev.second ? fi_strerror(ev.second)
		                        : (ev.first == FI_SHUTDOWN ? "FI_SHUTDOWN" : "other"));
	printf("\n");
	EXPECT(enodev.load() == 3, enodev.load());
	/* 10x the second the removal's events take in the emulated guest, a third of the
	 * waits' 30 s */
	EXPECT(t_eq < 10, static_cast<long>(t_eq * 1000));
	rxw.join();
	printf("  fi_cq_sread on a CQ with receives posted: %s (%s) after %.2f s\n",
	       fi_strerror(static_cast<int>(-rxw.ret)),
	       rxw.ret == -FI_EAVAIL ? fi_strerror(err1.err) : "-", rxw.took);
	EXPECT(rxw.ret == -FI_EAVAIL, rxw.ret);
	EXPECT(rxw.took < 10, static_cast<long>(rxw.took * 1000)); /* as t_eq */
	/* the idle waiters: released by the application once the EQ said so */
	EXPECT_OK(fi_cq_signal(idle));
	EXPECT_OK(fi_cq_signal(member));
	idlew.join();
	setw.join();
	printf("  idle fi_cq_sread: %s after %.2f s; fi_wait on the set: %s after %.2f s\n",
	       fi_strerror(static_cast<int>(-idlew.ret)), idlew.took,
	       fi_strerror(static_cast<int>(-setw.ret)), setw.took);
	EXPECT(idlew.ret == -FI_EAGAIN || idlew.ret == -FI_EAVAIL, idlew.ret);
	EXPECT(setw.ret == 0, setw.ret);
	/* posting on an endpoint whose device went away: an error, not a crash */
	ssize_t r = fi_send(c.cli.ep, c.cli.buf.data(), 8, c.cli.desc(), 0, nullptr);
	printf("  fi_send after the removal: %s\n", r ? fi_strerror(static_cast<int>(-r)) : "0");
	/* everything closes */
	auto tc = clock_type::now();
	close_fid(&member->fid);
	close_fid(&set->fid);
	close_fid(&idle->fid);
	close_conn(c);
	close_stack(st);
	printf("  everything closed in %.2f s\n", since(tc));
	alarm(0);
	int status = 0;
	pid_t w = 0;
	for (int i = 0; i < 100 && (w = waitpid(del, &status, WNOHANG)) == 0; i++)
		std::this_thread::sleep_for(std::chrono::milliseconds(100));
	if (w == del)
		printf("  rdma link delete finished (status %d) %.2f s after it started\n",
		       WIFEXITED(status) ? WEXITSTATUS(status) : -1, since(t0));
	else
		printf("  rdma link delete still running while this process lives (%.2f s): it "
		       "finishes when the process exits\n",
		       since(t0));
}

/* ------------------------------------------------------------------ sendrecv */

void test_sendrecv()
{
	stack st;
	conn c;
	if (!EXPECT_OK(open_stack(st, FI_WAIT_FD)) &&
	    !EXPECT_OK(connect_pair(st, c, "7483", 1u << 20)))
		printf("  1 MiB %s\n", transfer(c, 1u << 20, 9) ? "verified" : "FAILED");
	close_conn(c);
	close_stack(st);
}

const test tests[] = {
    {"peer-killed", test_peer_killed},
    {"spin-killed", test_spin_killed},
    {"exhaustion", test_exhaustion},
    {"waiter-closer", test_waiter_closer},
    {"race", test_race},
    {"device-gone", test_device_gone},
    {"sendrecv", test_sendrecv},
};

} // namespace

int main(int argc, char **argv)
{
	setvbuf(stdout, nullptr, _IOLBF, 0);
	if (!have_rxe())
		return 77;
	self_path = argv[0];
	if (argc > 2 && strcmp(argv[1], "serve-until-killed") == 0)
		return serve_until_killed(argv[2]);
	if (argc != 2) {
		printf(
		    "usage: dp_fault TEST (peer-killed spin-killed exhaustion waiter-closer race "
		    "device-gone sendrecv)\n");
		return 1;
	}
	for (const test &t : tests) {
		if (strcmp(argv[1], t.name) != 0)
			continue;
		auto t0 = clock_type::now();
		printf("== %s\n", t.name);
		t.fn();
		printf("%s %s (%.2fs)\n", failures ? "FAILED" : "ok", t.name, since(t0));
		return failures ? 1 : 0;
	}
	printf("unknown test %s\n", argv[1]);
	return 1;
}
