/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* vwait passive endpoints: an rdma_cm id that listens; each connection request becomes an
 * FI_CONNREQ event whose fi_info carries the new id as its handle. A passive endpoint that does
 * not listen can also hand its bound id to an active endpoint (fi_endpoint with info->handle the
 * passive endpoint, fi_endpoint(3)): the address reserved by fi_setname goes with it. */
#include "config.h"

#include "vwait/cm.h"
#include "vwait/ep.h"
#include "vwait/util/enosys.h"
#include "vwait/vwait.h"

#include <netinet/in.h>

#include <cstdlib>
#include <cstring>
#include <memory>

namespace vwait
{

pep::pep(fabric *fab, info_ptr info, verbs::cm_id_ptr id)
    : fabric_(fab), info_(std::move(info)), id_(std::move(id))
{
	id_->context = static_cast<cm_target *>(this);
	bound_ = rdma_get_local_addr(id_.get())->sa_family != 0;
}

pep::~pep()
{
	id_.reset();
}

struct fi_info *pep::connreq_info(struct rdma_cm_id *id) noexcept
{
	return connreq::new_info(info_.get(), id);
}

bool pep::given_away(const char *call) const noexcept
{
	if (id_)
		return false;
	FI_WARN(&prov, FI_LOG_EP_CTRL,
	        "%s: the passive endpoint gave its address to an active endpoint\n", call);
	return true;
}

/* rdma_migrate_id under mutex_, here and in restore_id: see rc_ep::migrate_to_eq (the EQ's
 * progress never takes an endpoint-level lock). */
int pep::take_id(verbs::cm_id_ptr *out) noexcept
{
	util::lock_guard<util::mutex> lock(mutex_);
	if (given_away("fi_endpoint(info->handle)"))
		return -FI_EINVAL;
	if (listening_) {
		FI_WARN(&prov, FI_LOG_EP_CTRL,
		        "fi_endpoint(info->handle): the passive endpoint listens\n");
		return -FI_EOPBADSTATE;
	}
	/* off the EQ's channel: the active endpoint resolves its route blocking and moves the id
	 * to its own EQ when it connects */
	if (eq_ && rdma_migrate_id(id_.get(), nullptr) != 0) {
		int ret = verbs::errno_code();
		FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_endpoint(info->handle): rdma_migrate_id: %s\n",
		        fi_strerror(-ret));
		return ret;
	}
	id_->context = nullptr;
	*out = std::move(id_);
	return FI_SUCCESS;
}

void pep::restore_id(verbs::cm_id_ptr id) noexcept
{
	util::lock_guard<util::mutex> lock(mutex_);
	id->context = static_cast<cm_target *>(this);
	if (eq_ && rdma_migrate_id(id.get(), eq_->channel()) != 0)
		FI_WARN(&prov, FI_LOG_EP_CTRL, "rdma_migrate_id back to the EQ: %s\n",
		        fi_strerror(-verbs::errno_code()));
	id_ = std::move(id);
}

int pep::bind(struct fid *bfid, uint64_t flags) noexcept
{
	if (!bfid) {
		FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_pep_bind: bfid is NULL\n");
		return -FI_EINVAL;
	}
	if (bfid->fclass != FI_CLASS_EQ) {
		FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_pep_bind: fid class %zu is not an EQ\n",
		        bfid->fclass);
		return -FI_EINVAL;
	}
	if (flags) {
		FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_pep_bind: flags 0x%llx must be 0\n",
		        static_cast<unsigned long long>(flags));
		return -FI_EBADFLAGS;
	}
	util::lock_guard<util::mutex> lock(mutex_);
	if (given_away("fi_pep_bind"))
		return -FI_EOPBADSTATE;
	if (eq_) {
		FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_pep_bind: already bound to an EQ\n");
		return -FI_EINVAL;
	}
	verbs_eq *q = util::object_of<verbs_eq>(bfid);
	if (!q) {
		FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_pep_bind: fid %p is not a vwait EQ\n",
		        static_cast<void *>(bfid));
		return -FI_EINVAL;
	}
	if (rdma_migrate_id(id_.get(), q->channel()) != 0) {
		int ret = verbs::errno_code();
		FI_WARN(&prov, FI_LOG_EP_CTRL, "rdma_migrate_id: %s\n", fi_strerror(-ret));
		return ret;
	}
	eq_.reset(q);
	return FI_SUCCESS;
}

int pep::listen() noexcept
{
	util::lock_guard<util::mutex> lock(mutex_);
	if (!eq_) {
		FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_listen: passive endpoint has no EQ bound\n");
		return -FI_ENOEQ;
	}
	if (given_away("fi_listen"))
		return -FI_EOPBADSTATE;
	if (listening_)
		return FI_SUCCESS;
	if (!bound_) {
		struct sockaddr_in any = {};
		any.sin_family = AF_INET;
		if (rdma_bind_addr(id_.get(), reinterpret_cast<struct sockaddr *>(&any)) != 0) {
			int ret = verbs::errno_code();
			FI_WARN(&prov, FI_LOG_EP_CTRL, "rdma_bind_addr(any): %s\n",
			        fi_strerror(-ret));
			return ret;
		}
		bound_ = true;
	}
	if (rdma_listen(id_.get(), 1024) != 0) {
		int ret = verbs::errno_code();
		FI_WARN(&prov, FI_LOG_EP_CTRL, "rdma_listen: %s\n", fi_strerror(-ret));
		return ret;
	}
	listening_ = true;
	return FI_SUCCESS;
}

int pep::getname(void *addr, size_t *addrlen) noexcept
{
	util::lock_guard<util::mutex> lock(mutex_);
	if (given_away("fi_getname"))
		return -FI_EOPBADSTATE;
	return copy_sockaddr(rdma_get_local_addr(id_.get()), addr, addrlen, "fi_getname");
}

int pep::setname(void *addr, size_t addrlen) noexcept
{
	if (!addr) {
		FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_setname: addr is NULL\n");
		return -FI_EINVAL;
	}
	if (check_sockaddr(addr, addrlen, FI_FORMAT_UNSPEC, "fi_setname: addr") != 0)
		return -FI_EINVAL;
	util::lock_guard<util::mutex> lock(mutex_);
	if (given_away("fi_setname"))
		return -FI_EOPBADSTATE;
	if (listening_) {
		FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_setname: passive endpoint already listens\n");
		return -FI_EOPBADSTATE;
	}
	/* an rdma_cm id binds once: a new name takes a new id */
	verbs::cm_id_ptr fresh;
	if (int ret = verbs::create_id(eq_ ? eq_->channel() : nullptr,
	                               static_cast<cm_target *>(this), &fresh))
		return ret;
	if (rdma_bind_addr(fresh.get(), static_cast<struct sockaddr *>(addr)) != 0) {
		int ret = verbs::errno_code();
		FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_setname: rdma_bind_addr: %s\n",
		        fi_strerror(-ret));
		return ret;
	}
	id_ = std::move(fresh);
	bound_ = true;
	return FI_SUCCESS;
}

int pep::reject(struct fid *handle, const void *param, size_t paramlen) noexcept
{
	connreq *req = connreq::of(handle);
	if (!req) {
		FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_reject: handle %p is not a connection request\n",
		        static_cast<void *>(handle));
		return -FI_EINVAL;
	}
	if (paramlen > cm_reject_data_max || (paramlen && !param)) {
		FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_reject: paramlen %zu (max %zu) or NULL param\n",
		        paramlen, cm_reject_data_max);
		return -FI_EINVAL;
	}
	/* refused or not, the handle is done (fi_cm(3): the application frees only the info) */
	std::unique_ptr<connreq> owned(req);
	return owned->reject(param, paramlen);
}

int pep::getopt(int level, int optname, void *optval, size_t *optlen) noexcept
{
	if (level != FI_OPT_ENDPOINT || optname != FI_OPT_CM_DATA_SIZE)
		return -FI_ENOPROTOOPT;
	if (!optval || !optlen || *optlen < sizeof(size_t)) {
		FI_WARN(&prov, FI_LOG_EP_CTRL,
		        "fi_getopt(FI_OPT_CM_DATA_SIZE): buffer too small\n");
		return -FI_ETOOSMALL;
	}
	*static_cast<size_t *>(optval) = cm_connect_data_max;
	*optlen = sizeof(size_t);
	return FI_SUCCESS;
}

namespace
{

using pep_box = util::fid_box<struct fid_pep, pep>;

pep *pep_of(struct fid *fid) noexcept
{
	return pep_box::of(fid)->obj;
}

int pep_close(struct fid *fid) noexcept
{
	auto *box = pep_box::of(fid);
	delete box->obj;
	delete box;
	return FI_SUCCESS;
}

int pep_bind(struct fid *fid, struct fid *bfid, uint64_t flags) noexcept
{
	return pep_of(fid)->bind(bfid, flags);
}

int pep_getopt(fid_t fid, int level, int optname, void *optval, size_t *optlen) noexcept
{
	return pep_of(fid)->getopt(level, optname, optval, optlen);
}

int pep_setname(fid_t fid, void *addr, size_t addrlen) noexcept
{
	return pep_of(fid)->setname(addr, addrlen);
}

int pep_getname(fid_t fid, void *addr, size_t *addrlen) noexcept
{
	return pep_of(fid)->getname(addr, addrlen);
}

int pep_listen(struct fid_pep *fid) noexcept
{
	return pep_box::of(fid)->obj->listen();
}

int pep_reject(struct fid_pep *fid, fid_t handle, const void *param, size_t paramlen) noexcept
{
	return pep_box::of(fid)->obj->reject(handle, param, paramlen);
}

struct fi_ops pep_fi_ops = {
    .size = sizeof(struct fi_ops),
    .close = pep_close,
    .bind = pep_bind,
    .control = util::unsupported{},
    .ops_open = util::unsupported{},
    .tostr = util::unsupported{},
    .ops_set = util::unsupported{},
};

struct fi_ops_ep pep_ep_ops = {
    .size = sizeof(struct fi_ops_ep),
    .cancel = util::unsupported{},
    .getopt = pep_getopt,
    .setopt = util::unsupported{},
    .tx_ctx = util::unsupported{},
    .rx_ctx = util::unsupported{},
    .rx_size_left = util::unsupported{},
    .tx_size_left = util::unsupported{},
};

struct fi_ops_cm pep_cm_ops = {
    .size = sizeof(struct fi_ops_cm),
    .setname = pep_setname,
    .getname = pep_getname,
    .getpeer = util::unsupported{},
    .connect = util::unsupported{},
    .listen = pep_listen,
    .accept = util::unsupported{},
    .reject = pep_reject,
    .shutdown = util::unsupported{},
    .join = util::unsupported{},
};

} // namespace

pep *vwait_pep(struct fid *fid) noexcept
{
	return pep_box::checked(fid, FI_CLASS_PEP, &pep_fi_ops);
}

int pep_open(struct fid_fabric *fabric_fid, struct fi_info *info, struct fid_pep **out,
             void *context) noexcept
{
	if (!fabric_fid || !info || !out) {
		FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_passive_ep: %s is NULL\n",
		        !fabric_fid ? "fabric" : (!info ? "info" : "pep"));
		return -FI_EINVAL;
	}
	*out = nullptr;
	if (info->ep_attr && util::raw_enum(info->ep_attr->type) != FI_EP_MSG &&
	    util::raw_enum(info->ep_attr->type) != FI_EP_UNSPEC) {
		FI_WARN(&prov, FI_LOG_EP_CTRL, "fi_passive_ep: ep type %d is not FI_EP_MSG\n",
		        util::raw_enum(info->ep_attr->type));
		return -FI_EINVAL;
	}
	if (int ret = check_sockaddr(info->src_addr, info->src_addrlen, info->addr_format,
	                             "fi_passive_ep: info->src_addr"))
		return ret == -FI_ENODATA ? -FI_EINVAL : ret;
	return guard([&] {
		info_ptr copy(fi_dupinfo(info));
		if (!copy)
			return -FI_ENOMEM;
		verbs::cm_id_ptr id;
		if (int ret = verbs::create_id(nullptr, nullptr, &id)) {
			FI_WARN(&prov, FI_LOG_EP_CTRL, "rdma_create_id: %s\n", fi_strerror(-ret));
			return ret;
		}
		if (info->src_addr) {
			if (rdma_bind_addr(id.get(),
			                   static_cast<struct sockaddr *>(info->src_addr)) != 0) {
				int ret = verbs::errno_code();
				FI_WARN(&prov, FI_LOG_EP_CTRL,
				        "fi_passive_ep: rdma_bind_addr(src_addr): %s\n",
				        fi_strerror(-ret));
				return ret;
			}
		}
		auto *fab = fabric_box::of(fabric_fid)->obj;
		auto obj = std::make_unique<pep>(fab, std::move(copy), std::move(id));
		pep_box::hand_out(obj, FI_CLASS_PEP, context, &pep_fi_ops, out,
		                  [&](struct fid_pep &f) {
			                  f.ops = &pep_ep_ops;
			                  f.cm = &pep_cm_ops;
			                  obj->set_fid(&f.fid);
		                  });
		return FI_SUCCESS;
	});
}

} // namespace vwait
