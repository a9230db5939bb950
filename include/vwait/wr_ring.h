/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* The work-request rings of an endpoint: one per queue (send, receive) of its QP. wr_id of
 * every posted work request points at its slot; translate() (cq.cpp) gives slots back. */
#ifndef VWAIT_WR_RING_H
#define VWAIT_WR_RING_H

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <type_traits>

#include <sys/mman.h>
#include <unistd.h>

namespace vwait
{

namespace util
{
class sw_cntr;
}

struct wr_ring;

/* wr_id of a keepalive probe (eq.cpp, ep_rc.cpp): an unsignalled zero-byte RDMA write outside
 * the rings (the QP has one send slot more for it); it completes only when it fails, and
 * translate() drops that completion (the QP is in error then: what is posted flushes). */
constexpr uint64_t probe_wr_id = 0;

/* What vwait remembers of one posted work request; wr_id points at it. */
struct wr_slot {
	void *context = nullptr;
	uint64_t flags = 0; /* FI_SEND | FI_MSG, FI_RMA | FI_WRITE, ... */
	size_t len = 0;
	bool report = true;        /* false: no completion entry unless it fails */
	uint64_t seq = 0;          /* the ring's post count when it was posted (see retire) */
	const void *buf = nullptr; /* a receive's first buffer (where UD puts the GRH) */
	wr_ring *ring = nullptr;
};
static_assert(std::is_trivially_copyable_v<wr_slot> && std::is_trivially_destructible_v<wr_slot>,
              "wr_ring's slots come zeroed from mmap or calloc");

/* The slots of one queue (send or receive) of one QP. RC completes a queue in order, so
 * slots are handed out round-robin, and two counts say which are free: posted, written only by
 * the endpoint that posts (under its lock), and retired, written only by the CQ that polls the
 * queue's completions (under its lock). Each side reads the other's count and writes its own
 * with a plain store: no read-modify-write on the data path. A send that needs no completion
 * entry (inject, selective completion) may go unsignalled: it produces a work completion only
 * if it fails, and its slot comes back with the next completion of the queue (every slot
 * posted before the one that completed). The CQs an endpoint was bound to keep the ring alive
 * after the endpoint closed (late flushes still point at it). */
struct wr_ring {
	/* The slots come zeroed and are written only when claimed (claim() sets the ring
	 * pointer), so that the pages of slots an idle endpoint has not used yet take no resident
	 * memory until its queue has gone round once: an array of two pages or more is an
	 * anonymous mapping of its own (pages appear as they are first written; calloc would
	 * clear, so touch, every page of a chunk it carves from memory malloc already holds),
	 * a smaller one, or one whose mapping failed, comes from calloc. wr_slot is
	 * implicit-lifetime (trivially copyable and destructible): zeroed memory holds slots. */
	explicit wr_ring(size_t n) : slots(alloc_slots(n ? n : 1)), nslots(n)
	{
		if (!slots)
			throw std::bad_alloc();
	}
	struct slots_deleter {
		size_t mapped_bytes = 0; /* 0: from calloc */
		void operator()(wr_slot *p) const noexcept
		{
			if (mapped_bytes)
				::munmap(p, mapped_bytes);
			else
				std::free(p);
		}
	};
	using slots_ptr = std::unique_ptr<wr_slot[], slots_deleter>;
	static slots_ptr alloc_slots(size_t n) noexcept
	{
		const size_t bytes = n * sizeof(wr_slot);
		const long page = ::sysconf(_SC_PAGESIZE);
		if (page > 0 && bytes >= 2 * static_cast<size_t>(page)) {
			void *m = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
			                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (m != MAP_FAILED)
				return slots_ptr(static_cast<wr_slot *>(m), slots_deleter{bytes});
		}
		return slots_ptr(static_cast<wr_slot *>(std::calloc(n, sizeof(wr_slot))),
		                 slots_deleter{0});
	}
	slots_ptr slots;
	const size_t nslots;              /* slots in the queue */
	std::atomic<uint64_t> posted{0};  /* work requests posted, ever: the poster's */
	std::atomic<uint64_t> retired{0}; /* of those, the ones whose slot came back: the CQ's */
	std::atomic<bool> closed{false};
	size_t head = 0;          /* the next slot to post, < nslots; under the endpoint's lock */
	size_t unsignaled = 0;    /* unsignalled sends in a row, under the endpoint's lock */
	uint64_t reads_until = 0; /* the last RDMA read's seq + 1 (0: none yet), the poster's */
	/* The counters bound to this queue's endpoint direction (fi_ep_bind), set before
	 * fi_enable and counted by translate() until closed:
	 *   send queue:    msg = FI_SEND, write = FI_WRITE, read = FI_READ;
	 *   receive queue: msg = FI_RECV, write = FI_REMOTE_WRITE. Verbs reports a remote
	 *                  write only when it carries immediate data (it consumes a receive):
	 *                  plain RDMA writes of the peer never reach this side's CQ. */
	util::sw_cntr *msg_cntr = nullptr;
	util::sw_cntr *write_cntr = nullptr;
	util::sw_cntr *read_cntr = nullptr;
	/* whether a counter counts this queue's completions (each work request is signalled) */
	bool counted() const noexcept { return msg_cntr || write_cntr || read_cntr; }
	/* A receive queue that reports its senders (a DGRAM endpoint's): the fi_addr_t of the
	 * sender of a datagram, from the receive buffer and the source QPN. */
	uint64_t (*source)(void *arg, const void *buf, uint32_t src_qp) = nullptr;
	void *source_arg = nullptr;
	/* bytes at the start of every receive that the application does not see (the GRH a DGRAM
	 * endpoint without FI_MSG_PREFIX keeps in its own buffer) */
	size_t hidden = 0;

	/* The poster, under its lock: the slot for the next work request, or nullptr when every
	 * slot is in use. commit() once the work request is posted. */
	wr_slot *claim() noexcept
	{
		const uint64_t seq = posted.load(std::memory_order_relaxed);
		if (seq - retired.load(std::memory_order_acquire) >= nslots)
			return nullptr;
		wr_slot *slot = &slots[head];
		slot->seq = seq;
		slot->ring = this;
		return slot;
	}
	void commit() noexcept
	{
		head = head + 1 == nslots ? 0 : head + 1;
		posted.store(posted.load(std::memory_order_relaxed) + 1, std::memory_order_release);
	}
	/* The CQ, under its lock: the work completion of slot came; it and every slot posted
	 * before it are free again. */
	void retire(const wr_slot &slot) noexcept
	{
		retired.store(slot.seq + 1, std::memory_order_release);
	}

	/* slots posted and not yet given back (retired read first: it never passes posted) */
	size_t outstanding() const noexcept
	{
		const uint64_t r = retired.load(std::memory_order_acquire);
		return static_cast<size_t>(posted.load(std::memory_order_acquire) - r);
	}
	/* slots free for posting (by a reader other than the poster, outstanding() may run ahead
	 * of nslots for a moment: posts and completions between its two loads) */
	size_t free_slots() const noexcept
	{
		const size_t out = outstanding();
		return out < nslots ? nslots - out : 0;
	}
};

} // namespace vwait

#endif
