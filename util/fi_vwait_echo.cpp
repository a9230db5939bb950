/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* fi_vwait_echo: an echo service over libfabric FI_EP_MSG endpoints, driven by one event loop,
 * the pattern of fi_poll(3) that RPC stacks use: libfabric's descriptors sit in the
 * application's own epoll set beside its timers and signals.
 *
 *   server: fi_vwait_echo [-p PROV] [-P PORT] [-T SECONDS] [-q] -s ADDR
 *   client: fi_vwait_echo [-p PROV] [-P PORT] -c CONNS [-m MSGS] [-S SIZE] [-R ROUNDS]
 *                         [-H SECONDS] ADDR
 *
 * Server: one thread and one epoll set holding
 *   - the descriptor of the EQ of its passive endpoint (FI_WAIT_FD, fi_control(FI_GETWAIT)),
 *     which also receives every connection's events;
 *   - the descriptor of each connection's CQ (FI_WAIT_FD, fi_control(FI_GETWAIT));
 *   - a timerfd: a status line every -T seconds (default 10; 0: none; -q: none);
 *   - a signalfd for SIGINT and SIGTERM: close everything, print a summary, exit 0.
 * Before it sleeps in epoll_wait it calls fi_trywait, as fi_poll(3) says, on each EQ or CQ it
 * has read since that object was last armed: an object armed by a successful fi_trywait and
 * not read since stays armed, so an idle connection costs nothing per wakeup. When fi_trywait
 * says -FI_EAGAIN, the loop reads those objects again and retries; it never sleeps on an
 * object that holds an event. Each received message is sent back from the buffer it landed
 * in; the buffer takes a new receive once that send completes.
 *
 * Client: CONNS connections (default 1) opened from one thread, MSGS messages (default 10) of
 * SIZE bytes (default 64, at most 4096) on each, one in flight per connection and all
 * connections at once; each reply is checked byte by byte. Prints how long connecting took
 * ("client: C connections up in S s"). -R then sends ROUNDS rounds round-robin, one message
 * in flight in all: each connection in turn sends one and waits for its reply, and the mean
 * round trip is printed ("client: round-robin ... us per round trip"). -H holds the connections
 * open and idle for SECONDS before they are shut down (to measure an idle server). Prints "client:
 * C connections, R replies verified".
 *
 * Uses the public libfabric API only. Exit status 0 on success, 1 on any error, 2 on usage. */
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

namespace
{

constexpr size_t max_size = 4096; /* one message at most */
constexpr size_t slots = 4;       /* receive buffers per server connection */
constexpr int cm_timeout_ms = 60000;

struct options {
	std::string prov = "vwait";
	std::string port = "7471";
	std::string addr;
	bool server = false;
	bool quiet = false;
	int tick_s = 10;
	size_t conns = 1;
	size_t msgs = 10;
	size_t size = 64;
	int hold_s = 0;
	size_t rounds = 0; /* -R: round-robin rounds after the all-at-once messages */
};

uint32_t api_version()
{
	return FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION);
}

bool failed(int ret, const char *what)
{
	if (ret) {
		fprintf(stderr, "fi_vwait_echo: %s: %s (%d)\n", what,
		        fi_strerror(ret < 0 ? -ret : ret), ret);
		return true;
	}
	return false;
}

void close_fid(struct fid *f)
{
	if (f)
		fi_close(f);
}

/* FI_EP_MSG hints: messages, the MR mode of verbs providers. */
struct fi_info *hints_for(const options &o)
{
	struct fi_info *h = fi_allocinfo();
	if (!h)
		return nullptr;
	h->ep_attr->type = FI_EP_MSG;
	h->caps = FI_MSG;
	h->mode = FI_CONTEXT;
	h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	h->fabric_attr->prov_name = strdup(o.prov.c_str());
	return h;
}

/* The payload of message seq on connection c: both sides compute it. */
void fill(uint8_t *p, size_t n, size_t c, size_t seq)
{
	for (size_t i = 0; i < n; i++)
		p[i] = static_cast<uint8_t>(i * 131 + c * 17 + seq * 7 + 1);
}

bool matches(const uint8_t *p, size_t n, size_t c, size_t seq)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != static_cast<uint8_t>(i * 131 + c * 17 + seq * 7 + 1))
			return false;
	return true;
}

/* ------------------------------------------------------------------ server */

/* What an epoll entry points at. */
struct source {
	enum kind { eq, cq, timer, signal } what;
	struct fid *fid = nullptr; /* eq, cq: what fi_trywait is given */
	struct conn *c = nullptr;  /* cq: its connection */
	bool unarmed = false;      /* read since its last successful fi_trywait */
};

struct conn {
	struct fid_ep *ep = nullptr;
	struct fid_cq *cq = nullptr;
	struct fid_mr *mr = nullptr;
	int cq_fd = -1;
	source src{source::cq};
	std::vector<uint8_t> buf = std::vector<uint8_t>(slots * max_size);
	struct fi_context rx_ctx[slots] = {};
	struct fi_context tx_ctx[slots] = {};
	uint64_t echoed = 0;
};

struct server {
	options o;
	struct fi_info *info = nullptr;
	struct fid_fabric *fabric = nullptr;
	struct fid_domain *domain = nullptr;
	struct fid_eq *eq = nullptr;
	struct fid_pep *pep = nullptr;
	int epfd = -1, timer_fd = -1, sig_fd = -1, eq_fd = -1;
	source eq_src{source::eq}, timer_src{source::timer}, sig_src{source::signal};
	std::vector<std::unique_ptr<conn>> conns;
	std::vector<source *> unarmed; /* objects to give fi_trywait before sleeping */
	std::vector<source *> batch;   /* read_unarmed's copy of it */
	uint64_t served = 0, echoed = 0, ticks = 0, wakeups = 0;
	bool stop = false;
	int exit_code = 0;

	~server();
	int open();
	int run();
	void mark(source *s);
	void read_eq();
	void read_cq(conn *c);
	void read_unarmed();
	void open_conn(struct fi_info *req);
	void close_conn(conn *c);
	int post_recv(conn *c, size_t slot);
	uint64_t total_echoed() const
	{
		uint64_t t = echoed;
		for (const auto &c : conns)
			t += c->echoed;
		return t;
	}
};

server::~server()
{
	while (!conns.empty())
		close_conn(conns.back().get());
	close_fid(pep ? &pep->fid : nullptr);
	close_fid(eq ? &eq->fid : nullptr);
	close_fid(domain ? &domain->fid : nullptr);
	close_fid(fabric ? &fabric->fid : nullptr);
	fi_freeinfo(info);
	for (int fd : {epfd, timer_fd, sig_fd})
		if (fd >= 0)
			::close(fd);
}

int server::open()
{
	struct fi_info *h = hints_for(o);
	if (!h)
		return -FI_ENOMEM;
	int ret = fi_getinfo(api_version(), o.addr.c_str(), o.port.c_str(), FI_SOURCE, h, &info);
	fi_freeinfo(h);
	if (failed(ret, "fi_getinfo") ||
	    failed(fi_fabric(info->fabric_attr, &fabric, nullptr), "fi_fabric"))
		return 1;
	struct fi_eq_attr ea = {};
	ea.wait_obj = FI_WAIT_FD;
	if (failed(fi_eq_open(fabric, &ea, &eq, nullptr), "fi_eq_open(FI_WAIT_FD)") ||
	    failed(fi_domain(fabric, info, &domain, nullptr), "fi_domain") ||
	    failed(fi_passive_ep(fabric, info, &pep, nullptr), "fi_passive_ep") ||
	    failed(fi_pep_bind(pep, &eq->fid, 0), "fi_pep_bind") ||
	    failed(fi_listen(pep), "fi_listen") ||
	    failed(fi_control(&eq->fid, FI_GETWAIT, &eq_fd), "fi_control(EQ, FI_GETWAIT)"))
		return 1;
	eq_src.fid = &eq->fid;

	epfd = epoll_create1(EPOLL_CLOEXEC);
	sigset_t mask;
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM); /* blocked by main() before any thread started */
	sig_fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (epfd < 0 || sig_fd < 0 || timer_fd < 0) {
		perror("fi_vwait_echo: epoll_create1 / signalfd / timerfd_create");
		return 1;
	}
	if (o.tick_s > 0) {
		struct itimerspec its = {};
		its.it_interval.tv_sec = its.it_value.tv_sec = o.tick_s;
		timerfd_settime(timer_fd, 0, &its, nullptr);
	}
	struct {
		int fd;
		source *s;
	} const entries[] = {{eq_fd, &eq_src}, {timer_fd, &timer_src}, {sig_fd, &sig_src}};
	for (const auto &e : entries) {
		struct epoll_event ev = {};
		ev.events = EPOLLIN;
		ev.data.ptr = e.s;
		if (epoll_ctl(epfd, EPOLL_CTL_ADD, e.fd, &ev)) {
			perror("fi_vwait_echo: epoll_ctl");
			return 1;
		}
	}
	mark(&eq_src); /* never armed yet */
	printf("echo: listening on %s:%s (%s), pid %d\n", o.addr.c_str(), o.port.c_str(),
	       o.prov.c_str(), static_cast<int>(getpid()));
	fflush(stdout);
	return 0;
}

void server::mark(source *s)
{
	if (!s->unarmed) {
		s->unarmed = true;
		unarmed.push_back(s);
	}
}

int server::post_recv(conn *c, size_t slot)
{
	return fi_recv(c->ep, &c->buf[slot * max_size], max_size, fi_mr_desc(c->mr), 0,
	               &c->rx_ctx[slot]);
}

/* FI_CONNREQ: an endpoint with its own CQ in the epoll set, receives posted, accepted. */
void server::open_conn(struct fi_info *req)
{
	auto c = std::make_unique<conn>();
	c->src.c = c.get();
	struct fi_cq_attr ca = {};
	ca.format = FI_CQ_FORMAT_MSG;
	ca.wait_obj = FI_WAIT_FD;
	ca.size = 2 * slots;
	int ret = fi_endpoint(domain, req, &c->ep, c.get());
	if (!ret)
		ret = fi_cq_open(domain, &ca, &c->cq, c.get());
	if (!ret)
		ret = fi_ep_bind(c->ep, &c->cq->fid, FI_TRANSMIT | FI_RECV);
	if (!ret)
		ret = fi_ep_bind(c->ep, &eq->fid, 0);
	if (!ret)
		ret = fi_enable(c->ep);
	if (!ret)
		ret = fi_mr_reg(domain, c->buf.data(), c->buf.size(), FI_SEND | FI_RECV, 0, 0, 0,
		                &c->mr, nullptr);
	for (size_t i = 0; i < slots && !ret; i++)
		ret = post_recv(c.get(), i);
	if (!ret)
		ret = fi_control(&c->cq->fid, FI_GETWAIT, &c->cq_fd);
	if (!ret) {
		c->src.fid = &c->cq->fid;
		struct epoll_event ev = {};
		ev.events = EPOLLIN;
		ev.data.ptr = &c->src;
		ret = epoll_ctl(epfd, EPOLL_CTL_ADD, c->cq_fd, &ev) ? -errno : 0;
	}
	if (!ret)
		ret = fi_accept(c->ep, nullptr, 0);
	if (ret) {
		failed(ret, "a connection request");
		if (!c->ep)
			fi_reject(pep, req->handle, nullptr, 0);
		conns.push_back(std::move(c));
		close_conn(conns.back().get());
		return;
	}
	mark(&c->src);
	conns.push_back(std::move(c));
}

void server::close_conn(conn *c)
{
	if (c->cq_fd >= 0)
		epoll_ctl(epfd, EPOLL_CTL_DEL, c->cq_fd, nullptr);
	unarmed.erase(std::remove(unarmed.begin(), unarmed.end(), &c->src), unarmed.end());
	close_fid(c->ep ? &c->ep->fid : nullptr);
	close_fid(c->mr ? &c->mr->fid : nullptr);
	close_fid(c->cq ? &c->cq->fid : nullptr);
	echoed += c->echoed;
	auto it =
	    std::find_if(conns.begin(), conns.end(), [c](const auto &p) { return p.get() == c; });
	if (it != conns.end())
		conns.erase(it);
}

void server::read_eq()
{
	for (;;) {
		uint32_t event = 0;
		alignas(struct fi_eq_cm_entry) uint8_t raw[sizeof(struct fi_eq_cm_entry) + 256];
		auto *e = reinterpret_cast<struct fi_eq_cm_entry *>(raw);
		ssize_t n = fi_eq_read(eq, &event, raw, sizeof(raw), 0);
		if (n == -FI_EAGAIN)
			return;
		if (n == -FI_EAVAIL) {
			struct fi_eq_err_entry err = {};
			if (fi_eq_readerr(eq, &err, 0) < 0)
				return;
			fprintf(stderr, "fi_vwait_echo: EQ error: %s\n", fi_strerror(err.err));
			if (err.fid && err.fid->fclass == FI_CLASS_EP && err.fid->context)
				close_conn(static_cast<conn *>(err.fid->context));
			continue;
		}
		if (n < 0) {
			failed(static_cast<int>(n), "fi_eq_read");
			stop = true;
			exit_code = 1;
			return;
		}
		switch (event) {
		case FI_CONNREQ:
			open_conn(e->info);
			fi_freeinfo(e->info);
			break;
		case FI_CONNECTED:
			served++;
			break;
		case FI_SHUTDOWN:
			close_conn(static_cast<conn *>(e->fid->context));
			break;
		default:
			break;
		}
	}
}

void server::read_cq(conn *c)
{
	struct fi_cq_msg_entry e[16];
	for (;;) {
		ssize_t n = fi_cq_read(c->cq, e, 16);
		if (n == -FI_EAGAIN)
			return;
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry err = {};
			fi_cq_readerr(c->cq, &err, 0);
			/* flushed work requests of a connection going down: its FI_SHUTDOWN follows
			 */
			if (err.err != FI_ECANCELED)
				fprintf(stderr, "fi_vwait_echo: CQ error: %s\n",
				        fi_strerror(err.err));
			continue;
		}
		if (n < 0) {
			failed(static_cast<int>(n), "fi_cq_read");
			return;
		}
		for (ssize_t i = 0; i < n; i++) {
			auto *ctx = static_cast<struct fi_context *>(e[i].op_context);
			if (e[i].flags & FI_RECV) {
				size_t slot = static_cast<size_t>(ctx - c->rx_ctx);
				int ret = fi_send(c->ep, &c->buf[slot * max_size], e[i].len,
				                  fi_mr_desc(c->mr), 0, &c->tx_ctx[slot]);
				if (failed(ret, "fi_send"))
					continue;
				c->echoed++;
			} else {
				size_t slot = static_cast<size_t>(ctx - c->tx_ctx);
				failed(post_recv(c, slot), "fi_recv");
			}
		}
	}
}

/* Reads every source marked since it was last armed; read_eq may close connections, so
 * only the sources still marked are read. */
void server::read_unarmed()
{
	batch = unarmed;
	for (source *s : batch) {
		if (std::find(unarmed.begin(), unarmed.end(), s) == unarmed.end())
			continue;
		if (s->what == source::eq)
			read_eq();
		else
			read_cq(s->c);
	}
}

int server::run()
{
	std::vector<struct fid *> fids;
	while (!stop) {
		/* arm what was read since it was last armed; read again while fi_trywait refuses */
		while (!unarmed.empty() && !stop) {
			fids.clear();
			for (source *s : unarmed)
				fids.push_back(s->fid);
			int ret = fi_trywait(fabric, fids.data(), static_cast<int>(fids.size()));
			if (ret == FI_SUCCESS) {
				for (source *s : unarmed)
					s->unarmed = false;
				unarmed.clear();
				break;
			}
			if (ret != -FI_EAGAIN) {
				failed(ret, "fi_trywait");
				return 1;
			}
			read_unarmed();
		}
		struct epoll_event ev[64];
		int n = epoll_wait(epfd, ev, 64, -1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			perror("fi_vwait_echo: epoll_wait");
			return 1;
		}
		wakeups++;
		/* the epoll entries first, then the reads: read_eq may close a connection whose
		 * CQ is further down this list */
		for (int i = 0; i < n; i++) {
			auto *s = static_cast<source *>(ev[i].data.ptr);
			if (s->what == source::eq || s->what == source::cq) {
				mark(s);
			} else if (s->what == source::timer) {
				uint64_t expirations = 0;
				if (read(timer_fd, &expirations, sizeof(expirations)) > 0) {
					ticks += expirations;
					if (!o.quiet)
						printf(
						    "echo: %zu connections, %llu messages echoed, "
						    "%llu wakeups\n",
						    conns.size(),
						    static_cast<unsigned long long>(total_echoed()),
						    static_cast<unsigned long long>(wakeups));
				}
			} else {
				struct signalfd_siginfo si;
				if (read(sig_fd, &si, sizeof(si)) == sizeof(si)) {
					printf("echo: %s: closing %zu connections\n",
					       strsignal(static_cast<int>(si.ssi_signo)),
					       conns.size());
					stop = true;
				}
			}
		}
		if (stop)
			break;
		read_unarmed();
	}
	while (!conns.empty())
		close_conn(conns.back().get());
	printf("echo: served %llu connections, %llu messages echoed, %llu wakeups, %llu ticks\n",
	       static_cast<unsigned long long>(served), static_cast<unsigned long long>(echoed),
	       static_cast<unsigned long long>(wakeups), static_cast<unsigned long long>(ticks));
	return exit_code;
}

/* ------------------------------------------------------------------ client */

struct client_conn {
	struct fid_ep *ep = nullptr;
	size_t index = 0;
	size_t sent = 0, replied = 0;
	bool send_busy = false, connected = false;
};

/* CONNS connections from one thread, on one EQ and one CQ, which it reads with fi_eq_sread
 * and fi_cq_sread: a client has nothing else to wait for. */
struct client {
	options o;
	struct fi_info *info = nullptr;
	struct fid_fabric *fabric = nullptr;
	struct fid_domain *domain = nullptr;
	struct fid_eq *eq = nullptr;
	struct fid_cq *cq = nullptr;
	struct fid_mr *mr = nullptr;
	std::vector<client_conn> cc;
	/* the operation contexts (FI_CONTEXT): which connection and which direction completed */
	std::vector<struct fi_context> rx_ctx, tx_ctx;
	/* per connection: a receive buffer and a send buffer */
	std::vector<uint8_t> buf;
	/* connections whose send met -FI_EAGAIN (a provider's queue or credits full): sent again
	 * after the next completions */
	std::vector<size_t> again;
	size_t verified = 0, wrong = 0;
	struct timespec t0 = {};

	explicit client(const options &opt)
	    : o(opt), cc(opt.conns), rx_ctx(opt.conns), tx_ctx(opt.conns),
	      buf(opt.conns * 2 * max_size)
	{
	}
	~client();
	int run();
	int open();
	int connect_all();
	int start(client_conn &c);
	int next_cm_event(size_t *up);
	int exchange();
	int on_completion(const struct fi_cq_msg_entry &e, size_t *done);
	int finish_sends();
	int round_trip(client_conn &c);
	void check_reply(client_conn &c, size_t len);
	uint8_t *rx_buf(size_t i) { return &buf[(2 * i) * max_size]; }
	uint8_t *tx_buf(size_t i) { return &buf[(2 * i + 1) * max_size]; }
	int post_recv(client_conn &c);
	int send_next(client_conn &c);
};

double seconds_since(const struct timespec &a, struct timespec *now)
{
	clock_gettime(CLOCK_MONOTONIC, now);
	return static_cast<double>(now->tv_sec - a.tv_sec) +
	       static_cast<double>(now->tv_nsec - a.tv_nsec) / 1e9;
}

client::~client()
{
	for (client_conn &c : cc) {
		if (c.ep && c.connected)
			fi_shutdown(c.ep, 0);
		close_fid(c.ep ? &c.ep->fid : nullptr);
	}
	close_fid(mr ? &mr->fid : nullptr);
	close_fid(cq ? &cq->fid : nullptr);
	close_fid(eq ? &eq->fid : nullptr);
	close_fid(domain ? &domain->fid : nullptr);
	close_fid(fabric ? &fabric->fid : nullptr);
	fi_freeinfo(info);
}

/* The objects every connection shares: the EQ of their CM events, one CQ, one MR over the
 * buffers. The clock of "connections up" starts here. */
int client::open()
{
	struct fi_info *h = hints_for(o);
	if (!h)
		return 1;
	int ret = fi_getinfo(api_version(), o.addr.c_str(), o.port.c_str(), 0, h, &info);
	fi_freeinfo(h);
	if (failed(ret, "fi_getinfo"))
		return 1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	struct fi_eq_attr ea = {};
	ea.wait_obj = FI_WAIT_UNSPEC;
	struct fi_cq_attr ca = {};
	ca.format = FI_CQ_FORMAT_MSG;
	ca.wait_obj = FI_WAIT_UNSPEC;
	ca.size = 4 * o.conns;
	if (failed(fi_fabric(info->fabric_attr, &fabric, nullptr), "fi_fabric") ||
	    failed(fi_eq_open(fabric, &ea, &eq, nullptr), "fi_eq_open") ||
	    failed(fi_domain(fabric, info, &domain, nullptr), "fi_domain") ||
	    failed(fi_cq_open(domain, &ca, &cq, nullptr), "fi_cq_open") ||
	    failed(
	        fi_mr_reg(domain, buf.data(), buf.size(), FI_SEND | FI_RECV, 0, 0, 0, &mr, nullptr),
	        "fi_mr_reg"))
		return 1;
	return 0;
}

int client::post_recv(client_conn &c)
{
	return static_cast<int>(
	    fi_recv(c.ep, rx_buf(c.index), max_size, fi_mr_desc(mr), 0, &rx_ctx[c.index]));
}

/* the connection's next message; a send that finds the queue full waits in `again` */
int client::send_next(client_conn &c)
{
	fill(tx_buf(c.index), o.size, c.index, c.sent);
	ssize_t ret = fi_send(c.ep, tx_buf(c.index), o.size, fi_mr_desc(mr), 0, &tx_ctx[c.index]);
	if (ret == -FI_EAGAIN) {
		again.push_back(c.index);
		return 0;
	}
	if (ret == 0) {
		c.send_busy = true;
		c.sent++;
	}
	return static_cast<int>(ret);
}

/* one connection's endpoint, bound to the shared CQ and EQ, a receive posted, connecting */
int client::start(client_conn &c)
{
	return failed(fi_endpoint(domain, info, &c.ep, &c), "fi_endpoint") ||
	       failed(fi_ep_bind(c.ep, &cq->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind(cq)") ||
	       failed(fi_ep_bind(c.ep, &eq->fid, 0), "fi_ep_bind(eq)") ||
	       failed(fi_enable(c.ep), "fi_enable") || failed(post_recv(c), "fi_recv") ||
	       failed(fi_connect(c.ep, info->dest_addr, nullptr, 0), "fi_connect");
}

/* one CM event; FI_CONNECTED names its endpoint's connection through the endpoint's context */
int client::next_cm_event(size_t *up)
{
	uint32_t event = 0;
	struct fi_eq_cm_entry e;
	ssize_t n = fi_eq_sread(eq, &event, &e, sizeof(e), cm_timeout_ms, 0);
	if (n == -FI_EAVAIL) {
		struct fi_eq_err_entry ee = {};
		fi_eq_readerr(eq, &ee, 0);
		fprintf(stderr, "fi_vwait_echo: connect: %s\n", fi_strerror(ee.err));
		return 1;
	}
	if (n < 0) {
		failed(static_cast<int>(n), "fi_eq_sread (connect)");
		return 1;
	}
	if (event == FI_CONNECTED) {
		static_cast<client_conn *>(e.fid->context)->connected = true;
		++*up;
	}
	return 0;
}

/* every connection, in windows of 16 requests at a time */
int client::connect_all()
{
	size_t up = 0, started = 0;
	while (up < o.conns) {
		while (started < o.conns && started - up < 16) {
			client_conn &c = cc[started];
			c.index = started++;
			if (start(c))
				return 1;
		}
		if (next_cm_event(&up))
			return 1;
	}
	struct timespec now;
	const double up_s = seconds_since(t0, &now);
	printf("client: %zu connections up in %.3f s (%.1f per s)\n", up, up_s,
	       up_s > 0 ? static_cast<double>(up) / up_s : 0.0);
	fflush(stdout);
	return 0;
}

void client::check_reply(client_conn &c, size_t len)
{
	if (len == o.size && matches(rx_buf(c.index), o.size, c.index, c.replied))
		verified++;
	else
		wrong++;
	c.replied++;
}

/* A completion of the all-at-once phase: a reply (checked, the next receive posted) or a
 * send's; the connection's next message goes once its reply is in and its send buffer free. */
int client::on_completion(const struct fi_cq_msg_entry &e, size_t *done)
{
	auto *ctx = static_cast<struct fi_context *>(e.op_context);
	const bool rx = e.flags & FI_RECV;
	client_conn &c = cc[static_cast<size_t>(ctx - (rx ? rx_ctx.data() : tx_ctx.data()))];
	if (rx) {
		check_reply(c, e.len);
		if (c.replied == o.msgs)
			++*done;
		else if (failed(post_recv(c), "fi_recv"))
			return 1;
	} else {
		c.send_busy = false;
	}
	if (!c.send_busy && c.replied == c.sent && c.sent < o.msgs)
		return failed(send_next(c), "fi_send");
	return 0;
}

/* MSGS messages on every connection at once, one in flight on each */
int client::exchange()
{
	for (client_conn &c : cc)
		if (o.msgs && failed(send_next(c), "fi_send"))
			return 1;
	size_t done = o.msgs ? 0 : o.conns;
	while (done < o.conns) {
		std::vector<size_t> retry;
		retry.swap(again);
		for (size_t i : retry)
			if (failed(send_next(cc[i]), "fi_send"))
				return 1;
		struct fi_cq_msg_entry e[16];
		ssize_t n = fi_cq_sread(cq, e, 16, nullptr, cm_timeout_ms);
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry ce = {};
			fi_cq_readerr(cq, &ce, 0);
			fprintf(stderr, "fi_vwait_echo: CQ error: %s\n", fi_strerror(ce.err));
			return 1;
		}
		if (n < 0) {
			failed(static_cast<int>(n), "fi_cq_sread (replies)");
			return 1;
		}
		for (ssize_t i = 0; i < n; i++)
			if (on_completion(e[i], &done))
				return 1;
	}
	return 0;
}

/* before the round-robin: the completions of the last sends, whose replies may have come
 * before them */
int client::finish_sends()
{
	for (client_conn &c : cc) {
		while (c.send_busy) {
			struct fi_cq_msg_entry e;
			ssize_t n = fi_cq_sread(cq, &e, 1, nullptr, cm_timeout_ms);
			if (n != 1 || !(e.flags & FI_SEND)) {
				fprintf(stderr, "fi_vwait_echo: waiting for the last sends\n");
				return 1;
			}
			auto *ctx = static_cast<struct fi_context *>(e.op_context);
			cc[static_cast<size_t>(ctx - tx_ctx.data())].send_busy = false;
		}
	}
	return 0;
}

/* -R: one message on connection c, the only one in flight: its reply and its send's
 * completion */
int client::round_trip(client_conn &c)
{
	if (failed(post_recv(c), "fi_recv") || failed(send_next(c), "fi_send"))
		return 1;
	if (!again.empty()) {
		fprintf(stderr, "fi_vwait_echo: round-robin: fi_send: %s\n",
		        fi_strerror(FI_EAGAIN));
		return 1;
	}
	bool got = false;
	while (!got || c.send_busy) {
		struct fi_cq_msg_entry e;
		ssize_t n = fi_cq_sread(cq, &e, 1, nullptr, cm_timeout_ms);
		if (n != 1) {
			failed(n < 0 ? static_cast<int>(n) : -FI_EOTHER,
			       "fi_cq_sread (round-robin)");
			return 1;
		}
		auto *ctx = static_cast<struct fi_context *>(e.op_context);
		if (ctx == &tx_ctx[c.index]) {
			c.send_busy = false;
		} else if (ctx == &rx_ctx[c.index]) {
			got = true;
			check_reply(c, e.len);
		} else {
			fprintf(stderr, "fi_vwait_echo: round-robin: a completion of another "
			                "connection\n");
			return 1;
		}
	}
	return 0;
}

/* connect, exchange, -R rounds, -H hold; 0 when every reply came back right */
int client::run()
{
	if (open() || connect_all() || exchange())
		return 1;
	struct timespec t1;
	const double s = seconds_since(t0, &t1);
	if (o.rounds) {
		if (finish_sends())
			return 1;
		for (size_t r = 0; r < o.rounds; r++)
			for (client_conn &c : cc)
				if (round_trip(c))
					return 1;
		struct timespec t2;
		const double rr_s = seconds_since(t1, &t2);
		printf("client: round-robin %zu rounds over %zu connections, %.1f us per round "
		       "trip\n",
		       o.rounds, o.conns, rr_s * 1e6 / static_cast<double>(o.rounds * o.conns));
	}
	printf("client: %zu connections, %zu replies verified, %zu wrong, %.2f s\n", o.conns,
	       verified, wrong, s);
	fflush(stdout);
	if (o.hold_s > 0) {
		printf("client: holding %zu connections idle for %d s\n", o.conns, o.hold_s);
		fflush(stdout);
		sleep(static_cast<unsigned>(o.hold_s));
	}
	return wrong == 0 && verified == o.conns * (o.msgs + o.rounds) ? 0 : 1;
}

int usage()
{
	fprintf(stderr, "usage: fi_vwait_echo [-p PROV] [-P PORT] [-T SECONDS] [-q] -s ADDR\n"
	                "       fi_vwait_echo [-p PROV] [-P PORT] -c CONNS [-m MSGS] [-S SIZE] "
	                "[-R ROUNDS] [-H SECONDS] ADDR\n");
	return 2;
}

} // namespace

int main(int argc, char **argv)
{
	options o;
	int opt;
	while ((opt = getopt(argc, argv, "p:P:T:qs:c:m:S:R:H:h")) != -1) {
		switch (opt) {
		case 'p':
			o.prov = optarg;
			break;
		case 'P':
			o.port = optarg;
			break;
		case 'T':
			o.tick_s = atoi(optarg);
			break;
		case 'q':
			o.quiet = true;
			break;
		case 's':
			o.server = true;
			o.addr = optarg;
			break;
		case 'c':
			o.conns = strtoul(optarg, nullptr, 0);
			break;
		case 'm':
			o.msgs = strtoul(optarg, nullptr, 0);
			break;
		case 'S':
			o.size = strtoul(optarg, nullptr, 0);
			break;
		case 'R':
			o.rounds = strtoul(optarg, nullptr, 0);
			break;
		case 'H':
			o.hold_s = atoi(optarg);
			break;
		default:
			return usage();
		}
	}
	setvbuf(stdout, nullptr, _IOLBF, 0);
	if (o.server) {
		if (optind != argc)
			return usage();
		/* SIGINT and SIGTERM go to the signalfd only: blocked before libfabric starts any
		 * thread, so that every thread inherits the mask and none takes the signal's
		 * default action */
		sigset_t mask;
		sigemptyset(&mask);
		sigaddset(&mask, SIGINT);
		sigaddset(&mask, SIGTERM);
		if (sigprocmask(SIG_BLOCK, &mask, nullptr)) {
			perror("fi_vwait_echo: sigprocmask");
			return 1;
		}
		server s;
		s.o = o;
		if (s.open())
			return 1;
		return s.run();
	}
	if (optind != argc - 1 || o.conns == 0 || o.size == 0 || o.size > max_size)
		return usage();
	o.addr = argv[optind];
	client c(o);
	return c.run();
}
