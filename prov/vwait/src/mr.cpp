/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* vwait memory regions: ibv_reg_mr on the domain's protection domain. fi_mr_desc is the
 * ibv_mr (its lkey), fi_mr_key the rkey (FI_MR_PROV_KEY, FI_MR_VIRT_ADDR). */
#include "config.h"

#include "vwait/domain.h"
#include "vwait/util/enosys.h"
#include "vwait/util/held.h"
#include "vwait/vwait.h"

#include <cinttypes>
#include <cstring>
#include <memory>

namespace vwait
{

namespace
{

class mr
{
public:
	mr(domain *dom, verbs::mr_ptr hw) : domain_(dom), hw_(std::move(hw)) {}
	mr(const mr &) = delete;
	mr &operator=(const mr &) = delete;

	struct ibv_mr *hw() const noexcept { return hw_.get(); }

private:
	util::held<domain> domain_;
	verbs::mr_ptr hw_;
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
	return guard([&] {
		verbs::mr_ptr hw(
		    ibv_reg_mr(dom->pd(), const_cast<void *>(buf), len,
		               access_to_ibv(access, dom->context()->device->transport_type ==
		                                         IBV_TRANSPORT_IWARP)));
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

} // namespace

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
