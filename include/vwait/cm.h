/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* vwait connection management: the rdma_cm id's owner (cm_target), the framing of CM private
 * data, the FI_CONNREQ handle's lifecycle and the socket-address helpers every endpoint kind
 * and fi_getinfo share. */
#ifndef VWAIT_CM_H
#define VWAIT_CM_H

#include "vwait/util/fid.h"
#include "vwait/verbs.h"

#include <rdma/fabric.h>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

struct sockaddr;

namespace vwait
{

namespace util
{
class sw_cq;
}

/* What an rdma_cm id's context points at: the endpoint or passive endpoint that owns it. */
class cm_target
{
public:
	virtual ~cm_target() = default;
	virtual struct fid *cm_fid() noexcept = 0;
	/* The connecting side: its CONNECTED event carries the peer's accept data. */
	virtual bool active_side() const noexcept = 0;
	/* A connection request arrived for this listener; the info for it (handle set), or
	 * nullptr when the request cannot be described (it is then rejected). */
	virtual struct fi_info *connreq_info(struct rdma_cm_id *id) noexcept = 0;
	/* The peer (or this side) disconnected: outstanding work must flush. id is the event's
	 * (valid until the event is acknowledged, even while the target is closing). May run
	 * on any thread that drains the EQ. */
	virtual void disconnected(struct rdma_cm_id *id) noexcept = 0;
	/* Called at a disconnect, before disconnected() flushes the QP: the completions that
	 * arrived before it are moved up from the hardware, and each CQ the application reads
	 * for this target that has unread entries is added with its util::sw_cq::unread_mark()
	 * (the EQ holds FI_SHUTDOWN until they are read). Runs on the thread converting the
	 * event, under the EQ's locks (40, 42): takes a CQ's progress (60) and ring (80). */
	struct cq_mark {
		util::sw_cq *cq;
		uint64_t mark;
	};
	virtual void unread_marks(std::vector<cq_mark> &marks) noexcept { (void)marks; }
	/* Keepalive (FI_VWAIT_KEEPALIVE_MS), from the EQ's progress thread: posts one probe to
	 * the peer; false once the connection is broken (the QP is in the error state). */
	virtual bool probe() noexcept { return true; }
	/* The probe found the connection broken: the peer is told (if it can still hear). */
	virtual void probe_failed() noexcept {}

private:
	friend class verbs_eq;
	/* set by verbs_eq::unprobe, under the EQ's probe_mutex_, when the target starts closing:
	 * no FI_SHUTDOWN is held for it from then on */
	bool left_eq_ = false;
};

/* The private data of connect, accept and reject goes behind a one-byte length, because
 * rdma_cm pads it to the transport's fixed size. */
constexpr size_t cm_hdr_size = 1;
constexpr size_t cm_connect_data_max = 56 - cm_hdr_size;
constexpr size_t cm_accept_data_max = 196 - cm_hdr_size;
constexpr size_t cm_reject_data_max = 148 - cm_hdr_size;
/* The private data inside what rdma_cm delivered (nullptr, 0 when malformed). */
std::pair<const uint8_t *, size_t> cm_data(const void *raw, size_t raw_len) noexcept;
/* header + data, ready for rdma_connect / rdma_accept / rdma_reject. */
std::vector<uint8_t> cm_wrap(const void *data, size_t len);

/* The FI_CONNREQ handle (fi_cm(3)): the rdma_cm id of a connection request that arrived on a
 * listener, with the fid of class FI_CLASS_CONNREQ the application sees as info->handle.
 *
 * One owner, the handle in the FI_CONNREQ event's fi_info, and four ways out, each of which
 * frees it: fi_endpoint takes its id (and clears info->handle), fi_reject refuses the request,
 * fi_close on the handle refuses it too; an FI_CONNREQ entry nobody read is refused when its EQ
 * closes. fi_freeinfo leaves a handle alone (libfabric's rule for every provider), so an
 * application that does none of these leaks one. A handle from outside is reached only through
 * of(), which checks the class and vwait's own ops table. */
class connreq
{
public:
	/* The FI_CONNREQ event's info: a copy of the listener's with the request's addresses and
	 * device, its handle a new connreq owning id. nullptr when out of memory (id then stays
	 * with the caller). */
	static struct fi_info *new_info(const struct fi_info *listener,
	                                struct rdma_cm_id *id) noexcept;
	/* The connreq behind a handle from outside; nullptr unless vwait made it. */
	static connreq *of(struct fid *handle) noexcept;
	/* An FI_CONNREQ entry nobody read (its EQ closes): refused, the handle and info freed. */
	static void discard(struct fi_info *info) noexcept;
	/* An FI_CONNREQ info that could not be queued: handle and info freed, the id left to the
	 * caller (it is destroyed once its event is acknowledged, never before). */
	static void forget(struct fi_info *info) noexcept;

	/* A refused or taken request's handle; an id still held is refused, then destroyed. */
	~connreq();
	connreq(const connreq &) = delete;
	connreq &operator=(const connreq &) = delete;

	struct fid *handle() noexcept { return &box_.fid; }
	/* fi_endpoint: the id, which this handle no longer owns (empty once taken). */
	verbs::cm_id_ptr take_id() noexcept { return std::move(id_); }
	/* fi_reject: refuses with data (framed: cm_wrap) and destroys the id; -FI_EINVAL when an
	 * endpoint took it already. The handle stays to be freed. */
	int reject(const void *param, size_t paramlen) noexcept;

private:
	explicit connreq(struct rdma_cm_id *id) noexcept;

	util::fid_box<struct fid, connreq> box_;
	verbs::cm_id_ptr id_;
};

/* The length of a socket address of sa's family (AF_INET, AF_INET6, AF_IB). */
size_t sockaddr_size(const struct sockaddr *sa) noexcept;

/* An address handed in by the application (hints, fi_passive_ep / fi_endpoint's info): 0 when
 * addr is NULL or an AF_INET / AF_INET6 address that len covers and addr_format allows
 * (FI_FORMAT_UNSPEC and FI_SOCKADDR allow both). A malformed one (len too short for its
 * family, a family addr_format excludes): -FI_EINVAL; another family (AF_IB, AF_UNIX...) or
 * format: -FI_ENODATA. One warning line naming what (e.g. "hints->src_addr") either way. */
int check_sockaddr(const void *addr, size_t len, uint32_t addr_format, const char *what) noexcept;

/* fi_getname / fi_getpeer: sa into addr, *addrlen set to its size; -FI_ETOOSMALL when addr
 * is NULL or *addrlen is short. */
int copy_sockaddr(const struct sockaddr *sa, void *addr, size_t *addrlen,
                  const char *what) noexcept;

} // namespace vwait

#endif
