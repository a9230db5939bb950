/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* vwait address vectors: UD names (FI_ADDR_IB_UD) into verbs address handles, for FI_EP_DGRAM
 * endpoints. fi_addr_t is the table index under FI_AV_MAP and FI_AV_TABLE alike. */
#include "config.h"

#include "vwait/av.h"
#include "vwait/util/cq.h"
#include "vwait/util/enosys.h"
#include "vwait/vwait.h"

#include <arpa/inet.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>

namespace vwait
{

namespace
{

constexpr const char ud_scheme[] = "fi_addr_ib_ud://";

bool ipv4_mapped(const union ibv_gid &g) noexcept
{
	static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	return memcmp(g.raw, prefix, sizeof(prefix)) == 0;
}

} // namespace

std::string ud_name_str(const ud_name &n)
{
	char gid[INET6_ADDRSTRLEN] = "";
	inet_ntop(AF_INET6, n.gid, gid, sizeof(gid));
	char buf[128];
	snprintf(buf, sizeof(buf), "%s[%s]:%" PRIu32 ":0x%" PRIx32 ":%u", ud_scheme, gid, n.qpn,
	         n.qkey, static_cast<unsigned>(n.lid));
	return buf;
}

bool ud_name_parse(const char *s, ud_name *out) noexcept
{
	if (!s || strncmp(s, ud_scheme, sizeof(ud_scheme) - 1) != 0)
		return false;
	s += sizeof(ud_scheme) - 1;
	if (*s != '[')
		return false;
	const char *close = strchr(s, ']');
	if (!close || close - s - 1 >= INET6_ADDRSTRLEN)
		return false;
	char gid[INET6_ADDRSTRLEN];
	memcpy(gid, s + 1, static_cast<size_t>(close - s - 1));
	gid[close - s - 1] = '\0';
	ud_name n = {};
	if (inet_pton(AF_INET6, gid, n.gid) != 1)
		return false;
	unsigned long qpn = 0, qkey = 0, lid = 0;
	int used = 0;
	if (sscanf(close + 1, ":%lu:%li:%lu%n", &qpn, reinterpret_cast<long *>(&qkey), &lid,
	           &used) != 3 ||
	    close[1 + used] != '\0' || qpn > 0xffffff || qkey > UINT32_MAX || lid > UINT16_MAX)
		return false;
	n.qpn = static_cast<uint32_t>(qpn);
	n.qkey = static_cast<uint32_t>(qkey);
	n.lid = static_cast<uint16_t>(lid);
	*out = n;
	return true;
}

void grh_source_gid(const void *grh, uint8_t gid[16]) noexcept
{
	/* The GRH's source GID sits at bytes 8..23. RoCE v2 over IPv4 leaves the first 20 bytes
	 * zero and puts the IPv4 header in the last 20: the GID is then ::ffff:<source IP>. */
	const auto *p = static_cast<const uint8_t *>(grh);
	static const uint8_t zero[20] = {};
	if (memcmp(p, zero, sizeof(zero)) == 0) {
		memset(gid, 0, 10);
		gid[10] = gid[11] = 0xff;
		memcpy(gid + 12, p + 20 + 12, 4);
	} else {
		memcpy(gid, p + 8, 16);
	}
}

int ud_local_gid(struct ibv_context *ctx, uint8_t port, union ibv_gid *gid, int *index) noexcept
{
	struct ibv_port_attr pa;
	if (ibv_query_port(ctx, port, &pa) != 0)
		return -FI_ENODEV;
	int first = -1;
	union ibv_gid g0 = {};
	for (int i = 0; i < pa.gid_tbl_len; i++) {
		union ibv_gid g;
		if (ibv_query_gid(ctx, port, i, &g) != 0)
			continue;
		static const union ibv_gid zero = {};
		if (memcmp(g.raw, zero.raw, sizeof(g.raw)) == 0)
			continue;
		if (ipv4_mapped(g)) {
			*gid = g;
			*index = i;
			return 0;
		}
		if (first < 0) {
			first = i;
			g0 = g;
		}
	}
	if (first < 0)
		return -FI_ENODATA;
	*gid = g0;
	*index = first;
	return 0;
}

int ud_local_port(struct ibv_context *ctx, uint8_t *port, union ibv_gid *gid, int *index,
                  uint16_t *lid) noexcept
{
	struct ibv_device_attr da;
	if (ibv_query_device(ctx, &da) != 0)
		return -FI_ENODEV;
	for (uint8_t p = 1; p <= da.phys_port_cnt; p++) {
		struct ibv_port_attr pa;
		if (ibv_query_port(ctx, p, &pa) != 0 || pa.state != IBV_PORT_ACTIVE)
			continue;
		if (ud_local_gid(ctx, p, gid, index) != 0)
			continue;
		*port = p;
		*lid = pa.lid;
		return 0;
	}
	return -FI_ENODATA;
}

av::av(domain *dom, const struct fi_av_attr &attr, uint8_t port, int sgid_index)
    : domain_(dom), type_(attr.type == FI_AV_UNSPEC ? FI_AV_MAP : attr.type), port_(port),
      sgid_index_(sgid_index)
{
	table_.reserve(attr.count);
}

av::~av()
{
	for (entry &e : table_)
		if (e.ah)
			ibv_destroy_ah(e.ah);
}

av::peer av::key(const uint8_t *gid, uint32_t qpn) noexcept
{
	peer p;
	memcpy(&p.gid_hi, gid, 8);
	memcpy(&p.gid_lo, gid + 8, 8);
	p.qpn = qpn;
	return p;
}

int av::insert_one(const ud_name &n, fi_addr_t *out) noexcept
{
	if (n.qpn == 0 || n.qpn > 0xffffff) {
		FI_WARN(&prov, FI_LOG_AV, "fi_av_insert: %s has no valid QPN\n",
		        ud_name_str(n).c_str());
		return -FI_EINVAL;
	}
	struct ibv_ah_attr a = {};
	a.is_global = 1;
	memcpy(a.grh.dgid.raw, n.gid, sizeof(n.gid));
	a.grh.sgid_index = static_cast<uint8_t>(sgid_index_);
	a.grh.hop_limit = 64;
	a.dlid = n.lid;
	a.port_num = port_;
	struct ibv_ah *ah = ibv_create_ah(domain_->pd(), &a);
	if (!ah) {
		int ret = verbs::errno_code();
		FI_WARN(&prov, FI_LOG_AV, "fi_av_insert: ibv_create_ah(%s): %s\n",
		        ud_name_str(n).c_str(), fi_strerror(-ret));
		return ret;
	}
	fi_addr_t idx = table_.size();
	table_.push_back(entry{n, ah});
	by_name_[key(n.gid, n.qpn)] = idx;
	if (out)
		*out = idx;
	return 0;
}

int av::insert(const void *addr, size_t count, fi_addr_t *fi_addr, uint64_t flags) noexcept
{
	if (flags & ~static_cast<uint64_t>(FI_MORE | FI_SYNC_ERR)) {
		FI_WARN(&prov, FI_LOG_AV, "fi_av_insert: flags 0x%" PRIx64 " not supported\n",
		        flags);
		return -FI_EBADFLAGS;
	}
	if (count && !addr) {
		FI_WARN(&prov, FI_LOG_AV, "fi_av_insert: addr is NULL with count %zu\n", count);
		return -FI_EINVAL;
	}
	return guard([&] {
		util::lock_guard<util::mutex> lock(mutex_);
		int done = 0;
		auto *names = static_cast<const ud_name *>(addr);
		for (size_t i = 0; i < count; i++) {
			ud_name n;
			memcpy(&n, &names[i], sizeof(n));
			int ret = insert_one(n, fi_addr ? &fi_addr[i] : nullptr);
			if (ret == 0) {
				done++;
				continue;
			}
			if (fi_addr)
				fi_addr[i] = FI_ADDR_NOTAVAIL;
		}
		return done;
	});
}

int av::insertsvc(const char *node, const char *service, fi_addr_t *fi_addr,
                  uint64_t flags) noexcept
{
	ud_name n;
	if (!ud_name_parse(node, &n)) {
		FI_WARN(&prov, FI_LOG_AV,
		        "fi_av_insertsvc: node \"%s\" is not a fi_addr_ib_ud:// name (vwait has no "
		        "name service)\n",
		        node ? node : "(null)");
		return -FI_EINVAL;
	}
	if (service) {
		char *end = nullptr;
		unsigned long svc = strtoul(service, &end, 10);
		if (!*service || *end || svc > UINT16_MAX) {
			FI_WARN(&prov, FI_LOG_AV, "fi_av_insertsvc: service \"%s\" is no number\n",
			        service);
			return -FI_EINVAL;
		}
		n.service = static_cast<uint16_t>(svc);
	}
	return insert(&n, 1, fi_addr, flags);
}

int av::remove(fi_addr_t *fi_addr, size_t count, uint64_t flags) noexcept
{
	if (flags) {
		FI_WARN(&prov, FI_LOG_AV, "fi_av_remove: flags 0x%" PRIx64 " must be 0\n", flags);
		return -FI_EBADFLAGS;
	}
	if (count && !fi_addr) {
		FI_WARN(&prov, FI_LOG_AV, "fi_av_remove: fi_addr is NULL with count %zu\n", count);
		return -FI_EINVAL;
	}
	util::lock_guard<util::mutex> lock(mutex_);
	for (size_t i = 0; i < count; i++) {
		if (fi_addr[i] >= table_.size() || !table_[fi_addr[i]].ah) {
			FI_WARN(&prov, FI_LOG_AV,
			        "fi_av_remove: fi_addr %" PRIu64 " not in the AV\n",
			        static_cast<uint64_t>(fi_addr[i]));
			return -FI_EINVAL;
		}
	}
	for (size_t i = 0; i < count; i++) {
		entry &e = table_[fi_addr[i]];
		auto it = by_name_.find(key(e.name.gid, e.name.qpn));
		if (it != by_name_.end() && it->second == fi_addr[i])
			by_name_.erase(it);
		ibv_destroy_ah(e.ah);
		e.ah = nullptr;
	}
	return 0;
}

int av::lookup(fi_addr_t fi_addr, void *addr, size_t *addrlen) noexcept
{
	if (!addrlen) {
		FI_WARN(&prov, FI_LOG_AV, "fi_av_lookup: addrlen is NULL\n");
		return -FI_EINVAL;
	}
	util::lock_guard<util::mutex> lock(mutex_);
	if (fi_addr >= table_.size() || !table_[fi_addr].ah) {
		FI_WARN(&prov, FI_LOG_AV, "fi_av_lookup: fi_addr %" PRIu64 " not in the AV\n",
		        static_cast<uint64_t>(fi_addr));
		return -FI_EINVAL;
	}
	size_t have = *addrlen;
	*addrlen = sizeof(ud_name);
	if (addr)
		memcpy(addr, &table_[fi_addr].name, std::min(have, sizeof(ud_name)));
	return have < sizeof(ud_name) ? -FI_ETOOSMALL : 0;
}

bool av::dest(fi_addr_t fi_addr, struct ibv_ah **ah, uint32_t *qpn, uint32_t *qkey) noexcept
{
	util::lock_guard<util::mutex> lock(mutex_);
	if (fi_addr >= table_.size() || !table_[fi_addr].ah)
		return false;
	const entry &e = table_[fi_addr];
	*ah = e.ah;
	*qpn = e.name.qpn;
	*qkey = e.name.qkey;
	return true;
}

fi_addr_t av::source(const uint8_t *gid, uint32_t qpn) noexcept
{
	try {
		util::lock_guard<util::mutex> lock(mutex_);
		auto it = by_name_.find(key(gid, qpn));
		return it == by_name_.end() ? FI_ADDR_NOTAVAIL : it->second;
	} catch (...) {
		return FI_ADDR_NOTAVAIL;
	}
}

uint64_t av::source_of(void *arg, const void *grh, uint32_t src_qp) noexcept
{
	uint8_t gid[16];
	grh_source_gid(grh, gid);
	return static_cast<av *>(arg)->source(gid, src_qp);
}

namespace
{

using av_box = util::fid_box<struct fid_av, av>;

av *av_of(struct fid_av *fid) noexcept
{
	return av_box::of(fid)->obj;
}

int av_close(struct fid *fid) noexcept
{
	auto *box = av_box::of(fid);
	if (box->obj->busy()) {
		FI_WARN(&prov, FI_LOG_AV, "fi_close(av): endpoints are still bound to it\n");
		return -FI_EBUSY;
	}
	delete box->obj;
	delete box;
	return FI_SUCCESS;
}

int av_bind(struct fid *, struct fid *, uint64_t) noexcept
{
	FI_WARN(&prov, FI_LOG_AV, "fi_av_bind: asynchronous AVs (an EQ) are not supported\n");
	return -FI_ENOSYS;
}

int av_insert(struct fid_av *fid, const void *addr, size_t count, fi_addr_t *fi_addr,
              uint64_t flags, void *) noexcept
{
	return av_of(fid)->insert(addr, count, fi_addr, flags);
}

int av_insertsvc(struct fid_av *fid, const char *node, const char *service, fi_addr_t *fi_addr,
                 uint64_t flags, void *) noexcept
{
	return av_of(fid)->insertsvc(node, service, fi_addr, flags);
}

int av_insertsym(struct fid_av *, const char *, size_t, const char *, size_t, fi_addr_t *, uint64_t,
                 void *) noexcept
{
	FI_WARN(&prov, FI_LOG_AV,
	        "fi_av_insertsym: UD names are no node/service ranges (use fi_av_insert)\n");
	return -FI_ENOSYS;
}

int av_remove(struct fid_av *fid, fi_addr_t *fi_addr, size_t count, uint64_t flags) noexcept
{
	return av_of(fid)->remove(fi_addr, count, flags);
}

int av_lookup(struct fid_av *fid, fi_addr_t fi_addr, void *addr, size_t *addrlen) noexcept
{
	return av_of(fid)->lookup(fi_addr, addr, addrlen);
}

const char *av_straddr(struct fid_av *, const void *addr, char *buf, size_t *len) noexcept
{
	if (!addr || !buf || !len)
		return nullptr;
	try {
		ud_name n;
		memcpy(&n, addr, sizeof(n));
		std::string s = ud_name_str(n);
		if (*len)
			snprintf(buf, *len, "%s", s.c_str());
		*len = s.size() + 1;
		return buf;
	} catch (...) {
		return nullptr;
	}
}

struct fi_ops av_fi_ops = {
    .size = sizeof(struct fi_ops),
    .close = av_close,
    .bind = av_bind,
    .control = util::unsupported{},
    .ops_open = util::unsupported{},
    .tostr = util::unsupported{},
    .ops_set = util::unsupported{},
};

struct fi_ops_av av_ops = {
    .size = sizeof(struct fi_ops_av),
    .insert = av_insert,
    .insertsvc = av_insertsvc,
    .insertsym = av_insertsym,
    .remove = av_remove,
    .lookup = av_lookup,
    .straddr = av_straddr,
    .av_set = util::unsupported{},
};

} // namespace

av *verbs_av_of(struct fid *fid) noexcept
{
	return av_box::checked(fid, FI_CLASS_AV, &av_fi_ops);
}

int av_open(struct fid_domain *domain_fid, struct fi_av_attr *attr, struct fid_av **out,
            void *context) noexcept
{
	if (!domain_fid || !attr || !out) {
		FI_WARN(&prov, FI_LOG_AV, "fi_av_open: %s is NULL\n",
		        !domain_fid ? "domain" : (!attr ? "attr" : "av"));
		return -FI_EINVAL;
	}
	*out = nullptr;
	int type = util::raw_enum(attr->type);
	if (type != FI_AV_UNSPEC && type != FI_AV_MAP && type != FI_AV_TABLE) {
		FI_WARN(&prov, FI_LOG_AV, "fi_av_open: type %d unknown\n", type);
		return -FI_EINVAL;
	}
	if (attr->name || attr->rx_ctx_bits || attr->ep_per_node > 1 ||
	    (attr->flags & (FI_EVENT | FI_SYMMETRIC | FI_READ))) {
		FI_WARN(
		    &prov, FI_LOG_AV,
		    "fi_av_open: named/shared AVs, rx_ctx_bits, FI_EVENT, FI_SYMMETRIC and FI_READ "
		    "are not supported\n");
		return -FI_ENOSYS;
	}
	if (attr->flags & ~static_cast<uint64_t>(FI_EVENT | FI_SYMMETRIC | FI_READ)) {
		FI_WARN(&prov, FI_LOG_AV, "fi_av_open: flags 0x%" PRIx64 " unknown\n", attr->flags);
		return -FI_EBADFLAGS;
	}
	domain *dom = domain_of(domain_fid);
	return guard([&] {
		uint8_t port = 0;
		union ibv_gid gid;
		int index = 0;
		uint16_t lid = 0;
		if (int ret = ud_local_port(dom->context(), &port, &gid, &index, &lid)) {
			FI_WARN(&prov, FI_LOG_AV, "fi_av_open: %s has no active port with a GID\n",
			        dom->name());
			return ret;
		}
		auto obj = std::make_unique<av>(dom, *attr, port, index);
		av_box::hand_out(obj, FI_CLASS_AV, context, &av_fi_ops, out,
		                 [](struct fid_av &f) { f.ops = &av_ops; });
		return FI_SUCCESS;
	});
}

} // namespace vwait
