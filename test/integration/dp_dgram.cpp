/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* FI_EP_DGRAM integration tests of vwait on a real verbs device (soft-RoCE in the VM): UD
 * endpoints in one domain, addressed through AVs.
 *
 *   dp_dgram TEST    (TEST: info sendrecv av bad-input trunc sread names all)
 * Needs FI_PROVIDER_PATH (the built plugin) and RXE_ADDR. Exit 0 pass, 77 skip, 1 fail. */
#include "vwait/fi_deprecated.h"

#include "harness.h"

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include <poll.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace
{

using namespace vwait_it;

/* the prefix of this world's buffers: 40 with FI_MSG_PREFIX (the GRH), else 0 */
size_t prefix = 40;
bool use_prefix = true;
/* how long a completion may take */
/* "must not hang" for one datagram on the device: 100x a completion in the emulated guest */
constexpr int dgram_timeout_ms = 10000;

struct fi_info *dgram_hints()
{
	struct fi_info *h = fi_allocinfo();
	h->ep_attr->type = FI_EP_DGRAM;
	h->caps = FI_MSG | FI_SOURCE;
	h->mode = (use_prefix ? FI_MSG_PREFIX : 0) | FI_CONTEXT;
	h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	h->fabric_attr->prov_name = strdup("vwait");
	return h;
}

/* One UD endpoint with its CQs, counters and registered buffer. */
struct side {
	struct fid_ep *ep = nullptr;
	struct fid_cq *tx = nullptr;
	struct fid_cq *rx = nullptr;
	struct fid_cntr *tx_cntr = nullptr;
	struct fid_cntr *rx_cntr = nullptr;
	struct fid_av *av = nullptr;
	std::vector<uint8_t> buf;
	struct fid_mr *mr = nullptr;
	uint8_t name[64] = {};
	size_t namelen = sizeof(name);
};

struct world {
	struct fi_info *info = nullptr;
	struct fid_fabric *fabric = nullptr;
	struct fid_domain *domain = nullptr;
	struct fid_wait *waitset = nullptr; /* b's CQs, when opened with FI_WAIT_SET */
	side a, b;
};

void close_side(side &s)
{
	close_fid(s.ep ? &s.ep->fid : nullptr);
	close_fid(s.av ? &s.av->fid : nullptr);
	close_fid(s.mr ? &s.mr->fid : nullptr);
	close_fid(s.tx ? &s.tx->fid : nullptr);
	close_fid(s.rx ? &s.rx->fid : nullptr);
	close_fid(s.tx_cntr ? &s.tx_cntr->fid : nullptr);
	close_fid(s.rx_cntr ? &s.rx_cntr->fid : nullptr);
	s = side{};
}

void close_world(world &w)
{
	close_side(w.a);
	close_side(w.b);
	close_fid(w.waitset ? &w.waitset->fid : nullptr);
	close_fid(w.domain ? &w.domain->fid : nullptr);
	close_fid(w.fabric ? &w.fabric->fid : nullptr);
	fi_freeinfo(w.info);
	w = world{};
}

int open_world(world &w, enum fi_av_type av_type = FI_AV_MAP)
{
	struct fi_info *hints = dgram_hints();
	hints->domain_attr->av_type = av_type;
	int ret = fi_getinfo(version, nullptr, nullptr, 0, hints, &w.info);
	fi_freeinfo(hints);
	if (ret)
		return ret;
	prefix = w.info->ep_attr->msg_prefix_size;
	EXPECT(prefix == (use_prefix ? 40u : 0u), prefix);
	if ((ret = fi_fabric(w.info->fabric_attr, &w.fabric, nullptr)))
		return ret;
	return fi_domain(w.fabric, w.info, &w.domain, nullptr);
}

int open_side(world &w, side &s, enum fi_wait_obj wait = FI_WAIT_NONE,
              enum fi_av_type av_type = FI_AV_MAP, size_t bufsize = 8192)
{
	struct fi_cq_attr ca = {};
	ca.format = FI_CQ_FORMAT_DATA;
	ca.wait_obj = wait;
	ca.wait_set = wait == FI_WAIT_SET ? w.waitset : nullptr;
	int ret;
	if ((ret = fi_cq_open(w.domain, &ca, &s.tx, nullptr)) ||
	    (ret = fi_cq_open(w.domain, &ca, &s.rx, nullptr)))
		return ret;
	struct fi_cntr_attr ka = {};
	ka.events = FI_CNTR_EVENTS_COMP;
	ka.wait_obj = FI_WAIT_UNSPEC;
	if ((ret = fi_cntr_open(w.domain, &ka, &s.tx_cntr, nullptr)) ||
	    (ret = fi_cntr_open(w.domain, &ka, &s.rx_cntr, nullptr)))
		return ret;
	struct fi_av_attr aa = {};
	aa.type = av_type;
	if ((ret = fi_av_open(w.domain, &aa, &s.av, nullptr)))
		return ret;
	if ((ret = fi_endpoint(w.domain, w.info, &s.ep, nullptr)))
		return ret;
	/* no name before fi_enable: the QP number comes with it */
	size_t len = sizeof(s.name);
	ret = fi_getname(&s.ep->fid, s.name, &len);
	EXPECT(ret == -FI_EOPBADSTATE, ret);
	/* no AV: no enable */
	if ((ret = fi_ep_bind(s.ep, &s.tx->fid, FI_TRANSMIT)) ||
	    (ret = fi_ep_bind(s.ep, &s.rx->fid, FI_RECV)) ||
	    (ret = fi_ep_bind(s.ep, &s.tx_cntr->fid, FI_SEND)) ||
	    (ret = fi_ep_bind(s.ep, &s.rx_cntr->fid, FI_RECV)))
		return ret;
	ret = fi_enable(s.ep);
	EXPECT(ret == -FI_ENOAV, ret);
	if ((ret = fi_ep_bind(s.ep, &s.av->fid, 0)) || (ret = fi_enable(s.ep)))
		return ret;
	s.namelen = sizeof(s.name);
	if ((ret = fi_getname(&s.ep->fid, s.name, &s.namelen)))
		return ret;
	s.buf.assign(bufsize, 0);
	return fi_mr_reg(w.domain, s.buf.data(), s.buf.size(), FI_SEND | FI_RECV, 0, 0, 0, &s.mr,
	                 nullptr);
}

/* A world with two enabled endpoints (b's CQs on wait); false (world closed) on failure. */
bool open_pair(world &w, enum fi_wait_obj wait = FI_WAIT_NONE, enum fi_av_type type = FI_AV_MAP)
{
	int ret = open_world(w, type);
	if (ret == 0 && wait == FI_WAIT_SET) {
		struct fi_wait_attr wa = {};
		wa.wait_obj = FI_WAIT_UNSPEC;
		ret = fi_sets::wait_open(w.fabric, &wa, &w.waitset);
	}
	if (ret == 0)
		ret = open_side(w, w.a, FI_WAIT_NONE, type);
	if (ret == 0)
		ret = open_side(w, w.b, wait, type);
	if (!EXPECT(ret == 0, ret)) {
		close_world(w);
		return false;
	}
	return true;
}

/* b's address in a's AV: what a sends to (FI_ADDR_NOTAVAIL after a failed check) */
fi_addr_t a_knows_b(world &w)
{
	fi_addr_t to_b = FI_ADDR_NOTAVAIL;
	int ret = fi_av_insert(w.a.av, w.b.name, 1, &to_b, 0, nullptr);
	EXPECT(ret == 1, ret);
	return to_b;
}

/* One completion on cq within the timeout: 1 (*e, *src), -FI_EAVAIL (*err), or a code. */
long wait_comp(struct fid_cq *cq, struct fi_cq_data_entry *e, fi_addr_t *src = nullptr,
               struct fi_cq_err_entry *err = nullptr, int ms = dgram_timeout_ms)
{
	fi_addr_t from = FI_ADDR_UNSPEC;
	long n = poll_comp(cq, err, ms, [&] { return fi_cq_readfrom(cq, e, 1, &from); });
	if (n == 1 && src)
		*src = from;
	return n;
}

/* ------------------------------------------------------------------ tests */

void test_info()
{
	struct fi_info *hints = dgram_hints(), *info = nullptr;
	int ret = fi_getinfo(version, nullptr, nullptr, 0, hints, &info);
	if (EXPECT(ret == 0 && info, ret)) {
		EXPECT(info->ep_attr->type == FI_EP_DGRAM, info->ep_attr->type);
		EXPECT(info->ep_attr->protocol == FI_PROTO_IB_UD, info->ep_attr->protocol);
		EXPECT(info->addr_format == FI_ADDR_IB_UD, info->addr_format);
		EXPECT(info->src_addr && info->src_addrlen == 32, info->src_addrlen);
		EXPECT((info->mode & FI_MSG_PREFIX) && info->ep_attr->msg_prefix_size == prefix,
		       info->ep_attr->msg_prefix_size);
		size_t m = info->ep_attr->max_msg_size;
		EXPECT(m == 256 || m == 512 || m == 1024 || m == 2048 || m == 4096, m);
		EXPECT((info->caps & (FI_MSG | FI_SEND | FI_RECV | FI_SOURCE)) ==
		           (FI_MSG | FI_SEND | FI_RECV | FI_SOURCE),
		       info->caps);
		EXPECT(!(info->caps & FI_RMA), info->caps);
		printf("  %s %s max_msg_size %zu inject %zu\n", info->fabric_attr->name,
		       info->domain_attr->name, m, info->tx_attr->inject_size);
		/* above the MTU: not offered */
		hints->ep_attr->max_msg_size = m + 1;
		struct fi_info *none = nullptr;
		ret = fi_getinfo(version, nullptr, nullptr, 0, hints, &none);
		EXPECT(ret == -FI_ENODATA, ret);
		fi_freeinfo(none);
		hints->ep_attr->max_msg_size = 0;
	}
	fi_freeinfo(info);
	info = nullptr;
	/* no FI_MSG_PREFIX in mode: offered without it (vwait keeps the GRH) */
	hints->mode = FI_CONTEXT;
	ret = fi_getinfo(version, nullptr, nullptr, 0, hints, &info);
	if (EXPECT(ret == 0 && info, ret))
		EXPECT(!(info->mode & FI_MSG_PREFIX) && info->ep_attr->msg_prefix_size == 0,
		       info->ep_attr->msg_prefix_size);
	fi_freeinfo(info);
	info = nullptr;
	hints->mode = FI_MSG_PREFIX;
	/* multicast is not offered */
	hints->caps = FI_MSG | FI_MULTICAST;
	ret = fi_getinfo(version, nullptr, nullptr, 0, hints, &info);
	EXPECT(ret == -FI_ENODATA, ret);
	fi_freeinfo(info);
	info = nullptr;
	hints->caps = FI_MSG;
	/* a node that is a UD name is the destination; an address and a service where no
	 * endpoint answers give none (test_names: one that does) */
	const char *node = "fi_addr_ib_ud://[fe80::1]:17:0x76776169:0"; /* well-formed, made up */
	ret = fi_getinfo(version, node, nullptr, 0, hints, &info);
	if (EXPECT(ret == 0 && info && info->dest_addr && info->dest_addrlen == 32, ret))
		EXPECT(*reinterpret_cast<uint32_t *>(static_cast<uint8_t *>(info->dest_addr) +
		                                     16) == 17,
		       0);
	fi_freeinfo(info);
	info = nullptr;
	ret = fi_getinfo(version, getenv("RXE_ADDR"), "7500", 0, hints, &info);
	EXPECT(ret == -FI_ENODATA, ret);
	fi_freeinfo(info);
	info = nullptr;
	/* unspecified type: MSG and DGRAM infos both */
	struct fi_info *any = fi_allocinfo(), *list = nullptr;
	any->mode = ~0ULL;
	any->domain_attr->mr_mode =
	    FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	any->fabric_attr->prov_name = strdup("vwait");
	ret = fi_getinfo(version, nullptr, nullptr, 0, any, &list);
	bool msg = false, dgram = false;
	for (struct fi_info *i = list; ret == 0 && i; i = i->next) {
		msg |= i->ep_attr->type == FI_EP_MSG;
		dgram |= i->ep_attr->type == FI_EP_DGRAM;
	}
	EXPECT(ret == 0 && msg && dgram, ret);
	fi_freeinfo(list);
	fi_freeinfo(any);
	fi_freeinfo(hints);
}

/* fi_getinfo(address, service) for FI_EP_DGRAM: the enabled endpoint whose source address has
 * that service answers with its name (fabtests' DGRAM clients start this way), and a send to
 * it arrives; once it is closed nobody answers. */
void test_names()
{
	const char *svc = "7510";
	struct fi_info *hints = dgram_hints();
	world w;
	int ret = fi_getinfo(version, nullptr, svc, FI_SOURCE, hints, &w.info);
	if (EXPECT(ret == 0, ret)) {
		prefix = w.info->ep_attr->msg_prefix_size;
		ret = fi_fabric(w.info->fabric_attr, &w.fabric, nullptr);
		if (ret == 0)
			ret = fi_domain(w.fabric, w.info, &w.domain, nullptr);
		if (ret == 0)
			ret = open_side(w, w.a);
		EXPECT(ret == 0, ret);
	}
	struct fi_info *to_a = nullptr;
	auto t0 = clock_type::now();
	if (ret == 0)
		ret = fi_getinfo(version, rxe_addr, svc, 0, hints, &to_a);
	if (ret == 0 && EXPECT(to_a && to_a->dest_addr && to_a->dest_addrlen == 32, ret)) {
		printf("  fi_getinfo(%s, %s): the name in %ld ms\n", rxe_addr, svc, ms_since(t0));
		EXPECT(memcmp(to_a->dest_addr, w.a.name, 32) == 0, 0);
		/* b: an endpoint of the info that named a */
		std::swap(w.info, to_a);
		ret = open_side(w, w.b);
		std::swap(w.info, to_a);
		fi_addr_t b_to_a = FI_ADDR_NOTAVAIL;
		if (EXPECT(ret == 0, ret)) {
			ret = fi_av_insert(w.b.av, to_a->dest_addr, 1, &b_to_a, 0, nullptr);
			EXPECT(ret == 1, ret);
		}
		uint8_t *tx = w.b.buf.data(), *rx = w.a.buf.data();
		if (ret == 1) {
			ret = static_cast<int>(fi_recv(w.a.ep, rx, prefix + 64, fi_mr_desc(w.a.mr),
			                               FI_ADDR_UNSPEC, rx));
			EXPECT(ret == 0, ret);
			fill(tx + prefix, 64, 7);
			ret = static_cast<int>(
			    fi_send(w.b.ep, tx, prefix + 64, fi_mr_desc(w.b.mr), b_to_a, tx));
			EXPECT(ret == 0, ret);
			struct fi_cq_data_entry e;
			long n = wait_comp(w.a.rx, &e);
			EXPECT(n == 1 && e.op_context == rx && verify(rx + prefix, 64, 7), n);
			n = wait_comp(w.b.tx, &e);
			EXPECT(n == 1 && e.op_context == tx, n);
		}
	} else {
		EXPECT(ret == 0, ret);
	}
	fi_freeinfo(to_a);
	to_a = nullptr;
	close_world(w);
	/* a closed: nobody answers on the port */
	ret = fi_getinfo(version, rxe_addr, svc, 0, hints, &to_a);
	EXPECT(ret == -FI_ENODATA, ret);
	fi_freeinfo(to_a);
	to_a = nullptr;
	/* without FI_EP_DGRAM in the hints nobody is asked: an address gives no DGRAM info */
	struct fi_info *any = fi_allocinfo(), *list = nullptr;
	any->mode = ~0ULL;
	any->domain_attr->mr_mode = hints->domain_attr->mr_mode;
	any->fabric_attr->prov_name = strdup("vwait");
	ret = fi_getinfo(version, rxe_addr, svc, 0, any, &list);
	for (struct fi_info *i = ret == 0 ? list : nullptr; i; i = i->next)
		EXPECT(i->ep_attr->type != FI_EP_DGRAM, i->ep_attr->type);
	fi_freeinfo(list);
	fi_freeinfo(any);
	fi_freeinfo(hints);
}

void test_sendrecv_on(enum fi_av_type type)
{
	world w;
	if (!open_pair(w, FI_WAIT_NONE, type))
		return;
	int ret;
	EXPECT(w.a.namelen == 32, w.a.namelen);
	/* a knows b; b knows a (so b's receives report a as their source) */
	fi_addr_t a_to_b = FI_ADDR_NOTAVAIL, b_to_a = FI_ADDR_NOTAVAIL;
	ret = fi_av_insert(w.a.av, w.b.name, 1, &a_to_b, 0, nullptr);
	EXPECT(ret == 1, ret);
	size_t m = w.info->ep_attr->max_msg_size;
	void *ddesc_a = fi_mr_desc(w.a.mr), *ddesc_b = fi_mr_desc(w.b.mr);
	uint8_t *tx = w.a.buf.data(), *rx = w.b.buf.data();

	/* before b knows a: the source is FI_ADDR_NOTAVAIL */
	ret = static_cast<int>(fi_recv(w.b.ep, rx, prefix + m, ddesc_b, FI_ADDR_UNSPEC, rx));
	EXPECT(ret == 0, ret);
	fill(tx + prefix, 100, 1);
	ret = static_cast<int>(fi_send(w.a.ep, tx, prefix + 100, ddesc_a, a_to_b, tx));
	EXPECT(ret == 0, ret);
	struct fi_cq_data_entry e;
	fi_addr_t src = 0;
	long n = wait_comp(w.a.tx, &e);
	EXPECT(n == 1 && e.op_context == tx && (e.flags & FI_SEND), n);
	n = wait_comp(w.b.rx, &e, &src);
	if (EXPECT(n == 1, n)) {
		EXPECT(e.op_context == rx && (e.flags & FI_RECV), e.flags);
		EXPECT(e.len == prefix + 100, e.len);
		EXPECT(verify(rx + prefix, 100, 1), 0);
		EXPECT(src == FI_ADDR_NOTAVAIL, static_cast<long>(src));
	}
	ret = fi_av_insert(w.b.av, w.a.name, 1, &b_to_a, 0, nullptr);
	EXPECT(ret == 1, ret);
	if (type == FI_AV_TABLE)
		EXPECT(b_to_a == 0, static_cast<long>(b_to_a));

	/* every size up to the MTU, the source known now; senddata carries its data */
	for (size_t len : {size_t{0}, size_t{1}, size_t{64}, m / 2, m}) {
		ret =
		    static_cast<int>(fi_recv(w.b.ep, rx, prefix + m, ddesc_b, FI_ADDR_UNSPEC, rx));
		EXPECT(ret == 0, ret);
		fill(tx + prefix, len, static_cast<unsigned>(len));
		ret = static_cast<int>(
		    fi_senddata(w.a.ep, tx, prefix + len, ddesc_a, 0xabc000 + len, a_to_b, tx));
		EXPECT(ret == 0, ret);
		n = wait_comp(w.a.tx, &e);
		EXPECT(n == 1, n);
		n = wait_comp(w.b.rx, &e, &src);
		if (EXPECT(n == 1, n)) {
			EXPECT(e.len == prefix + len, e.len);
			EXPECT(verify(rx + prefix, len, static_cast<unsigned>(len)), len);
			EXPECT(src == b_to_a, static_cast<long>(src));
			EXPECT((e.flags & FI_REMOTE_CQ_DATA) && e.data == 0xabc000 + len, e.data);
		}
	}
	/* inject: no completion entry, but counted */
	uint64_t sent_before = fi_cntr_read(w.a.tx_cntr);
	ret = static_cast<int>(fi_recv(w.b.ep, rx, prefix + m, ddesc_b, FI_ADDR_UNSPEC, rx));
	EXPECT(ret == 0, ret);
	fill(tx + prefix, 32, 9);
	ret = static_cast<int>(fi_inject(w.a.ep, tx, prefix + 32, a_to_b));
	EXPECT(ret == 0, ret);
	n = wait_comp(w.b.rx, &e, &src);
	EXPECT(n == 1 && e.len == prefix + 32 && verify(rx + prefix, 32, 9), n);
	ret = fi_cntr_wait(w.a.tx_cntr, sent_before + 1, dgram_timeout_ms);
	EXPECT(ret == 0, ret);
	n = wait_comp(w.a.tx, &e, nullptr, nullptr, 100);
	EXPECT(n == -FI_ETIMEDOUT, n);
	EXPECT(fi_cntr_read(w.b.rx_cntr) == 7, fi_cntr_read(w.b.rx_cntr));
	/* fi_av_lookup gives the name back; straddr prints it */
	uint8_t back[64];
	size_t len = sizeof(back);
	ret = fi_av_lookup(w.a.av, a_to_b, back, &len);
	EXPECT(ret == 0 && len == 32 && memcmp(back, w.b.name, 32) == 0, ret);
	char str[128];
	size_t slen = sizeof(str);
	const char *s = fi_av_straddr(w.a.av, w.b.name, str, &slen);
	EXPECT(s && strncmp(s, "fi_addr_ib_ud://", 16) == 0, 0);
	if (s)
		printf("  b is %s\n", s);
	close_world(w);
}

void test_sendrecv()
{
	test_sendrecv_on(FI_AV_MAP);
	test_sendrecv_on(FI_AV_TABLE);
	/* without FI_MSG_PREFIX: the buffers hold the payload only */
	use_prefix = false;
	test_sendrecv_on(FI_AV_MAP);
	use_prefix = true;
}

void test_av()
{
	world w;
	if (!open_pair(w))
		return;
	int ret;
	/* a name with QPN 0 is refused, the good one beside it goes in */
	uint8_t names[2][32];
	memcpy(names[0], w.b.name, 32);
	memcpy(names[1], w.b.name, 32);
	memset(names[0] + 16, 0, 4);
	fi_addr_t out[2] = {0, 0};
	ret = fi_av_insert(w.a.av, names, 2, out, 0, nullptr);
	EXPECT(ret == 1, ret);
	EXPECT(out[0] == FI_ADDR_NOTAVAIL && out[1] != FI_ADDR_NOTAVAIL, static_cast<long>(out[0]));
	ret = fi_av_insert(w.a.av, names, 1, out, 0x1ULL << 60, nullptr);
	EXPECT(ret == -FI_EBADFLAGS, ret);
	ret = fi_av_insert(w.a.av, nullptr, 1, out, 0, nullptr);
	EXPECT(ret == -FI_EINVAL, ret);
	/* insertsvc takes the text form; insertsym has no meaning for UD names */
	char str[128];
	size_t slen = sizeof(str);
	fi_av_straddr(w.a.av, w.b.name, str, &slen);
	fi_addr_t svc = FI_ADDR_NOTAVAIL;
	ret = fi_av_insertsvc(w.a.av, str, nullptr, &svc, 0, nullptr);
	EXPECT(ret == 1 && svc != FI_ADDR_NOTAVAIL, ret);
	ret = fi_av_insertsvc(w.a.av, "192.168.1.1", "7000", &svc, 0, nullptr);
	EXPECT(ret == -FI_EINVAL, ret);
	ret = fi_av_insertsym(w.a.av, "node", 1, "7000", 1, &svc, 0, nullptr);
	EXPECT(ret == -FI_ENOSYS, ret);
	/* lookup: a short buffer, an unknown address */
	uint8_t back[8];
	size_t len = sizeof(back);
	ret = fi_av_lookup(w.a.av, out[1], back, &len);
	EXPECT(ret == -FI_ETOOSMALL && len == 32, ret);
	len = sizeof(back);
	ret = fi_av_lookup(w.a.av, 12345, back, &len);
	EXPECT(ret == -FI_EINVAL, ret);
	/* remove: then sends to it fail, a second remove fails */
	fi_addr_t gone = out[1];
	ret = fi_av_remove(w.a.av, &gone, 1, 0);
	EXPECT(ret == 0, ret);
	ret = fi_av_remove(w.a.av, &gone, 1, 0);
	EXPECT(ret == -FI_EINVAL, ret);
	ret = static_cast<int>(
	    fi_send(w.a.ep, w.a.buf.data(), prefix + 8, fi_mr_desc(w.a.mr), gone, nullptr));
	EXPECT(ret == -FI_EINVAL, ret);
	/* an AV with endpoints bound does not close; options vwait lacks are refused */
	ret = fi_close(&w.a.av->fid);
	EXPECT(ret == -FI_EBUSY, ret);
	struct fi_av_attr aa = {};
	aa.type = FI_AV_MAP;
	aa.name = "shared";
	struct fid_av *av2 = nullptr;
	ret = fi_av_open(w.domain, &aa, &av2, nullptr);
	EXPECT(ret == -FI_ENOSYS, ret);
	aa.name = nullptr;
	aa.flags = FI_EVENT;
	ret = fi_av_open(w.domain, &aa, &av2, nullptr);
	EXPECT(ret == -FI_ENOSYS, ret);
	aa.flags = 0;
	aa.type = static_cast<enum fi_av_type>(77);
	ret = fi_av_open(w.domain, &aa, &av2, nullptr);
	EXPECT(ret == -FI_EINVAL, ret);
	close_world(w);
}

void test_bad_input()
{
	world w;
	if (!open_pair(w))
		return;
	int ret;
	fi_addr_t to_b = a_knows_b(w);
	size_t m = w.info->ep_attr->max_msg_size;
	void *d = fi_mr_desc(w.a.mr);
	uint8_t *tx = w.a.buf.data();
	/* a destination never inserted */
	ssize_t r = fi_send(w.a.ep, tx, prefix + 8, d, 999, nullptr);
	EXPECT(r == -FI_EINVAL, r);
	/* no room for the prefix */
	r = fi_send(w.a.ep, tx, prefix - 1, d, to_b, nullptr);
	EXPECT(r == -FI_EINVAL, r);
	/* above the MTU */
	r = fi_send(w.a.ep, tx, prefix + m + 1, d, to_b, nullptr);
	EXPECT(r == -FI_EMSGSIZE, r);
	/* inject above inject_size */
	r = fi_inject(w.a.ep, tx, prefix + w.info->tx_attr->inject_size + 1, to_b);
	EXPECT(r == -FI_EINVAL || r == -FI_EMSGSIZE, r);
	/* no RMA, no connection management, no multicast */
	r = fi_write(w.a.ep, tx, 8, d, to_b, 0, 0, nullptr);
	EXPECT(r == -FI_ENOSYS, r);
	ret = fi_connect(w.a.ep, w.b.name, nullptr, 0);
	EXPECT(ret == -FI_ENOSYS, ret);
	struct fid_mc *mc = nullptr;
	ret = fi_join(w.a.ep, w.b.name, 0, &mc, nullptr);
	EXPECT(ret == -FI_ENOSYS, ret);
	/* a second AV, an EQ-less endpoint still works; a bad flag on the AV bind */
	struct fi_av_attr aa = {};
	struct fid_av *av2 = nullptr;
	ret = fi_av_open(w.domain, &aa, &av2, nullptr);
	if (EXPECT(ret == 0, ret)) {
		ret = fi_ep_bind(w.a.ep, &av2->fid, 0);
		EXPECT(ret == -FI_EOPBADSTATE || ret == -FI_EINVAL, ret);
		close_fid(&av2->fid);
	}
	close_world(w);
}

void trunc_once()
{
	world w;
	if (!open_pair(w))
		return;
	fi_addr_t to_b = a_knows_b(w);
	void *da = fi_mr_desc(w.a.mr), *db = fi_mr_desc(w.b.mr);
	uint8_t *tx = w.a.buf.data(), *rx = w.b.buf.data();
	/* a 512-byte datagram into a 64-byte buffer */
	ssize_t r = fi_recv(w.b.ep, rx, prefix + 64, db, FI_ADDR_UNSPEC, rx);
	EXPECT(r == 0, r);
	fill(tx + prefix, 512, 3);
	r = fi_send(w.a.ep, tx, prefix + 512, da, to_b, tx);
	EXPECT(r == 0, r);
	struct fi_cq_data_entry e;
	long n = wait_comp(w.a.tx, &e);
	EXPECT(n == 1, n);
	struct fi_cq_err_entry err = {};
	n = wait_comp(w.b.rx, &e, nullptr, &err, 2000);
	printf("  truncated receive: %s (err %d, %s)\n",
	       n == -FI_EAVAIL ? "error entry" : "no entry", err.err,
	       n == -FI_EAVAIL ? fi_cq_strerror(w.b.rx, err.prov_errno, err.err_data, nullptr, 0)
	                       : "-");
	/* FI_ETRUNC, what fitted delivered, the rest counted in olen */
	if (EXPECT(n == -FI_EAVAIL, n)) {
		EXPECT(err.err == FI_ETRUNC && err.op_context == rx, err.err);
		EXPECT(err.len == prefix + 64 && err.olen == 512 - 64, err.olen);
		EXPECT(verify(rx + prefix, 64, 3), 0);
	}
	/* the endpoint goes on: a fitting datagram arrives */
	r = fi_recv(w.b.ep, rx, prefix + 1024, db, FI_ADDR_UNSPEC, rx);
	EXPECT(r == 0, r);
	fill(tx + prefix, 48, 4);
	r = fi_send(w.a.ep, tx, prefix + 48, da, to_b, tx);
	EXPECT(r == 0, r);
	n = wait_comp(w.a.tx, &e);
	EXPECT(n == 1, n);
	n = wait_comp(w.b.rx, &e);
	EXPECT(n == 1 && e.len == prefix + 48 && verify(rx + prefix, 48, 4), n);
	close_world(w);
}

void test_trunc()
{
	trunc_once();
	use_prefix = false;
	trunc_once();
	use_prefix = true;
}

/* A thread blocked in fi_cq_sread (or fi_wait on a wait set, or poll() on the CQ's fd after
 * fi_trywait) on b's receive CQ is woken by a datagram from a. */
void sread_once(enum fi_wait_obj wait, const char *how)
{
	world w;
	if (!open_pair(w, wait))
		return;
	int ret;
	fi_addr_t to_b = a_knows_b(w);
	uint8_t *rx = w.b.buf.data();
	ssize_t r = fi_recv(w.b.ep, rx, prefix + 256, fi_mr_desc(w.b.mr), FI_ADDR_UNSPEC, rx);
	EXPECT(r == 0, r);
	std::atomic<bool> sent{false};
	std::thread sender([&] {
		std::this_thread::sleep_for(std::chrono::milliseconds(300));
		fill(w.a.buf.data() + prefix, 16, 5);
		sent = true;
		ssize_t s =
		    fi_send(w.a.ep, w.a.buf.data(), prefix + 16, fi_mr_desc(w.a.mr), to_b, nullptr);
		EXPECT(s == 0, s);
	});
	struct fi_cq_data_entry e = {};
	auto t0 = clock_type::now();
	ssize_t n = -FI_EAGAIN;
	if (strcmp(how, "waitset") == 0) {
		ret = fi_sets::wait(w.waitset, dgram_timeout_ms);
		EXPECT(ret == 0, ret);
		n = fi_cq_read(w.b.rx, &e, 1);
	} else if (strcmp(how, "pollset") == 0) {
		struct fid_poll *ps = nullptr;
		struct fi_poll_attr pa = {};
		ret = fi_sets::poll_open(w.domain, &pa, &ps);
		EXPECT(ret == 0, ret);
		ret = fi_sets::poll_add(ps, &w.b.rx->fid, 0);
		EXPECT(ret == 0, ret);
		void *ctx[2] = {};
		int got = 0;
		while (got == 0 && clock_type::now() - t0 < std::chrono::seconds(10))
			got = fi_sets::poll(ps, ctx, 2);
		EXPECT(got == 1, got);
		n = fi_cq_read(w.b.rx, &e, 1);
		fi_sets::poll_del(ps, &w.b.rx->fid, 0);
		close_fid(&ps->fid);
	} else if (strcmp(how, "fd") == 0) {
		int fd = -1;
		ret = fi_control(&w.b.rx->fid, FI_GETWAIT, &fd);
		EXPECT(ret == 0 && fd >= 0, ret);
		struct fid *f = &w.b.rx->fid;
		while (n == -FI_EAGAIN && clock_type::now() - t0 < std::chrono::seconds(10)) {
			if (fi_trywait(w.fabric, &f, 1) == 0) {
				struct pollfd p = {fd, POLLIN, 0};
				poll(&p, 1, 10000);
			}
			n = fi_cq_read(w.b.rx, &e, 1);
		}
	} else {
		n = fi_cq_sread(w.b.rx, &e, 1, nullptr, dgram_timeout_ms);
	}
	double ms = std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
	sender.join();
	EXPECT(n == 1 && sent && e.op_context == rx && verify(rx + prefix, 16, 5), n);
	/* not before the send (300 ms); woken by it, not at the wait's deadline */
	EXPECT(ms >= 250 && ms < dgram_timeout_ms, static_cast<long>(ms));
	printf("  %s: woken after %.0f ms\n", how, ms);
	close_world(w);
}

void test_sread()
{
	sread_once(FI_WAIT_UNSPEC, "sread-unspec");
	sread_once(FI_WAIT_FD, "sread-fd");
	sread_once(FI_WAIT_MUTEX_COND, "sread-mutex-cond");
	sread_once(FI_WAIT_YIELD, "sread-yield");
	sread_once(FI_WAIT_FD, "fd");
	sread_once(FI_WAIT_SET, "waitset");
	sread_once(FI_WAIT_NONE, "pollset");
}

const test tests[] = {
    {"info", test_info},           {"sendrecv", test_sendrecv}, {"av", test_av},
    {"bad-input", test_bad_input}, {"trunc", test_trunc},       {"sread", test_sread},
    {"names", test_names},
};

} // namespace

int main(int argc, char **argv)
{
	return run_tests(argc, argv, tests, dgram_hints, "FI_EP_DGRAM");
}
