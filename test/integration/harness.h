/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* Shared by the integration test programs (dp_msg, dp_cntr, dp_fault, dp_dgram, eq_test): the
 * expectations (EXPECT counts a failure and goes on), the vwait MSG hints, opening a fabric +
 * EQ + domain (a stack), one side of a connection (CQs, counters, endpoint, registered buffer),
 * connecting a pair through a listener, and main()'s test table runner.
 *
 * Each program includes it once and says `using namespace vwait_it;` in its own anonymous
 * namespace. Needs FI_PROVIDER_PATH (the built plugin) and RXE_ADDR (else the program skips, 77).
 */
#ifndef VWAIT_TEST_INTEGRATION_HARNESS_H
#define VWAIT_TEST_INTEGRATION_HARNESS_H

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace vwait_it
{

/* ------------------------------------------------------------ expectations */

/* Failed expectations so far (threads of a test may count too). */
inline std::atomic<int> failures{0};

inline bool check(bool ok, const char *what, long got, int line)
{
	if (!ok) {
		printf("  FAILED line %d: %s (got %ld: %s)\n", line, what, got,
		       got < 0 ? fi_strerror(static_cast<int>(-got)) : "");
		failures++;
	}
	return ok;
}

/* 0 when ret is 0; else counts a failure and returns ret */
inline long expect_ok(long ret, const char *what, int line)
{
	check(ret == 0, what, ret, line);
	return ret;
}

#define EXPECT(cond, val) vwait_it::check((cond), #cond, static_cast<long>(val), __LINE__)
#define EXPECT_OK(expr) vwait_it::expect_ok((expr), #expr, __LINE__)

/* ------------------------------------------------------------ time, names */

constexpr uint32_t version = FI_VERSION(1, 17);
/* every "must not hang" wait of the programs: 100x a connect or a completion in the emulated
 * guest (tens to hundreds of ms); a hang is the test's timeout */
constexpr int timeout_ms = 20000;
/* RXE_ADDR: the verbs device's IPv4 address (set by run_tests / have_rxe) */
inline const char *rxe_addr = nullptr;

using clock_type = std::chrono::steady_clock;

inline long ms_since(clock_type::time_point t0)
{
	return static_cast<long>(
	    std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - t0).count());
}

/* seconds since t0 */
inline double since(clock_type::time_point t0)
{
	return std::chrono::duration<double>(clock_type::now() - t0).count();
}

/* FI_WAIT_x without its FI_WAIT_ prefix */
inline const char *wait_name(int w)
{
	switch (w) {
	case FI_WAIT_NONE:
		return "NONE";
	case FI_WAIT_UNSPEC:
		return "UNSPEC";
	case FI_WAIT_SET:
		return "SET";
	case FI_WAIT_FD:
		return "FD";
	case FI_WAIT_MUTEX_COND:
		return "MUTEX_COND";
	case FI_WAIT_YIELD:
		return "YIELD";
	case FI_WAIT_POLLFD:
		return "POLLFD";
	default:
		return "?";
	}
}

/* A data pattern of seed, and its check. */
inline void fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = static_cast<uint8_t>((i * 131 + seed * 7 + (i >> 8)) & 0xff);
}

inline bool verify(const uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != static_cast<uint8_t>((i * 131 + seed * 7 + (i >> 8)) & 0xff))
			return false;
	return true;
}

/* ------------------------------------------------------------ objects */

/* vwait FI_EP_MSG hints with caps and the MR mode of every vwait endpoint. */
inline struct fi_info *msg_hints(uint64_t caps = FI_MSG | FI_RMA)
{
	struct fi_info *h = fi_allocinfo();
	h->ep_attr->type = FI_EP_MSG;
	h->caps = caps;
	h->mode = FI_CONTEXT | FI_RX_CQ_DATA;
	h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	h->fabric_attr->prov_name = strdup("vwait");
	return h;
}

/* An EQ entry with room for CM private data. */
struct cm_buf {
	alignas(struct fi_eq_cm_entry) uint8_t raw[sizeof(struct fi_eq_cm_entry) + 256];
	struct fi_eq_cm_entry *e() { return reinterpret_cast<struct fi_eq_cm_entry *>(raw); }
	uint8_t *data() { return raw + sizeof(struct fi_eq_cm_entry); }
};

/* fi_close, expected to succeed; nullptr is nothing to close. */
inline void close_fid(struct fid *f)
{
	if (f) {
		int ret = fi_close(f);
		EXPECT(ret == 0, ret);
	}
}

/* Reads one EQ event within ms: its size, or a negative code. */
inline long eq_event(struct fid_eq *eq, uint32_t *event, void *buf, size_t len, int ms = timeout_ms)
{
	return fi_eq_sread(eq, event, buf, len, ms, 0);
}

/* One completion on cq within ms, read by read() (a non-blocking read of one entry): 1, or
 * -FI_EAVAIL with the error entry read into *err (a scratch one when err is NULL), or
 * -FI_ETIMEDOUT, or read()'s own negative code. */
template <typename Read>
long poll_comp(struct fid_cq *cq, struct fi_cq_err_entry *err, int ms, Read read)
{
	auto end = clock_type::now() + std::chrono::milliseconds(ms);
	for (;;) {
		ssize_t n = read();
		if (n == 1)
			return 1;
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry tmp = {};
			struct fi_cq_err_entry *out = err ? err : &tmp;
			*out = {};
			ssize_t r = fi_cq_readerr(cq, out, 0);
			EXPECT(r == 1, r);
			return -FI_EAVAIL;
		}
		if (n != -FI_EAGAIN)
			return n;
		if (clock_type::now() > end)
			return -FI_ETIMEDOUT;
	}
}

/* A fabric, an EQ and a domain: what outlives the connections of a test. */
/* An iWARP device (siw): no immediate data (cq_data_size 0), no acknowledged RDMA write,
 * reads scatter to fewer buffers, connections only through rdma_cm. */
inline bool is_iwarp(const struct fi_info *info)
{
	return info && info->ep_attr && info->ep_attr->protocol == FI_PROTO_IWARP;
}

struct stack {
	struct fi_info *info = nullptr;
	struct fid_fabric *fabric = nullptr;
	struct fid_domain *domain = nullptr;
	struct fid_eq *eq = nullptr;
};

/* Opens st's fabric, EQ (eq_wait) and domain from st.info. */
inline int open_stack_from(stack &st, enum fi_wait_obj eq_wait)
{
	int ret;
	if ((ret = fi_fabric(st.info->fabric_attr, &st.fabric, nullptr)))
		return ret;
	struct fi_eq_attr ea = {};
	ea.wait_obj = eq_wait;
	if ((ret = fi_eq_open(st.fabric, &ea, &st.eq, nullptr)))
		return ret;
	return fi_domain(st.fabric, st.info, &st.domain, nullptr);
}

/* node/service nullptr: any vwait MSG info. */
inline int open_stack(stack &st, enum fi_wait_obj eq_wait, const char *node = nullptr,
                      const char *service = nullptr, uint64_t flags = 0)
{
	struct fi_info *hints = msg_hints();
	int ret = fi_getinfo(version, node, service, flags, hints, &st.info);
	fi_freeinfo(hints);
	return ret ? ret : open_stack_from(st, eq_wait);
}

inline void close_stack(stack &st)
{
	close_fid(st.domain ? &st.domain->fid : nullptr);
	close_fid(st.eq ? &st.eq->fid : nullptr);
	close_fid(st.fabric ? &st.fabric->fid : nullptr);
	fi_freeinfo(st.info);
	st = stack{};
}

/* A listening passive endpoint of st on info, bound to st.eq; its address in *addr. */
inline int listen_on(stack &st, struct fi_info *info, struct fid_pep **pep, void *addr,
                     size_t addrlen)
{
	int ret = fi_passive_ep(st.fabric, info, pep, nullptr);
	if (ret)
		return ret;
	if ((ret = fi_pep_bind(*pep, &st.eq->fid, 0)) || (ret = fi_listen(*pep)))
		return ret;
	return fi_getname(&(*pep)->fid, addr, &addrlen);
}

/* One side of a connection: endpoint, CQs, registered buffer. */
struct side {
	struct fid_ep *ep = nullptr;
	struct fid_cq *tx = nullptr;
	struct fid_cq *rx = nullptr;
	std::vector<uint8_t> buf;
	struct fid_mr *mr = nullptr;
	void *desc() const { return fi_mr_desc(mr); }
};

/* What one side opens and binds. */
struct side_cfg {
	enum fi_wait_obj wait = FI_WAIT_NONE; /* the CQs' */
	enum fi_cq_format format = FI_CQ_FORMAT_DATA;
	bool tx_cq = true;
	bool rx_cq = true;
	size_t tx_size = 0; /* CQ sizes: 0 the provider's default */
	size_t rx_size = 0;
	uint64_t tx_flags = 0; /* added to the FI_TRANSMIT bind */
	uint64_t cq_flags = 0; /* added to both CQ binds: FI_SELECTIVE_COMPLETION */
	std::vector<std::pair<struct fid_cntr *, uint64_t>> cntrs; /* bound with their flags */
};

/* CQs, an endpoint on info bound to them, the counters and st.eq, enabled, and a buffer of
 * bufsize registered for every access. */
inline int open_side(stack &st, struct fi_info *info, side &s, const side_cfg &cfg, size_t bufsize)
{
	auto open_cq = [&](struct fid_cq **cq, size_t size) {
		struct fi_cq_attr ca = {};
		ca.format = cfg.format;
		ca.wait_obj = cfg.wait;
		ca.size = size;
		return fi_cq_open(st.domain, &ca, cq, nullptr);
	};
	int ret;
	if (cfg.tx_cq && (ret = open_cq(&s.tx, cfg.tx_size)))
		return ret;
	if (cfg.rx_cq && (ret = open_cq(&s.rx, cfg.rx_size)))
		return ret;
	if ((ret = fi_endpoint(st.domain, info, &s.ep, nullptr)))
		return ret;
	if (s.tx && (ret = fi_ep_bind(s.ep, &s.tx->fid, FI_TRANSMIT | cfg.tx_flags | cfg.cq_flags)))
		return ret;
	if (s.rx && (ret = fi_ep_bind(s.ep, &s.rx->fid, FI_RECV | cfg.cq_flags)))
		return ret;
	for (const auto &c : cfg.cntrs)
		if ((ret = fi_ep_bind(s.ep, &c.first->fid, c.second)))
			return ret;
	if ((ret = fi_ep_bind(s.ep, &st.eq->fid, 0)) || (ret = fi_enable(s.ep)))
		return ret;
	s.buf.assign(bufsize, 0);
	return fi_mr_reg(st.domain, s.buf.data(), s.buf.size(),
	                 FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE,
	                 0, 0, 0, &s.mr, nullptr);
}

inline void close_side(side &s)
{
	close_fid(s.ep ? &s.ep->fid : nullptr);
	close_fid(s.mr ? &s.mr->fid : nullptr);
	close_fid(s.tx ? &s.tx->fid : nullptr);
	close_fid(s.rx ? &s.rx->fid : nullptr);
	s = side{};
}

/* The CM data of a connection, checked when given: FI_CONNREQ carries cdata (with the
 * listener's fid and an info with a handle and dest_addr), the client's FI_CONNECTED adata,
 * and both sides see FI_CONNECTED. */
struct cm_data {
	std::string cdata;
	std::string adata;
};

/* Opens cli on cli_info and connects it to the listener pep at srv_addr (before_connect, when
 * given, runs between the client's fi_enable and its fi_connect); the server side is opened
 * on the FI_CONNREQ's info and accepts. 0 once both sides saw FI_CONNECTED. */
inline int connect_sides(stack &st, struct fid_pep *pep, struct fi_info *cli_info,
                         const void *srv_addr, side &cli, const side_cfg &cli_cfg, side &srv,
                         const side_cfg &srv_cfg, size_t bufsize, const cm_data *data = nullptr,
                         const std::function<void()> &before_connect = {})
{
	int ret = open_side(st, cli_info, cli, cli_cfg, bufsize);
	if (ret)
		return ret;
	if (before_connect)
		before_connect();
	if ((ret = fi_connect(cli.ep, srv_addr, data ? data->cdata.data() : nullptr,
	                      data ? data->cdata.size() : 0)))
		return ret;
	cm_buf ent;
	uint32_t ev = 0;
	long n = eq_event(st.eq, &ev, ent.raw, sizeof(ent.raw));
	if (n == -FI_EAVAIL) {
		struct fi_eq_err_entry err = {};
		fi_eq_readerr(st.eq, &err, 0);
		printf("  connect: EQ error %s (prov_errno %d)\n", fi_strerror(err.err),
		       err.prov_errno);
	}
	if (!EXPECT(n >= static_cast<long>(sizeof(struct fi_eq_cm_entry)) && ev == FI_CONNREQ, n))
		return -FI_EOTHER;
	struct fi_info *req = ent.e()->info;
	if (data) {
		EXPECT(ent.e()->fid == &pep->fid, 0);
		EXPECT(static_cast<size_t>(n) == sizeof(struct fi_eq_cm_entry) + data->cdata.size(),
		       n);
		EXPECT(memcmp(ent.data(), data->cdata.data(), data->cdata.size()) == 0, 0);
		EXPECT(req && req->handle && req->dest_addr, 0);
	}
	ret = open_side(st, req, srv, srv_cfg, bufsize);
	if (!ret)
		ret = fi_accept(srv.ep, data ? data->adata.data() : nullptr,
		                data ? data->adata.size() : 0);
	fi_freeinfo(req);
	if (ret)
		return ret;
	bool cli_up = false, srv_up = false;
	for (int i = 0; i < 2; i++) {
		n = eq_event(st.eq, &ev, ent.raw, sizeof(ent.raw));
		if (!EXPECT(n >= static_cast<long>(sizeof(struct fi_eq_cm_entry)) &&
		                ev == FI_CONNECTED,
		            n))
			return -FI_EOTHER;
		if (ent.e()->fid == &cli.ep->fid) {
			cli_up = true;
			if (data) {
				EXPECT(static_cast<size_t>(n) ==
				           sizeof(struct fi_eq_cm_entry) + data->adata.size(),
				       n);
				EXPECT(memcmp(ent.data(), data->adata.data(), data->adata.size()) ==
				           0,
				       0);
			}
		} else if (ent.e()->fid == &srv.ep->fid) {
			srv_up = true;
		}
	}
	return !data || (cli_up && srv_up) ? 0 : -FI_EOTHER;
}

/* ------------------------------------------------------------ main */

/* RXE_ADDR into rxe_addr; false (after a SKIP line) when there is none. */
inline bool have_rxe()
{
	rxe_addr = getenv("RXE_ADDR");
	if (!rxe_addr || !*rxe_addr) {
		printf("SKIP: RXE_ADDR is not set (no verbs device)\n");
		return false;
	}
	return true;
}

struct test {
	const char *name;
	void (*fn)();
};

/* main() of a program of tests: `prog [TEST]` runs the test named TEST, or all of them
 * (TEST "all" or none). Skips (77) without RXE_ADDR, fails (1) when fi_getinfo with hints()
 * finds no vwait (ep_type names it); 0 when every expectation held, 2 for an unknown TEST. */
template <size_t N>
int run_tests(int argc, char **argv, const test (&tests)[N], struct fi_info *(*hints)(),
              const char *ep_type)
{
	setvbuf(stdout, nullptr, _IOLBF, 0);
	if (!have_rxe())
		return 77;
	struct fi_info *h = hints(), *info = nullptr;
	int ret = fi_getinfo(version, nullptr, nullptr, 0, h, &info);
	fi_freeinfo(h);
	fi_freeinfo(info);
	if (ret) {
		printf("FAIL: fi_getinfo(vwait, %s): %s (FI_PROVIDER_PATH=%s)\n", ep_type,
		       fi_strerror(-ret), getenv("FI_PROVIDER_PATH"));
		return 1;
	}
	const char *which = argc > 1 ? argv[1] : "all";
	bool any = false;
	for (const test &t : tests) {
		if (strcmp(which, "all") != 0 && strcmp(which, t.name) != 0)
			continue;
		any = true;
		int before = failures;
		auto t0 = clock_type::now();
		printf("== %s\n", t.name);
		t.fn();
		printf("%s %s (%.2fs)\n", failures == before ? "ok" : "FAILED", t.name, since(t0));
	}
	if (!any) {
		printf("unknown test %s\n", which);
		return 2;
	}
	printf("%d failure(s)\n", failures.load());
	return failures ? 1 : 0;
}

} // namespace vwait_it

#endif
