/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* Names of DGRAM endpoints on IP ports. A UD endpoint's name holds its QP number, which only
 * exists once the endpoint is enabled, so a peer that knows a host and a service (an IP
 * address and a port, as fi_getinfo(node, service) gives them) cannot compute it. An enabled
 * endpoint whose source address has a service answers on that UDP port with its name; the
 * fi_getinfo of the peer asks for it. */
#ifndef VWAIT_UD_NAMES_H
#define VWAIT_UD_NAMES_H

#include "vwait/av.h"
#include "vwait/util/fd.h"
#include "vwait/util/helper_thread.h"

namespace vwait
{

/* One endpoint's answerer: a UDP socket bound to the name's service on every address, and a
 * thread that answers each query with the name. */
class ud_name_service
{
public:
	ud_name_service() = default;
	ud_name_service(const ud_name_service &) = delete;
	ud_name_service &operator=(const ud_name_service &) = delete;
	~ud_name_service() { stop(); }

	/* Answer for name on UDP port name.service: 0, or a negative FI_E* code (the port taken,
	 * no thread). */
	int start(const ud_name &name) noexcept;
	void stop() noexcept;

private:
	void serve() noexcept;

	ud_name name_ = {};
	util::fd sock_;
	util::fd stop_; /* an eventfd: stop() ends serve() */
	util::helper_thread thread_;
};

/* Ask node:service (UDP) for the name of the endpoint that answers there, for up to
 * timeout_ms: 0 and *out, or -FI_ENODATA when nobody answered in time. */
int ud_name_resolve(const char *node, const char *service, int timeout_ms, ud_name *out) noexcept;

} // namespace vwait

#endif
