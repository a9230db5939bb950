/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* Credit-based flow control for ofi_rxm over an RC endpoint: libfabric's internal extension
 * "ofix_flow_ctrl_v1", which ofi_rxm opens on its core domain with fi_open_ops and uses when the
 * core offers it (upstream verbs does, on every MSG endpoint without a shared receive context).
 * Without it, a receiver that stops reposting (ofi_rxm's receive buffers all in use) leaves the
 * sender's next message no posted receive: RoCE's RC retries (receiver not ready), iWARP cannot
 * and terminates the connection. With it, a message that would find no receive is held back
 * (-FI_EAGAIN) until the peer grants credits for the receives it posted again.
 *
 * The credit accounting is here (no verbs: unit-tested on the host); the endpoint keeps one
 * send_credits under its posting lock and one recv_credits under its receive lock (ep.h), and
 * flow_ctrl.cpp hands out the ops table. */
#ifndef VWAIT_FLOW_CTRL_H
#define VWAIT_FLOW_CTRL_H

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

#include <cstdint>
#include <sys/types.h>

namespace vwait
{

/* The fi_open_ops name and the table, as libfabric's internal header (ofi_util.h) declares
 * them; it is not installed, so the layout is written here. Checked against the binaries:
 * ofi_rxm of libfabric 1.17.0 (Debian 12) and 2.1.0 (Debian 13) opens this name, keeps the
 * table and calls set_send_handler at offset 0x20 and available at 0x08, as below; the
 * send handler's credits argument was a size_t before 1.15 (the same 64 bits on LP64). */
constexpr char flow_ctrl_ops_name[] = "ofix_flow_ctrl_v1";

struct flow_ctrl_ops_v1 {
	size_t size;
	/* the endpoint can do flow control (called after fi_enable, before connecting) */
	bool (*available)(struct fid_ep *ep);
	/* both sides connected and agreed: start counting; threshold: grant the peer credits
	 * once this many receives were posted again */
	int (*enable)(struct fid_ep *ep, uint64_t threshold);
	/* the peer granted credits (ofi_rxm received its credit message) */
	void (*add_credits)(struct fid_ep *ep, uint64_t credits);
	/* how the core asks ofi_rxm to send a credit message: 0 when sent or queued; anything
	 * else gives the credits back to the core, which grants them later */
	void (*set_send_handler)(struct fid_domain *domain,
	                         ssize_t (*send_handler)(struct fid_ep *ep, uint64_t credits));
};

using credit_send_fn = ssize_t (*)(struct fid_ep *ep, uint64_t credits);

/* The flag ofi_rxm sends its credit messages with: they may take the last credit, which
 * other messages leave to them. FI_PRIORITY (bit 22) in libfabric 1.x's public header;
 * 2.x removed it there and ofi_rxm passes its internal OFI_PRIORITY (bit 62: read in
 * 2.1.0's rxm_send_credits). Neither bit means anything else to a send in either version. */
constexpr uint64_t credit_priority_flags = (1ULL << 22) | (1ULL << 62);

/* The sending side: credits for the peer's posted receives. Unlimited until enable(); a
 * grant that arrives before enable() (the peer enabled first) is kept for it. Both sides
 * start with one credit, which only a priority (credit) message may take: so that a side
 * that used every other credit can still tell the peer what it posted again. */
class send_credits
{
public:
	static constexpr uint64_t unlimited = UINT64_MAX;

	bool enabled() const noexcept { return credits_ != unlimited; }
	uint64_t credits() const noexcept { return credits_; }
	/* granted before enable() */
	uint64_t saved() const noexcept { return saved_; }

	/* A transmit that consumes a peer receive may go: it takes a credit. false: hold it back
	 * (-FI_EAGAIN), the peer has no receive for it, or only the one kept for credits. */
	bool take(bool priority) noexcept
	{
		if (credits_ == unlimited)
			return true;
		if (credits_ == 0 || (credits_ == 1 && !priority))
			return false;
		--credits_;
		return true;
	}
	/* the transmit that took a credit was not posted after all */
	void untake() noexcept
	{
		if (credits_ != unlimited)
			++credits_;
	}
	void add(uint64_t n) noexcept
	{
		uint64_t &to = credits_ == unlimited ? saved_ : credits_;
		to = n < unlimited - 1 - to ? to + n : unlimited - 1;
	}
	/* a second call changes nothing */
	void enable() noexcept
	{
		if (credits_ != unlimited)
			return;
		credits_ = saved_ < unlimited - 1 ? 1 + saved_ : unlimited - 1;
		saved_ = 0;
	}

private:
	uint64_t credits_ = unlimited;
	uint64_t saved_ = 0;
};

/* The receiving side: receives posted and not yet granted to the peer. It counts from -1: the
 * peer's first credit is given by the protocol, not granted. Nothing is granted before
 * enable(); from then on, each time threshold receives are ungranted, all of them are. */
class recv_credits
{
public:
	bool enabled() const noexcept { return threshold_ != disabled; }
	int64_t ungranted() const noexcept { return avail_; }

	/* a receive was posted: the credits to grant the peer now (0: none); below the
	 * threshold (every receive but one in threshold), one comparison */
	uint64_t posted() noexcept
	{
		if (__builtin_expect(++avail_ < threshold_, 1))
			return 0;
		return due();
	}
	/* the credits to grant now (the receives ofi_rxm posted before connecting); posted_before:
	 * receives posted before and not counted with posted() (an endpoint's receive path
	 * counts nothing until flow control is on: it passes its ring's post count), taken on
	 * the first call only */
	uint64_t enable(uint64_t threshold, uint64_t posted_before = 0) noexcept
	{
		if (!enabled())
			avail_ += static_cast<int64_t>(posted_before);
		threshold_ = threshold < static_cast<uint64_t>(disabled)
		                 ? static_cast<int64_t>(threshold)
		                 : disabled - 1;
		return due();
	}
	/* a grant that could not be sent (ofi_rxm's handler out of memory): granted again with
	 * the next receive posted, or by the endpoint's next transmit (due()), whichever comes
	 * first; with neither, a side that only waits for the peer would wait for ever */
	void not_granted(uint64_t n) noexcept { avail_ += static_cast<int64_t>(n); }
	/* the credits to grant now, if the threshold is reached */
	uint64_t due() noexcept
	{
		if (avail_ <= 0 || avail_ < threshold_)
			return 0;
		const uint64_t n = static_cast<uint64_t>(avail_);
		avail_ = 0;
		return n;
	}

private:
	static constexpr int64_t disabled = INT64_MAX;
	int64_t avail_ = -1;
	int64_t threshold_ = disabled;
};

/* The table fi_open_ops(domain, "ofix_flow_ctrl_v1") hands out (flow_ctrl.cpp). */
extern struct flow_ctrl_ops_v1 flow_ctrl_ops;

} // namespace vwait

#endif
