/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* fi_vwait_bench's link (bench.h): the fabric, the connection, the objects the mode waits on,
 * and one round of the ping-pong. */
#include "../fi_sets.h"
#include "bench.h"

#include <rdma/fi_cm.h>

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <time.h>

#include <algorithm>
#include <cstring>

namespace vwait_bench
{

/* The error entry a read that returned -FI_EAVAIL left: printed after `what`, its code
 * returned (negative). */
int cq_error(struct fid_cq *cq, const char *what)
{
	struct fi_cq_err_entry err = {};
	fi_cq_readerr(cq, &err, 0);
	fprintf(stderr, "%s: %s (prov_errno %d)\n", what, fi_strerror(err.err), err.prov_errno);
	return -err.err;
}

int link::connect()
{
	FI_CALL(open_fabric());
	if (opt_.rdm)
		FI_CALL(opt_.server.empty() ? rdm_server() : rdm_client());
	else
		FI_CALL(opt_.server.empty() ? accept_one() : connect_one());
	return 0;
}

int link::open_alone()
{
	FI_CALL(open_fabric());
	if (opt_.rdm)
		return rdm_endpoint();
	FI_CALL(fi_domain(fabric_, info_, &domain_, nullptr));
	struct fi_cq_attr attr = {};
	attr.format = FI_CQ_FORMAT_CONTEXT;
	attr.size = 64;
	attr.wait_obj = FI_WAIT_NONE;
	return fi_cq_open(domain_, &attr, &cq_, nullptr);
}

int link::open_fabric()
{
	struct fi_info *hints = fi_allocinfo();
	if (!hints)
		return -FI_ENOMEM;
	hints->ep_attr->type = opt_.rdm ? FI_EP_RDM : FI_EP_MSG;
	hints->caps = FI_MSG;
	hints->mode = FI_CONTEXT;
	hints->domain_attr->mr_mode =
	    FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	hints->fabric_attr->prov_name = strdup(opt_.prov.c_str());
	const char *node = opt_.server.empty() ? nullptr : opt_.server.c_str();
	uint64_t flags = opt_.server.empty() ? FI_SOURCE : 0;
	if (opt_.server.empty() && !opt_.source.empty())
		node = opt_.source.c_str();
	if (opt_.how == mode::empty_read) {
		node = nullptr;
		flags = 0;
	}
	int ret = fi_getinfo(FI_VERSION(1, 5), node, opt_.port.c_str(), flags, hints, &info_);
	fi_freeinfo(hints);
	FI_CALL(ret);
	FI_CALL(fi_fabric(info_->fabric_attr, &fabric_, nullptr));
	if (opt_.rdm)
		return 0; /* no connection, no EQ */
	struct fi_eq_attr eq_attr = {};
	eq_attr.wait_obj = FI_WAIT_UNSPEC;
	if (opt_.how == mode::waitset) {
		/* the EQ of the connection is a member of the wait set too */
		struct fi_wait_attr wattr = {};
		wattr.wait_obj = FI_WAIT_FD;
		ret = fi_sets::wait_open(fabric_, &wattr, &waitset_);
		if (ret) {
			fprintf(stderr, "fi_wait_open(FI_WAIT_FD): %s\n", fi_strerror(-ret));
			unsupported_ = ret == -FI_ENOSYS || ret == -FI_EINVAL;
			return ret;
		}
		eq_attr.wait_obj = FI_WAIT_SET;
		eq_attr.wait_set = waitset_;
	}
	ret = fi_eq_open(fabric_, &eq_attr, &eq_, nullptr);
	if (ret) {
		fprintf(stderr, "fi_eq_open(wait_obj %d): %s\n", eq_attr.wait_obj,
		        fi_strerror(-ret));
		unsupported_ = ret == -FI_ENOSYS || ret == -FI_EINVAL;
		return ret;
	}
	return 0;
}

/* the next CM event, waited for by fi_eq_sread */
int link::cm_event(uint32_t want, struct fi_eq_cm_entry *entry)
{
	uint32_t event = 0;
	ssize_t n = fi_eq_sread(eq_, &event, entry, sizeof(*entry), opt_.cm_wait_s * 1000, 0);
	if (n == -FI_EAVAIL) {
		struct fi_eq_err_entry err = {};
		fi_eq_readerr(eq_, &err, 0);
		fprintf(stderr, "CM error: %s\n", fi_strerror(err.err));
		return -err.err;
	}
	if (n < 0) {
		fprintf(stderr, "fi_eq_sread: %s\n", fi_strerror(static_cast<int>(-n)));
		return static_cast<int>(n);
	}
	if (event != want) {
		fprintf(stderr, "CM event %u, expected %u\n", event, want);
		return -FI_EOTHER;
	}
	return 0;
}

int link::accept_one()
{
	FI_CALL(fi_passive_ep(fabric_, info_, &pep_, nullptr));
	FI_CALL(fi_pep_bind(pep_, &eq_->fid, 0));
	FI_CALL(fi_listen(pep_));
	printf("LISTENING prov=%s\n", opt_.prov.c_str()); /* test drivers wait for it */
	fflush(stdout);
	struct fi_eq_cm_entry entry = {};
	FI_CALL(cm_event(FI_CONNREQ, &entry));
	conn_info_ = entry.info;
	FI_CALL(fi_domain(fabric_, conn_info_, &domain_, nullptr));
	FI_CALL(open_cq());
	FI_CALL(fi_endpoint(domain_, conn_info_, &ep_, nullptr));
	FI_CALL(bind_ep());
	FI_CALL(post_recv());
	FI_CALL(fi_accept(ep_, nullptr, 0));
	FI_CALL(cm_event(FI_CONNECTED, &entry));
	return 0;
}

int link::connect_one()
{
	FI_CALL(fi_domain(fabric_, info_, &domain_, nullptr));
	FI_CALL(open_cq());
	FI_CALL(fi_endpoint(domain_, info_, &ep_, nullptr));
	FI_CALL(bind_ep());
	FI_CALL(post_recv());
	FI_CALL(fi_connect(ep_, info_->dest_addr, nullptr, 0));
	struct fi_eq_cm_entry entry = {};
	FI_CALL(cm_event(FI_CONNECTED, &entry));
	return 0;
}

/* -e rdm: the domain, CQ, AV and endpoint, enabled, with receive buffers of at least
 * name_max bytes (the client's name comes in one) */
int link::rdm_endpoint()
{
	FI_CALL(fi_domain(fabric_, info_, &domain_, nullptr));
	FI_CALL(open_cq());
	struct fi_av_attr av_attr = {};
	av_attr.type = FI_AV_TABLE;
	FI_CALL(fi_av_open(domain_, &av_attr, &av_, nullptr));
	FI_CALL(fi_endpoint(domain_, info_, &ep_, nullptr));
	return bind_ep();
}

/* the server learns the client's address from its first message */
int link::rdm_server()
{
	FI_CALL(rdm_endpoint());
	FI_CALL(post_recv(name_max));
	printf("LISTENING prov=%s\n", opt_.prov.c_str()); /* test drivers wait for it */
	fflush(stdout);
	FI_CALL(setup_completion(&rctx_));
	FI_CALL(insert_peer(rbuf_.data()));
	return post_recv();
}

/* the client sends its name and waits until it went: ofi_rxm connects meanwhile, and
 * none of it is counted with the ping-pong's calls (plain fi_send and fi_cq_read) */
int link::rdm_client()
{
	FI_CALL(rdm_endpoint());
	FI_CALL(insert_peer(info_->dest_addr));
	FI_CALL(post_recv());
	size_t len = buf_.size();
	FI_CALL(fi_getname(&ep_->fid, buf_.data(), &len));
	for (;;) {
		ssize_t ret = fi_send(ep_, buf_.data(), len, fi_mr_desc(mr_), peer_, &sctx_);
		if (ret == 0)
			break;
		if (ret != -FI_EAGAIN)
			FI_CALL(ret);
		fi_cq_read(cq_, nullptr, 0); /* progress */
	}
	return setup_completion(&sctx_);
}

/* -e rdm: spins on fi_cq_read until the completion of ctx, the only one expected */
int link::setup_completion(void *ctx)
{
	for (;;) {
		struct fi_cq_entry e = {};
		ssize_t n = fi_cq_read(cq_, &e, 1);
		if (n == -FI_EAGAIN)
			continue;
		if (n == 1 && e.op_context == ctx)
			return 0;
		if (n == -FI_EAVAIL)
			return cq_error(cq_, "address exchange");
		fprintf(stderr, "address exchange: unexpected completion (%zd)\n", n);
		return n < 0 ? static_cast<int>(n) : -FI_EOTHER;
	}
}

int link::insert_peer(const void *addr)
{
	int n = fi_av_insert(av_, addr, 1, &peer_, 0, nullptr);
	if (n != 1) {
		fprintf(stderr, "fi_av_insert: %d\n", n);
		return n < 0 ? n : -FI_EINVAL;
	}
	return 0;
}

int link::open_cq()
{
	struct fi_cq_attr attr = {};
	attr.format = FI_CQ_FORMAT_CONTEXT;
	attr.size = 64;
	attr.wait_obj = opt_.wait_obj;
	if (opt_.how == mode::cntr_wait) {
		/* the CQ stays empty (selective completion): counters tell */
		attr.wait_obj = FI_WAIT_NONE;
		struct fi_cntr_attr cattr = {};
		cattr.events = FI_CNTR_EVENTS_COMP;
		cattr.wait_obj = opt_.wait_obj;
		int ret = fi_cntr_open(domain_, &cattr, &rcntr_, nullptr);
		if (!ret)
			ret = fi_cntr_open(domain_, &cattr, &scntr_, nullptr);
		if (ret) {
			fprintf(stderr, "fi_cntr_open(wait_obj %d): %s\n", cattr.wait_obj,
			        fi_strerror(-ret));
			unsupported_ = ret == -FI_ENOSYS || ret == -FI_EINVAL;
			return ret;
		}
	}
	if (opt_.how == mode::waitset) {
		attr.wait_obj = FI_WAIT_SET;
		attr.wait_set = waitset_;
	}
	int ret = fi_cq_open(domain_, &attr, &cq_, &cq_) /* context: itself */;
	if (ret) {
		fprintf(stderr, "fi_cq_open(wait_obj %d): %s\n", attr.wait_obj, fi_strerror(-ret));
		unsupported_ = ret == -FI_ENOSYS || ret == -FI_EINVAL;
		return ret;
	}
	const bool in_set = opt_.how == mode::pollset || opt_.how == mode::waitset;
	/* idle members: half before the CQ in use, half after it */
	const int idle = in_set ? opt_.members - 1 : 0;
	struct fi_cq_attr idle_attr = attr;
	idle_attr.size = 16;
	for (int i = 0; i < idle; i++) {
		struct fid_cq *c = nullptr;
		FI_CALL(fi_cq_open(domain_, &idle_attr, &c, nullptr));
		idle_.push_back(c);
	}
	if (opt_.how == mode::pollset) {
		struct fi_poll_attr pattr = {};
		ret = fi_sets::poll_open(domain_, &pattr, &pollset_);
		for (int i = 0; !ret && i < idle / 2; i++)
			ret = fi_sets::poll_add(pollset_, &idle_[i]->fid, 0);
		if (!ret)
			ret = fi_sets::poll_add(pollset_, &cq_->fid, 0);
		for (int i = idle / 2; !ret && i < idle; i++)
			ret = fi_sets::poll_add(pollset_, &idle_[i]->fid, 0);
		if (ret) {
			fprintf(stderr, "fi_poll_open/add: %s\n", fi_strerror(-ret));
			unsupported_ = ret == -FI_ENOSYS;
			return ret;
		}
	}
	if (opt_.how == mode::trywait_poll) {
		ret = fi_control(&cq_->fid, FI_GETWAIT, &wait_fd_);
		if (ret) {
			fprintf(stderr, "fi_control(FI_GETWAIT): %s\n", fi_strerror(-ret));
			unsupported_ = true;
			return ret;
		}
	}
	return 0;
}

int link::bind_ep()
{
	if (opt_.rdm)
		FI_CALL(fi_ep_bind(ep_, &av_->fid, 0));
	else
		FI_CALL(fi_ep_bind(ep_, &eq_->fid, 0));
	if (opt_.how == mode::cntr_wait) {
		FI_CALL(
		    fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION));
		int ret = fi_ep_bind(ep_, &rcntr_->fid, FI_RECV);
		if (!ret)
			ret = fi_ep_bind(ep_, &scntr_->fid, FI_SEND);
		if (ret) {
			fprintf(stderr, "fi_ep_bind(counter): %s\n", fi_strerror(-ret));
			unsupported_ = ret == -FI_ENOSYS;
			return ret;
		}
	} else {
		FI_CALL(fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV));
	}
	FI_CALL(fi_enable(ep_));
	const size_t bytes = std::max<size_t>(opt_.size, opt_.rdm ? name_max : 1);
	buf_.assign(bytes, 0);
	rbuf_.assign(bytes, 0);
	FI_CALL(fi_mr_reg(domain_, buf_.data(), buf_.size(), FI_SEND, 0, 0, 0, &mr_, nullptr));
	FI_CALL(fi_mr_reg(domain_, rbuf_.data(), rbuf_.size(), FI_RECV, 0, 1, 0, &rmr_, nullptr));
	return 0;
}

int link::post_recv()
{
	return post_recv(opt_.size);
}

int link::post_recv(size_t len)
{
	for (;;) {
		ssize_t ret = vwait_bench_recv(ep_, rbuf_.data(), len, fi_mr_desc(rmr_),
		                               FI_ADDR_UNSPEC, &rctx_);
		if (ret != -FI_EAGAIN)
			return static_cast<int>(ret);
	}
}

int link::post_send()
{
	for (;;) {
		ssize_t ret =
		    vwait_bench_send(ep_, buf_.data(), opt_.size, fi_mr_desc(mr_), peer_, &sctx_);
		if (ret != -FI_EAGAIN)
			return static_cast<int>(ret);
		vwait_bench_cq_read(cq_, nullptr, 0); /* progress */
	}
}

/* one completion, waited for as the mode says */
int link::wait_one(struct fi_cq_entry *e)
{
	for (;;) {
		ssize_t n;
		switch (opt_.how) {
		case mode::spin:
		case mode::cntr_wait:  /* not used: cntr_round waits on counters */
		case mode::empty_read: /* not used */
			n = vwait_bench_cq_read(cq_, e, 1);
			if (n == -FI_EAGAIN && opt_.bursts && opt_.server.empty() &&
			    opt_.go_fifo.empty())
				backoff();
			else
				empty_run_ = 0;
			break;
		case mode::sread:
			n = fi_cq_sread(cq_, e, 1, nullptr, -1);
			break;
		case mode::trywait_poll: {
			n = vwait_bench_cq_read(cq_, e, 1);
			if (n != -FI_EAGAIN)
				break;
			struct fid *fids[1] = {&cq_->fid};
			if (fi_trywait(fabric_, fids, 1) == FI_SUCCESS) {
				struct pollfd pfd = {wait_fd_, POLLIN, 0};
				poll(&pfd, 1, -1);
			}
			continue;
		}
		case mode::pollset: {
			void *ctx[1] = {nullptr};
			int k = fi_sets::poll(pollset_, ctx, 1);
			if (k < 0) {
				fprintf(stderr, "fi_poll: %s\n", fi_strerror(-k));
				return k;
			}
			if (k == 0)
				continue;
			if (ctx[0] != &cq_) {
				fprintf(stderr, "fi_poll named %p, not the CQ in use (%p)\n",
				        ctx[0], (void *)&cq_);
				return -FI_EOTHER;
			}
			n = vwait_bench_cq_read(cq_, e, 1);
			break;
		}
		case mode::waitset: {
			n = vwait_bench_cq_read(cq_, e, 1);
			if (n != -FI_EAGAIN)
				break;
			int ret = fi_sets::wait(waitset_, -1);
			if (ret && ret != -FI_ETIMEDOUT && ret != -FI_EAGAIN) {
				fprintf(stderr, "fi_wait: %s\n", fi_strerror(-ret));
				return ret;
			}
			continue;
		}
		}
		if (n == 1)
			return 0;
		if (n == -FI_EAGAIN)
			continue;
		if (n == -FI_EAVAIL)
			return cq_error(cq_, "completion error");
		fprintf(stderr, "reading the CQ: %s\n", fi_strerror(static_cast<int>(-n)));
		return static_cast<int>(n);
	}
}

/* -R, the server between bursts: after 2 ms without a message, 500 us of sleep per read
 * (the clock is read once per 256 empty reads, to stay out of the spinning loop) */
void link::backoff()
{
	if (++empty_run_ % 256 != 0)
		return;
	auto now = std::chrono::steady_clock::now();
	if (empty_run_ == 256)
		idle_since_ = now;
	else if (now - idle_since_ > std::chrono::milliseconds(2)) {
		struct timespec ts = {0, 500000};
		nanosleep(&ts, nullptr);
	}
}

/* cntr-wait: blocks until counter c reaches v (cntr-spin: polls it) */
int link::cntr_reach(struct fid_cntr *c, uint64_t v)
{
	int ret = 0;
	if (opt_.wait_obj == FI_WAIT_NONE) {
		const uint64_t errs = fi_cntr_readerr(c);
		while (fi_cntr_read(c) < v) {
			if (fi_cntr_readerr(c) != errs) {
				ret = -FI_EAVAIL;
				break;
			}
		}
	} else {
		ret = fi_cntr_wait(c, v, -1);
	}
	if (ret == -FI_EAVAIL)
		fprintf(stderr, "counter: %llu operations failed\n",
		        static_cast<unsigned long long>(fi_cntr_readerr(c)));
	else if (ret)
		fprintf(stderr, "fi_cntr_wait: %s\n", fi_strerror(-ret));
	return ret;
}

/* one round of the ping-pong, waited for with counters (i counts from 0) */
int link::cntr_round(bool client, uint64_t i)
{
	if (client) {
		memset(buf_.data(), static_cast<int>(i & 0xff), opt_.size);
		FI_CALL(post_send());
		FI_CALL(cntr_reach(rcntr_, i + 1));
		FI_CALL(cntr_reach(scntr_, i + 1));
		if (opt_.size && rbuf_[opt_.size - 1] != static_cast<char>(i & 0xff)) {
			fprintf(stderr, "round %llu: wrong data\n",
			        static_cast<unsigned long long>(i));
			return -FI_EIO;
		}
		return post_recv();
	}
	FI_CALL(cntr_reach(rcntr_, i + 1));
	FI_CALL(cntr_reach(scntr_, i)); /* the previous pong went */
	memcpy(buf_.data(), rbuf_.data(), opt_.size);
	FI_CALL(post_recv());
	return post_send();
}

/* waits until both the send and the receive of this round completed */
int link::finish_round()
{
	bool sent = false, received = false;
	while (!sent || !received) {
		struct fi_cq_entry e = {};
		FI_CALL(wait_one(&e));
		if (e.op_context == &sctx_)
			sent = true;
		else if (e.op_context == &rctx_)
			received = true;
	}
	return 0;
}

/* one round of the ping-pong (i counts every round from 0): the client sends and waits
 * for the answer, the server waits for a message and answers it */
int link::round(bool client, int i)
{
	if (opt_.how == mode::cntr_wait)
		return cntr_round(client, static_cast<uint64_t>(i));
	if (client) {
		memset(buf_.data(), i & 0xff, opt_.size);
		FI_CALL(post_send());
		if (opt_.data_first && opt_.size)
			while (__atomic_load_n(&rbuf_[opt_.size - 1], __ATOMIC_ACQUIRE) !=
			       static_cast<char>(i & 0xff)) {
			}
		FI_CALL(finish_round());
		if (opt_.size && rbuf_[opt_.size - 1] != static_cast<char>(i & 0xff)) {
			fprintf(stderr, "round %d: wrong data\n", i);
			return -FI_EIO;
		}
		return post_recv();
	}
	/* wait for the ping (the previous pong's send completion may come before or after
	 * it), repost, answer with the same bytes */
	bool pinged = false;
	while (!pinged || send_pending_) {
		struct fi_cq_entry e = {};
		FI_CALL(wait_one(&e));
		if (e.op_context == &rctx_ && !pinged)
			pinged = true;
		else if (e.op_context == &sctx_ && send_pending_)
			send_pending_ = false;
		else {
			fprintf(stderr, "server: unexpected completion\n");
			return -FI_EOTHER;
		}
	}
	memcpy(buf_.data(), rbuf_.data(), opt_.size);
	FI_CALL(post_recv());
	FI_CALL(post_send());
	send_pending_ = true;
	return 0;
}

/* the server's last pong must have gone before it closes */
int link::drain(int rounds)
{
	if (opt_.how == mode::cntr_wait && opt_.server.empty())
		FI_CALL(cntr_reach(scntr_, static_cast<uint64_t>(rounds)));
	while (send_pending_) {
		struct fi_cq_entry e = {};
		FI_CALL(wait_one(&e));
		if (e.op_context == &sctx_)
			send_pending_ = false;
	}
	return 0;
}

int link::add_recv_slots(size_t n)
{
	slot_buf_.assign(n * opt_.size, 0);
	slot_ctx_.assign(n, fi_context{});
	FI_CALL(fi_mr_reg(domain_, slot_buf_.data(), slot_buf_.size(), FI_RECV, 0, 2, 0, &slot_mr_,
	                  nullptr));
	for (size_t i = 0; i < n; i++)
		FI_CALL(post_slot(i));
	return 0;
}

/* -X: reposts slot i of the receive slots (i == their number: rbuf_) */
int link::post_slot(size_t i)
{
	if (i == slot_ctx_.size())
		return post_recv();
	for (;;) {
		ssize_t ret = vwait_bench_recv(ep_, &slot_buf_[i * opt_.size], opt_.size,
		                               fi_mr_desc(slot_mr_), FI_ADDR_UNSPEC, &slot_ctx_[i]);
		if (ret != -FI_EAGAIN)
			return static_cast<int>(ret);
	}
}

/* -X: the slot of a receive's context (window: rbuf_'s) */
size_t link::slot_of(void *ctx) const
{
	if (ctx == &rctx_)
		return slot_ctx_.size();
	return static_cast<size_t>(static_cast<struct fi_context *>(ctx) - slot_ctx_.data());
}

void link::teardown()
{
	if (ep_)
		fi_close(&ep_->fid);
	if (mr_)
		fi_close(&mr_->fid);
	if (rmr_)
		fi_close(&rmr_->fid);
	if (slot_mr_)
		fi_close(&slot_mr_->fid);
	if (pollset_) {
		if (cq_)
			fi_sets::poll_del(pollset_, &cq_->fid, 0);
		for (struct fid_cq *c : idle_)
			fi_sets::poll_del(pollset_, &c->fid, 0);
		fi_close(&pollset_->fid);
	}
	for (struct fid_cq *c : idle_)
		fi_close(&c->fid);
	if (av_)
		fi_close(&av_->fid);
	if (cq_)
		fi_close(&cq_->fid);
	if (rcntr_)
		fi_close(&rcntr_->fid);
	if (scntr_)
		fi_close(&scntr_->fid);
	if (pep_)
		fi_close(&pep_->fid);
	if (domain_)
		fi_close(&domain_->fid);
	if (eq_)
		fi_close(&eq_->fid);
	if (waitset_)
		fi_close(&waitset_->fid);
	if (fabric_)
		fi_close(&fabric_->fid);
	fi_freeinfo(conn_info_);
	fi_freeinfo(info_);
}

} // namespace vwait_bench
