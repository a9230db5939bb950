/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* vwait memory regions: ibv_reg_mr on the domain's protection domain. fi_mr_desc is the
 * ibv_mr (its lkey), fi_mr_key the rkey (FI_MR_PROV_KEY, FI_MR_VIRT_ADDR). With the
 * registration cache (FI_VWAIT_MR_CACHE, util/mr_cache.h), the ibv_mr is a cached
 * registration of the pages around the buffer, shared by every MR it serves, and fi_close
 * gives back a reference. A registration with no context (ofi_rxm's, for every rendezvous
 * buffer) is handed the cached registration's own fid_mr, as libfabric's cache does for
 * upstream verbs: a hit allocates nothing. One with a context gets an fid_mr of its own,
 * which carries it. */
#include "config.h"

#include "vwait/domain.h"
#include "vwait/nic.h"
#include "vwait/util/enosys.h"
#include "vwait/util/held.h"
#include "vwait/util/mem_monitor.h"
#include "vwait/vwait.h"

#include <atomic>
#include <cinttypes>
#include <cstring>
#include <memory>
#include <unistd.h>

namespace vwait
{

namespace
{

/* What the cache keeps for one registration (its handle): the ibv_mr, and the fid_mr that
 * every registration with no context which it covers is handed. That fid's fi_close gives
 * back one reference (cached_close); the last one may destroy this. Made by cache_reg,
 * freed by cache_dereg. */
struct cached_reg;
using cached_box = util::fid_box<struct fid_mr, cached_reg>;
struct cached_reg {
	struct ibv_mr *hw = nullptr;
	domain *dom = nullptr;
	/* the cache's entry for it, known from the first hand-out on (the same value from every
	 * thread that stores it) */
	std::atomic<util::mr_cache::entry *> entry{nullptr};
	cached_box box{};
};

struct ibv_mr *cached_hw(util::mr_cache::entry *e) noexcept
{
	return static_cast<cached_reg *>(util::mr_cache::handle(e))->hw;
}

int cached_close(struct fid *fid) noexcept
{
	cached_reg *r = cached_box::of(fid)->obj;
	domain *dom = r->dom;
	dom->mr_cache()->put(r->entry.load(std::memory_order_relaxed)); /* may free r */
	dom->unhold();
	return FI_SUCCESS;
}

struct fi_ops cached_fi_ops = util::fi_ops_with(cached_close);

class mr
{
public:
	mr(domain *dom, verbs::mr_ptr hw) : domain_(dom), hw_(std::move(hw)) {}
	/* a reference on a cached registration, given back at close */
	mr(domain *dom, util::mr_cache::entry *cached)
	    : domain_(dom), cache_(dom->mr_cache()), cached_(cached)
	{
	}
	~mr()
	{
		if (cached_)
			cache_->put(cached_);
	}
	mr(const mr &) = delete;
	mr &operator=(const mr &) = delete;

	struct ibv_mr *hw() const noexcept { return cached_ ? cached_hw(cached_) : hw_.get(); }

private:
	util::held<domain> domain_; /* first: released last */
	verbs::mr_ptr hw_;
	util::mr_cache *cache_ = nullptr;
	util::mr_cache::entry *cached_ = nullptr;
};

using mr_box = util::fid_box<struct fid_mr, mr>;

int mr_close(struct fid *fid) noexcept
{
	auto *box = mr_box::of(fid);
	delete box->obj;
	delete box;
	return FI_SUCCESS;
}

struct fi_ops mr_fi_ops = util::fi_ops_with(mr_close);

constexpr uint64_t access_bits =
    FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;

int access_to_ibv(uint64_t access, bool iwarp)
{
	if (access == 0)
		access = access_bits;
	int ibv = 0;
	/* local writes: receives, the target buffer of a read, and remote writes */
	if (access & (FI_RECV | FI_READ | FI_REMOTE_WRITE))
		ibv |= IBV_ACCESS_LOCAL_WRITE;
	/* iWARP carries a read's response as a tagged write into the reader's sink, which the
	 * device checks as a remote write (RFC 5040; ibv_post_send(3): IBV_WR_RDMA_READ) */
	if (iwarp && (access & FI_READ))
		ibv |= IBV_ACCESS_REMOTE_WRITE;
	if (access & FI_REMOTE_READ)
		ibv |= IBV_ACCESS_REMOTE_READ;
	if (access & FI_REMOTE_WRITE)
		ibv |= IBV_ACCESS_REMOTE_WRITE;
	return ibv;
}

int reg(struct fid *fid, const void *buf, size_t len, uint64_t access, uint64_t flags,
        struct fid_mr **out, void *context) noexcept
{
	if (!fid || !out) {
		FI_WARN(&prov, FI_LOG_MR, "fi_mr_reg: %s is NULL\n", !fid ? "domain" : "mr");
		return -FI_EINVAL;
	}
	*out = nullptr;
	if (fid->fclass != FI_CLASS_DOMAIN) {
		FI_WARN(&prov, FI_LOG_MR, "fi_mr_reg: fid class %zu is not a domain\n",
		        fid->fclass);
		return -FI_EINVAL;
	}
	if (access & ~access_bits) {
		FI_WARN(&prov, FI_LOG_MR, "fi_mr_reg: access 0x%" PRIx64 " has unknown bits\n",
		        access);
		return -FI_EINVAL;
	}
#ifdef FI_MR_DMABUF
	if (flags & FI_MR_DMABUF) {
		FI_WARN(&prov, FI_LOG_MR, "fi_mr_reg: FI_MR_DMABUF is not supported\n");
		return -FI_EBADFLAGS;
	}
#endif
	/* other flags (FI_RMA_EVENT, hints of layered providers) change nothing here */
	(void)flags;
	if (!buf && len) {
		FI_WARN(&prov, FI_LOG_MR, "fi_mr_reg: buf is NULL with len %zu\n", len);
		return -FI_EINVAL;
	}
	auto *dom = domain_box::of(fid)->obj;
	const int ibv_access =
	    access_to_ibv(access, dom->context()->device->transport_type == IBV_TRANSPORT_IWARP);
	return guard([&] {
		/* the cache, unless this is a fork child of the process that made it */
		util::mr_cache *cache = dom->mr_cache();
		if (cache && len && cache->usable()) {
			util::mr_cache::entry *e = nullptr;
			if (int ret = cache->get(buf, len, static_cast<uint64_t>(ibv_access), &e))
				return ret;
			if (!context) {
				auto *r = static_cast<cached_reg *>(util::mr_cache::handle(e));
				r->entry.store(e, std::memory_order_relaxed);
				dom->hold(); /* cached_close lets go */
				*out = &r->box.fid;
				return FI_SUCCESS;
			}
			std::unique_ptr<mr> obj;
			try {
				obj = std::make_unique<mr>(dom, e);
			} catch (...) {
				cache->put(e);
				throw;
			}
			mr_box::hand_out(obj, FI_CLASS_MR, context, &mr_fi_ops, out,
			                 [&](struct fid_mr &f) {
				                 f.mem_desc = obj->hw();
				                 f.key = obj->hw()->rkey;
			                 });
			return FI_SUCCESS;
		}
		verbs::mr_ptr hw(ibv_reg_mr(dom->pd(), const_cast<void *>(buf), len, ibv_access));
		if (!hw) {
			int ret = verbs::errno_code();
			FI_WARN(&prov, FI_LOG_MR, "ibv_reg_mr(%p, %zu): %s\n", buf, len,
			        fi_strerror(-ret));
			return ret;
		}
		auto obj = std::make_unique<mr>(dom, std::move(hw));
		mr_box::hand_out(obj, FI_CLASS_MR, context, &mr_fi_ops, out, [&](struct fid_mr &f) {
			f.mem_desc = obj->hw();
			f.key = obj->hw()->rkey;
		});
		return FI_SUCCESS;
	});
}

/* the cache's callbacks: ctx is the domain, the handle a cached_reg */
int cache_reg(void *ctx, uintptr_t start, size_t len, uint64_t access, void **handle) noexcept
{
	auto *dom = static_cast<domain *>(ctx);
	auto *r = new (std::nothrow) cached_reg;
	if (!r)
		return -FI_ENOMEM;
	r->hw =
	    ibv_reg_mr(dom->pd(), reinterpret_cast<void *>(start), len, static_cast<int>(access));
	if (!r->hw) {
		int ret = verbs::errno_code();
		FI_WARN(&prov, FI_LOG_MR, "ibv_reg_mr(0x%" PRIxPTR ", %zu): %s\n", start, len,
		        fi_strerror(-ret));
		delete r;
		return ret;
	}
	r->dom = dom;
	r->box.obj = r;
	r->box.fid.fid.fclass = FI_CLASS_MR;
	r->box.fid.fid.ops = &cached_fi_ops;
	r->box.fid.mem_desc = r->hw;
	r->box.fid.key = r->hw->rkey;
	*handle = r;
	return 0;
}

void cache_dereg(void *, void *handle) noexcept
{
	auto *r = static_cast<cached_reg *>(handle);
	verbs::mr_deleter{}(r->hw);
	delete r;
}

/* libfabric's default bound: total memory / CPUs / 2 */
size_t default_max_size() noexcept
{
	const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	if (pages <= 0 || page <= 0)
		return size_t{1} << 30;
	if (cpus <= 0)
		cpus = 1;
	return static_cast<size_t>(pages) * static_cast<size_t>(page) / static_cast<size_t>(cpus) /
	       2;
}

/* wait_for_repeat: a process that registers each buffer once (a poll-only one, SOS's heap)
 * keeps nothing and never starts the monitor's thread; one that registers the same buffer
 * for every message (rxm's rendezvous) keeps from its second registration on */
util::mr_cache_limits cache_limits() noexcept
{
	const params &p = get_params();
	return {p.mr_cache_max_count,
	        p.mr_cache_max_size ? p.mr_cache_max_size : default_max_size(), true};
}

std::atomic<bool> warned_monitor{false};

} // namespace

bool mr_cache_status(const char **reason) noexcept
{
	const params &p = get_params();
	if (!p.mr_cache) {
		*reason = params::mr_cache_default ? "FI_VWAIT_MR_CACHE=0"
		                                   : "FI_VWAIT_MR_CACHE=0, the default";
		return false;
	}
	if (p.mr_cache_monitor_disabled) {
		*reason = "FI_MR_CACHE_MONITOR=disabled";
		return false;
	}
	if (p.mr_cache_max_count == 0) {
		*reason = "FI_MR_CACHE_MAX_COUNT=0";
		return false;
	}
	const char *why = nullptr;
	if (util::mem_monitor::probe(&why) != 0) {
		*reason = why;
		if (!warned_monitor.exchange(true))
			FI_WARN(&prov, FI_LOG_MR,
			        "no registration cache: %s; every fi_mr_reg registers anew\n", why);
		return false;
	}
	*reason = nullptr;
	return true;
}

std::unique_ptr<util::mr_cache> mr_cache_open(domain *dom) noexcept
{
	const char *reason = nullptr;
	if (!mr_cache_status(&reason))
		return nullptr;
	if (util::mem_monitor::instance().acquire(&reason) != 0) {
		FI_WARN(&prov, FI_LOG_MR, "no registration cache for this domain: %s\n", reason);
		return nullptr;
	}
	std::unique_ptr<util::mr_cache> cache(
	    new (std::nothrow) util::mr_cache(util::mr_cache_ops{cache_reg, cache_dereg, dom},
	                                      cache_limits(), &util::mem_monitor::instance()));
	if (!cache)
		util::mem_monitor::instance().release();
	return cache;
}

void mr_cache_close(const char *domain_name, std::unique_ptr<util::mr_cache> cache) noexcept
{
	if (!cache)
		return;
	const util::mr_cache_stats st = cache->stats();
	FI_INFO(&prov, FI_LOG_MR,
	        "%s: registration cache: %" PRIu64 " hits, %" PRIu64 " misses, %" PRIu64
	        " registrations (%" PRIu64 " not kept), %" PRIu64 " invalidated, %" PRIu64
	        " evicted, %" PRIu64 " flushes; %zu kept (%zu bytes) at close; %s\n",
	        domain_name, st.hits, st.misses, st.registered, st.not_kept, st.invalidated,
	        st.evicted, st.flushes, st.count, st.bytes,
	        st.armed ? "armed" : "not armed (no registration was repeated)");
	cache.reset();
	util::mem_monitor::instance().release();
}

void mr_cache_tostr(char *buf, size_t len) noexcept
{
	const char *reason = nullptr;
	if (mr_cache_status(&reason)) {
		const util::mr_cache_limits l = cache_limits();
		nic_append(buf, len,
		           "\t\tvwait_mr_cache: on (monitor: %s; at most %zu registrations, %zu "
		           "bytes; keeps from the first repeated registration)\n",
		           util::mem_monitor::mode(), l.max_count, l.max_bytes);
	} else {
		nic_append(buf, len, "\t\tvwait_mr_cache: off (%s)\n", reason);
	}
}

int mr_reg(struct fid *fid, const void *buf, size_t len, uint64_t access, uint64_t offset,
           uint64_t requested_key, uint64_t flags, struct fid_mr **mr, void *context) noexcept
{
	(void)offset;
	(void)requested_key; /* FI_MR_PROV_KEY: the key is the device's */
	return reg(fid, buf, len, access, flags, mr, context);
}

int mr_regv(struct fid *fid, const struct iovec *iov, size_t count, uint64_t access,
            uint64_t offset, uint64_t requested_key, uint64_t flags, struct fid_mr **mr,
            void *context) noexcept
{
	if (count > 1 || (count == 1 && !iov)) {
		FI_WARN(&prov, FI_LOG_MR, "fi_mr_regv: count %zu (mr_iov_limit is 1)\n", count);
		return -FI_EINVAL;
	}
	return mr_reg(fid, count ? iov[0].iov_base : nullptr, count ? iov[0].iov_len : 0, access,
	              offset, requested_key, flags, mr, context);
}

int mr_regattr(struct fid *fid, const struct fi_mr_attr *attr, uint64_t flags,
               struct fid_mr **mr) noexcept
{
	if (!attr) {
		FI_WARN(&prov, FI_LOG_MR, "fi_mr_regattr: attr is NULL\n");
		return -FI_EINVAL;
	}
	if (attr->iface != FI_HMEM_SYSTEM) {
		FI_WARN(&prov, FI_LOG_MR, "fi_mr_regattr: iface %d is not FI_HMEM_SYSTEM\n",
		        static_cast<int>(attr->iface));
		return -FI_ENOSYS;
	}
	return mr_regv(fid, attr->mr_iov, attr->iov_count, attr->access, attr->offset,
	               attr->requested_key, flags, mr, attr->context);
}

} // namespace vwait
