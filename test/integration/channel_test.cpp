/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* Completion channels as wait objects, on a real verbs device: two RC QPs of one device
 * connected to each other, their CQs on one shared channel whose fd is a source of a
 * util::waiter. Checks that an armed CQ's completion wakes the waiter, that the event names
 * the CQ that fired, that an unarmed CQ raises no event, that batched acks let
 * ibv_destroy_cq return, and that the waiter's FI_GETWAIT fd polls readable for an event.
 * Exit 0 pass, 77 no device, 1 fail. */
#include "vwait/channel.h"
#include "vwait/util/wait.h"

#include <rdma/fi_errno.h>
#include <rdma/providers/fi_prov.h>

#include <infiniband/verbs.h>
#include <poll.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

namespace
{

int failures = 0;
#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);   \
			failures++;                                                                \
		}                                                                                  \
	} while (0)

struct fi_provider test_prov = {};

struct sink final : vwait::cq_events {
	vwait::util::waiter *w = nullptr;
	int fired = 0;
	void on_event() noexcept override
	{
		fired++;
		if (w)
			w->wake();
	}
	~sink() override = default;
};

struct qp_deleter {
	void operator()(struct ibv_qp *qp) const noexcept { ibv_destroy_qp(qp); }
};
using qp_ptr = std::unique_ptr<struct ibv_qp, qp_deleter>;

int find_ipv4_gid(struct ibv_context *ctx, int port, int len)
{
	for (int i = 0; i < len; i++) {
		union ibv_gid gid;
		if (ibv_query_gid(ctx, port, i, &gid) != 0)
			continue;
		static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
		if (memcmp(gid.raw, mapped, sizeof(mapped)) == 0)
			return i;
	}
	return -1;
}

bool connect_qp(struct ibv_qp *qp, uint32_t remote_qpn, const union ibv_gid &gid, int gidx)
{
	struct ibv_qp_attr a = {};
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE;
	if (ibv_modify_qp(qp, &a,
	                  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		return false;
	a = {};
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = remote_qpn;
	a.rq_psn = 1;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = gid;
	a.ah_attr.grh.sgid_index = static_cast<uint8_t>(gidx);
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a,
	                  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
	                      IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return false;
	a = {};
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 1;
	a.max_rd_atomic = 1;
	return ibv_modify_qp(qp, &a,
	                     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
	                         IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) == 0;
}

/* A count of polls, 100 us apart: ms * 10 of them last at least ms, however fast the machine.
 * The callers' 1000 ms is 10x a loopback completion on a loaded emulated guest. */
int poll_n(struct ibv_cq *cq, int want, int ms)
{
	int got = 0;
	for (int i = 0; i < ms * 10 && got < want; i++) {
		struct ibv_wc wc[8];
		int n = ibv_poll_cq(cq, 8, wc);
		for (int k = 0; k < n; k++)
			if (wc[k].status != IBV_WC_SUCCESS)
				fprintf(stderr, "completion status %s\n",
				        ibv_wc_status_str(wc[k].status));
		got += n > 0 ? n : 0;
		if (got < want)
			usleep(100);
	}
	return got;
}

} // namespace

int main()
{
	/* a hang (e.g. ibv_destroy_cq waiting for an ack) fails the test; 120 s is 10x the whole
	 * program's run in the emulated guest */
	alarm(120);
	const char *want = getenv("RXE_DEV");
	int ndev = 0;
	vwait::verbs::device_list_ptr list = vwait::verbs::get_device_list(&ndev);
	struct ibv_device *dev = nullptr;
	for (int i = 0; i < ndev; i++)
		if (!want || !*want || strcmp(ibv_get_device_name(list[i]), want) == 0)
			dev = list[i];
	if (!dev) {
		printf("SKIP: no verbs device\n");
		return 77;
	}
	vwait::verbs::context_ptr ctx(ibv_open_device(dev));
	CHECK(ctx != nullptr);
	if (!ctx)
		return 1;
	struct ibv_port_attr port;
	CHECK(ibv_query_port(ctx.get(), 1, &port) == 0);
	int gidx = find_ipv4_gid(ctx.get(), 1, port.gid_tbl_len);
	CHECK(gidx >= 0);
	union ibv_gid gid;
	CHECK(ibv_query_gid(ctx.get(), 1, gidx, &gid) == 0);
	vwait::verbs::pd_ptr pd(ibv_alloc_pd(ctx.get()));
	CHECK(pd != nullptr);

	std::unique_ptr<vwait::util::waiter> w, other;
	CHECK(vwait::util::waiter::create(&test_prov, FI_WAIT_FD, w) == 0);
	CHECK(vwait::util::waiter::create(&test_prov, FI_WAIT_FD, other) == 0);
	if (!w || !other || !pd)
		return 1;

	{
		vwait::channel_registry registry(ctx.get());
		std::shared_ptr<vwait::comp_channel> ch, same, different;
		CHECK(registry.get(w.get(), ch) == 0);
		CHECK(registry.get(w.get(), same) == 0);
		CHECK(registry.get(other.get(), different) == 0);
		CHECK(ch && ch == same);
		CHECK(different && different != ch);
		different.reset();
		same.reset();

		sink sa, sb;
		sa.w = sb.w = w.get();
		vwait::verbs::cq_ptr cqa(ibv_create_cq(ctx.get(), 256, &sa, ch->get(), 0));
		vwait::verbs::cq_ptr cqb(ibv_create_cq(ctx.get(), 256, &sb, ch->get(), 0));
		CHECK(cqa && cqb);
		if (!cqa || !cqb)
			return 1;
		sa.attach(cqa.get());
		sb.attach(cqb.get());

		struct ibv_qp_init_attr qia = {};
		qia.qp_type = IBV_QPT_RC;
		qia.cap.max_send_wr = qia.cap.max_recv_wr = 64;
		qia.cap.max_send_sge = qia.cap.max_recv_sge = 1;
		qia.send_cq = qia.recv_cq = cqa.get();
		qp_ptr qpa(ibv_create_qp(pd.get(), &qia));
		qia.send_cq = qia.recv_cq = cqb.get();
		qp_ptr qpb(ibv_create_qp(pd.get(), &qia));
		CHECK(qpa && qpb);
		if (!qpa || !qpb)
			return 1;
		CHECK(connect_qp(qpa.get(), qpb->qp_num, gid, gidx));
		CHECK(connect_qp(qpb.get(), qpa->qp_num, gid, gidx));

		static char sbuf[64], rbuf[64];
		vwait::verbs::mr_ptr smr(
		    ibv_reg_mr(pd.get(), sbuf, sizeof(sbuf), IBV_ACCESS_LOCAL_WRITE));
		vwait::verbs::mr_ptr rmr(
		    ibv_reg_mr(pd.get(), rbuf, sizeof(rbuf), IBV_ACCESS_LOCAL_WRITE));
		CHECK(smr && rmr);
		auto round = [&](bool signaled) {
			struct ibv_sge rs = {reinterpret_cast<uintptr_t>(rbuf), sizeof(rbuf),
			                     rmr->lkey};
			struct ibv_recv_wr rwr = {}, *rbad = nullptr;
			rwr.sg_list = &rs;
			rwr.num_sge = 1;
			CHECK(ibv_post_recv(qpb.get(), &rwr, &rbad) == 0);
			struct ibv_sge ss = {reinterpret_cast<uintptr_t>(sbuf), sizeof(sbuf),
			                     smr->lkey};
			struct ibv_send_wr swr = {}, *sbad = nullptr;
			swr.sg_list = &ss;
			swr.num_sge = 1;
			swr.opcode = IBV_WR_SEND;
			swr.send_flags = signaled ? IBV_SEND_SIGNALED : 0;
			CHECK(ibv_post_send(qpa.get(), &swr, &sbad) == 0);
		};

		/* 1. armed CQs: each completion raises an event naming its own CQ */
		CHECK(sa.arm() == 0);
		CHECK(sb.arm() == 0);
		CHECK(sa.armed() && sb.armed());
		round(true);
		for (int i = 0; i < 20 && (sa.fired < 1 || sb.fired < 1); i++)
			CHECK(w->wait(2000) == 0);
		CHECK(sa.fired == 1);
		CHECK(sb.fired == 1);
		CHECK(!sa.armed() && !sb.armed());
		CHECK(poll_n(cqa.get(), 1, 1000) == 1);
		CHECK(poll_n(cqb.get(), 1, 1000) == 1);

		/* 2. only cq b armed: only b fires */
		CHECK(sb.arm() == 0);
		round(true);
		for (int i = 0; i < 20 && sb.fired < 2; i++)
			CHECK(w->wait(2000) == 0);
		CHECK(sb.fired == 2);
		CHECK(poll_n(cqa.get(), 1, 1000) == 1);
		CHECK(poll_n(cqb.get(), 1, 1000) == 1);
		ch->drain();
		CHECK(sa.fired == 1);

		/* 3. nothing armed: no event, the waiter times out, completions are still there */
		round(true);
		CHECK(poll_n(cqb.get(), 1, 1000) == 1);
		CHECK(poll_n(cqa.get(), 1, 1000) == 1);
		CHECK(w->wait(200) == -FI_ETIMEDOUT);
		CHECK(sa.fired == 1 && sb.fired == 2);

		/* 4. the FD wait object polls readable while an event is pending */
		int fd = -1;
		CHECK(w->control(FI_GETWAIT, &fd) == 0);
		CHECK(fd >= 0);
		CHECK(w->trywait() == 0);
		CHECK(sb.arm() == 0);
		round(true);
		struct pollfd pfd = {fd, POLLIN, 0};
		CHECK(poll(&pfd, 1, 5000) == 1);
		CHECK(w->trywait() == -FI_EAGAIN); /* drains: b fires */
		CHECK(sb.fired == 3);
		CHECK(poll_n(cqa.get(), 1, 1000) == 1);
		CHECK(poll_n(cqb.get(), 1, 1000) == 1);

		/* 5. many events (more than one ack batch), then destroy must not hang */
		const int rounds = 3 * static_cast<int>(vwait::cq_events::ack_batch) / 2;
		for (int r = 0; r < rounds; r++) {
			CHECK(sb.arm() == 0);
			round(false);
			int before = sb.fired;
			for (int i = 0; i < 20 && sb.fired == before; i++)
				w->wait(2000);
			CHECK(sb.fired == before + 1);
			CHECK(poll_n(cqb.get(), 1, 1000) == 1);
		}
		printf("events: cq a %llu, cq b %llu\n", (unsigned long long)sa.events(),
		       (unsigned long long)sb.events());
		CHECK(sb.events() == static_cast<uint64_t>(3 + rounds));
		qpa.reset();
		qpb.reset();
		sa.begin_close();
		sa.ack_all();
		sb.begin_close();
		sb.ack_all();
		cqa.reset(); /* ibv_destroy_cq waits for every ack: alarm() catches a hang */
		cqb.reset();
	}
	printf("%s\n", failures ? "FAIL" : "all checks passed");
	return failures ? 1 : 0;
}
