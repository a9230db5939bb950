/* The vwait event queue: rdma_cm events of the endpoints bound to it, turned into libfabric
 * CM events, plus what fi_eq_write adds, on the util layer's EQ. */
#ifndef VWAIT_EQ_H
#define VWAIT_EQ_H

#include "vwait/cm.h"
#include "vwait/fabric.h"
#include "vwait/util/eq.h"
#include "vwait/util/fid.h"
#include "vwait/verbs.h"

#include <rdma/fi_eq.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace vwait
{

/* The vwait EQ: the util layer's software EQ (entries of any length, error entries, FI_PEEK,
 * fi_eq_write, every wait object, wait sets, fi_trywait, FI_GETWAIT / FI_GETWAITOBJ) fed from
 * an rdma_cm event channel. The channel's fd (non-blocking) is an fd source of the EQ's
 * waiter: whoever waits on it (fi_eq_sread, fi_wait on a wait set, the MUTEX_COND helper
 * thread) or tries (fi_trywait) drains it through progress(), which turns each rdma_cm event
 * into an entry (FI_CONNREQ, FI_CONNECTED, FI_SHUTDOWN, or an error entry) and acknowledges
 * it at once. Reads drain it too, so FI_WAIT_NONE EQs work by polling. */
class eq final : public util::eq
{
public:
	eq(fabric *fab, const struct fi_eq_attr &attr, verbs::event_channel ch);
	~eq() override;

	/* After util::eq_install set up the wait object: the channel becomes a source of it.
	 * 0 or a negative FI_E* code. */
	int start() noexcept;

	struct rdma_event_channel *channel() const noexcept { return channel_.get(); }
	fabric *parent() const noexcept { return fabric_; }

protected:
	void progress() noexcept override;
	std::string describe_error(int prov_errno, const void *err_data) const override;
	void discard(uint32_t event, const void *entry, size_t len) noexcept override;

private:
	/* One rdma_cm event into at most one entry (under progress_mutex_): true when it
	 * queued one. Throws when it could not (the event is then lost, with a warning). */
	bool convert(struct rdma_cm_event *ev);
	void push_cm(uint32_t event, struct fid *fid, struct fi_info *info, const uint8_t *data,
	             size_t len);
	void push_cm_error(struct fid *fid, int err, int prov_errno, const uint8_t *data,
	                   size_t len);

	fabric *fabric_;
	verbs::event_channel channel_;
	std::mutex progress_mutex_; /* keeps events in order across draining threads */
};

/* The vwait EQ behind a fid handed to fi_ep_bind / fi_pep_bind: nullptr for anything else (an
 * EQ of another provider, not an EQ at all). */
eq *verbs_eq_of(struct fid *fid) noexcept;

/* struct fi_ops_fabric::eq_open */
int eq_open(struct fid_fabric *fabric, struct fi_eq_attr *attr, struct fid_eq **eq,
            void *context) noexcept;

} // namespace vwait

#endif
