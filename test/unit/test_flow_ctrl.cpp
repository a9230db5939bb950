/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* ofi_rxm's credit-based flow control (include/vwait/flow_ctrl.h): the credit accounting of each
 * side, and a model of two connected endpoints driven as ofi_rxm drives them (receives posted
 * before connecting, counted one by one or as the endpoint counts them: none until enable(),
 * which takes the ring's post count; enable() at FI_CONNECTED on each side at its own time; a
 * credit message sent with the priority flag through the send handler or deferred; a receiver
 * that stops reposting for a while): no message ever arrives to an empty receive queue (on iWARP
 * that ends the connection), every message arrives once and in order, and nothing deadlocks. Then
 * the ops table with fids that are not vwait's: a warning, no crash. */
#include "vwait_cmocka.h"

#include "vwait/flow_ctrl.h"

#include <rdma/fi_errno.h>

#include <cstdint>
#include <cstdio>
#include <deque>
#include <random>

namespace
{

using vwait::recv_credits;
using vwait::send_credits;

void send_side(void **)
{
	send_credits tx;
	/* before enable: unlimited, and a grant is kept for enable */
	assert_false(tx.enabled());
	for (int i = 0; i < 1000; i++)
		assert_true(tx.take(false));
	tx.add(5);
	assert_false(tx.enabled());
	tx.enable();
	assert_true(tx.enabled());
	assert_int_equal(tx.credits(), 6); /* the protocol's one and the 5 granted */
	tx.enable();                       /* a second enable changes nothing */
	assert_int_equal(tx.credits(), 6);
	for (int i = 0; i < 5; i++)
		assert_true(tx.take(false));
	/* the last credit is a credit message's */
	assert_false(tx.take(false));
	assert_int_equal(tx.credits(), 1);
	assert_true(tx.take(true));
	assert_false(tx.take(true));
	assert_false(tx.take(false));
	tx.untake();
	assert_int_equal(tx.credits(), 1);
	tx.add(3);
	assert_int_equal(tx.credits(), 4);
	tx.add(UINT64_MAX); /* saturates below the "unlimited" mark */
	assert_true(tx.enabled());
	assert_int_equal(tx.credits(), UINT64_MAX - 1);
}

void recv_side(void **)
{
	recv_credits rx;
	assert_false(rx.enabled());
	/* 8 receives posted before connecting: nothing granted, the first is the protocol's */
	for (int i = 0; i < 8; i++)
		assert_int_equal(rx.posted(), 0);
	assert_int_equal(rx.ungranted(), 7);
	assert_int_equal(rx.enable(4), 7);
	assert_true(rx.enabled());
	assert_int_equal(rx.ungranted(), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(rx.posted(), 0);
	assert_int_equal(rx.posted(), 4);
	/* a grant that could not go is granted with the next */
	rx.not_granted(4);
	assert_int_equal(rx.posted(), 5);
	/* below the threshold at enable: granted later */
	recv_credits late;
	for (int i = 0; i < 3; i++)
		late.posted();
	assert_int_equal(late.enable(4), 0);
	assert_int_equal(late.posted(), 0);
	assert_int_equal(late.posted(), 4);
	/* threshold 0 grants each receive, never 0 credits */
	recv_credits zero;
	assert_int_equal(zero.enable(0), 0);
	assert_int_equal(zero.posted(), 0); /* the protocol's credit */
	assert_int_equal(zero.posted(), 1);
	/* an endpoint counts nothing before enable: it passes the receives posted so far, the
	 * same 7 credits as 8 posted() calls; a second enable adds nothing */
	recv_credits ring;
	assert_int_equal(ring.ungranted(), -1);
	assert_int_equal(ring.enable(4, 8), 7);
	assert_int_equal(ring.ungranted(), 0);
	assert_int_equal(ring.enable(4, 8), 0);
	assert_int_equal(ring.ungranted(), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(ring.posted(), 0);
	assert_int_equal(ring.posted(), 4);
	recv_credits few;
	assert_int_equal(few.enable(4, 3), 0);
	assert_int_equal(few.ungranted(), 2);
	assert_int_equal(few.posted(), 0);
	assert_int_equal(few.posted(), 4);
}

/* One side of a connection, as ofi_rxm drives a core endpoint. */
struct side {
	struct msg {
		bool credit;
		uint64_t value; /* credits, or the application message's number */
	};
	send_credits tx;
	recv_credits rx;
	bool connected = false;    /* ofi_rxm's FI_CONNECTED processed: enable() called */
	int posted = 0;            /* receives posted on the QP */
	uint64_t ring_posted = 0;  /* receives posted ever: the receive ring's post count */
	std::deque<msg> arrived;   /* completions not yet read */
	std::deque<uint64_t> held; /* ofi_rxm's deferred credit messages */
	uint64_t next_send = 0, next_recv = 0, credit_msgs = 0;
	int asleep = 0;    /* steps during which the application reads nothing */
	bool owed = false; /* a grant the handler could not send */
};

struct link {
	side s[2];
	std::deque<side::msg> wire[2]; /* wire[i]: from s[i] to s[1 - i], in order */
	uint64_t threshold;
	std::mt19937 rng;
	bool refused_handler = false; /* the send handler fails now and then */
	uint64_t limit;               /* messages each side sends */
	/* as ep does it: recv_credits::posted() only once enabled, the receives posted before
	 * passed to enable() (the ring's post count); else posted() for every receive */
	bool ring_count;

	link(int rx_size, unsigned seed, uint64_t m, bool ring)
	    : threshold(rx_size / 2), rng(seed), limit(m), ring_count(ring)
	{
		for (side &x : s)
			for (int i = 0; i < rx_size; i++)
				post_one(x);
	}
	/* a receive posted: the credits it makes due */
	uint64_t post_one(side &x)
	{
		x.posted++;
		x.ring_posted++;
		if (ring_count && !x.rx.enabled())
			return 0;
		const uint64_t n = x.rx.posted();
		if (!x.rx.enabled())
			assert_int_equal(n, 0); /* nothing before enable */
		return n;
	}
	/* the peer's receives not granted yet */
	uint64_t ungranted(const side &x) const
	{
		if (ring_count && !x.rx.enabled())
			return x.ring_posted - 1; /* what enable() will count */
		return static_cast<uint64_t>(x.rx.ungranted());
	}
	/* fi_sendmsg(OFI_PRIORITY) of a credit message */
	bool post_credit(int i, uint64_t n)
	{
		if (!s[i].tx.take(true))
			return false;
		wire[i].push_back({true, n});
		s[i].credit_msgs++;
		return true;
	}
	/* the domain's send handler, ofi_rxm's rxm_send_credits: deferred unless connected
	 * and sent; 0 either way, unless it has no buffer (then the core keeps the credits) */
	void grant(int i, uint64_t n)
	{
		/* out of memory now and then, never twice in a row, while this side has messages
		 * to send: its next transmit grants again (ep::regrant) */
		if (refused_handler && !s[i].owed && s[i].next_send + 64 < limit &&
		    rng() % 8 == 0) {
			s[i].rx.not_granted(n);
			s[i].owed = true;
			return;
		}
		if (!s[i].connected || !s[i].held.empty() || !post_credit(i, n))
			s[i].held.push_back(n);
	}
	void connect(int i, uint64_t threshold_now)
	{
		s[i].connected = true;
		s[i].tx.enable();
		if (uint64_t n = s[i].rx.enable(threshold_now, ring_count ? s[i].ring_posted : 0))
			grant(i, n);
	}
	/* Every receive posted at the peer is accounted for exactly once: a credit of this
	 * side's (1 + the grants kept before enable), a message of this side's on the wire, a
	 * receive the peer has not granted yet, or a grant on its way (deferred at the peer, on
	 * the wire back, or arrived here and not read yet). */
	void check() const
	{
		for (int i = 0; i < 2; i++) {
			const side &x = s[i], &peer = s[1 - i];
			uint64_t sum = x.tx.enabled() ? x.tx.credits() : 1 + x.tx.saved();
			sum += wire[i].size();
			sum += ungranted(peer);
			for (uint64_t n : peer.held)
				sum += n;
			for (const side::msg &m : wire[1 - i])
				sum += m.credit ? m.value : 0;
			for (const side::msg &m : x.arrived)
				sum += m.credit ? m.value : 0;
			assert_int_equal(sum, static_cast<uint64_t>(peer.posted));
		}
	}
	/* rxm's progress of its deferred queue */
	void flush_held(int i)
	{
		while (s[i].connected && !s[i].held.empty() && post_credit(i, s[i].held.front()))
			s[i].held.pop_front();
	}
	/* an application send: refused while credit messages wait (as rxm_get_conn does) */
	bool app_send(int i)
	{
		side &x = s[i];
		if (!x.connected || x.next_send == limit || !x.held.empty())
			return false;
		const bool sent = x.tx.take(false);
		if (sent)
			wire[i].push_back({false, x.next_send++});
		/* ep::post_tx_wr: a grant the handler could not send goes now */
		if (x.owed) {
			x.owed = false;
			if (uint64_t n = x.rx.due())
				grant(i, n);
		}
		return sent;
	}
	/* the wire delivers one message of i's into a posted receive of the peer */
	void deliver(int i)
	{
		side &peer = s[1 - i];
		/* iWARP: no receive posted is the end of the connection */
		assert_true(peer.posted > 0);
		peer.posted--;
		peer.arrived.push_back(wire[i].front());
		wire[i].pop_front();
	}
	/* the application reads one completion through ofi_rxm: a credit message adds credits,
	 * a message is checked; the buffer is posted again */
	void read_one(int i)
	{
		side &x = s[i];
		side::msg m = x.arrived.front();
		x.arrived.pop_front();
		if (m.credit)
			x.tx.add(m.value);
		else
			assert_int_equal(m.value, x.next_recv++);
		if (uint64_t n = post_one(x))
			grant(i, n);
	}
};

/* Both directions at once, M messages each, with random steps; one side asleep now and then.
 * Returns the credit messages sent. */
uint64_t run_link(int rx_size, unsigned seed, uint64_t m, bool handler_fails, bool ring_count)
{
	link l(rx_size, seed, m, ring_count);
	l.refused_handler = handler_fails;
	const int first = static_cast<int>(l.rng() % 2);
	const uint64_t total_steps = 200000 + 400 * m;
	uint64_t steps = 0;
	for (; steps < total_steps; steps++) {
		if (l.s[0].next_recv == m && l.s[1].next_recv == m)
			break;
		/* the two sides reach FI_CONNECTED at their own time */
		if (!l.s[first].connected && steps >= 1)
			l.connect(first, l.threshold);
		if (!l.s[1 - first].connected && steps >= 1 + l.rng() % 50)
			l.connect(1 - first, l.threshold);
		const int i = static_cast<int>(l.rng() % 2);
		switch (l.rng() % 4) {
		case 0:
			l.app_send(i);
			break;
		case 1:
			if (!l.wire[i].empty())
				l.deliver(i);
			break;
		case 2:
			if (l.s[i].asleep) {
				l.s[i].asleep--;
			} else if (!l.s[i].arrived.empty()) {
				l.read_one(i);
				if (l.rng() % 500 == 0)
					l.s[i].asleep = 2000; /* fi_bw's receiver, sleeping */
			}
			break;
		default:
			l.flush_held(i);
			break;
		}
		l.check();
	}
	if (l.s[0].next_recv != m || l.s[1].next_recv != m)
		for (int i = 0; i < 2; i++)
			printf("rx_size %d seed %u side %d: connected %d credits %llu saved %llu "
			       "posted %d "
			       "ungranted %lld held %zu arrived %zu wire %zu sent %llu read %llu\n",
			       rx_size, seed, i, l.s[i].connected,
			       static_cast<unsigned long long>(l.s[i].tx.credits()),
			       static_cast<unsigned long long>(l.s[i].tx.saved()), l.s[i].posted,
			       static_cast<long long>(l.s[i].rx.ungranted()), l.s[i].held.size(),
			       l.s[i].arrived.size(), l.wire[i].size(),
			       static_cast<unsigned long long>(l.s[i].next_send),
			       static_cast<unsigned long long>(l.s[i].next_recv));
	assert_int_equal(l.s[0].next_recv, m);
	assert_int_equal(l.s[1].next_recv, m);
	return l.s[0].credit_msgs + l.s[1].credit_msgs;
}

void two_sides(void **)
{
	for (bool ring_count : {false, true})
		for (int rx_size : {4, 8, 16, 128})
			for (unsigned seed = 1; seed <= 12; seed++) {
				const uint64_t m = 3000;
				const uint64_t credits =
				    run_link(rx_size, seed, m, seed % 3 == 0, ring_count);
				if (seed == 1)
					printf("rx_size %d%s: %llu credit messages for 2 x %llu "
					       "messages\n",
					       rx_size, ring_count ? " (ring count)" : "",
					       static_cast<unsigned long long>(credits),
					       static_cast<unsigned long long>(m));
			}
}

/* The ops table, called with what is not a vwait endpoint or domain: no crash. */
void ops_bad_fids(void **)
{
	const vwait::flow_ctrl_ops_v1 &ops = vwait::flow_ctrl_ops;
	assert_true(ops.size >= sizeof(vwait::flow_ctrl_ops_v1));
	assert_false(ops.available(nullptr));
	assert_int_equal(ops.enable(nullptr, 64), -FI_EINVAL);
	ops.add_credits(nullptr, 3);
	ops.set_send_handler(nullptr, nullptr);
	/* an endpoint fid of another provider (its own ops table) */
	struct fi_ops other_ops = {};
	struct fid_ep other = {};
	other.fid.fclass = FI_CLASS_EP;
	other.fid.ops = &other_ops;
	assert_false(ops.available(&other));
	assert_int_equal(ops.enable(&other, 64), -FI_EINVAL);
	ops.add_credits(&other, 3);
	struct fid_domain other_domain = {};
	other_domain.fid.fclass = FI_CLASS_DOMAIN;
	other_domain.fid.ops = &other_ops;
	ops.set_send_handler(&other_domain, nullptr);
}

} // namespace

int main()
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(send_side),
	    cmocka_unit_test(recv_side),
	    cmocka_unit_test(two_sides),
	    cmocka_unit_test(ops_bad_fids),
	};
	return cmocka_run_group_tests_name("flow_ctrl", tests, nullptr, nullptr) == 0 ? 0 : 1;
}
