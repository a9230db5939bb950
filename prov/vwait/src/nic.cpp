/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* The fid_nic vwait hangs on its infos: how fi_info -v and applications learn which wait
 * objects vwait supports. libfabric copies it through fi_control(FI_DUP), frees it through
 * fi_close, prints it through tostr; other code (ofi_rxm) makes copies whose prov_attr is NULL,
 * so every slot copes with that. */
#include "config.h"

#include "vwait/nic.h"
#include "vwait/util/enosys.h"
#include "vwait/vwait.h"

#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace vwait
{

namespace
{

constexpr uint64_t bit(enum fi_wait_obj w)
{
	return FI_VWAIT_WAIT_BIT(w);
}

/* What vwait supports today. Each line changes with the code that makes it true. */
constexpr uint64_t every_object_wait = bit(FI_WAIT_NONE) | bit(FI_WAIT_UNSPEC) | bit(FI_WAIT_SET) |
                                       bit(FI_WAIT_FD) | bit(FI_WAIT_MUTEX_COND) |
                                       bit(FI_WAIT_YIELD) | bit(FI_WAIT_POLLFD);
constexpr uint64_t every_wait_set_wait = bit(FI_WAIT_UNSPEC) | bit(FI_WAIT_FD) |
                                         bit(FI_WAIT_MUTEX_COND) | bit(FI_WAIT_YIELD) |
                                         bit(FI_WAIT_POLLFD);
const struct fi_vwait_wait_attr support = {
    .version = FI_VWAIT_WAIT_ATTR_VERSION,
    .kinds = FI_VWAIT_KIND_MAX,
    .wait_objs =
        {
            /* FI_VWAIT_KIND_CQ: util::sw_cq over an ibv_cq on a completion channel */
            every_object_wait,
            /* FI_VWAIT_KIND_CNTR: util::sw_cntr fed by verbs CQs, waiting on their channels */
            every_object_wait,
            /* FI_VWAIT_KIND_EQ: util::sw_eq with the rdma_cm channel as a source of its
               waiter */
            every_object_wait,
            /* FI_VWAIT_KIND_WAIT_SET: util::wait_open */
            every_wait_set_wait,
        },
    .features = FI_VWAIT_FEAT_WAIT_SET | FI_VWAIT_FEAT_POLL_SET | FI_VWAIT_FEAT_TRYWAIT,
    .unspec_is = FI_WAIT_FD,
    .wait_policy = FI_VWAIT_POLICY_ADAPTIVE, /* wait_support() fills in the parameters */
    .spin_us = 0,
    .wake_us = 0,
};

const char *const kind_names[FI_VWAIT_KIND_MAX] = {"cq", "cntr", "eq", "wait_set"};

struct wait_name {
	enum fi_wait_obj obj;
	const char *name;
};
const wait_name wait_names[] = {
    {FI_WAIT_NONE, "FI_WAIT_NONE"},
    {FI_WAIT_UNSPEC, "FI_WAIT_UNSPEC"},
    {FI_WAIT_SET, "FI_WAIT_SET"},
    {FI_WAIT_FD, "FI_WAIT_FD"},
    {FI_WAIT_MUTEX_COND, "FI_WAIT_MUTEX_COND"},
    {FI_WAIT_YIELD, "FI_WAIT_YIELD"},
    {FI_WAIT_POLLFD, "FI_WAIT_POLLFD"},
};

/* snprintf that appends at strlen(buf) and never writes past buf + len. */
__attribute__((format(printf, 3, 4))) void append(char *buf, size_t len, const char *fmt, ...)
{
	size_t used = strnlen(buf, len);
	if (used + 1 >= len)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf + used, len - used, fmt, ap);
	va_end(ap);
}

const char *or_empty(const char *s)
{
	return s ? s : "";
}

void nic_free(struct fid_nic *nic) noexcept
{
	if (!nic)
		return;
	if (nic->device_attr) {
		free(nic->device_attr->name);
		free(nic->device_attr->device_id);
		free(nic->device_attr->device_version);
		free(nic->device_attr->vendor_id);
		free(nic->device_attr->driver);
		free(nic->device_attr->firmware);
		free(nic->device_attr);
	}
	free(nic->bus_attr);
	if (nic->link_attr) {
		free(nic->link_attr->address);
		free(nic->link_attr->network_type);
		free(nic->link_attr);
	}
	free(nic->prov_attr);
	free(nic);
}

char *dup_or_null(const char *s, bool *failed)
{
	if (!s)
		return nullptr;
	char *p = strdup(s);
	if (!p)
		*failed = true;
	return p;
}

struct fid_nic *nic_copy(const struct fid_nic *src) noexcept;

int nic_close(struct fid *fid) noexcept
{
	nic_free(reinterpret_cast<struct fid_nic *>(fid));
	return FI_SUCCESS;
}

int nic_control(struct fid *fid, int command, void *arg) noexcept
{
	if (command != FI_DUP) {
		FI_WARN(&prov, FI_LOG_CORE, "fid_nic control: command %d is not supported\n",
		        command);
		return -FI_ENOSYS;
	}
	if (!arg) {
		FI_WARN(&prov, FI_LOG_CORE, "fid_nic FI_DUP: arg is NULL\n");
		return -FI_EINVAL;
	}
	struct fid_nic *dup = nic_copy(reinterpret_cast<struct fid_nic *>(fid));
	*static_cast<struct fid_nic **>(arg) = dup;
	return dup ? FI_SUCCESS : -FI_ENOMEM;
}

int nic_tostr(const struct fid *fid, char *buf, size_t len) noexcept
{
	if (!buf || len == 0)
		return -FI_EINVAL;
	const auto *nic = reinterpret_cast<const struct fid_nic *>(fid);
	append(buf, len, "\tfid_nic:\n");
	if (const struct fi_device_attr *d = nic->device_attr)
		append(buf, len,
		       "\t\tfi_device_attr:\n\t\t\tname: %s\n\t\t\tdevice_id: %s\n"
		       "\t\t\tdevice_version: %s\n\t\t\tvendor_id: %s\n\t\t\tdriver: %s\n"
		       "\t\t\tfirmware: %s\n",
		       or_empty(d->name), or_empty(d->device_id), or_empty(d->device_version),
		       or_empty(d->vendor_id), or_empty(d->driver), or_empty(d->firmware));
	if (const struct fi_link_attr *l = nic->link_attr)
		append(buf, len,
		       "\t\tfi_link_attr:\n\t\t\taddress: %s\n\t\t\tmtu: %zu\n\t\t\tspeed: %zu\n"
		       "\t\t\tstate: %s\n\t\t\tnetwork_type: %s\n",
		       or_empty(l->address), l->mtu, l->speed,
		       l->state == FI_LINK_UP     ? "FI_LINK_UP"
		       : l->state == FI_LINK_DOWN ? "FI_LINK_DOWN"
		                                  : "FI_LINK_UNKNOWN",
		       or_empty(l->network_type));
	/* A copy without prov_attr still belongs to vwait: print what this build supports. */
	const auto *attr = static_cast<const struct fi_vwait_nic_attr *>(nic->prov_attr);
	wait_support_tostr(attr && attr->magic == FI_VWAIT_NIC_MAGIC ? attr->wait : wait_support(),
	                   buf, len);
	return FI_SUCCESS;
}

struct fi_ops nic_ops = {
    .size = sizeof(struct fi_ops),
    .close = nic_close,
    .bind = util::unsupported{},
    .control = nic_control,
    .ops_open = util::unsupported{},
    .tostr = nic_tostr,
    .ops_set = util::unsupported{},
};

struct fid_nic *nic_alloc() noexcept
{
	auto *nic = static_cast<struct fid_nic *>(calloc(1, sizeof(struct fid_nic)));
	if (!nic)
		return nullptr;
	nic->fid.fclass = FI_CLASS_NIC;
	nic->fid.ops = &nic_ops;
	nic->device_attr =
	    static_cast<struct fi_device_attr *>(calloc(1, sizeof(*nic->device_attr)));
	nic->bus_attr = static_cast<struct fi_bus_attr *>(calloc(1, sizeof(*nic->bus_attr)));
	nic->link_attr = static_cast<struct fi_link_attr *>(calloc(1, sizeof(*nic->link_attr)));
	nic->prov_attr = calloc(1, sizeof(struct fi_vwait_nic_attr));
	if (!nic->device_attr || !nic->bus_attr || !nic->link_attr || !nic->prov_attr) {
		nic_free(nic);
		return nullptr;
	}
	return nic;
}

struct fid_nic *nic_copy(const struct fid_nic *src) noexcept
{
	struct fid_nic *nic = nic_alloc();
	if (!nic)
		return nullptr;
	nic->fid.context = src->fid.context;
	bool failed = false;
	if (const struct fi_device_attr *d = src->device_attr) {
		nic->device_attr->name = dup_or_null(d->name, &failed);
		nic->device_attr->device_id = dup_or_null(d->device_id, &failed);
		nic->device_attr->device_version = dup_or_null(d->device_version, &failed);
		nic->device_attr->vendor_id = dup_or_null(d->vendor_id, &failed);
		nic->device_attr->driver = dup_or_null(d->driver, &failed);
		nic->device_attr->firmware = dup_or_null(d->firmware, &failed);
	}
	if (src->bus_attr)
		*nic->bus_attr = *src->bus_attr;
	if (const struct fi_link_attr *l = src->link_attr) {
		*nic->link_attr = *l;
		nic->link_attr->address = dup_or_null(l->address, &failed);
		nic->link_attr->network_type = dup_or_null(l->network_type, &failed);
	}
	auto *attr = static_cast<struct fi_vwait_nic_attr *>(nic->prov_attr);
	const auto *src_attr = static_cast<const struct fi_vwait_nic_attr *>(src->prov_attr);
	if (src_attr && src_attr->magic == FI_VWAIT_NIC_MAGIC)
		*attr = *src_attr;
	else
		*attr = fi_vwait_nic_attr{FI_VWAIT_NIC_MAGIC, wait_support()};
	if (failed) {
		nic_free(nic);
		return nullptr;
	}
	return nic;
}

char *hex(uint32_t v, bool *failed)
{
	char text[16];
	snprintf(text, sizeof(text), "0x%" PRIx32, v);
	return dup_or_null(text, failed);
}

int query_wait(struct fid *fid, struct fi_vwait_wait_attr *attr) noexcept
{
	(void)fid;
	if (!attr) {
		FI_WARN(&prov, FI_LOG_CORE, "fi_vwait_wait_ops.query: attr is NULL\n");
		return -FI_EINVAL;
	}
	*attr = wait_support();
	return FI_SUCCESS;
}

} // namespace

struct fi_vwait_wait_ops wait_ops = {
    .size = sizeof(struct fi_vwait_wait_ops),
    .query = query_wait,
};

struct fi_vwait_wait_attr wait_support() noexcept
{
	struct fi_vwait_wait_attr attr = support;
	const util::wait_policy &p = get_params().wait;
	switch (p.kind) {
	case util::wait_policy_kind::adaptive:
		attr.wait_policy = FI_VWAIT_POLICY_ADAPTIVE;
		break;
	case util::wait_policy_kind::block:
		attr.wait_policy = FI_VWAIT_POLICY_BLOCK;
		break;
	case util::wait_policy_kind::fixed:
		attr.wait_policy = FI_VWAIT_POLICY_FIXED;
		break;
	}
	attr.spin_us = p.spin_us;
	const uint64_t w = util::process_wake_stats().cost_ns();
	attr.wake_us = static_cast<uint32_t>((w + 999) / 1000);
	return attr;
}

void wait_support_tostr(const struct fi_vwait_wait_attr &attr, char *buf, size_t len) noexcept
{
	append(buf, len, "\t\tvwait_wait_objects:\n");
	for (unsigned k = 0; k < FI_VWAIT_KIND_MAX && k < attr.kinds; k++) {
		append(buf, len, "\t\t\t%s:", kind_names[k]);
		const char *sep = " ";
		for (const wait_name &w : wait_names)
			if (attr.wait_objs[k] & bit(w.obj)) {
				append(buf, len, "%s%s", sep, w.name);
				sep = ", ";
			}
		if (attr.wait_objs[k] == 0)
			append(buf, len, " (not supported)");
		append(buf, len, "\n");
	}
	append(buf, len, "\t\t\tfeatures:%s%s%s%s\n",
	       attr.features & FI_VWAIT_FEAT_WAIT_SET ? " wait_set" : "",
	       attr.features & FI_VWAIT_FEAT_POLL_SET ? " poll_set" : "",
	       attr.features & FI_VWAIT_FEAT_TRYWAIT ? " trywait" : "",
	       attr.features ? "" : " (none)");
	for (const wait_name &w : wait_names)
		if (w.obj == attr.unspec_is)
			append(buf, len, "\t\t\tFI_WAIT_UNSPEC is: %s\n", w.name);
	static const char *const policies[] = {"adaptive", "block", "fixed"};
	if (attr.version >= 2) {
		const char *policy = attr.wait_policy < 3 ? policies[attr.wait_policy] : "unknown";
		if (attr.wait_policy == FI_VWAIT_POLICY_BLOCK)
			append(buf, len, "\t\t\twait_policy: block\n");
		else
			append(buf, len, "\t\t\twait_policy: %s, spin up to %" PRIu32 " us\n",
			       policy, attr.spin_us);
	}
	if (attr.version >= 3 && attr.wait_policy == FI_VWAIT_POLICY_ADAPTIVE) {
		/* the attr was filled at fi_getinfo; what the process measured since counts too */
		uint32_t w = attr.wake_us;
		if (!w)
			w = static_cast<uint32_t>((util::process_wake_stats().cost_ns() + 999) /
			                          1000);
		if (w)
			append(buf, len,
			       "\t\t\twake_up_cost: %" PRIu32
			       " us (adaptive spins up to twice that)\n",
			       w);
		else
			append(buf, len,
			       "\t\t\twake_up_cost: not measured yet (learnt from this process's "
			       "first sleeps)\n");
	}
}

struct fid_nic *nic_create(const nic_desc &desc) noexcept
{
	struct fid_nic *nic = nic_alloc();
	if (!nic)
		return nullptr;
	bool failed = false;
	nic->device_attr->name = dup_or_null(desc.device.c_str(), &failed);
	nic->device_attr->device_id = hex(desc.vendor_part, &failed);
	nic->device_attr->device_version = hex(desc.hw_ver, &failed);
	nic->device_attr->vendor_id = hex(desc.vendor_id, &failed);
	nic->device_attr->driver = dup_or_null(desc.driver.c_str(), &failed);
	nic->device_attr->firmware = dup_or_null(desc.firmware.c_str(), &failed);
	nic->bus_attr->bus_type = FI_BUS_UNKNOWN;
	nic->link_attr->address = dup_or_null(desc.address.c_str(), &failed);
	nic->link_attr->mtu = desc.mtu;
	nic->link_attr->speed = desc.speed;
	nic->link_attr->state = desc.up ? FI_LINK_UP : FI_LINK_DOWN;
	nic->link_attr->network_type = dup_or_null(desc.network_type.c_str(), &failed);
	*static_cast<struct fi_vwait_nic_attr *>(nic->prov_attr) =
	    fi_vwait_nic_attr{FI_VWAIT_NIC_MAGIC, wait_support()};
	if (failed) {
		nic_free(nic);
		return nullptr;
	}
	return nic;
}

} // namespace vwait
