/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* vwait address vectors for FI_EP_DGRAM: UD endpoint names (FI_ADDR_IB_UD) resolved into
 * verbs address handles, looked up by fi_addr_t on every send and by (GID, QPN) on every
 * receive of an endpoint with FI_SOURCE. */
#ifndef VWAIT_AV_H
#define VWAIT_AV_H

#include "vwait/domain.h"
#include "vwait/util/fid.h"
#include "vwait/util/held.h"
#include "vwait/util/thread_safety.h"

#include <infiniband/verbs.h>
#include <rdma/fi_domain.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace vwait
{

/* A UD endpoint's name: 32 bytes, the size FI_ADDR_IB_UD has (uint64_t[4]). qkey and service
 * travel with it; lid matters on InfiniBand only (RoCE routes by GID). */
struct ud_name {
	uint8_t gid[16];
	uint32_t qpn;
	uint32_t qkey;
	uint16_t lid;
	uint16_t service;
	uint8_t pad[4];
};
static_assert(sizeof(ud_name) == 32, "FI_ADDR_IB_UD is 32 bytes");

/* FI_MSG_PREFIX: every DGRAM buffer starts with room for the 40-byte GRH that UD receives
 * write there (struct ibv_grh); sends skip it. */
constexpr size_t ud_prefix_size = 40;
/* The Q_Key of every vwait UD QP (a datagram with another is dropped by the receiver). */
constexpr uint32_t ud_qkey = 0x76776169;

/* "fi_addr_ib_ud://[<gid>]:<qpn>:<qkey>:<lid>" (fi_av_straddr's form), and back: false when
 * s is not of that form. */
std::string ud_name_str(const ud_name &n);
bool ud_name_parse(const char *s, ud_name *out) noexcept;

/* The sender's GID in the GRH a UD receive wrote into its buffer's prefix. */
void grh_source_gid(const void *grh, uint8_t gid[16]) noexcept;

/* The GID UD endpoints of this port send from (and so are named by): the first IPv4-mapped
 * one (RoCE v2 over IPv4, routable), else index 0. 0 or a negative FI_E* code. */
int ud_local_gid(struct ibv_context *ctx, uint8_t port, union ibv_gid *gid, int *index) noexcept;
/* The first active port of ctx with its UD GID and LID (0 or a negative FI_E* code). */
int ud_local_port(struct ibv_context *ctx, uint8_t *port, union ibv_gid *gid, int *index,
                  uint16_t *lid) noexcept;

/* An address vector: a table of UD names with their address handles. FI_AV_MAP and
 * FI_AV_TABLE both hand out the index as fi_addr_t (a removed index is not reused). */
class av
{
public:
	av(domain *dom, const struct fi_av_attr &attr, uint8_t port, int sgid_index);
	~av();
	av(const av &) = delete;
	av &operator=(const av &) = delete;

	int insert(const void *addr, size_t count, fi_addr_t *fi_addr, uint64_t flags) noexcept;
	int insertsvc(const char *node, const char *service, fi_addr_t *fi_addr,
	              uint64_t flags) noexcept;
	int remove(fi_addr_t *fi_addr, size_t count, uint64_t flags) noexcept;
	int lookup(fi_addr_t fi_addr, void *addr, size_t *addrlen) noexcept;

	/* A send to fi_addr: its handle, QPN and Q_Key; false when fi_addr names no entry. */
	bool dest(fi_addr_t fi_addr, struct ibv_ah **ah, uint32_t *qpn, uint32_t *qkey) noexcept;
	/* The fi_addr_t of the sender of a datagram (FI_ADDR_NOTAVAIL when not in the AV). */
	fi_addr_t source(const uint8_t *gid, uint32_t qpn) noexcept;
	/* For wr_ring::source: grh is the receive buffer's prefix. */
	static uint64_t source_of(void *arg, const void *grh, uint32_t src_qp) noexcept;

	void hold() noexcept { refs_.fetch_add(1, std::memory_order_relaxed); }
	void unhold() noexcept { refs_.fetch_sub(1, std::memory_order_release); }
	bool busy() const noexcept { return refs_.load(std::memory_order_acquire) != 0; }
	domain *parent() const noexcept { return domain_.get(); }
	enum fi_av_type type() const noexcept { return type_; }

private:
	struct entry {
		ud_name name;
		struct ibv_ah *ah = nullptr;
	};
	/* (GID, QPN): who sent a datagram; no allocation to look one up */
	struct peer {
		uint64_t gid_hi, gid_lo;
		uint32_t qpn;
		bool operator==(const peer &o) const noexcept
		{
			return gid_hi == o.gid_hi && gid_lo == o.gid_lo && qpn == o.qpn;
		}
	};
	struct peer_hash {
		size_t operator()(const peer &p) const noexcept
		{
			return std::hash<uint64_t>()(p.gid_lo ^ (p.gid_hi * 0x9e3779b97f4a7c15ULL) ^
			                             (uint64_t{p.qpn} << 32));
		}
	};
	static peer key(const uint8_t *gid, uint32_t qpn) noexcept;
	int insert_one(const ud_name &n, fi_addr_t *out) noexcept VWAIT_REQUIRES(mutex_);

	util::held<domain> domain_;
	enum fi_av_type type_;
	uint8_t port_;
	int sgid_index_;
	util::mutex mutex_{lock_level::av_table};
	std::vector<entry> table_ VWAIT_GUARDED_BY(mutex_); /* ah == nullptr: removed */
	std::unordered_map<peer, fi_addr_t, peer_hash> by_name_ VWAIT_GUARDED_BY(mutex_);
	std::atomic<int> refs_{0};
};

/* The vwait AV behind a fid handed to fi_ep_bind (nullptr for anything else). */
av *verbs_av_of(struct fid *fid) noexcept;

/* struct fi_ops_domain::av_open */
int av_open(struct fid_domain *domain, struct fi_av_attr *attr, struct fid_av **av,
            void *context) noexcept;

} // namespace vwait

#endif
