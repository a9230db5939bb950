/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* fi_getinfo: one info per endpoint type, verbs device and active port, with the device's
 * limits, filtered by the hints: one loop over the types (info_template.h) and the ports
 * (info_probe.cpp), MSG infos first. A new endpoint type is a template and a names
 * function. */
#include "config.h"

#include "vwait/av.h"
#include "vwait/ep.h"
#include "vwait/info_template.h"
#include "vwait/util/object.h"
#include "vwait/vwait.h"

#include <rdma/fi_endpoint.h>

#include <vector>

namespace vwait
{

namespace
{

/* In the order fi_getinfo lists them. */
const ep_template *const templates[] = {&msg_template, &dgram_template};

/* An fi_info list being built, owned until it is handed out. */
struct info_list {
	info_ptr head;
	struct fi_info *last = nullptr;

	void append(info_ptr one) noexcept
	{
		struct fi_info *raw = one.release();
		if (last)
			last->next = raw;
		else
			head.reset(raw);
		last = raw;
		while (last->next)
			last = last->next;
	}
};

/* The types the hints may get: of their endpoint type, taking their address format. */
bool asked(const ep_template &t, const struct fi_info *hints)
{
	if (!hints)
		return true;
	if (hints->ep_attr) {
		int type = util::raw_enum(hints->ep_attr->type);
		if (type != FI_EP_UNSPEC && type != util::raw_enum(t.ep.type))
			return false;
	}
	return takes_format(t, hints->addr_format);
}

/* The infos of t on every port (probed once per fi_getinfo, into *ports). */
int type_infos(const info_request &r, const ep_template &t, std::vector<port_desc> *ports,
               bool *probed, info_list *out) noexcept
{
	if (t.check)
		if (int ret = t.check(r.version, r.hints))
			return ret;
	return guard([&] {
		if (!*probed) {
			*ports = info_ports();
			*probed = true;
		}
		if (ports->empty())
			return -FI_ENODATA;
		port_namer namer;
		if (int ret = t.names(r, &namer))
			return ret;
		info_list list;
		for (const port_desc &port : *ports) {
			if (const char *why = port_lacks(t, port)) {
				FI_INFO(&prov, FI_LOG_CORE, "%s %s: no %s endpoint\n",
				        port.device.c_str(), why, t.name);
				continue;
			}
			info_names names;
			if (!namer(port, &names))
				continue;
			if (info_ptr one = build_info(r.version, t, port, r.hints, names))
				list.append(std::move(one));
		}
		if (!list.head)
			return -FI_ENODATA;
		out->append(std::move(list.head));
		return FI_SUCCESS;
	});
}

} // namespace

/* hints->handle a vwait passive endpoint: infos of connected types only, each with that handle
 * (fi_getinfo(3)), for an active endpoint that takes its address (fi_endpoint(3), rc_ep_open).
 * The first type's error is fi_getinfo's; a later type that fails just adds nothing. */
int getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
            const struct fi_info *hints, struct fi_info **info) noexcept
{
	*info = nullptr;
	if (hints && hints->handle && hints->handle->fclass == FI_CLASS_PEP &&
	    !vwait_pep(hints->handle)) {
		FI_INFO(&prov, FI_LOG_CORE,
		        "fi_getinfo: hints->handle is another provider's passive endpoint\n");
		return -FI_ENODATA;
	}
	const struct fi_info *pep_hints =
	    hints && hints->handle && hints->handle->fclass == FI_CLASS_PEP ? hints : nullptr;
	std::vector<const ep_template *> types;
	for (const ep_template *t : templates)
		if (asked(*t, hints) && (!pep_hints || !t->datagram))
			types.push_back(t);
	info_request r = {version, node, service, flags, hints, types.size() == 1};
	std::vector<port_desc> ports;
	bool probed = false;
	info_list list;
	int first = -FI_ENODATA;
	for (size_t i = 0; i < types.size(); i++) {
		int ret = type_infos(r, *types[i], &ports, &probed, &list);
		if (i == 0) {
			first = ret;
			if (ret != 0 && ret != -FI_ENODATA)
				return ret;
		}
	}
	if (!list.head)
		return first;
	for (struct fi_info *i = pep_hints ? list.head.get() : nullptr; i; i = i->next)
		i->handle = pep_hints->handle;
	*info = list.head.release();
	return FI_SUCCESS;
}

struct fi_info *port_info(uint32_t version, const port_desc &port, const struct fi_info *hints,
                          const struct sockaddr *src, const struct sockaddr *dst)
{
	return build_info(version, msg_template, port, hints, sockaddr_names(src, dst)).release();
}

struct fi_info *dgram_port_info(uint32_t version, const port_desc &port,
                                const struct fi_info *hints, const ud_name &src, const ud_name *dst)
{
	info_names names;
	names.format = FI_ADDR_IB_UD;
	names.src.set(&src, sizeof(src));
	if (dst)
		names.dst.set(dst, sizeof(*dst));
	return build_info(version, dgram_template, port, hints, names).release();
}

} // namespace vwait
