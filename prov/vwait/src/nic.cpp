/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* The fid_nic vwait hangs on its infos: how fi_info -v and applications learn which wait
 * objects vwait supports (the table: wait_support.cpp). libfabric copies it through
 * fi_control(FI_DUP), frees it through fi_close, prints it through tostr; other code (ofi_rxm)
 * makes copies whose prov_attr is NULL, so every slot copes with that. */
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

void nic_append(char *buf, size_t len, const char *fmt, ...) noexcept
{
	size_t used = strnlen(buf, len);
	if (used + 1 >= len)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf + used, len - used, fmt, ap);
	va_end(ap);
}

namespace
{

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
	nic_append(buf, len, "\tfid_nic:\n");
	if (const struct fi_device_attr *d = nic->device_attr)
		nic_append(buf, len,
		           "\t\tfi_device_attr:\n\t\t\tname: %s\n\t\t\tdevice_id: %s\n"
		           "\t\t\tdevice_version: %s\n\t\t\tvendor_id: %s\n\t\t\tdriver: %s\n"
		           "\t\t\tfirmware: %s\n",
		           or_empty(d->name), or_empty(d->device_id), or_empty(d->device_version),
		           or_empty(d->vendor_id), or_empty(d->driver), or_empty(d->firmware));
	if (const struct fi_link_attr *l = nic->link_attr)
		nic_append(
		    buf, len,
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
	mr_cache_tostr(buf, len);
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

} // namespace

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
