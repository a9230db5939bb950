/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* What fi_getinfo answers for one port, pinned: for made-up ports (RoCE, InfiniBand, iWARP, a
 * small device; no device is opened), API versions and a range of hints, the whole fi_info as
 * fi_tostr prints it (fi_info -v), for FI_EP_MSG and FI_EP_DGRAM, compared with
 * test_info-<libfabric release>.golden (one line per case: its name and a hash of the text,
 * or NULL when the hints cannot be met). A change of what getinfo answers shows here as the cases
 * that differ; VWAIT_INFO_WRITE=FILE writes the lines to FILE and every text to FILE.dump instead.
 */
/* the C++ stream headers first: cmocka defines fail() */
#include <fstream>
#include <sstream>

#include "vwait_cmocka.h"

#include "vwait/av.h"
#include "vwait/fi_deprecated.h"
#include "vwait/info.h"

#include <rdma/fabric.h>
#include <rdma/fi_endpoint.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace
{

vwait::port_desc base_port(const char *device, bool iwarp)
{
	vwait::port_desc p{};
	p.device = device;
	p.fabric = "IB-0xfe80000000000000";
	p.port_num = 1;
	strcpy(p.dev_attr.fw_ver, "1.2.3");
	p.dev_attr.vendor_id = 0x02c9;
	p.dev_attr.vendor_part_id = 4119;
	p.dev_attr.max_qp_wr = 32768;
	p.dev_attr.max_sge = 32;
	p.dev_attr.max_qp = 1000;
	p.dev_attr.max_cq = 2000;
	p.dev_attr.max_mr = 3000;
	p.port_attr.state = IBV_PORT_ACTIVE;
	p.port_attr.link_layer = IBV_LINK_LAYER_ETHERNET;
	p.port_attr.max_msg_sz = 1u << 31;
	p.port_attr.active_mtu = IBV_MTU_1024;
	p.port_attr.active_speed = 32;
	p.port_attr.active_width = 2;
	p.port_attr.lid = 0;
	p.max_inline = 1024;
	p.iwarp = iwarp;
	return p;
}

/* device names no host has in /sys/class/infiniband: the nic's driver comes from the name */
std::vector<vwait::port_desc> ports()
{
	std::vector<vwait::port_desc> v;
	v.push_back(base_port("rxe_pin0", false)); /* RoCE, 1 KiB MTU */
	vwait::port_desc ib = base_port("mlx_pin0", false);
	ib.port_attr.link_layer = IBV_LINK_LAYER_INFINIBAND;
	ib.port_attr.active_mtu = IBV_MTU_4096;
	ib.port_attr.lid = 7;
	ib.max_inline = 512;
	v.push_back(ib);
	vwait::port_desc siw = base_port("siw_pin0", true); /* iWARP: 64 bytes inline */
	siw.max_inline = 64;
	siw.dev_attr.max_sge = 6;
	v.push_back(siw);
	vwait::port_desc small = base_port("rxe_pin1", false); /* limits below the defaults */
	small.dev_attr.max_qp_wr = 100;
	small.dev_attr.max_sge = 2;
	small.port_attr.max_msg_sz = 512;
	small.port_attr.active_mtu = IBV_MTU_2048;
	small.max_inline = 32;
	v.push_back(small);
	return v;
}

constexpr uint64_t mr_bits = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;

struct hint_case {
	const char *name;
	std::function<void(struct fi_info *)> set; /* nullptr: NULL hints */
};

std::vector<hint_case> hint_cases()
{
	auto mr = [](struct fi_info *h) { h->domain_attr->mr_mode = static_cast<int>(mr_bits); };
	return {
	    {"null", nullptr},
	    {"empty", [](struct fi_info *) {}},
	    {"mr", mr},
	    {"msg", [mr](struct fi_info *h) { mr(h), h->caps = FI_MSG; }},
	    {"rma",
	     [mr](struct fi_info *h) {
		     mr(h), h->caps = FI_MSG | FI_RMA | FI_READ;
		     h->mode = FI_RX_CQ_DATA | FI_MSG_PREFIX | FI_CONTEXT;
	     }},
	    {"send-only", [mr](struct fi_info *h) { mr(h), h->caps = FI_SEND; }},
	    {"source", [mr](struct fi_info *h) { mr(h), h->caps = FI_MSG | FI_SOURCE; }},
	    {"sizes",
	     [mr](struct fi_info *h) {
		     mr(h), h->tx_attr->size = 64, h->tx_attr->iov_limit = 2;
		     h->tx_attr->inject_size = 100, h->tx_attr->op_flags = FI_COMPLETION;
		     h->rx_attr->size = 32, h->rx_attr->iov_limit = 1;
		     h->rx_attr->op_flags = FI_MULTI_RECV;
		     h->rx_attr->mode = FI_RX_CQ_DATA;
	     }},
	    {"big",
	     [mr](struct fi_info *h) {
		     mr(h), h->tx_attr->size = 40000, h->ep_attr->max_msg_size = 1u << 20;
	     }},
	    {"order", [mr](struct fi_info *h) { mr(h), h->tx_attr->msg_order = FI_ORDER_SAS; }},
	    {"rma-iov", [mr](struct fi_info *h) { mr(h), h->tx_attr->rma_iov_limit = 2; }},
	    {"shared-ctx",
	     [mr](struct fi_info *h) { mr(h), h->ep_attr->tx_ctx_cnt = FI_SHARED_CONTEXT; }},
	    {"domain",
	     [mr](struct fi_info *h) {
		     mr(h), h->domain_attr->threading = FI_THREAD_DOMAIN;
		     h->domain_attr->control_progress = FI_PROGRESS_MANUAL;
		     h->domain_attr->data_progress = FI_PROGRESS_MANUAL;
		     h->domain_attr->av_type = FI_AV_TABLE;
		     h->domain_attr->caps = FI_LOCAL_COMM;
	     }},
	    {"cq-data", [mr](struct fi_info *h) { mr(h), h->domain_attr->cq_data_size = 4; }},
	    {"key-8", [mr](struct fi_info *h) { mr(h), h->domain_attr->mr_key_size = 8; }},
	    {"names",
	     [mr](struct fi_info *h) {
		     mr(h), h->domain_attr->name = strdup("rxe_pin0");
		     h->fabric_attr->name = strdup("IB-0xfe80000000000000");
		     h->fabric_attr->prov_name = strdup("vwait");
	     }},
	    {"protocol-rc",
	     [mr](struct fi_info *h) { mr(h), h->ep_attr->protocol = FI_PROTO_RDMA_CM_IB_RC; }},
	    {"protocol-ud",
	     [mr](struct fi_info *h) { mr(h), h->ep_attr->protocol = FI_PROTO_IB_UD; }},
	    {"mr-basic",
	     [](struct fi_info *h) {
		     h->domain_attr->mr_mode = fi_v1::mr_basic;
		     h->mode = fi_v1::local_mr;
	     }},
	    {"mr-basic-no-local",
	     [](struct fi_info *h) { h->domain_attr->mr_mode = fi_v1::mr_basic; }},
	    {"bad-caps", [mr](struct fi_info *h) { mr(h), h->caps = FI_TAGGED; }},
	};
}

uint64_t fnv1a(const std::string &s)
{
	uint64_t h = 1469598103934665603ULL;
	for (unsigned char c : s) {
		h ^= c;
		h *= 1099511628211ULL;
	}
	return h;
}

/* The text of info: fi_tostr's, with the provider version left out (it changes by release)
 * and the NIC's registration cache line (it says what this machine's kernel allows; test_nic
 * pins it) */
std::string text_of(struct fi_info *info)
{
	if (!info)
		return "NULL";
	info->fabric_attr->prov_version = 0;
	std::string s = fi_tostr(info, FI_TYPE_INFO);
	fi_freeinfo(info);
	const std::string::size_type at = s.find("\t\tvwait_mr_cache: ");
	if (at != std::string::npos)
		s.erase(at, s.find('\n', at) + 1 - at);
	return s;
}

struct sockaddr_in ipv4(const char *a, uint16_t port)
{
	struct sockaddr_in s = {};
	s.sin_family = AF_INET;
	s.sin_port = htons(port);
	inet_pton(AF_INET, a, &s.sin_addr);
	return s;
}

/* Every case: its name and fi_tostr's text. */
std::vector<std::pair<std::string, std::string>> all_cases()
{
	std::vector<std::pair<std::string, std::string>> out;
	const struct sockaddr_in src = ipv4("169.254.77.1", 0);
	const struct sockaddr_in dst = ipv4("169.254.77.2", 7471);
	vwait::ud_name usrc = {}, udst = {};
	for (int i = 0; i < 16; i++)
		usrc.gid[i] = static_cast<uint8_t>(i), udst.gid[i] = static_cast<uint8_t>(0xf0 + i);
	usrc.qkey = udst.qkey = vwait::ud_qkey;
	udst.qpn = 17;
	udst.service = 5000;
	for (const vwait::port_desc &port : ports())
		for (uint32_t version : {FI_VERSION(1, 5), FI_VERSION(1, 17), FI_VERSION(2, 0)})
			for (const hint_case &hc : hint_cases()) {
				struct fi_info *hints = nullptr;
				if (hc.set) {
					hints = fi_allocinfo();
					assert_non_null(hints);
					hc.set(hints);
				}
				char name[128];
				snprintf(name, sizeof(name), "%s-%u.%u-%s", port.device.c_str(),
				         FI_MAJOR(version), FI_MINOR(version), hc.name);
				const auto *s = reinterpret_cast<const struct sockaddr *>(&src);
				const auto *d = reinterpret_cast<const struct sockaddr *>(&dst);
				out.emplace_back(
				    std::string("msg-") + name,
				    text_of(vwait::port_info(version, port, hints, s, nullptr)));
				out.emplace_back(
				    std::string("msg-dst-") + name,
				    text_of(vwait::port_info(version, port, hints, s, d)));
				if (!port.iwarp) {
					out.emplace_back(std::string("dgram-") + name,
					                 text_of(vwait::dgram_port_info(
					                     version, port, hints, usrc, nullptr)));
					out.emplace_back(std::string("dgram-dst-") + name,
					                 text_of(vwait::dgram_port_info(
					                     version, port, hints, usrc, &udst)));
				}
				fi_freeinfo(hints);
			}
	return out;
}

std::string line_of(const std::pair<std::string, std::string> &c)
{
	char hash[32];
	snprintf(hash, sizeof(hash), "%016" PRIx64, fnv1a(c.second));
	return c.first + " " + (c.second == "NULL" ? std::string("NULL") : std::string(hash));
}

void pinned_infos(void **)
{
	std::vector<std::pair<std::string, std::string>> cases = all_cases();
	if (const char *out = getenv("VWAIT_INFO_WRITE")) {
		std::ofstream lines(out), dump(std::string(out) + ".dump");
		for (const auto &c : cases) {
			lines << line_of(c) << "\n";
			dump << "=== " << c.first << "\n" << c.second << "\n";
		}
		print_message("wrote %zu cases to %s\n", cases.size(), out);
		return;
	}
	/* one golden file per libfabric release that loads the tests: fi_tostr prints other
	 * fields in 2.x than in 1.x */
	const uint32_t lib = fi_version();
	const std::string release =
	    std::to_string(FI_MAJOR(lib)) + "." + std::to_string(FI_MINOR(lib));
	const char *srcdir = getenv("srcdir");
	std::string path =
	    std::string(srcdir ? srcdir : ".") + "/test/unit/test_info-" + release + ".golden";
	std::ifstream in(path);
	if (!in.good()) {
		print_message("no %s: nothing pinned for libfabric %s (VWAIT_INFO_WRITE=FILE makes "
		              "one)\n",
		              path.c_str(), release.c_str());
		skip();
	}
	std::vector<std::string> want;
	for (std::string l; std::getline(in, l);)
		want.push_back(l);
	assert_int_equal(want.size(), cases.size());
	int differ = 0;
	for (size_t i = 0; i < cases.size(); i++)
		if (line_of(cases[i]) != want[i]) {
			print_error("differs: %s (golden: %s)\n%s\n", line_of(cases[i]).c_str(),
			            want[i].c_str(), cases[i].second.c_str());
			differ++;
		}
	print_message("%zu cases, %d differ\n", cases.size(), differ);
	assert_int_equal(differ, 0);
}

} // namespace

int main()
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(pinned_infos),
	};
	return cmocka_run_group_tests_name("info", tests, nullptr, nullptr) == 0 ? 0 : 1;
}
