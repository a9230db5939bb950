/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* ofi_rxm's credit-based flow control on a real device (include/vwait/flow_ctrl.h), driven
 * here as ofi_rxm drives it: fi_open_ops(domain, "ofix_flow_ctrl_v1"), a send handler that
 * sends a credit message with the priority flag (or defers it), receives posted before
 * enable(threshold), add_credits() when a credit message arrives. A sender whose receiver stops
 * reposting is refused (-FI_EAGAIN) at the last credit, and nothing reaches the peer without a
 * posted receive (on iWARP that would end the connection); once the receiver reposts, every
 * message arrives, in order.
 *
 *   dp_flow [credits]
 * Needs FI_PROVIDER_PATH (the built plugin) and RXE_ADDR. Exit 0 pass, 77 skip, 1 fail. */
#include "harness.h"

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#include <netinet/in.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>

namespace
{

using namespace vwait_it;

/* libfabric's internal table (ofi_util.h, not installed), as ofi_rxm sees it */
struct flow_ops {
	size_t size;
	bool (*available)(struct fid_ep *ep);
	int (*enable)(struct fid_ep *ep, uint64_t threshold);
	void (*add_credits)(struct fid_ep *ep, uint64_t credits);
	void (*set_send_handler)(struct fid_domain *domain,
	                         ssize_t (*handler)(struct fid_ep *ep, uint64_t credits));
};
/* ofi_rxm's priority flag: FI_PRIORITY in libfabric 1.x, OFI_PRIORITY in 2.x */
constexpr uint64_t priority_1x = 1ULL << 22;
constexpr uint64_t priority_2x = 1ULL << 62;

constexpr size_t slot = 64;       /* bytes per receive or send buffer */
constexpr size_t rx_slots = 16;   /* receives each side keeps posted */
constexpr size_t tx_base = 32768; /* send buffers from here, tx_slots of them */
constexpr size_t tx_slots = 256;

enum : uint32_t { app_msg = 0x41505030, credit_msg = 0x43524544 };
struct wire_msg {
	uint32_t kind;
	uint32_t seq;
	uint64_t credits;
};

struct world : stack {
	struct fid_pep *pep = nullptr;
	side cli, srv;
	struct sockaddr_in srv_addr = {};
	flow_ops *ops = nullptr;
};

struct peer {
	side *s = nullptr;
	std::deque<uint64_t> held; /* credit messages deferred, as ofi_rxm's deferred queue */
	size_t tx_next = 0;
	uint32_t sent = 0, received = 0, credit_msgs = 0, handler_calls = 0, errors = 0;
	uint64_t credits_in = 0;
};

world *the_world;
peer the_peers[2]; /* client, server */

peer *peer_of(struct fid_ep *ep)
{
	for (peer &p : the_peers)
		if (p.s && p.s->ep == ep)
			return &p;
	return nullptr;
}

ssize_t post_msg(peer &p, uint32_t kind, uint32_t seq, uint64_t credits, uint64_t flags)
{
	uint8_t *buf = p.s->buf.data() + tx_base + (p.tx_next % tx_slots) * slot;
	wire_msg m = {kind, seq, credits};
	memcpy(buf, &m, sizeof(m));
	struct iovec iov = {buf, sizeof(m)};
	void *desc = p.s->desc();
	struct fi_msg msg = {};
	msg.msg_iov = &iov;
	msg.desc = &desc;
	msg.iov_count = 1;
	ssize_t ret = fi_sendmsg(p.s->ep, &msg, flags | FI_COMPLETION);
	if (ret == 0)
		p.tx_next++;
	return ret;
}

/* rxm_send_credits: sent with the priority flag, or deferred; 0 either way */
ssize_t send_credits(struct fid_ep *ep, uint64_t credits)
{
	peer *p = peer_of(ep);
	if (!EXPECT(p != nullptr, 0))
		return -FI_EINVAL;
	p->handler_calls++;
	if (!p->held.empty() || post_msg(*p, credit_msg, 0, credits, priority_1x) != 0)
		p->held.push_back(credits);
	else
		p->credit_msgs++;
	return 0;
}

ssize_t post_recv(peer &p, size_t i)
{
	return fi_recv(p.s->ep, p.s->buf.data() + i * slot, slot, p.s->desc(), 0,
	               reinterpret_cast<void *>(i));
}

/* ofi_rxm's progress: send completions, deferred credit messages, then (when reading) the
 * received messages, each buffer posted again */
void progress(peer &p, bool read_rx)
{
	struct fi_cq_data_entry e[8];
	ssize_t n;
	while ((n = fi_cq_read(p.s->tx, e, 8)) > 0) {
	}
	if (n == -FI_EAVAIL) {
		struct fi_cq_err_entry err = {};
		fi_cq_readerr(p.s->tx, &err, 0);
		printf("  send error: %s\n", fi_strerror(err.err));
		p.errors++;
	}
	while (!p.held.empty() && post_msg(p, credit_msg, 0, p.held.front(), priority_2x) == 0) {
		p.held.pop_front();
		p.credit_msgs++;
	}
	if (!read_rx)
		return;
	while ((n = fi_cq_read(p.s->rx, e, 1)) == 1) {
		const size_t i = reinterpret_cast<size_t>(e[0].op_context);
		wire_msg m;
		memcpy(&m, p.s->buf.data() + i * slot, sizeof(m));
		if (m.kind == credit_msg) {
			p.credits_in += m.credits;
			the_world->ops->add_credits(p.s->ep, m.credits);
		} else if (EXPECT(m.kind == app_msg && m.seq == p.received, m.seq)) {
			p.received++;
		}
		ssize_t ret = post_recv(p, i);
		EXPECT(ret == 0, ret);
	}
	if (n == -FI_EAVAIL) {
		struct fi_cq_err_entry err = {};
		fi_cq_readerr(p.s->rx, &err, 0);
		printf("  receive error: %s\n", fi_strerror(err.err));
		p.errors++;
	}
}

void run_flow(world &w, uint32_t total);

void test_flow(uint32_t total)
{
	world w;
	the_world = &w;
	if (!EXPECT(open_stack(w, FI_WAIT_UNSPEC) == 0, 0))
		return;
	/* the table: bad flags refused, the size of libfabric's */
	void *ops = nullptr;
	int ret = fi_open_ops(&w.domain->fid, "ofix_flow_ctrl_v1", 1, &ops, nullptr);
	EXPECT(ret == -FI_EBADFLAGS, ret);
	ret = fi_open_ops(&w.domain->fid, "ofix_flow_ctrl_v1", 0, &ops, nullptr);
	if (!EXPECT(ret == 0 && ops, ret)) {
		close_stack(w);
		return;
	}
	w.ops = static_cast<flow_ops *>(ops);
	EXPECT(w.ops->size == sizeof(flow_ops), w.ops->size);
	w.ops->set_send_handler(w.domain, send_credits);

	ret = listen_on(w, w.info, &w.pep, &w.srv_addr, sizeof(w.srv_addr));
	side_cfg cfg;
	if (EXPECT(ret == 0, ret))
		ret = connect_sides(w, w.pep, w.info, &w.srv_addr, w.cli, cfg, w.srv, cfg, 65536);
	if (EXPECT(ret == 0, ret))
		run_flow(w, total);
	close_side(w.cli);
	close_side(w.srv);
	close_fid(w.pep ? &w.pep->fid : nullptr);
	close_stack(w);
	for (peer &p : the_peers)
		p = peer{};
}

void run_flow(world &w, uint32_t total)
{
	int ret;
	the_peers[0] = peer{};
	the_peers[1] = peer{};
	the_peers[0].s = &w.cli;
	the_peers[1].s = &w.srv;
	printf("  %s: %zu receives posted per side, threshold %zu\n",
	       is_iwarp(w.info) ? "iWARP" : "RoCE", rx_slots, rx_slots / 2);
	/* receives first, as ofi_rxm posts them before it connects: nothing granted yet */
	for (peer &p : the_peers)
		for (size_t i = 0; i < rx_slots; i++)
			EXPECT(post_recv(p, i) == 0, i);
	for (peer &p : the_peers) {
		EXPECT(w.ops->available(p.s->ep), 0);
		EXPECT(p.handler_calls == 0, p.handler_calls);
	}
	/* enable: each side grants what it posted, less the credit the protocol gives */
	for (peer &p : the_peers) {
		ret = w.ops->enable(p.s->ep, rx_slots / 2);
		EXPECT(ret == 0, ret);
		EXPECT(p.handler_calls == 1 && p.credit_msgs == 1, p.handler_calls);
	}
	{
		auto t0 = clock_type::now();
		while ((the_peers[0].credits_in == 0 || the_peers[1].credits_in == 0) &&
		       ms_since(t0) < timeout_ms)
			for (peer &p : the_peers)
				progress(p, true);
	}
	for (peer &p : the_peers)
		EXPECT(p.credits_in == rx_slots - 1, p.credits_in);

	/* The server stops reading, as fi_bw's receiver sleeps: the client gets as far as its
	 * credits go, less the one kept for a credit message, then -FI_EAGAIN, for as long as
	 * the server sleeps. */
	{
		peer &c = the_peers[0];
		while ((ret = static_cast<int>(post_msg(c, app_msg, c.sent, 0, 0))) == 0)
			c.sent++;
		EXPECT(ret == -FI_EAGAIN, ret);
		EXPECT(c.sent == rx_slots - 2, c.sent);
		printf("  client: %u messages, then -FI_EAGAIN\n", c.sent);
		/* a quiet window: a longer one only finds more, it cannot fail a correct provider
		 */
		for (int i = 0; i < 10; i++) {
			usleep(100 * 1000);
			progress(c, true);
			progress(the_peers[1], false);
			ret = static_cast<int>(post_msg(c, app_msg, c.sent, 0, 0));
			EXPECT(ret == -FI_EAGAIN, ret);
		}
		/* the last credit is a credit message's (2.x's flag here), and then none is left */
		ret = static_cast<int>(post_msg(c, credit_msg, 0, 0, priority_2x));
		EXPECT(ret == 0, ret);
		ret = static_cast<int>(post_msg(c, credit_msg, 0, 0, priority_1x));
		EXPECT(ret == -FI_EAGAIN, ret);
		progress(c, true);
		EXPECT(c.errors == 0 && the_peers[1].errors == 0, c.errors);
		EXPECT(the_peers[1].received == 0, the_peers[1].received);
	}

	/* The server reads and reposts again: every message arrives, in order. */
	{
		peer &c = the_peers[0], &s = the_peers[1];
		auto t0 = clock_type::now();
		/* must not hang: 60 s, 10x the 2000 messages' few seconds in the emulated guest */
		while (s.received < total && ms_since(t0) < 60000 && !c.errors && !s.errors) {
			while (c.sent < total && post_msg(c, app_msg, c.sent, 0, 0) == 0)
				c.sent++;
			progress(c, true);
			progress(s, true);
		}
		EXPECT(s.received == total, s.received);
		EXPECT(c.errors == 0 && s.errors == 0, c.errors + s.errors);
		printf("  %u messages in %.2f s; credit messages: client %u, server %u "
		       "(handler calls %u, %u)\n",
		       s.received, since(t0), c.credit_msgs, s.credit_msgs, c.handler_calls,
		       s.handler_calls);
	}
}

void test_flow_default()
{
	test_flow(2000);
}

const test tests[] = {
    {"flow", test_flow_default},
};

} // namespace

int main(int argc, char **argv)
{
	return run_tests(
	    argc, argv, tests, [] { return msg_hints(); }, "FI_EP_MSG");
}
