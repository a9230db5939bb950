/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* fi_info->nic: how vwait reports the wait objects it supports. The fid_nic must survive every
 * way libfabric and its users handle it: fi_dupinfo (FI_DUP), fi_freeinfo (close), fi_tostr
 * (fi_info -v), and copies with a NULL prov_attr as ofi_rxm makes. */
#include "vwait_cmocka.h"

#include "vwait/info.h"
#include "vwait/nic.h"
#include "vwait/util/mem_monitor.h"

#include <rdma/fabric.h>
#include <rdma/fi_ext_vwait.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>

namespace
{

vwait::nic_desc rxe_like()
{
	vwait::nic_desc d;
	d.device = "rxe0";
	d.driver = "rxe";
	d.firmware = "0.0.0";
	d.vendor_id = 0xffffff;
	d.address = "169.254.77.1";
	d.mtu = 1024;
	d.speed = 10000000000ULL;
	d.up = true;
	d.network_type = "Ethernet";
	return d;
}

std::string tostr(struct fid_nic *nic)
{
	char buf[4096] = "prefix\n";
	assert_int_equal(nic->fid.ops->tostr(&nic->fid, buf, sizeof(buf)), 0);
	return buf;
}

/* every kind gets one line naming exactly the wait objects of the table */
void tostr_lists_wait_objects(void **)
{
	struct fid_nic *nic = vwait::nic_create(rxe_like());
	assert_non_null(nic);
	std::string s = tostr(nic);
	assert_true(s.rfind("prefix\n", 0) == 0); /* appends, keeps what was there */
	assert_non_null(strstr(s.c_str(), "name: rxe0"));
	assert_non_null(strstr(s.c_str(), "vwait_wait_objects:"));
	const struct fi_vwait_wait_attr sup = vwait::wait_support();
	for (const char *kind : {"cq:", "cntr:", "eq:", "wait_set:"})
		assert_non_null(strstr(s.c_str(), kind));
	if (sup.wait_objs[FI_VWAIT_KIND_CQ] & FI_VWAIT_WAIT_BIT(FI_WAIT_NONE))
		assert_non_null(strstr(s.c_str(), "cq: FI_WAIT_NONE"));
	/* the wait policy in force (the defaults: no fi_prov_ini read any parameter here) */
	assert_int_equal(sup.wait_policy, FI_VWAIT_POLICY_ADAPTIVE);
	assert_int_equal(sup.spin_us, 1000);
	assert_non_null(strstr(s.c_str(), "wait_policy: adaptive, spin up to 1000 us\n"));
	/* the registration cache, on by default where this host gives a monitor, else off with
	 * the monitor's reason */
	const char *why = nullptr;
	if (vwait::util::mem_monitor::probe(&why) == 0) {
		assert_non_null(strstr(s.c_str(), "\t\tvwait_mr_cache: on (monitor: "));
		assert_non_null(
		    strstr(s.c_str(), "; keeps from the first repeated registration)\n"));
	} else {
		const std::string off = std::string("\t\tvwait_mr_cache: off (") + why + ")\n";
		assert_non_null(strstr(s.c_str(), off.c_str()));
	}
	assert_int_equal(fi_close(&nic->fid), 0);
}

/* a short buffer is filled up to its end and no further */
void tostr_short_buffer(void **)
{
	struct fid_nic *nic = vwait::nic_create(rxe_like());
	assert_non_null(nic);
	char buf[40];
	memset(buf, 'x', sizeof(buf));
	buf[0] = '\0';
	assert_int_equal(nic->fid.ops->tostr(&nic->fid, buf, 16), 0);
	assert_true(strlen(buf) < 16);
	for (size_t i = 16; i < sizeof(buf); i++)
		assert_int_equal(buf[i], 'x');
	assert_int_equal(nic->fid.ops->tostr(&nic->fid, nullptr, 16), -FI_EINVAL);
	assert_int_equal(fi_close(&nic->fid), 0);
}

/* fi_dupinfo copies the nic through FI_DUP: a deep copy carrying the table */
void dupinfo_deep_copies(void **)
{
	struct fi_info *info = fi_allocinfo();
	assert_non_null(info);
	info->nic = vwait::nic_create(rxe_like());
	assert_non_null(info->nic);
	struct fi_info *dup = fi_dupinfo(info);
	assert_non_null(dup);
	assert_non_null(dup->nic);
	assert_ptr_not_equal(dup->nic, info->nic);
	assert_ptr_not_equal(dup->nic->device_attr->name, info->nic->device_attr->name);
	assert_string_equal(dup->nic->device_attr->name, "rxe0");
	const auto *attr = static_cast<const struct fi_vwait_nic_attr *>(dup->nic->prov_attr);
	assert_non_null(attr);
	assert_true(attr->magic == FI_VWAIT_NIC_MAGIC);
	const struct fi_vwait_wait_attr sup = vwait::wait_support();
	assert_memory_equal(&attr->wait, &sup, sizeof(attr->wait));
	fi_freeinfo(info);
	/* the copy outlives its original */
	assert_string_equal(dup->nic->link_attr->network_type, "Ethernet");
	fi_freeinfo(dup);
}

/* a copy made by someone else: our ops, NULL prov_attr, NULL sub-attributes */
void copy_without_prov_attr(void **)
{
	struct fid_nic *nic = vwait::nic_create(rxe_like());
	assert_non_null(nic);
	auto *bare = static_cast<struct fid_nic *>(calloc(1, sizeof(struct fid_nic)));
	assert_non_null(bare);
	bare->fid = nic->fid;
	std::string s = tostr(bare);
	assert_non_null(strstr(s.c_str(), "vwait_wait_objects:"));
	struct fid_nic *copy = nullptr;
	assert_int_equal(fi_control(&bare->fid, FI_DUP, &copy), 0);
	assert_non_null(copy);
	assert_non_null(copy->prov_attr);
	assert_int_equal(fi_close(&copy->fid), 0);
	assert_int_equal(fi_close(&bare->fid), 0);
	assert_int_equal(fi_close(&nic->fid), 0);
}

void bad_control(void **)
{
	struct fid_nic *nic = vwait::nic_create(rxe_like());
	assert_non_null(nic);
	assert_int_equal(fi_control(&nic->fid, FI_DUP, nullptr), -FI_EINVAL);
	assert_int_equal(fi_control(&nic->fid, FI_GETWAIT, nullptr), -FI_ENOSYS);
	assert_int_equal(fi_close(&nic->fid), 0);
}

/* fi_info -v goes through fi_tostr(FI_TYPE_INFO), which calls the nic's tostr */
void fi_tostr_shows_table(void **)
{
	struct fi_info *info = fi_allocinfo();
	assert_non_null(info);
	info->nic = vwait::nic_create(rxe_like());
	const char *s = fi_tostr(info, FI_TYPE_INFO);
	assert_non_null(s);
	assert_non_null(strstr(s, "vwait_wait_objects:"));
	fi_freeinfo(info);
}

void query_ops(void **)
{
	struct fi_vwait_wait_attr attr;
	memset(&attr, 0xff, sizeof(attr));
	assert_int_equal(vwait::wait_ops.query(nullptr, &attr), 0);
	assert_int_equal(attr.version, FI_VWAIT_WAIT_ATTR_VERSION);
	assert_int_equal(attr.kinds, FI_VWAIT_KIND_MAX);
	assert_int_equal(vwait::wait_ops.query(nullptr, nullptr), -FI_EINVAL);
}

/* fi_info -v's link attributes, from the port as ibv_devinfo shows it */
void link_mtu_and_speed(void **)
{
	assert_int_equal(vwait::link_mtu_bytes(IBV_MTU_256), 256);
	assert_int_equal(vwait::link_mtu_bytes(IBV_MTU_1024), 1024);
	assert_int_equal(vwait::link_mtu_bytes(IBV_MTU_4096), 4096);
	assert_int_equal(vwait::link_mtu_bytes(static_cast<enum ibv_mtu>(0)), 0);
	assert_int_equal(vwait::link_mtu_bytes(static_cast<enum ibv_mtu>(9)), 0);
	assert_int_equal(vwait::link_speed_bps(1, 1), 2500000000ULL);      /* SDR 1X */
	assert_int_equal(vwait::link_speed_bps(32, 2), 100000000000ULL);   /* EDR 4X (rxe) */
	assert_int_equal(vwait::link_speed_bps(64, 2), 200000000000ULL);   /* HDR 4X */
	assert_int_equal(vwait::link_speed_bps(128, 8), 1200000000000ULL); /* NDR 12X */
	assert_int_equal(vwait::link_speed_bps(0, 2), 0);
	assert_int_equal(vwait::link_speed_bps(32, 3), 0);
}

/* every device and link field of the nic, for a device bound to a bus driver and for a
 * software device (rxe: a "parent" netdev, no bus device), from a fake sysfs */
void nic_desc_from_port(void **)
{
	char dir[] = "/tmp/vwait-sysfs-XXXXXX";
	assert_non_null(mkdtemp(dir));
	std::string root = dir;
	std::string hw = root + "/class/infiniband/mlx5_0";
	assert_int_equal(
	    system(("mkdir -p " + hw + "/device " + root + "/bus/pci/drivers/mlx5_core " + root +
	            "/class/infiniband/rxe0 && touch " + root + "/class/infiniband/rxe0/parent")
	               .c_str()),
	    0);
	assert_int_equal(
	    symlink((root + "/bus/pci/drivers/mlx5_core").c_str(), (hw + "/device/driver").c_str()),
	    0);
	vwait::port_desc p{};
	p.device = "mlx5_0";
	strcpy(p.dev_attr.fw_ver, "16.35.2000");
	p.dev_attr.vendor_id = 0x02c9;
	p.dev_attr.vendor_part_id = 4119;
	p.dev_attr.hw_ver = 0;
	p.port_attr.state = IBV_PORT_ACTIVE;
	p.port_attr.link_layer = IBV_LINK_LAYER_INFINIBAND;
	p.port_attr.active_mtu = IBV_MTU_4096;
	p.port_attr.active_speed = 32;
	p.port_attr.active_width = 2;
	vwait::nic_desc d = vwait::port_nic_desc(p, root);
	assert_string_equal(d.device.c_str(), "mlx5_0");
	assert_string_equal(d.driver.c_str(), "mlx5_core");
	assert_string_equal(d.firmware.c_str(), "16.35.2000");
	assert_int_equal(d.vendor_id, 0x02c9);
	assert_int_equal(d.vendor_part, 4119);
	assert_int_equal(d.mtu, 4096);
	assert_int_equal(d.speed, 100000000000ULL);
	assert_true(d.up);
	assert_string_equal(d.network_type.c_str(), "InfiniBand");

	p.device = "rxe0";
	p.port_attr.state = IBV_PORT_DOWN;
	p.port_attr.link_layer = IBV_LINK_LAYER_ETHERNET;
	p.port_attr.active_mtu = IBV_MTU_1024;
	d = vwait::port_nic_desc(p, root);
	assert_string_equal(d.driver.c_str(), "rdma_rxe");
	assert_int_equal(d.mtu, 1024);
	assert_false(d.up);
	assert_string_equal(d.network_type.c_str(), "Ethernet");

	p.device = "siw0"; /* soft-iWARP: no bus device, no parent attribute */
	p.iwarp = true;
	assert_string_equal(vwait::port_nic_desc(p, root).driver.c_str(), "siw");
	p.iwarp = false;
	p.device = "nodev0"; /* nothing in sysfs: no driver, no crash */
	assert_true(vwait::port_nic_desc(p, root).driver.empty());
	assert_int_equal(system(("rm -rf " + root).c_str()), 0);
}

} // namespace

/* fi_getinfo's answer for an iWARP port (made up: no device opened) beside a RoCE one: its
 * protocol, no remote CQ data, the inject size its QPs take; hints iWARP cannot meet get none. */
void iwarp_port_info(void **)
{
	vwait::port_desc p{};
	p.device = "siw0";
	p.fabric = "IB-0x0";
	p.port_num = 1;
	p.dev_attr.max_qp_wr = 32768;
	p.dev_attr.max_sge = 6;
	p.dev_attr.max_sge_rd = 1;
	p.dev_attr.max_qp = 100;
	p.dev_attr.max_cq = 100;
	p.dev_attr.max_mr = 100;
	p.port_attr.state = IBV_PORT_ACTIVE;
	p.port_attr.link_layer = IBV_LINK_LAYER_ETHERNET;
	p.port_attr.max_msg_sz = 1u << 30;
	p.max_inline = 64;
	p.iwarp = true;
	const uint32_t v = FI_VERSION(1, 17);
	struct fi_info *i = vwait::port_info(v, p, nullptr, nullptr, nullptr);
	assert_non_null(i);
	assert_int_equal(i->ep_attr->protocol, FI_PROTO_IWARP);
	assert_int_equal(i->domain_attr->cq_data_size, 0);
	assert_false(i->rx_attr->mode & FI_RX_CQ_DATA);
	assert_int_equal(i->tx_attr->inject_size, 64);
	fi_freeinfo(i);

	struct fi_info *h = fi_allocinfo();
	assert_non_null(h);
	h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	h->domain_attr->cq_data_size = 4; /* immediate data: not on iWARP */
	assert_null(vwait::port_info(v, p, h, nullptr, nullptr));
	h->domain_attr->cq_data_size = 0;
	h->ep_attr->protocol = FI_PROTO_RDMA_CM_IB_RC; /* another protocol */
	assert_null(vwait::port_info(v, p, h, nullptr, nullptr));
	h->ep_attr->protocol = FI_PROTO_IWARP;
	h->tx_attr->inject_size = 128; /* more than its QPs take inline */
	assert_null(vwait::port_info(v, p, h, nullptr, nullptr));
	h->tx_attr->inject_size = 0;
	i = vwait::port_info(v, p, h, nullptr, nullptr);
	assert_non_null(i);
	assert_int_equal(i->ep_attr->protocol, FI_PROTO_IWARP);
	fi_freeinfo(i);

	/* the same port as RoCE: the IB RC protocol over rdma_cm, 4 bytes of CQ data */
	p.device = "rxe0";
	p.iwarp = false;
	p.max_inline = 1024;
	h->ep_attr->protocol = FI_PROTO_IWARP;
	assert_null(vwait::port_info(v, p, h, nullptr, nullptr));
	h->ep_attr->protocol = FI_PROTO_UNSPEC;
	h->domain_attr->cq_data_size = 4;
	i = vwait::port_info(v, p, h, nullptr, nullptr);
	assert_non_null(i);
	assert_int_equal(i->ep_attr->protocol, FI_PROTO_RDMA_CM_IB_RC);
	assert_int_equal(i->domain_attr->cq_data_size, 4);
	assert_int_equal(i->tx_attr->inject_size, 256);
	fi_freeinfo(i);
	fi_freeinfo(h);
}

int main()
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(link_mtu_and_speed),     cmocka_unit_test(nic_desc_from_port),
	    cmocka_unit_test(iwarp_port_info),        cmocka_unit_test(tostr_lists_wait_objects),
	    cmocka_unit_test(tostr_short_buffer),     cmocka_unit_test(dupinfo_deep_copies),
	    cmocka_unit_test(copy_without_prov_attr), cmocka_unit_test(bad_control),
	    cmocka_unit_test(fi_tostr_shows_table),   cmocka_unit_test(query_ops),
	};
	return cmocka_run_group_tests_name("nic", tests, nullptr, nullptr) == 0 ? 0 : 1;
}
