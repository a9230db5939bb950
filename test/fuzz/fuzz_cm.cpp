/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* libFuzzer target: connection data from a peer, and the EQ that hands it out. Private data
 * of any length (0..255, what rdma_conn_param can hold) and content, padded as rdma_cm pads
 * it, goes through cm_data (the one-byte length framing vwait puts in front of it; cm_wrap
 * makes it) and, as the verbs EQ's convert() does, into a CM entry (fi_eq_cm_entry + data) or
 * an error entry with it as err_data, pushed into a util EQ (the verbs EQ is one). fi_eq_read /
 * fi_eq_readerr copy out into buffers of any size with any flags; fi_eq_write adds entries of
 * the application's own. Checked: every call returns its documented value or a negative FI_E*
 * code, the data handed out is exactly what the peer sent. The verbs EQ's conversion of real
 * rdma_cm events (verbs_eq::convert) needs a channel and is not reached here. */
#include "config.h"

#include "fuzz_common.h"

#include "vwait/eq.h"
#include "vwait/util/eq.h"

#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#include <cstdlib>
#include <cstring>
#include <new>

namespace
{

using namespace vwait_fuzz;
namespace util = vwait::util;

/* What the peer sent, as rdma_cm delivers it: framed, then padded with anything. */
std::vector<uint8_t> from_peer(FuzzedDataProvider &in, std::vector<uint8_t> *sent)
{
	if (in.ConsumeBool()) {
		/* a peer that is not vwait: any bytes at all */
		std::vector<uint8_t> raw = bytes(in, 255);
		auto got = vwait::cm_data(raw.data(), raw.size());
		if (got.first &&
		    (got.first < raw.data() || got.first + got.second > raw.data() + raw.size()))
			abort();
		sent->assign(got.first, got.first + got.second);
		return raw;
	}
	*sent = bytes(in, vwait::cm_accept_data_max);
	std::vector<uint8_t> framed = vwait::cm_wrap(sent->data(), sent->size());
	std::vector<uint8_t> pad = bytes(in, 64);
	framed.insert(framed.end(), pad.begin(), pad.end());
	if (framed.size() > 255)
		framed.resize(255);
	auto got = vwait::cm_data(framed.data(), framed.size());
	if (framed.size() - vwait::cm_hdr_size >= sent->size() &&
	    (got.second != sent->size() ||
	     (got.second && memcmp(got.first, sent->data(), got.second))))
		abort();
	sent->assign(got.first, got.first + got.second);
	return framed;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	FuzzedDataProvider in(data, size);
	struct fi_eq_attr attr = {};
	attr.wait_obj = in.ConsumeBool() ? FI_WAIT_NONE : FI_WAIT_FD;
	attr.size = in.ConsumeIntegralInRange<size_t>(0, 64);
	struct fid_eq *eq = nullptr;
	if (util::eq_open(&fuzz_prov, &attr, &eq, nullptr,
	                  in.ConsumeBool() ? FI_VERSION(1, 4) : FI_VERSION(1, 17)) != 0)
		abort();
	struct fid peer_fid = {};
	while (in.remaining_bytes() > 0) {
		switch (in.ConsumeIntegralInRange<int>(0, 4)) {
		case 0: { /* a CM event with the peer's data, as convert() queues it */
			std::vector<uint8_t> sent;
			std::vector<uint8_t> raw = from_peer(in, &sent);
			std::vector<uint8_t> entry(sizeof(struct fi_eq_cm_entry) + sent.size());
			struct fi_eq_cm_entry cm = {};
			cm.fid = &peer_fid;
			memcpy(entry.data(), &cm, sizeof(cm));
			if (!sent.empty())
				memcpy(entry.data() + sizeof(cm), sent.data(), sent.size());
			uint32_t event = in.ConsumeBool() ? FI_CONNECTED : FI_SHUTDOWN;
			long r = util::object_of<util::sw_eq>(&eq->fid)->push(
			    event, entry.data(), entry.size(), in.ConsumeBool());
			if (r != 0 && r != -FI_EAGAIN && r != -FI_ENOMEM)
				abort();
			break;
		}
		case 1: { /* a reject with the peer's data as err_data */
			std::vector<uint8_t> sent;
			std::vector<uint8_t> raw = from_peer(in, &sent);
			struct fi_eq_err_entry err = {};
			err.fid = &peer_fid;
			err.err = FI_ECONNREFUSED;
			err.prov_errno = in.ConsumeIntegral<int>();
			long r = util::object_of<util::sw_eq>(&eq->fid)->push_error(
			    err, sent.data(), sent.size());
			if (r != 0 && r != -FI_EAGAIN && r != -FI_ENOMEM)
				abort();
			break;
		}
		case 2: { /* fi_eq_read into a buffer of any size */
			size_t len = in.ConsumeIntegralInRange<size_t>(0, 512);
			std::vector<uint8_t> buf(len);
			uint64_t flags = pick<uint64_t>(in, {0, FI_PEEK, FI_PEEK | 1, 1});
			uint32_t event = 0;
			bool null_buf = in.ConsumeBool();
			ssize_t n =
			    fi_eq_read(eq, &event, null_buf ? nullptr : buf.data(), len, flags);
			if (n > static_cast<ssize_t>(len) || (n < 0 && n < -FI_ERRNO_MAX - 10000))
				abort();
			break;
		}
		case 3: { /* fi_eq_readerr, err_data of the caller's size or none */
			struct fi_eq_err_entry err = {};
			std::vector<uint8_t> user(in.ConsumeIntegralInRange<size_t>(0, 300));
			if (in.ConsumeBool()) {
				err.err_data = user.data();
				err.err_data_size = user.size();
			}
			uint64_t flags = pick<uint64_t>(in, {0, FI_PEEK, 2});
			ssize_t n = fi_eq_readerr(eq, &err, flags);
			if (n > 0 && (n != sizeof(err) || err.err <= 0 ||
			              (err.err_data_size && !err.err_data)))
				abort();
			break;
		}
		default: { /* the application's own entry, any event (FI_CONNREQ too) */
			std::vector<uint8_t> mine = bytes(in, 128);
			uint32_t event = pick<uint32_t>(
			    in, {FI_NOTIFY, FI_CONNREQ, FI_CONNECTED, FI_SHUTDOWN, FI_MR_COMPLETE});
			ssize_t n = fi_eq_write(
			    eq, event, mine.empty() && in.ConsumeBool() ? nullptr : mine.data(),
			    mine.size(), pick<uint64_t>(in, {0, 1}));
			if (n != static_cast<ssize_t>(mine.size()) && n >= 0)
				abort();
			break;
		}
		}
	}
	if (fi_close(&eq->fid) != 0) /* unread entries are released here */
		abort();
	return 0;
}
