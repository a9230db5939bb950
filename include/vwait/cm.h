/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* vwait connection management: the rdma_cm id's owner (cm_target), the framing of CM private
 * data, the FI_CONNREQ handle's lifecycle and the socket-address helpers every endpoint kind
 * and fi_getinfo share. */
#ifndef VWAIT_CM_H
#define VWAIT_CM_H

#include "vwait/verbs.h"

#include <rdma/fabric.h>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

struct sockaddr;

namespace vwait
{

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
	/* Keepalive (FI_VWAIT_KEEPALIVE_MS), from the EQ's progress thread: posts one probe to
	 * the peer; false once the connection is broken (the QP is in the error state). */
	virtual bool probe() noexcept { return true; }
	/* The probe found the connection broken: the peer is told (if it can still hear). */
	virtual void probe_failed() noexcept {}
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

/* The FI_CONNREQ handle: a fid of class FI_CLASS_CONNREQ that owns the new id until an
 * endpoint takes it (fi_endpoint) or fi_reject drops it. */
struct connreq {
	struct fid fid;
	struct rdma_cm_id *id;
};

/* The FI_CONNREQ event's fi_info: a copy of the listener's info with the request's addresses
 * and device, its handle a new connreq owning id. nullptr when out of memory. */
struct fi_info *connreq_new_info(const struct fi_info *listener, struct rdma_cm_id *id) noexcept;
/* fi_endpoint on a connection request: the id, which the handle no longer owns (nullptr
 * when an endpoint already took it). */
struct rdma_cm_id *connreq_take(struct fid *handle) noexcept;
/* fi_reject: refuses the request with data (framed), destroys its id, frees the handle. */
int connreq_reject(struct fid *handle, const void *param, size_t paramlen) noexcept;
/* An FI_CONNREQ entry nobody read (its EQ closes): refused, its id destroyed, info freed. */
void connreq_discard(struct fi_info *info) noexcept;
/* An FI_CONNREQ info that could not be queued: the handle is freed and the info with it (the
 * id stays with the caller, which destroys it once the event is acknowledged). */
void connreq_forget(struct fi_info *info) noexcept;

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
