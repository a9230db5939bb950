/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* fi_vwait_bench's parts (main.cpp says what the tool does and how to run it):
 *   link         one side of the benchmark's connection: the fabric, the endpoint, and the
 *                CQ, counters or set it waits on as the mode says; one round of the ping-pong
 *                (link.cpp);
 *   the counted calls: every fi_cq_read, fi_send and fi_recv of the benchmark, out of line so
 *                that callgrind can count them alone, and the empty-read measurement (reads.cpp);
 *   run_pingpong latency and CPU per message: one plain run, think-time phases, bursts taken in
 *                turns (pingpong.cpp);
 *   run_stream   a one-way stream: messages per second, transitions to idle (stream.cpp).
 * Each part reaches the provider through libfabric's public API only. */
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

/* The benchmark's calls of fi_cq_read, fi_send and fi_recv (reads.cpp): callgrind counts each
 * alone with --toggle-collect=vwait_bench_cq_read (vwait_bench_send, vwait_bench_recv). */
extern "C" ssize_t vwait_bench_cq_read(struct fid_cq *cq, void *buf, size_t count);
extern "C" ssize_t vwait_bench_send(struct fid_ep *ep, const void *buf, size_t len, void *desc,
                                    fi_addr_t dest, void *ctx);
extern "C" ssize_t vwait_bench_recv(struct fid_ep *ep, void *buf, size_t len, void *desc,
                                    fi_addr_t src, void *ctx);

namespace vwait_bench
{

constexpr int exit_unsupported = 3;

enum class mode { spin, sread, trywait_poll, waitset, pollset, cntr_wait, empty_read };

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

/* the CQ reads of this process that found nothing, and the others (vwait_bench_cq_read) */
extern unsigned long long reads_empty, reads_full;

/* The error entry a read that returned -FI_EAVAIL left: printed after `what`, its code
 * returned (negative). */
int cq_error(struct fid_cq *cq, const char *what);
/* The threads of this process now (/proc/self/task): the provider's own show here (vwait's
 * EQ has one). */
int thread_count();
/* this process's CPU time (user + system), in us */
double cpu_now_us();
/* the client's think time: a busy wait when short (a sleep would overshoot it), a sleep else */
void think(int us);

#define FI_CALL(call)                                                                              \
	do {                                                                                       \
		int ret_ = static_cast<int>(call);                                                 \
		if (ret_ < 0) {                                                                    \
			fprintf(stderr, "%s:%d: %s: %s (%d)\n", __FILE__, __LINE__, #call,         \
			        fi_strerror(-ret_), ret_);                                         \
			return ret_;                                                               \
		}                                                                                  \
	} while (0)

/* One side of the benchmark: the fabric, then (-e msg) a connection through the EQ, or (-e
 * rdm) an endpoint that learns its peer's name from the first message; the CQ, counters, wait
 * set or poll set the mode waits on; two buffers of -S bytes, one to send and one to receive
 * into. Closes everything, in order, when it goes. */
class link
{
public:
	explicit link(const options &o) : opt_(o) {}
	~link() { teardown(); }
	link(const link &) = delete;
	link &operator=(const link &) = delete;

	/* the fabric, and the connection to the peer (the server waits for it) */
	int connect();
	/* -m empty-read: the fabric, a domain and one CQ (-e rdm: an endpoint too), no peer */
	int open_alone();

	/* one round of the ping-pong (i counts every round from 0): the client sends and waits
	 * for the answer, the server waits for a message and answers it */
	int round(bool client, int i);
	/* the server's last pong must have gone before it closes (rounds: how many ran) */
	int drain(int rounds);

	int post_send();
	int post_recv();
	/* -X: n more receive buffers of -S bytes, registered, posted; slot n is the link's own */
	int add_recv_slots(size_t n);
	int post_slot(size_t i);
	size_t slot_of(void *ctx) const;

	bool client() const { return !opt_.server.empty(); }
	bool unsupported() const { return unsupported_; }
	bool is_send(void *ctx) const { return ctx == &sctx_; }
	struct fid_fabric *fabric() const { return fabric_; }
	struct fid_cq *cq() const { return cq_; }

private:
	int open_fabric();
	int cm_event(uint32_t want, struct fi_eq_cm_entry *entry);
	int accept_one();
	int connect_one();
	int rdm_endpoint();
	int rdm_server();
	int rdm_client();
	int setup_completion(void *ctx);
	int insert_peer(const void *addr);
	int open_cq();
	int bind_ep();
	int post_recv(size_t len);
	int wait_one(struct fi_cq_entry *e);
	void backoff();
	int cntr_reach(struct fid_cntr *c, uint64_t v);
	int cntr_round(bool client, uint64_t i);
	int finish_round();
	void teardown();

	/* -e rdm: receive buffers hold at least this much (the client's name comes in one) */
	static constexpr size_t name_max = 256;

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
	std::vector<char> slot_buf_;
	std::vector<struct fi_context> slot_ctx_;
	struct fid_mr *slot_mr_ = nullptr;
};

/* -m empty-read: -I reads of an empty CQ (reads.cpp) */
int run_empty_reads(link &l, const options &o);
/* the ping-pong: -T phases, -R bursts, or one plain run (pingpong.cpp) */
int run_pingpong(link &l, const options &o);
/* -X: the one-way stream (stream.cpp) */
int run_stream(link &l, const options &o);

} // namespace vwait_bench
