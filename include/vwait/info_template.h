/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* The parts of fi_getinfo (info.h is its outside): an endpoint type is a template of static
 * attributes (info_attr.cpp) and a names function (info_addr.cpp); info_attr.cpp applies a
 * port's limits and the hints to a template; info.cpp loops over ports x templates. */
#ifndef VWAIT_INFO_TEMPLATE_H
#define VWAIT_INFO_TEMPLATE_H

#include "vwait/info.h"

#include <rdma/fabric.h>

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace vwait
{

/* One address of an info: its bytes (a sockaddr or a ud_name), empty when len is 0. */
struct info_addr {
	size_t len = 0;
	struct sockaddr_storage bytes = {};
	void set(const void *addr, size_t n) noexcept;
};

/* The addresses an info of one port carries, and their format. */
struct info_names {
	uint32_t format = FI_FORMAT_UNSPEC;
	info_addr src;
	info_addr dst;
};

/* fi_getinfo's arguments, as a names function reads them. alone: the type is the only one
 * asked for (a DGRAM node is then asked for its endpoint's name, ud_names.h). */
struct info_request {
	uint32_t version;
	const char *node;
	const char *service;
	uint64_t flags;
	const struct fi_info *hints;
	bool alone;
};

/* What a names function resolved, per port: false when the port cannot be named (it gives no
 * info). */
using port_namer = std::function<bool(const port_desc &, info_names *)>;
/* Resolves node / service / hints addresses once per fi_getinfo: 0 and *out, or a negative
 * FI_E* code (-FI_ENODATA: nothing vwait can use). Throws std::bad_alloc. */
using names_fn = int (*)(const info_request &, port_namer *out);

/* Hint fields a type has never refused (kept so: fi_getinfo's answers are pinned by
 * test/unit/test_info.golden). */
enum : unsigned {
	lax_av_type = 1u << 0,     /* MSG: no AV, av_type ignored */
	lax_mr_key_size = 1u << 1, /* DGRAM */
	lax_group_id = 1u << 2,    /* DGRAM (API 2.0 max_group_id) */
	lax_shared_ctx = 1u << 3,  /* MSG: FI_SHARED_CONTEXT in ep_attr->*_ctx_cnt accepted */
};

/* An endpoint type: its attributes as static data, and its names. */
struct ep_template {
	const char *name;     /* for log lines */
	bool datagram;        /* UD: bounded by the MTU, unordered, no iWARP; else RC */
	uint64_t caps;        /* what it offers, primary and secondary */
	uint64_t always_caps; /* given whatever the hints ask */
	uint64_t mode;        /* taken when the hints' mode has it (tx and rx) */
	uint64_t rx_mode;     /* taken when the hints' mode or rx mode has it, on a port with
	                         remote CQ data */
	unsigned lax;         /* lax_* */
	struct fi_tx_attr tx; /* caps: the tx caps mask; size, iov_limit, inject_size: defaults */
	struct fi_rx_attr rx; /* caps: the rx caps mask; size, iov_limit: defaults */
	struct fi_ep_attr ep; /* type, protocol (RC: on IB / RoCE), version, contexts */
	uint32_t addr_formats[4]; /* the hints' addr_format it takes beside FI_FORMAT_UNSPEC,
	                             FI_FORMAT_UNSPEC-ended */
	/* what it checks of the hints before any device is looked at (nullptr: nothing) */
	int (*check)(uint32_t version, const struct fi_info *hints) noexcept;
	names_fn names;
};

extern const ep_template msg_template;
extern const ep_template dgram_template;

/* The names functions (info_addr.cpp). */
int msg_names(const info_request &r, port_namer *out);
int dgram_names(const info_request &r, port_namer *out);
/* The RDMA device rdma_cm binds node, a host name or IP address of this host, to; "" when
 * none holds it (DGRAM: an IP address given with FI_SOURCE picks the port by it). */
std::string address_device(const char *node);
/* names for the test seams: src / dst as given (either may be NULL) */
info_names sockaddr_names(const struct sockaddr *src, const struct sockaddr *dst);

/* A port's limits for template t (info_attr.cpp): the remote CQ data a message carries (none
 * on iWARP), the protocol (RC on iWARP: FI_PROTO_IWARP) and the largest message (UD: the
 * MTU). */
size_t port_cq_data_size(const port_desc &port);
uint32_t port_protocol(const ep_template &t, const port_desc &port);
size_t port_max_msg_size(const ep_template &t, const port_desc &port);

/* The hints (info_hints.cpp): the caps to report, mr_mode as the application speaks it
 * (adding FI_LOCAL_MR to *mode for old API versions; -1 when it cannot be met), and which
 * hint template t cannot meet on port with caps, or nullptr. */
uint64_t hinted_caps(const ep_template &t, const struct fi_info *hints);
int64_t hinted_mr_mode(uint32_t version, const struct fi_info *hints, uint64_t *mode);
const char *hints_unmet(const ep_template &t, const port_desc &port, const struct fi_info *hints,
                        uint64_t caps);
/* Whether t takes hints with addr_format (FI_FORMAT_UNSPEC: every type). */
bool takes_format(const ep_template &t, uint32_t format);

/* Why template t has no endpoint on port at all (iWARP has no UD), or nullptr. */
const char *port_lacks(const ep_template &t, const port_desc &port) noexcept;

/* The info of template t on port under hints, named by names: the template with the port's
 * limits and the hints applied; NULL (and an FI_INFO line) when the hints cannot be met.
 * Throws std::bad_alloc. */
info_ptr build_info(uint32_t version, const ep_template &t, const port_desc &port,
                    const struct fi_info *hints, const info_names &names);

} // namespace vwait

#endif
