/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* An endpoint closed while its connection's answer is being taken in (fi_multi_ep -e rdm over
 * vwait;ofi_rxm, whose peers connect to each other at once, crashed there).
 *
 * librdmacm moves the id's QP inside rdma_get_cm_event, before it hands the event out: to ERR
 * on RDMA_CM_EVENT_REJECTED, to RTR and RTS on the connect response. The EQ's thread makes
 * that call. This program defines ibv_modify_qp and ibv_destroy_qp itself (the executable comes
 * first in the lookup, so librdmacm's calls land here): the first move of the watched kind
 * tells the test thread, which closes the endpoint, and holds the move for hold_ms. A QP
 * destroyed while its move is held is the bug (fi_close must wait for the move); the move of a
 * destroyed QP is then skipped, so the bug fails the test instead of crashing it.
 *
 *   cm_close_race rejected   the server rejects; the client closes during the move to ERR
 *   cm_close_race accepted   the server accepts; the client closes during the move to RTR
 *                            (not on iWARP: no such move in user space, see below)
 *
 * Needs FI_PROVIDER_PATH (the built plugin) and RXE_ADDR. Exit 0 pass, 77 skip, 1 fail. */
#include "harness.h"

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#include <dlfcn.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

namespace
{

using namespace vwait_it;

/* long enough for the test thread's close to land in the hold on a loaded guest; a close
 * after it passes without testing the race, so a short hold cannot fail a test */
constexpr int hold_ms = 400;

/* What the interposers share with the test thread (under mu). */
struct watch_flags {
	bool armed = false;          /* the next move to `state` is held */
	std::thread::id test_thread; /* its own moves (rdma_accept's) are not held */
	enum ibv_qp_state state = IBV_QPS_ERR;
	struct ibv_qp *held = nullptr;     /* the QP whose move is held now */
	bool entered = false;              /* a move was held (the test may close) */
	bool destroyed_while_held = false; /* the bug */
	bool held_done = false;            /* the held move went on (or was skipped) */
};
struct {
	std::mutex mu;
	std::condition_variable cv;
	watch_flags f;
} watch;

template <typename F>
F real(const char *name)
{
	void *p = dlsym(RTLD_NEXT, name);
	if (!p) {
		fprintf(stderr, "cm_close_race: dlsym(%s): %s\n", name, dlerror());
		abort();
	}
	return reinterpret_cast<F>(p);
}

} // namespace

extern "C" __attribute__((visibility("default"))) int
ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask)
{
	static auto next =
	    real<int (*)(struct ibv_qp *, struct ibv_qp_attr *, int)>("ibv_modify_qp");
	bool skip = false;
	{
		std::unique_lock<std::mutex> lock(watch.mu);
		if (watch.f.armed && (mask & IBV_QP_STATE) && attr->qp_state == watch.f.state &&
		    std::this_thread::get_id() != watch.f.test_thread) {
			watch.f.armed = false;
			watch.f.held = qp;
			watch.f.entered = true;
			watch.cv.notify_all();
			watch.cv.wait_for(lock, std::chrono::milliseconds(hold_ms),
			                  [] { return watch.f.destroyed_while_held; });
			skip = watch.f.destroyed_while_held;
			watch.f.held = nullptr;
			watch.f.held_done = true;
			watch.cv.notify_all();
		}
	}
	return skip ? EINVAL : next(qp, attr, mask);
}

extern "C" __attribute__((visibility("default"))) int ibv_destroy_qp(struct ibv_qp *qp)
{
	static auto next = real<int (*)(struct ibv_qp *)>("ibv_destroy_qp");
	{
		std::lock_guard<std::mutex> lock(watch.mu);
		if (qp && qp == watch.f.held) {
			watch.f.destroyed_while_held = true;
			watch.cv.notify_all();
		}
	}
	return next(qp);
}

namespace
{

/* Connects a client to a listener; the server answers (accept or reject) while the next
 * move of the client's QP to `state` is held; the client closes then. */
void close_during_move(bool accept, enum ibv_qp_state state)
{
	stack st;
	struct fid_pep *pep = nullptr;
	struct sockaddr_in addr = {};
	side cli, srv;
	if (EXPECT_OK(open_stack(st, FI_WAIT_UNSPEC)) ||
	    EXPECT_OK(listen_on(st, st.info, &pep, &addr, sizeof(addr)))) {
		close_fid(pep ? &pep->fid : nullptr);
		close_stack(st);
		return;
	}
	if (state == IBV_QPS_RTR && is_iwarp(st.info)) {
		/* iw_cm moves an iWARP QP to RTS in the kernel; librdmacm's rdma_get_cm_event moves
		 * it only on IB's CONNECT_RESPONSE, which iWARP never sends: no move to race */
		printf(
		    "  skipped on iWARP: the kernel (iw_cm) moves the QP, not rdma_get_cm_event\n");
		close_fid(&pep->fid);
		close_stack(st);
		return;
	}
	/* the EQ's thread starts once something may sleep: FI_GETWAIT says the application will
	 * (an fi_eq_sread below that finds its event while it spins would not) */
	int eq_fd = -1;
	EXPECT_OK(fi_control(&st.eq->fid, FI_GETWAIT, &eq_fd));
	if (EXPECT_OK(open_side(st, st.info, cli, side_cfg{}, 64)) == 0 &&
	    EXPECT_OK(fi_connect(cli.ep, &addr, nullptr, 0)) == 0) {
		cm_buf ent;
		uint32_t ev = 0;
		long n = eq_event(st.eq, &ev, ent.raw, sizeof(ent.raw));
		if (EXPECT(n > 0 && ev == FI_CONNREQ, n)) {
			struct fi_info *req = ent.e()->info;
			{
				std::lock_guard<std::mutex> lock(watch.mu);
				watch.f = {};
				watch.f.armed = true;
				watch.f.state = state;
				watch.f.test_thread = std::this_thread::get_id();
			}
			if (accept)
				EXPECT(open_side(st, req, srv, side_cfg{}, 64) == 0 &&
				           fi_accept(srv.ep, nullptr, 0) == 0,
				       0);
			else
				EXPECT_OK(fi_reject(pep, req->handle, nullptr, 0));
			fi_freeinfo(req);
			/* nobody here reads the EQ: its own thread takes the answer in */
			bool entered;
			{
				std::unique_lock<std::mutex> lock(watch.mu);
				/* must not hang: 10 s, 100x the answer's arrival in the guest */
				entered = watch.cv.wait_for(lock, std::chrono::seconds(10),
				                            [] { return watch.f.entered; });
			}
			if (EXPECT(entered, 0)) {
				auto t0 = clock_type::now();
				close_fid(&cli.ep->fid);
				cli.ep = nullptr;
				long ms = ms_since(t0);
				std::unique_lock<std::mutex> lock(watch.mu);
				watch.cv.wait_for(lock, std::chrono::seconds(10),
				                  [] { return watch.f.held_done; });
				printf(
				    "  move to %s held %d ms; fi_close took %ld ms; QP destroyed "
				    "during the move: %s\n",
				    state == IBV_QPS_ERR ? "ERR" : "RTR", hold_ms, ms,
				    watch.f.destroyed_while_held ? "yes" : "no");
				EXPECT(!watch.f.destroyed_while_held, 0);
			}
		}
	}
	{
		std::lock_guard<std::mutex> lock(watch.mu);
		watch.f.armed = false;
	}
	close_side(cli);
	close_side(srv);
	close_fid(pep ? &pep->fid : nullptr);
	close_stack(st);
}

void test_rejected()
{
	close_during_move(false, IBV_QPS_ERR);
}

void test_accepted()
{
	close_during_move(true, IBV_QPS_RTR);
}

const test tests[] = {
    {"rejected", test_rejected},
    {"accepted", test_accepted},
};

} // namespace

int main(int argc, char **argv)
{
	return run_tests(
	    argc, argv, tests, [] { return msg_hints(); }, "FI_EP_MSG");
}
