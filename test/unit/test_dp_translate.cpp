/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* Unit tests of the data path's pure parts (no device needed): work completion -> completion
 * record (vwait::translate) and the counters it bumps, ibv_wc_status -> FI_E*, and the CM
 * private-data framing, UD names and the source of a datagram. */
#include "vwait/av.h"
#include "vwait/cq.h"
#include "vwait/eq.h"
#include "vwait/util/cntr.h"

#include <rdma/fi_errno.h>

#include <arpa/inet.h>

#include <cstring>
#include <memory>

#include "vwait_cmocka.h"

namespace
{

struct ibv_wc wc_for(vwait::wr_slot &slot, enum ibv_wc_opcode op, enum ibv_wc_status st)
{
	struct ibv_wc wc;
	memset(&wc, 0, sizeof(wc));
	wc.wr_id = reinterpret_cast<uintptr_t>(&slot);
	wc.opcode = op;
	wc.status = st;
	return wc;
}

/* Posts the ring's next slot as an endpoint does: claim it, fill it (a slot comes zeroed from
 * the ring's calloc, then holds what its last post left: an endpoint sets every field it
 * reads), then commit once posted. */
vwait::wr_slot &post(vwait::wr_ring &ring)
{
	vwait::wr_slot *slot = ring.claim();
	assert_non_null(slot);
	assert_ptr_equal(slot->ring, &ring);
	slot->report = true;
	slot->buf = nullptr;
	ring.commit();
	return *slot;
}

/* cmocka state: the ring outlives a failing assertion's longjmp */
int setup(void **state)
{
	*state = new vwait::wr_ring(4);
	return 0;
}
int teardown(void **state)
{
	delete static_cast<vwait::wr_ring *>(*state);
	return 0;
}

void recv_with_imm(void **state)
{
	auto *ring = static_cast<vwait::wr_ring *>(*state);
	int ctx = 0;
	vwait::wr_slot &s = post(*ring);
	s.context = &ctx;
	s.flags = FI_RECV | FI_MSG;
	s.len = 4096;
	assert_int_equal(ring->free_slots(), 3);
	struct ibv_wc wc = wc_for(s, IBV_WC_RECV, IBV_WC_SUCCESS);
	wc.byte_len = 33;
	wc.wc_flags = IBV_WC_WITH_IMM;
	wc.imm_data = htonl(0xdeadbeef);
	vwait::completion c;
	assert_true(vwait::translate(wc, &c));
	assert_ptr_equal(c.context, &ctx);
	assert_int_equal(c.flags, FI_RECV | FI_MSG | FI_REMOTE_CQ_DATA);
	assert_int_equal(c.len, 33);
	assert_int_equal(c.data, 0xdeadbeef);
	assert_int_equal(c.err, 0);
	assert_int_equal(ring->free_slots(), 4); /* the slot went back */
}

void remote_write_with_imm(void **state)
{
	auto *ring = static_cast<vwait::wr_ring *>(*state);
	vwait::wr_slot &s = post(*ring);
	s.flags = FI_RECV | FI_MSG;
	struct ibv_wc wc = wc_for(s, IBV_WC_RECV_RDMA_WITH_IMM, IBV_WC_SUCCESS);
	wc.wc_flags = IBV_WC_WITH_IMM;
	wc.imm_data = htonl(7);
	wc.byte_len = 128;
	vwait::completion c;
	assert_true(vwait::translate(wc, &c));
	assert_int_equal(c.flags, FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA);
	assert_int_equal(c.data, 7);
	assert_int_equal(c.len, 128);
}

void send_side_from_slot(void **state)
{
	auto *ring = static_cast<vwait::wr_ring *>(*state);
	vwait::wr_slot &s = post(*ring);
	s.flags = FI_RMA | FI_READ;
	s.len = 99;
	s.report = true;
	vwait::completion c;
	assert_true(vwait::translate(wc_for(s, IBV_WC_RDMA_READ, IBV_WC_SUCCESS), &c));
	assert_int_equal(c.flags, FI_RMA | FI_READ);
	assert_int_equal(c.len, 99);
	/* unsignalled for the application (FI_SELECTIVE_COMPLETION, inject): dropped */
	vwait::wr_slot &q = post(*ring);
	q.flags = FI_SEND | FI_MSG;
	q.report = false;
	assert_false(vwait::translate(wc_for(q, IBV_WC_SEND, IBV_WC_SUCCESS), &c));
	assert_int_equal(ring->outstanding(), 0);
}

void errors_always_reported(void **state)
{
	auto *ring = static_cast<vwait::wr_ring *>(*state);
	vwait::wr_slot &s = post(*ring);
	int ctx = 0;
	s.context = &ctx;
	s.flags = FI_SEND | FI_MSG;
	s.report = false;
	struct ibv_wc wc = wc_for(s, IBV_WC_SEND, IBV_WC_REM_ACCESS_ERR);
	wc.vendor_err = 0x55;
	vwait::completion c;
	assert_true(vwait::translate(wc, &c));
	assert_int_equal(c.err, FI_EACCES);
	assert_int_equal(c.prov_errno, 0x55);
	assert_int_equal(c.status, IBV_WC_REM_ACCESS_ERR);
	assert_ptr_equal(c.context, &ctx);
}

/* Unsignalled sends have no work completion of their own: the next completion of the queue
 * gives their slots back too (RC completes in order), across the ring's wrap. */
void unsignaled_slots_come_back(void **state)
{
	auto *ring = static_cast<vwait::wr_ring *>(*state); /* 4 slots */
	vwait::completion c;
	post(*ring); /* slots 0, 1 unsignalled, 2 signalled */
	post(*ring);
	vwait::wr_slot &s2 = post(*ring);
	s2.flags = FI_SEND | FI_MSG;
	assert_int_equal(ring->outstanding(), 3);
	assert_true(vwait::translate(wc_for(s2, IBV_WC_SEND, IBV_WC_SUCCESS), &c));
	assert_int_equal(ring->free_slots(), 4);
	assert_int_equal(ring->outstanding(), 0);
	post(*ring); /* slots 3, 0 unsignalled, 1 signalled: wraps */
	post(*ring);
	vwait::wr_slot &s1 = post(*ring);
	assert_ptr_equal(&s1, &ring->slots[1]);
	s1.flags = FI_SEND | FI_MSG;
	assert_true(vwait::translate(wc_for(s1, IBV_WC_SEND, IBV_WC_SUCCESS), &c));
	assert_int_equal(ring->free_slots(), 4);
	/* a failed unsignalled send completes by itself: its own slot only */
	vwait::wr_slot &f = post(*ring); /* slots 2 (fails), 3 */
	post(*ring);
	f.report = false;
	assert_true(vwait::translate(wc_for(f, IBV_WC_SEND, IBV_WC_REM_ACCESS_ERR), &c));
	assert_int_equal(c.err, FI_EACCES);
	assert_int_equal(ring->free_slots(), 3);
	assert_int_equal(ring->outstanding(), 1);
	/* full: no slot to claim until a completion gives one back */
	for (int i = 0; i < 3; i++)
		post(*ring);
	assert_null(ring->claim());
	assert_int_equal(ring->free_slots(), 0);
}

void closed_ring_dropped(void **state)
{
	auto *ring = static_cast<vwait::wr_ring *>(*state);
	vwait::wr_slot &s = post(*ring);
	ring->closed = true;
	vwait::completion c;
	assert_false(vwait::translate(wc_for(s, IBV_WC_SEND, IBV_WC_WR_FLUSH_ERR), &c));
	assert_int_equal(ring->outstanding(), 0);
}

/* Counting: every completion of its kind counts on the ring's counter of that kind, success
 * or error, reported or not (FI_SELECTIVE_COMPLETION, inject); nothing counts once the
 * endpoint closed its ring. util::sw_cntr with FI_WAIT_NONE stands in for vwait::verbs_cntr. */
struct fi_provider test_prov = {
    .version = FI_VERSION(0, 1),
    .fi_version = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION),
    .name = "vwait-test",
};

struct count_state {
	vwait::wr_ring tx{8};
	vwait::wr_ring rx{8};
	std::unique_ptr<vwait::util::sw_cntr> send, recv, read, write, rwrite;
};

int count_setup(void **state)
{
	auto *s = new count_state;
	struct fi_cntr_attr a = {};
	a.events = FI_CNTR_EVENTS_COMP;
	a.wait_obj = FI_WAIT_NONE;
	for (auto *p : {&s->send, &s->recv, &s->read, &s->write, &s->rwrite})
		p->reset(new vwait::util::sw_cntr(&test_prov, a));
	s->tx.msg_cntr = s->send.get();
	s->tx.read_cntr = s->read.get();
	s->tx.write_cntr = s->write.get();
	s->rx.msg_cntr = s->recv.get();
	s->rx.write_cntr = s->rwrite.get();
	*state = s;
	return 0;
}
int count_teardown(void **state)
{
	delete static_cast<count_state *>(*state);
	return 0;
}

/* Posts one slot of ring with flags/report and completes it with op/st. */
bool complete(vwait::wr_ring &ring, size_t i, uint64_t flags, bool report, enum ibv_wc_opcode op,
              enum ibv_wc_status st)
{
	vwait::wr_slot &slot = post(ring);
	assert_ptr_equal(&slot, &ring.slots[i % ring.nslots]);
	slot.flags = flags;
	slot.report = report;
	vwait::completion c;
	return vwait::translate(wc_for(slot, op, st), &c);
}

/* A ring of two pages or more is a mapping of its own; a small one comes from calloc: both
 * zeroed, slot i at slots[i % nslots], every slot back after its completion, across wraps. */
void ring_sizes(void **)
{
	const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
	for (size_t n : {size_t{1}, size_t{4}, 2 * page / sizeof(vwait::wr_slot) - 1,
	                 2 * page / sizeof(vwait::wr_slot), size_t{1000}}) {
		vwait::wr_ring ring(n);
		assert_int_equal(ring.nslots, n);
		assert_int_equal(ring.slots.get_deleter().mapped_bytes != 0,
		                 n * sizeof(vwait::wr_slot) >= 2 * page);
		for (size_t i = 0; i < n; i++)
			assert_null(ring.slots[i].context);
		for (size_t i = 0; i < 3 * n + 1; i++) {
			assert_true(
			    complete(ring, i, FI_SEND | FI_MSG, true, IBV_WC_SEND, IBV_WC_SUCCESS));
			assert_int_equal(ring.free_slots(), n);
		}
	}
}

void counting(void **state)
{
	auto *s = static_cast<count_state *>(*state);
	/* 3 sends, one reported, one not (selective), one inject-like: all count */
	assert_true(complete(s->tx, 0, FI_SEND | FI_MSG, true, IBV_WC_SEND, IBV_WC_SUCCESS));
	assert_false(complete(s->tx, 1, FI_SEND | FI_MSG, false, IBV_WC_SEND, IBV_WC_SUCCESS));
	assert_false(complete(s->tx, 2, FI_SEND | FI_MSG, false, IBV_WC_SEND, IBV_WC_SUCCESS));
	/* 2 writes, 1 read, 1 failed write */
	complete(s->tx, 3, FI_RMA | FI_WRITE, false, IBV_WC_RDMA_WRITE, IBV_WC_SUCCESS);
	complete(s->tx, 4, FI_RMA | FI_WRITE, true, IBV_WC_RDMA_WRITE, IBV_WC_SUCCESS);
	complete(s->tx, 5, FI_RMA | FI_READ, false, IBV_WC_RDMA_READ, IBV_WC_SUCCESS);
	assert_true(
	    complete(s->tx, 6, FI_RMA | FI_WRITE, false, IBV_WC_RDMA_WRITE, IBV_WC_REM_ACCESS_ERR));
	/* receive side: 2 receives, a write with immediate data, a flushed receive */
	complete(s->rx, 0, FI_RECV | FI_MSG, true, IBV_WC_RECV, IBV_WC_SUCCESS);
	complete(s->rx, 1, FI_RECV | FI_MSG, false, IBV_WC_RECV, IBV_WC_SUCCESS);
	complete(s->rx, 2, FI_RECV | FI_MSG, true, IBV_WC_RECV_RDMA_WITH_IMM, IBV_WC_SUCCESS);
	complete(s->rx, 3, FI_RECV | FI_MSG, true, IBV_WC_RECV, IBV_WC_WR_FLUSH_ERR);
	assert_int_equal(s->send->read(), 3);
	assert_int_equal(s->send->readerr(), 0);
	assert_int_equal(s->write->read(), 2);
	assert_int_equal(s->write->readerr(), 1);
	assert_int_equal(s->read->read(), 1);
	assert_int_equal(s->recv->read(), 2);
	assert_int_equal(s->recv->readerr(), 1);
	assert_int_equal(s->rwrite->read(), 1);
	assert_int_equal(s->rwrite->readerr(), 0);
	/* a direction without a counter: nothing counted, nothing breaks */
	s->tx.read_cntr = nullptr;
	complete(s->tx, 7, FI_RMA | FI_READ, true, IBV_WC_RDMA_READ, IBV_WC_SUCCESS);
	assert_int_equal(s->read->read(), 1);
	/* closed: late completions count nowhere */
	s->tx.closed = true;
	assert_false(complete(s->tx, 0, FI_SEND | FI_MSG, true, IBV_WC_SEND, IBV_WC_SUCCESS));
	assert_false(complete(s->tx, 1, FI_SEND | FI_MSG, true, IBV_WC_SEND, IBV_WC_WR_FLUSH_ERR));
	assert_int_equal(s->send->read(), 3);
	assert_int_equal(s->send->readerr(), 0);
	assert_int_equal(s->tx.outstanding(), 0);
}

void status_mapping(void **)
{
	assert_int_equal(vwait::wc_status_error(IBV_WC_SUCCESS), 0);
	assert_int_equal(vwait::wc_status_error(IBV_WC_WR_FLUSH_ERR), FI_ECANCELED);
	assert_int_equal(vwait::wc_status_error(IBV_WC_LOC_LEN_ERR), FI_ETRUNC);
	assert_int_equal(vwait::wc_status_error(IBV_WC_RETRY_EXC_ERR), FI_ETIMEDOUT);
	assert_int_equal(vwait::wc_status_error(IBV_WC_RNR_RETRY_EXC_ERR), FI_ENORX);
	assert_int_equal(vwait::wc_status_error(IBV_WC_REM_OP_ERR), FI_EREMOTEIO);
	assert_int_equal(vwait::wc_status_error(IBV_WC_GENERAL_ERR), FI_EIO);
}

void cm_framing(void **)
{
	const char msg[] = "hello";
	std::vector<uint8_t> w = vwait::cm_wrap(msg, sizeof(msg));
	assert_int_equal(w.size(), sizeof(msg) + vwait::cm_hdr_size);
	/* rdma_cm pads what it delivers: the framing gives back exactly what was sent */
	std::vector<uint8_t> padded(w);
	padded.resize(56, 0xee);
	auto d = vwait::cm_data(padded.data(), padded.size());
	assert_int_equal(d.second, sizeof(msg));
	assert_memory_equal(d.first, msg, sizeof(msg));
	/* empty, truncated or absent: no data, no overread */
	auto e = vwait::cm_wrap(nullptr, 0);
	assert_int_equal(vwait::cm_data(e.data(), e.size()).second, 0);
	uint8_t bad[4] = {200, 1, 2, 3};
	assert_null(vwait::cm_data(bad, sizeof(bad)).first);
	assert_null(vwait::cm_data(nullptr, 10).first);
}

} // namespace

/* A datagram's receive reports its sender through the ring's source hook, only with a GRH. */
uint64_t fake_source(void *arg, const void *buf, uint32_t src_qp)
{
	*static_cast<const void **>(arg) = buf;
	return 1000 + src_qp;
}

void recv_with_source(void **state)
{
	auto *ring = static_cast<vwait::wr_ring *>(*state);
	static const void *seen = nullptr;
	ring->source = fake_source;
	ring->source_arg = &seen;
	uint8_t buf[64] = {};
	for (int grh = 0; grh < 2; grh++) {
		vwait::wr_slot &s = post(*ring);
		s.flags = FI_RECV | FI_MSG;
		s.len = sizeof(buf);
		s.buf = buf;
		struct ibv_wc wc = wc_for(s, IBV_WC_RECV, IBV_WC_SUCCESS);
		wc.byte_len = 50;
		wc.src_qp = 7;
		wc.wc_flags = grh ? IBV_WC_GRH : 0;
		vwait::completion c;
		assert_true(vwait::translate(wc, &c));
		assert_int_equal(c.len, 50);
		if (grh) {
			assert_int_equal(c.src, 1007);
			assert_ptr_equal(seen, buf);
		} else {
			assert_int_equal(c.src, FI_ADDR_NOTAVAIL);
		}
	}
}

/* More bytes than the buffers hold (the rest went to the spill entry): FI_ETRUNC. */
void recv_truncated(void **state)
{
	auto *ring = static_cast<vwait::wr_ring *>(*state);
	vwait::wr_slot &s = post(*ring);
	s.flags = FI_RECV | FI_MSG;
	s.len = 104;
	struct ibv_wc wc = wc_for(s, IBV_WC_RECV, IBV_WC_SUCCESS);
	wc.byte_len = 552;
	vwait::completion c;
	assert_true(vwait::translate(wc, &c));
	assert_int_equal(c.err, FI_ETRUNC);
	assert_int_equal(c.len, 104);
	assert_int_equal(c.olen, 448);
}

/* A GRH the endpoint keeps (no FI_MSG_PREFIX): not counted in the length reported. */
void recv_hidden_grh(void **state)
{
	auto *ring = static_cast<vwait::wr_ring *>(*state);
	ring->hidden = 40;
	for (uint32_t got : {40u + 64u, 40u + 100u}) {
		vwait::wr_slot &s = post(*ring);
		s.flags = FI_RECV | FI_MSG;
		s.len = 64;
		struct ibv_wc wc = wc_for(s, IBV_WC_RECV, IBV_WC_SUCCESS);
		wc.byte_len = got;
		vwait::completion c;
		assert_true(vwait::translate(wc, &c));
		if (got == 104) {
			assert_int_equal(c.err, 0);
			assert_int_equal(c.len, 64);
		} else {
			assert_int_equal(c.err, FI_ETRUNC);
			assert_int_equal(c.olen, 36);
		}
	}
}

void ud_names(void **)
{
	vwait::ud_name n = {};
	const uint8_t gid[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 169, 254, 77, 1};
	memcpy(n.gid, gid, 16);
	n.qpn = 0x11;
	n.qkey = vwait::ud_qkey;
	n.lid = 3;
	std::string s = vwait::ud_name_str(n);
	assert_string_equal(s.c_str(), "fi_addr_ib_ud://[::ffff:169.254.77.1]:17:0x76776169:3");
	vwait::ud_name back = {};
	assert_true(vwait::ud_name_parse(s.c_str(), &back));
	assert_memory_equal(&back, &n, sizeof(n));
	for (const char *bad :
	     {"", "169.254.77.1", "fi_addr_ib_ud://::1:17:1:0", "fi_addr_ib_ud://[::1]:17:1",
	      "fi_addr_ib_ud://[::1]:17:1:0x", "fi_addr_ib_ud://[zz]:17:1:0",
	      "fi_addr_ib_ud://[::1]:16777216:1:0", "fi_addr_ib_ud://[::1]:17:1:70000",
	      "fi_addr_ib_ud://[::1]:17:1:0 x"})
		assert_false(vwait::ud_name_parse(bad, &back));
	assert_false(vwait::ud_name_parse(nullptr, &back));
}

void grh_gid(void **)
{
	/* RoCE v2 over IPv4: 20 zero bytes, then an IPv4 header (source address at byte 12) */
	uint8_t grh[40] = {};
	grh[20] = 0x45;
	const uint8_t ip[4] = {169, 254, 77, 2};
	memcpy(grh + 32, ip, 4);
	uint8_t gid[16];
	vwait::grh_source_gid(grh, gid);
	const uint8_t mapped[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 169, 254, 77, 2};
	assert_memory_equal(gid, mapped, 16);
	/* a GRH proper: the source GID at bytes 8..23 */
	uint8_t g[40] = {};
	g[0] = 0x60;
	for (int i = 0; i < 16; i++)
		g[8 + i] = static_cast<uint8_t>(0xf0 + i);
	vwait::grh_source_gid(g, gid);
	assert_memory_equal(gid, g + 8, 16);
}

int main()
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(recv_with_imm, setup, teardown),
	    cmocka_unit_test(ring_sizes),
	    cmocka_unit_test_setup_teardown(remote_write_with_imm, setup, teardown),
	    cmocka_unit_test_setup_teardown(send_side_from_slot, setup, teardown),
	    cmocka_unit_test_setup_teardown(errors_always_reported, setup, teardown),
	    cmocka_unit_test_setup_teardown(unsignaled_slots_come_back, setup, teardown),
	    cmocka_unit_test_setup_teardown(closed_ring_dropped, setup, teardown),
	    cmocka_unit_test_setup_teardown(counting, count_setup, count_teardown),
	    cmocka_unit_test(status_mapping),
	    cmocka_unit_test(cm_framing),
	    cmocka_unit_test_setup_teardown(recv_with_source, setup, teardown),
	    cmocka_unit_test_setup_teardown(recv_truncated, setup, teardown),
	    cmocka_unit_test_setup_teardown(recv_hidden_grh, setup, teardown),
	    cmocka_unit_test(ud_names),
	    cmocka_unit_test(grh_gid),
	};
	return cmocka_run_group_tests(tests, nullptr, nullptr);
}
