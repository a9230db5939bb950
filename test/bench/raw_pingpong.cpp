/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* raw_pingpong: the raw verbs floor of make bench's turns section. A spinning ping-pong on one
 * RC queue pair (librdmacm to connect, libibverbs for the rest: one CQ for sends and receives,
 * inline sends when the size allows, every send signalled), in bursts that take turns with
 * fi_vwait_bench pairs the way fi_vwait_bench -R -G does: each side waits for a byte on its fifo
 * go before a burst and writes one to done after it; the client prints one BURST line per burst
 * (one-way latency of its timed rounds) and a RESULT line. Each round the client fills the
 * buffer with the round's number and checks the answer's last byte, as fi_vwait_bench does.
 *
 *   server: raw_pingpong [-S size] [-I iters] [-W warmup] -R bursts [-G go,done] [-P port]
 *   client: the same, and the server's address
 *
 * Exit status 0 on success, 1 on any error, 2 on usage. */
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace
{

struct options {
	size_t size = 64;
	int iters = 500;
	int warmup = 20;
	int bursts = 0;
	std::string go_fifo, done_fifo;
	std::string port = "7471";
	std::string server; /* empty: be the server */
};

class pingpong
{
public:
	explicit pingpong(const options &o) : opt_(o), buf_(o.size ? o.size : 1), rbuf_(buf_.size())
	{
	}
	~pingpong()
	{
		if (qp_id_) {
			rdma_disconnect(qp_id_);
			if (qp_id_->qp)
				rdma_destroy_qp(qp_id_);
		}
		if (mr_)
			ibv_dereg_mr(mr_);
		if (rmr_)
			ibv_dereg_mr(rmr_);
		if (cq_)
			ibv_destroy_cq(cq_);
		if (pd_)
			ibv_dealloc_pd(pd_);
		if (qp_id_)
			rdma_destroy_ep(qp_id_);
		if (listen_id_)
			rdma_destroy_ep(listen_id_);
		if (ai_)
			rdma_freeaddrinfo(ai_);
	}
	pingpong(const pingpong &) = delete;
	pingpong &operator=(const pingpong &) = delete;

	int run()
	{
		if (connect_pair() || open_fifos())
			return 1;
		const bool client = !opt_.server.empty();
		int i = 0;
		for (int b = 0; b < opt_.bursts; b++) {
			char c = 0;
			if (go_ >= 0 && read(go_, &c, 1) != 1) {
				fprintf(stderr, "-G: the driver went away\n");
				return 1;
			}
			std::chrono::steady_clock::time_point t0;
			for (int k = 0; k < opt_.warmup + opt_.iters; k++) {
				if (k == opt_.warmup)
					t0 = std::chrono::steady_clock::now();
				if (client ? client_round(i++) : server_round())
					return 1;
			}
			double usec = std::chrono::duration<double, std::micro>(
			                  std::chrono::steady_clock::now() - t0)
			                  .count();
			if (client)
				printf("BURST prov=raw burst=%d iters=%d lat_us=%.3f\n", b,
				       opt_.iters, usec / opt_.iters / 2);
			if (done_ >= 0 && write(done_, &c, 1) != 1) {
				fprintf(stderr, "-G: the driver went away\n");
				return 1;
			}
		}
		while (send_pending_) /* the server's last answer must have gone */
			if (wait(nullptr))
				return 1;
		if (client)
			printf("RESULT prov=raw mode=spin size=%zu bursts=%d iters=%d\n", opt_.size,
			       opt_.bursts, opt_.iters);
		return 0;
	}

private:
	int fail(const char *what)
	{
		perror(what);
		return 1;
	}

	int connect_pair()
	{
		struct rdma_addrinfo hints = {};
		hints.ai_port_space = RDMA_PS_TCP;
		const bool client = !opt_.server.empty();
		if (!client)
			hints.ai_flags = RAI_PASSIVE;
		if (rdma_getaddrinfo(client ? opt_.server.c_str() : nullptr, opt_.port.c_str(),
		                     &hints, &ai_))
			return fail("rdma_getaddrinfo");
		if (client) {
			if (rdma_create_ep(&qp_id_, ai_, nullptr, nullptr))
				return fail("rdma_create_ep");
		} else {
			if (rdma_create_ep(&listen_id_, ai_, nullptr, nullptr))
				return fail("rdma_create_ep");
			if (rdma_listen(listen_id_, 1))
				return fail("rdma_listen");
			printf("LISTENING prov=raw\n"); /* the driver waits for it */
			fflush(stdout);
			if (rdma_get_request(listen_id_, &qp_id_))
				return fail("rdma_get_request");
		}
		if (!(pd_ = ibv_alloc_pd(qp_id_->verbs)))
			return fail("ibv_alloc_pd");
		if (!(cq_ = ibv_create_cq(qp_id_->verbs, 64, nullptr, nullptr, 0)))
			return fail("ibv_create_cq");
		struct ibv_qp_init_attr attr = {};
		attr.send_cq = cq_;
		attr.recv_cq = cq_;
		attr.qp_type = IBV_QPT_RC;
		attr.cap.max_send_wr = 16;
		attr.cap.max_recv_wr = 16;
		attr.cap.max_send_sge = 1;
		attr.cap.max_recv_sge = 1;
		attr.cap.max_inline_data = 64;
		attr.sq_sig_all = 1;
		if (rdma_create_qp(qp_id_, pd_, &attr))
			return fail("rdma_create_qp");
		inline_ = opt_.size <= attr.cap.max_inline_data;
		mr_ = ibv_reg_mr(pd_, buf_.data(), buf_.size(), 0);
		rmr_ = ibv_reg_mr(pd_, rbuf_.data(), rbuf_.size(), IBV_ACCESS_LOCAL_WRITE);
		if (!mr_ || !rmr_)
			return fail("ibv_reg_mr");
		if (post_recv())
			return 1;
		struct rdma_conn_param param = {};
		param.retry_count = 6;
		if (client ? rdma_connect(qp_id_, &param) : rdma_accept(qp_id_, &param))
			return fail(client ? "rdma_connect" : "rdma_accept");
		return 0;
	}

	int open_fifos()
	{
		if (opt_.go_fifo.empty())
			return 0;
		go_ = open(opt_.go_fifo.c_str(), O_RDONLY | O_CLOEXEC);
		done_ = open(opt_.done_fifo.c_str(), O_WRONLY | O_CLOEXEC);
		return go_ < 0 || done_ < 0 ? fail("-G fifo") : 0;
	}

	int post_recv()
	{
		struct ibv_sge sge = {reinterpret_cast<uintptr_t>(rbuf_.data()),
		                      static_cast<uint32_t>(opt_.size), rmr_->lkey};
		struct ibv_recv_wr wr = {}, *bad = nullptr;
		wr.wr_id = recv_id;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		int ret = ibv_post_recv(qp_id_->qp, &wr, &bad);
		if (ret) {
			fprintf(stderr, "ibv_post_recv: %s\n", strerror(ret));
			return 1;
		}
		return 0;
	}

	int post_send()
	{
		struct ibv_sge sge = {reinterpret_cast<uintptr_t>(buf_.data()),
		                      static_cast<uint32_t>(opt_.size), mr_->lkey};
		struct ibv_send_wr wr = {}, *bad = nullptr;
		wr.wr_id = send_id;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_SEND;
		wr.send_flags = IBV_SEND_SIGNALED | (inline_ ? IBV_SEND_INLINE : 0);
		int ret = ibv_post_send(qp_id_->qp, &wr, &bad);
		if (ret) {
			fprintf(stderr, "ibv_post_send: %s\n", strerror(ret));
			return 1;
		}
		send_pending_ = true;
		return 0;
	}

	/* spins until a completion comes; *received tells a receive's (else: the send's) */
	int wait(bool *received)
	{
		struct ibv_wc wc[2];
		for (;;) {
			int n = ibv_poll_cq(cq_, 2, wc);
			if (n < 0) {
				fprintf(stderr, "ibv_poll_cq failed\n");
				return 1;
			}
			for (int k = 0; k < n; k++) {
				if (wc[k].status != IBV_WC_SUCCESS) {
					fprintf(stderr, "completion: %s\n",
					        ibv_wc_status_str(wc[k].status));
					return 1;
				}
				if (wc[k].wr_id == send_id)
					send_pending_ = false;
				else
					recv_pending_++;
			}
			if (n == 0)
				continue;
			if (received) {
				if (recv_pending_ == 0)
					continue;
				*received = true;
				recv_pending_--;
			}
			return 0;
		}
	}

	int client_round(int i)
	{
		memset(buf_.data(), i & 0xff, opt_.size);
		if (post_send())
			return 1;
		bool received = false;
		while (!received || send_pending_)
			if (wait(received ? nullptr : &received))
				return 1;
		if (opt_.size && rbuf_[opt_.size - 1] != static_cast<char>(i & 0xff)) {
			fprintf(stderr, "round %d: wrong data\n", i);
			return 1;
		}
		return post_recv();
	}

	int server_round()
	{
		bool received = false;
		while (!received || send_pending_)
			if (wait(received ? nullptr : &received))
				return 1;
		memcpy(buf_.data(), rbuf_.data(), opt_.size);
		return post_recv() || post_send();
	}

	static constexpr uint64_t send_id = 1, recv_id = 2;
	const options &opt_;
	std::vector<char> buf_, rbuf_;
	struct rdma_addrinfo *ai_ = nullptr;
	struct rdma_cm_id *listen_id_ = nullptr, *qp_id_ = nullptr;
	struct ibv_pd *pd_ = nullptr;
	struct ibv_cq *cq_ = nullptr;
	struct ibv_mr *mr_ = nullptr, *rmr_ = nullptr;
	bool inline_ = false, send_pending_ = false;
	int recv_pending_ = 0;
	int go_ = -1, done_ = -1;
};

bool parse(int argc, char **argv, options *o)
{
	for (int c; (c = getopt(argc, argv, "S:I:W:R:G:P:")) != -1;) {
		switch (c) {
		case 'S':
			o->size = strtoull(optarg, nullptr, 0);
			break;
		case 'I':
			o->iters = atoi(optarg);
			break;
		case 'W':
			o->warmup = atoi(optarg);
			break;
		case 'R':
			o->bursts = atoi(optarg);
			break;
		case 'G': {
			const char *comma = strchr(optarg, ',');
			if (!comma || comma == optarg || !comma[1])
				return false;
			o->go_fifo.assign(optarg, static_cast<size_t>(comma - optarg));
			o->done_fifo = comma + 1;
			break;
		}
		case 'P':
			o->port = optarg;
			break;
		default:
			return false;
		}
	}
	if (optind < argc)
		o->server = argv[optind];
	return o->iters > 0 && o->warmup >= 0 && o->bursts > 0 && o->size > 0 &&
	       o->size <= (1u << 20);
}

} // namespace

int main(int argc, char **argv)
{
	options opt;
	if (!parse(argc, argv, &opt)) {
		fprintf(stderr,
		        "usage: raw_pingpong [-S size] [-I iterations] [-W warmup] -R bursts "
		        "[-G go_fifo,done_fifo] [-P port] [server address]\n");
		return 2;
	}
	setvbuf(stdout, nullptr, _IOLBF, 0);
	pingpong p(opt);
	return p.run();
}
