/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* scale_util: what one wake costs the util layer when a set has many members, on the host, with
 * no device: each member is a CQ-like object fed by a "completion channel" (an eventfd and a list
 * of the members that fired, as ibv_get_cq_event names the CQ), armed by trywait like a verbs
 * CQ, so that the wake path is the one a verbs CQ takes through the util layer.
 *
 *   waitset  N members bound to one FI_WAIT_FD wait set sharing one channel (as the verbs CQs
 *            of one device bound to one wait set share one ibv_comp_channel); fi_wait, then
 *            read the member that fired
 *   pollset  N members (FI_WAIT_NONE) on one channel that the poll set drains; fi_poll until it
 *            names a member, then read it
 *   epoll    N members, each an FI_WAIT_FD object with a channel of its own, their FI_GETWAIT
 *            fds in one application epoll: epoll_wait, read the member whose fd fired, then
 *            fi_trywait on that member only (the others stay armed: they were not read)
 *
 * Each round fires one of the A active members (round robin) and runs the wait until the
 * member's entry is read. The rounds run in one thread (fire, then wait: the wait finds the
 * channel readable and does not sleep), so that every instruction of a wake is counted and the
 * count is the same run to run:
 *
 *   valgrind --tool=callgrind --toggle-collect=scale_round test/bench/scale_util -m waitset -N 4096
 *
 * prints instructions per round (Ir of scale_round / rounds); the system calls of the rounds are
 * the ones strace -f shows between the two close(-37) that bracket them. -t: the rounds are a
 * ping-pong between two threads instead: the main thread fires a member 50 us after the waiter
 * read the previous entry, the waiter (a thread of its own: its system calls are the lines of
 * strace -f not of the main thread) reads, finds nothing and sleeps in fi_wait / epoll_wait
 * (fi_poll spins); us_per_round includes the 50 us.
 *
 * -s (waitset): no fi_trywait on the set between rounds, so that every fi_wait finds its entry
 * in its poll phase and none reaches the prepare phase (which arms): a waiter that spins
 * through a busy ping-pong, where the members that were never armed must not be looked at
 * on every pass.
 *
 *   threads      T threads in fi_cq_sread on one CQ, a work queue fed one completion at a time
 *   threads-set  T threads each in fi_cq_sread on its own CQ of one wait set (run_threads);
 *                -P block: with the block wait policy (every wait sleeps; default adaptive)
 *
 * -B: a burst: each round fires all A active members at once, and the waiter reads all of
 * them (wakes_per_round: the waits it took; per completion = per round / A).
 *
 *   tcp-waitset, tcp-pollset, tcp-epoll: the same rounds over libfabric's own util objects
 *   (the tcp provider's CQs through the public API; tcp_bench), the anchor
 *
 * usage: scale_util [-m [tcp-]waitset|[tcp-]pollset|[tcp-]epoll|threads|threads-set]
 *                   [-N members] [-A active] [-I rounds] [-t] [-s] [-B] [-T threads]
 *                   [-P block|adaptive]
 * Prints one RESULT line. Exit 0, 1 on error, 2 on usage. */
#include "../unit/work_queue.h"
#include "proc_self.h"
#include "tcp_env.h"
#include "vwait/fi_deprecated.h"
#include "vwait/util/cq.h"
#include "vwait/util/fd.h"
#include "vwait/util/object.h"
#include "vwait/util/poll.h"
#include "vwait/util/trywait.h"
#include "vwait/util/wait.h"
#include "vwait/util/waitable.h"

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/providers/fi_prov.h>

#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

/* one round of the measured ones (defined below, counted by callgrind alone) */
extern "C" int scale_round(void *b, int round);

namespace
{

using clk = std::chrono::steady_clock;
namespace util = vwait::util;

struct fi_provider scale_prov = {
    .version = FI_VERSION(0, 1),
    .fi_version = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION),
    .context = {},
    .name = "vwait-scale",
    .getinfo = nullptr,
    .fabric = nullptr,
    .cleanup = nullptr,
};

class member;

/* A completion channel: an eventfd, and the members whose events it holds. */
class channel
{
public:
	channel() : efd_(util::fd::eventfd_nonblock()) {}
	int fd() const noexcept { return efd_.get(); }
	void post(member *m)
	{
		{
			std::lock_guard<std::mutex> lock(mu_);
			fired_.push_back(m);
		}
		uint64_t one = 1;
		if (::write(efd_.get(), &one, sizeof(one)) != sizeof(one))
			abort();
	}
	static void drain(void *arg) noexcept;
	util::event_source source() noexcept
	{
		util::event_source s;
		s.fd = fd();
		s.drain = drain;
		s.arg = this;
		return s;
	}
	void reserve(size_t n) { fired_.reserve(n); }

private:
	util::fd efd_;
	std::mutex mu_;
	std::vector<member *> fired_;
	std::vector<member *> taken_;
};

/* A CQ-like member: "hardware" entries move to its queue on progress; trywait arms it, and an
 * entry that arrives while it is armed posts an event on its channel. */
class member final : public util::waitable
{
public:
	member(channel *ch, bool evented) : ch_(ch), evented_(evented)
	{
		ops_.size = sizeof(ops_);
		ops_.control = [](struct fid *f, int cmd, void *arg) noexcept {
			return reinterpret_cast<holder *>(f)->self->answer_control(cmd, arg);
		};
		h_.fid.fclass = FI_CLASS_CQ;
		h_.fid.context = this;
		h_.fid.ops = &ops_;
		h_.self = this;
	}
	~member() override { close_wait(); }
	struct fid *fid() noexcept { return &h_.fid; }
	channel *chan() noexcept { return ch_; }

	/* the device side: a completion arrives */
	void fire()
	{
		hw_.fetch_add(1);
		if (armed_.exchange(false))
			ch_->post(this);
	}
	/* fi_cq_read of one entry */
	bool read() noexcept
	{
		progress();
		long q = queued_.load();
		while (q > 0 && !queued_.compare_exchange_weak(q, q - 1))
			;
		return q > 0;
	}

	bool ready() noexcept override
	{
		progress();
		return queued_.load() > 0;
	}
	int trywait() noexcept override
	{
		if (queued_.load() > 0)
			return -FI_EAGAIN;
		armed_.store(true);
		arms.fetch_add(1, std::memory_order_relaxed);
		return ready() ? -FI_EAGAIN : 0;
	}
	void *poll_context() const noexcept override { return h_.fid.context; }
	bool poll_ready(uint64_t &) noexcept override
	{
		if (ready())
			return true;
		return trywait() != 0;
	}
	bool events_from(util::event_source &out) const noexcept override
	{
		if (!evented_)
			return false;
		out = ch_->source();
		return true;
	}

	static std::atomic<unsigned long> arms;

private:
	void progress() noexcept
	{
		if (hw_.load(std::memory_order_relaxed))
			queued_.fetch_add(hw_.exchange(0));
	}

	struct holder {
		struct fid fid;
		member *self;
	};
	channel *ch_;
	bool evented_;
	std::atomic<long> hw_{0};
	std::atomic<long> queued_{0};
	std::atomic<bool> armed_{false};
	holder h_ = {};
	struct fi_ops ops_ = {};
};

std::atomic<unsigned long> member::arms{0};

void channel::drain(void *arg) noexcept
{
	auto *c = static_cast<channel *>(arg);
	uint64_t v;
	if (::read(c->efd_.get(), &v, sizeof(v)) != sizeof(v))
		return;
	{
		std::lock_guard<std::mutex> lock(c->mu_);
		c->taken_.swap(c->fired_);
	}
	for (member *m : c->taken_)
		m->notify();
	c->taken_.clear();
}

enum class mode { waitset, pollset, epoll };

/* wait calls (fi_wait, fi_poll, epoll_wait) of the rounds: the wakes */
unsigned long wakes = 0;

struct options {
	mode how = mode::waitset;
	const char *name = "waitset";
	int members = 16;
	int active = 1;
	int rounds = 1000;
	bool threads = false;
	bool spin = false;  /* -s: waitset rounds without fi_trywait on the set */
	bool burst = false; /* -B: all A active members fire each round, all are read */
	bool tcp = false;   /* -m tcp-*: libfabric's util objects (the tcp provider) */
	/* -m threads / threads-set: the work-queue run (run_threads) instead of rounds */
	enum class queue { none, one_cq, own_cqs } work = queue::none;
	int consumers = 8;  /* -T */
	bool block = false; /* -P block: the waits never spin (default: adaptive) */
};

/* closes a harness's wait set and poll set, either of which may be absent */
void close_sets(struct fid_wait *&set, struct fid_poll *&pset)
{
	if (set)
		fi_close(&set->fid);
	set = nullptr;
	if (pset)
		fi_close(&pset->fid);
	pset = nullptr;
}

/* What scale_round runs: one round of a harness. */
class rounds
{
public:
	virtual ~rounds() = default;
	virtual int round(int r) = 0;
};

class bench final : public rounds
{
public:
	explicit bench(const options &o) : opt_(o) {}
	~bench() override { close(); }
	int round(int r) override;

	int open()
	{
		const size_t n = static_cast<size_t>(opt_.members);
		const bool shared = opt_.how != mode::epoll;
		if (shared) {
			chans_.push_back(std::make_unique<channel>());
			chans_[0]->reserve(n);
		}
		if (opt_.how == mode::waitset) {
			struct fi_wait_attr wa = {};
			wa.wait_obj = FI_WAIT_FD;
			util::wait_policy block;
			block.kind = util::wait_policy_kind::block;
			int ret = util::wait_open(&scale_prov, &wa, &set_, {}, block);
			if (ret)
				return ret;
			if ((ret = util::get_waiter(&set_->fid, &waiter_)))
				return ret;
			ret = waiter_->add_source(chans_[0]->fd(), POLLIN, channel::drain,
			                          chans_[0].get());
			if (ret)
				return ret;
		} else if (opt_.how == mode::pollset) {
			int ret = util::poll_open(&scale_prov, nullptr, &pset_);
			if (ret)
				return ret;
		} else {
			ep_ = util::fd(epoll_create1(EPOLL_CLOEXEC));
			if (!ep_)
				return -FI_EMFILE;
		}
		for (size_t i = 0; i < n; ++i) {
			channel *ch = nullptr;
			if (shared) {
				ch = chans_[0].get();
			} else {
				chans_.push_back(std::make_unique<channel>());
				ch = chans_.back().get();
			}
			members_.push_back(std::make_unique<member>(ch, opt_.how == mode::pollset));
			member *m = members_.back().get();
			int ret = 0;
			switch (opt_.how) {
			case mode::waitset:
				ret = m->open_wait(&scale_prov, FI_WAIT_SET, set_);
				break;
			case mode::pollset:
				ret = fi_sets::poll_add(pset_, m->fid(), 0);
				break;
			case mode::epoll: {
				util::wait_policy block;
				block.kind = util::wait_policy_kind::block;
				m->set_wait_policy(block);
				ret = m->open_wait(&scale_prov, FI_WAIT_FD, nullptr);
				if (ret)
					break;
				ret = m->wait_object()->add_source(ch->fd(), POLLIN, channel::drain,
				                                   ch);
				if (ret)
					break;
				int wfd = -1;
				ret = fi_control(m->fid(), FI_GETWAIT, &wfd);
				if (ret)
					break;
				struct epoll_event ev = {};
				ev.events = EPOLLIN;
				ev.data.ptr = m;
				if (epoll_ctl(ep_.get(), EPOLL_CTL_ADD, wfd, &ev))
					ret = -errno;
				break;
			}
			}
			if (ret) {
				fprintf(stderr, "member %zu: %s\n", i, fi_strerror(-ret));
				return ret;
			}
		}
		pending_.reserve(static_cast<size_t>(opt_.active));
		ctx_.resize(static_cast<size_t>(opt_.active));
		evs_.resize(static_cast<size_t>(opt_.active));
		/* every member armed once: the set sleeps until one of them fires */
		return settle();
	}

	/* The wait until member m's entry is read. wait_first: m has fired already (one thread
	 * fires, then waits), so look only after the wait; a read first would find the entry in
	 * the "hardware" queue and skip the wake this program measures. */
	int wait_for(member *m, bool wait_first)
	{
		for (;;) {
			if (!wait_first && m->read())
				return rearm(m);
			wait_first = false;
			if (int ret = wait_once(m))
				return ret;
		}
	}

	/* Ready to sleep again. epoll: fi_trywait on the member just read, so that its fd may be
	 * slept on again (the members not read stay armed). waitset: fi_trywait on the set (what
	 * fi_wait's prepare phase does before it sleeps: arms the members that may hold
	 * something), so that the next round's wake comes through the channel, not through a
	 * poll that finds the entry; with -t the waiter sleeps in fi_wait, which does that
	 * itself. pollset: nothing (fi_poll arms what it finds empty). */
	int rearm(member *m)
	{
		struct fid *f = nullptr;
		if (opt_.how == mode::epoll)
			f = m->fid();
		else if (opt_.how == mode::waitset && !opt_.threads && !opt_.spin)
			f = &set_->fid;
		else
			return 0;
		for (int i = 0; i < 100; ++i) {
			if (util::trywait(&scale_prov, &f, 1) == 0)
				return 0;
			m->read();
		}
		return -FI_EOTHER;
	}

	/* -B: the A active members fired; wait until each one's entry is read. The harness
	 * knows which members fired (as with A = 1) and reads those after each wait. */
	int wait_all()
	{
		pending_.clear();
		for (int i = 0; i < opt_.active; ++i)
			pending_.push_back(active(i));
		while (!pending_.empty()) {
			++wakes;
			if (int ret = wait_any())
				return ret;
			for (size_t i = 0; i < pending_.size();) {
				member *m = pending_[i];
				if (!m->read()) {
					++i;
					continue;
				}
				if (opt_.how == mode::epoll)
					if (int ret = rearm(m))
						return ret;
				pending_[i] = pending_.back();
				pending_.pop_back();
			}
		}
		return opt_.how == mode::waitset ? rearm(active(0)) : 0;
	}

	/* one wait of wait_all: fi_poll and epoll_wait take up to A */
	int wait_any()
	{
		switch (opt_.how) {
		case mode::waitset: {
			int ret = fi_sets::wait(set_, 5000);
			return ret == -FI_EAGAIN ? 0 : ret;
		}
		case mode::pollset: {
			int k = fi_sets::poll(pset_, ctx_.data(), opt_.active);
			return k < 0 ? k : 0;
		}
		case mode::epoll: {
			int k = epoll_wait(ep_.get(), evs_.data(), opt_.active, 5000);
			return k <= 0 ? (k == 0 ? -FI_ETIMEDOUT : -errno) : 0;
		}
		}
		return 0;
	}

	int wait_once(member *m)
	{
		++wakes;
		switch (opt_.how) {
		case mode::waitset: {
			int ret = fi_sets::wait(set_, 5000);
			return ret == -FI_EAGAIN ? 0 : ret;
		}
		case mode::pollset: {
			void *ctx[1];
			int k = fi_sets::poll(pset_, ctx, 1);
			if (k < 0)
				return k;
			if (k == 1 && ctx[0] != m) {
				fprintf(stderr, "fi_poll named an idle member\n");
				return -FI_EOTHER;
			}
			return 0;
		}
		case mode::epoll: {
			struct epoll_event ev;
			int k = epoll_wait(ep_.get(), &ev, 1, 5000);
			if (k <= 0)
				return k == 0 ? -FI_ETIMEDOUT : -errno;
			if (ev.data.ptr != m) {
				fprintf(stderr, "epoll named an idle member\n");
				return -FI_EOTHER;
			}
			return 0;
		}
		}
		return 0;
	}

	member *active(int round) noexcept
	{
		/* the active ones spread over the set */
		size_t stride = members_.size() / static_cast<size_t>(opt_.active);
		return members_[(static_cast<size_t>(round % opt_.active)) * stride].get();
	}

	int settle()
	{
		switch (opt_.how) {
		case mode::waitset:
			return fi_sets::wait(set_, 0) == -FI_ETIMEDOUT ? 0 : -FI_EOTHER;
		case mode::pollset: {
			void *ctx[1];
			return fi_sets::poll(pset_, ctx, 1);
		}
		case mode::epoll: {
			std::vector<struct fid *> all;
			for (auto &m : members_)
				all.push_back(m->fid());
			return util::trywait(&scale_prov, all.data(), static_cast<int>(all.size()));
		}
		}
		return 0;
	}

	void close()
	{
		for (auto &m : members_) {
			if (pset_)
				fi_sets::poll_del(pset_, m->fid(), 0);
			m->close_wait();
		}
		members_.clear();
		if (waiter_ && !chans_.empty())
			waiter_->remove_source(chans_[0]->fd());
		waiter_ = nullptr;
		close_sets(set_, pset_);
		chans_.clear();
	}

private:
	options opt_;
	std::vector<std::unique_ptr<channel>> chans_;
	std::vector<std::unique_ptr<member>> members_;
	struct fid_wait *set_ = nullptr;
	util::waiter *waiter_ = nullptr;
	struct fid_poll *pset_ = nullptr;
	util::fd ep_;
	std::vector<member *> pending_;
	std::vector<void *> ctx_;
	std::vector<struct epoll_event> evs_;
};

int bench::round(int r)
{
	if (opt_.burst) {
		for (int i = 0; i < opt_.active; ++i)
			active(i)->fire();
		return wait_all();
	}
	member *m = active(r);
	m->fire();
	return wait_for(m, true);
}

/* -m tcp-waitset|tcp-pollset|tcp-epoll: the same rounds over libfabric's own util objects,
 * through the public API: N CQs of the tcp provider's domain, in an fi_wait_open wait set
 * (FI_WAIT_SET), in an fi_poll_open poll set (FI_WAIT_NONE), or FI_WAIT_FD each with its
 * FI_GETWAIT fd in an application epoll. A round signals the active CQs (fi_cq_signal: no
 * connection needed, as bench_util's tcp part) and waits once per wake until each of them was
 * seen: fi_wait returning, fi_poll or epoll naming it; then fi_cq_read on it (it finds
 * nothing: a signal writes no entry) and, epoll, fi_trywait on it.
 *
 * tcp-waitset runs as bench_util's wake_latency does: the rounds (scale_round) in a thread of
 * their own that sleeps in fi_wait, the signals from the main thread once it is about to. A
 * signal written before fi_wait starts is lost: the util wait set's fi_wait first drains its
 * signal descriptor, then polls its members (a signal adds no entry), then sleeps until the
 * timeout. So the main thread signals 50 us after the round began and again every 2 ms until
 * the round is read (resignals_per_round: 0 unless a signal was lost). tcp-pollset: a signal
 * does not reach a CQ without a wait object, so each round is one fi_poll over N idle CQs (the
 * poll set's scan, a floor for a wake). */
class tcp_bench final : public rounds
{
public:
	explicit tcp_bench(const options &o) : opt_(o) {}
	~tcp_bench() override { close(); }

	int open()
	{
		int ret = tcp_open(env_);
		if (ret) {
			fprintf(stderr, "tcp: fabric/domain on 127.0.0.1: %s\n", fi_strerror(-ret));
			return ret;
		}
		struct fi_cq_attr ca = {};
		ca.format = FI_CQ_FORMAT_CONTEXT;
		ca.size = 16;
		if (opt_.how == mode::waitset) {
			struct fi_wait_attr wa = {};
			wa.wait_obj = FI_WAIT_FD;
			if ((ret = fi_sets::wait_open(env_.fabric, &wa, &set_))) {
				fprintf(stderr, "tcp: fi_wait_open(FI_WAIT_FD): %s\n",
				        fi_strerror(-ret));
				return ret;
			}
			ca.wait_obj = FI_WAIT_SET;
			ca.wait_set = set_;
		} else if (opt_.how == mode::pollset) {
			struct fi_poll_attr pa = {};
			if ((ret = fi_sets::poll_open(env_.domain, &pa, &pset_))) {
				fprintf(stderr, "tcp: fi_poll_open: %s\n", fi_strerror(-ret));
				return ret;
			}
			ca.wait_obj = FI_WAIT_NONE;
		} else {
			ep_ = util::fd(epoll_create1(EPOLL_CLOEXEC));
			if (!ep_)
				return -FI_EMFILE;
			ca.wait_obj = FI_WAIT_FD;
		}
		for (int i = 0; i < opt_.members; ++i) {
			struct fid_cq *cq = nullptr;
			ret = fi_cq_open(env_.domain, &ca, &cq, cq_context(i));
			if (ret) {
				fprintf(stderr, "tcp: fi_cq_open %d (wait_obj %d): %s\n", i,
				        ca.wait_obj, fi_strerror(-ret));
				return ret;
			}
			cqs_.push_back(cq);
			if (pset_)
				ret = fi_sets::poll_add(pset_, &cq->fid, 0);
			else if (ep_) {
				int wfd = -1;
				ret = fi_control(&cq->fid, FI_GETWAIT, &wfd);
				struct epoll_event ev = {};
				ev.events = EPOLLIN;
				ev.data.u32 = static_cast<uint32_t>(i);
				if (!ret && epoll_ctl(ep_.get(), EPOLL_CTL_ADD, wfd, &ev))
					ret = -errno;
			}
			if (ret) {
				fprintf(stderr, "tcp: member %d: %s\n", i, fi_strerror(-ret));
				return ret;
			}
		}
		ctx_.resize(static_cast<size_t>(opt_.active));
		evs_.resize(static_cast<size_t>(opt_.active));
		if (ep_) {
			ret = fi_trywait(env_.fabric, reinterpret_cast<struct fid **>(cqs_.data()),
			                 opt_.members);
			if (ret) {
				fprintf(stderr, "tcp: fi_trywait on the members: %s\n",
				        fi_strerror(-ret));
				return ret;
			}
		}
		return 0;
	}

	/* tcp-waitset: count rounds from first, the waits in a thread of their own (scale_round
	 * when measured), the signals from this one */
	int drive(int first, int count, bool measured)
	{
		std::atomic<int> ready{first - 1}, done{first - 1}, err{0};
		std::thread waiter([&] {
			for (int r = first; r < first + count; ++r) {
				ready.store(r);
				int e = measured ? scale_round(this, r) : round(r);
				done.store(r);
				if (e) {
					err.store(e);
					return;
				}
			}
		});
		for (int r = first; r < first + count && !err.load(); ++r) {
			while (ready.load() < r)
				std::this_thread::yield();
			std::this_thread::sleep_for(std::chrono::microseconds(50));
			auto next = clk::now();
			for (bool again = false; done.load() < r && !err.load();) {
				if (clk::now() >= next) {
					resignals += again;
					again = true;
					signal(r);
					next = clk::now() + std::chrono::milliseconds(500);
				}
				std::this_thread::yield();
			}
		}
		waiter.join();
		return err.load();
	}
	unsigned long resignals = 0;

	int round(int r) override
	{
		if (opt_.how == mode::waitset)
			return wait_round(r);
		if (int ret = signal(r))
			return ret;
		const int n = opt_.burst ? opt_.active : 1;
		for (int left = n; left > 0;) {
			++wakes;
			int ret = wait_once(left);
			if (ret < 0)
				return ret;
			left -= ret;
		}
		return 0;
	}

	/* fi_cq_signal on round r's active CQs */
	int signal(int r)
	{
		const int first = opt_.burst ? 0 : r % opt_.active;
		const int n = opt_.burst ? opt_.active : 1;
		for (int k = 0; k < n; ++k)
			if (int ret = fi_cq_signal(cqs_[index(first + k)]))
				return ret;
		return 0;
	}

	/* tcp-waitset, the waiting thread: fi_wait until it returns woken, then fi_cq_read on
	 * each CQ of the round */
	int wait_round(int r)
	{
		first_ = opt_.burst ? 0 : r % opt_.active;
		const int n = opt_.burst ? opt_.active : 1;
		for (;;) {
			++wakes;
			int ret = wait_once(n);
			if (ret != -FI_ETIMEDOUT)
				return ret < 0 ? ret : 0;
		}
	}

	/* nothing left over: a wait set or an epoll that sleeps again once the rounds are read */
	bool quiet()
	{
		if (set_)
			return fi_sets::wait(set_, 0) == -FI_ETIMEDOUT;
		if (ep_) {
			struct epoll_event ev;
			return epoll_wait(ep_.get(), &ev, 1, 0) == 0;
		}
		return true;
	}

private:
	static void *cq_context(int i)
	{
		return reinterpret_cast<void *>(static_cast<intptr_t>(i + 1));
	}
	size_t index(int k) const
	{
		const int stride = opt_.members / opt_.active;
		return static_cast<size_t>((k % opt_.active) * stride);
	}
	int read(size_t i)
	{
		struct fi_cq_entry e;
		ssize_t k = fi_cq_read(cqs_[i], &e, 1);
		return k == -FI_EAGAIN || k >= 0 ? 0 : static_cast<int>(k);
	}

	/* one wait: how many of the signalled members it accounts for, or a negative code */
	int wait_once(int left)
	{
		switch (opt_.how) {
		case mode::waitset: {
			/* a wait set names nobody: one return of fi_wait covers every signal before
			 * it; the application reads each CQ it was waiting for */
			int ret = fi_sets::wait(set_, 5000);
			if (ret && ret != -FI_EAGAIN)
				return ret;
			for (int k = 0; k < left; ++k)
				if ((ret = read(index(first_ + k))))
					return ret;
			return left;
		}
		case mode::pollset: {
			/* fi_cq_signal does not reach a CQ without a wait object: nothing to name
			 */
			int k = fi_sets::poll(pset_, ctx_.data(), opt_.active);
			return k < 0 ? k : left;
		}
		case mode::epoll: {
			int k = epoll_wait(ep_.get(), evs_.data(), opt_.active, 5000);
			if (k <= 0)
				return k == 0 ? -FI_ETIMEDOUT : -errno;
			for (int j = 0; j < k; ++j) {
				size_t i = evs_[static_cast<size_t>(j)].data.u32;
				if (int ret = read(i))
					return ret;
				struct fid *f = &cqs_[i]->fid;
				if (int ret = fi_trywait(env_.fabric, &f, 1))
					return ret;
			}
			return k;
		}
		}
		return -FI_EINVAL;
	}

	void close()
	{
		for (struct fid_cq *cq : cqs_) {
			if (pset_)
				fi_sets::poll_del(pset_, &cq->fid, 0);
			fi_close(&cq->fid);
		}
		cqs_.clear();
		close_sets(set_, pset_);
		ep_ = util::fd();
	}

	options opt_;
	tcp_env env_;
	std::vector<struct fid_cq *> cqs_;
	struct fid_wait *set_ = nullptr;
	struct fid_poll *pset_ = nullptr;
	util::fd ep_;
	int first_ = 0; /* the round's first signalled member */
	std::vector<void *> ctx_;
	std::vector<struct epoll_event> evs_;
};

} // namespace

namespace
{
int one_round(rounds *b, int round)
{
	return b->round(round);
}
} // namespace

/* One wake of the measured rounds: member m fires, the set is waited on until m's entry is
 * read. Out of line, so that callgrind can count it alone (--toggle-collect=scale_round); the
 * warm-up rounds (the first wait arms every member: a cost of set-up) are not counted. */
extern "C" __attribute__((noinline)) int scale_round(void *b, int round)
{
	return one_round(static_cast<rounds *>(b), round);
}

namespace
{

double cpu_seconds()
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

bool parse_mode(const char *name, mode &how)
{
	if (!strcmp(name, "waitset"))
		how = mode::waitset;
	else if (!strcmp(name, "pollset"))
		how = mode::pollset;
	else if (!strcmp(name, "epoll"))
		how = mode::epoll;
	else
		return false;
	return true;
}

bool parse(int argc, char **argv, options &o)
{
	int c;
	while ((c = getopt(argc, argv, "m:N:A:I:tsBT:P:")) != -1) {
		switch (c) {
		case 'm':
			o.name = optarg;
			if (parse_mode(optarg, o.how))
				;
			else if (!strncmp(optarg, "tcp-", 4) && parse_mode(optarg + 4, o.how))
				o.tcp = true;
			else if (!strcmp(optarg, "threads"))
				o.work = options::queue::one_cq;
			else if (!strcmp(optarg, "threads-set"))
				o.work = options::queue::own_cqs;
			else
				return false;
			break;
		case 'N':
			o.members = atoi(optarg);
			break;
		case 'A':
			o.active = atoi(optarg);
			break;
		case 'I':
			o.rounds = atoi(optarg);
			break;
		case 't':
			o.threads = true;
			break;
		case 's':
			o.spin = true;
			break;
		case 'B':
			o.burst = true;
			break;
		case 'T':
			o.consumers = atoi(optarg);
			break;
		case 'P':
			if (!strcmp(optarg, "block"))
				o.block = true;
			else if (strcmp(optarg, "adaptive"))
				return false;
			break;
		default:
			return false;
		}
	}
	return o.members >= 1 && o.active >= 1 && o.active <= o.members && o.rounds > 0 &&
	       o.consumers >= 1 && !(o.threads && (o.tcp || o.burst));
}

/* -m threads / threads-set: the work-queue pattern. T consumer threads in fi_cq_sread, on one
 * FI_WAIT_FD CQ (threads) or each on its own CQ of one FI_WAIT_FD wait set (threads-set); this
 * thread writes the completions one at a time (the next once the previous was read, so the
 * consumers sleep between them; in threads-set completion i goes to CQ i % T). Prints the
 * completions per second, and per completion the waiter's wakeups (waiter::counts(): sleeps
 * that ended before their deadline, empty ones and the calibration timer's included) and the
 * consumers' voluntary context switches. */
int run_threads(const options &o)
{
	const bool own = o.work == options::queue::own_cqs;
	const int t = o.consumers;
	const auto total = static_cast<uintptr_t>(o.rounds);
	struct fid_wait *set = nullptr;
	util::waiter *w = nullptr;
	std::vector<struct fid_cq *> cqs;
	std::vector<util::sw_cq *> qs;
	int ret = 0;
	util::wait_policy policy;
	if (o.block)
		policy.kind = util::wait_policy_kind::block;
	if (own) {
		struct fi_wait_attr wa = {};
		wa.wait_obj = FI_WAIT_FD;
		ret = util::wait_open(&scale_prov, &wa, &set, {}, policy);
		if (!ret)
			ret = util::get_waiter(&set->fid, &w);
	}
	for (int c = 0; !ret && c < (own ? t : 1); c++) {
		struct fi_cq_attr a = {};
		a.format = FI_CQ_FORMAT_CONTEXT;
		a.wait_obj = own ? FI_WAIT_SET : FI_WAIT_FD;
		a.wait_set = set;
		struct fid_cq *cq = nullptr;
		try {
			auto q = std::make_unique<util::sw_cq>(&scale_prov, a, FI_VERSION(1, 17));
			q->set_wait_policy(policy); /* a wait-set member follows its set's */
			ret = util::cq_install(std::move(q), &cq, nullptr);
		} catch (const std::bad_alloc &) {
			ret = -FI_ENOMEM;
		}
		if (ret)
			break;
		cqs.push_back(cq);
		qs.push_back(util::object_of<util::sw_cq>(&cq->fid));
		if (!own)
			w = qs.back()->wait_object();
	}
	if (ret) {
		fprintf(stderr, "open: %s\n", fi_strerror(-ret));
		return 1;
	}
	/* a mark for strace: the system calls between the two close(-37) are the run's */
	const vwait_test::queue_run r =
	    vwait_test::work_queue(cqs, qs, w, t, total, [] { ::close(-37); });
	for (struct fid_cq *cq : cqs)
		fi_close(&cq->fid);
	if (set)
		fi_close(&set->fid);
	const auto per = [&](uint64_t n) { return static_cast<double>(n) / total; };
	if (r.bad || r.consumed != total) {
		fprintf(stderr, "%ld bad, %lu of %lu read\n", r.bad,
		        static_cast<unsigned long>(r.consumed), static_cast<unsigned long>(total));
		return 1;
	}
	printf("RESULT mode=%s%s threads=%d completions=%lu per_s=%.0f wakeups=%.3f empty=%.3f "
	       "handoffs=%.3f calib=%.3f sleeps=%.3f nvcsw=%.3f\n",
	       o.name, o.block ? "-block" : "", t, static_cast<unsigned long>(total),
	       total / r.secs, per(r.c.wakeups), per(r.c.empty), per(r.c.handoffs), per(r.c.calib),
	       per(r.c.sleeps), per(static_cast<uint64_t>(r.switches)));
	return 0;
}

} // namespace

int main(int argc, char **argv)
{
	options o;
	if (!parse(argc, argv, o)) {
		fprintf(
		    stderr,
		    "usage: %s [-m [tcp-]waitset|[tcp-]pollset|[tcp-]epoll|threads|threads-set] "
		    "[-N members] [-A active] [-I rounds] [-t] [-s] [-B] [-T threads] "
		    "[-P block|adaptive]\n",
		    argv[0]);
		return 2;
	}
	if (o.work != options::queue::none)
		return run_threads(o);
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max; /* epoll: 2 descriptors per member */
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	std::unique_ptr<bench> own;
	std::unique_ptr<tcp_bench> tcp;
	rounds *rs = nullptr;
	int ret;
	if (o.tcp) {
		tcp = std::make_unique<tcp_bench>(o);
		ret = tcp->open();
		rs = tcp.get();
	} else {
		own = std::make_unique<bench>(o);
		ret = own->open();
		rs = own.get();
	}
	if (ret) {
		fprintf(stderr, "open: %s\n", fi_strerror(-ret));
		return 1;
	}
	const bool driven = o.tcp && o.how == mode::waitset; /* tcp_bench::drive */
	/* warm-up: every active member once */
	if (driven && (ret = tcp->drive(0, o.active * 2, false))) {
		fprintf(stderr, "warm-up: %s\n", fi_strerror(-ret));
		return 1;
	}
	for (int r = 0; !driven && r < o.active * 2; ++r)
		if ((ret = one_round(rs, r))) {
			fprintf(stderr, "warm-up round %d: %s\n", r, fi_strerror(-ret));
			return 1;
		}
	const unsigned long arms0 = member::arms.load();
	const unsigned long wakes0 = wakes;
	const unsigned long resignals0 = tcp ? tcp->resignals : 0;
	const double cpu0 = cpu_seconds();
	/* a mark for strace: the system calls between the two close(-37) are the rounds' */
	::close(-37);
	const auto t0 = clk::now();
	if (driven) {
		if ((ret = tcp->drive(o.active * 2, o.rounds, true))) {
			fprintf(stderr, "rounds: %s\n", fi_strerror(-ret));
			return 1;
		}
	} else if (!o.threads) {
		for (int r = 0; r < o.rounds; ++r)
			if ((ret = scale_round(rs, r))) {
				fprintf(stderr, "round %d: %s\n", r, fi_strerror(-ret));
				return 1;
			}
	} else {
		bench &b = *own;
		/* ping-pong: this thread fires and waits for the other to have read the entry */
		std::atomic<int> done{-1};
		std::atomic<int> err{0};
		std::thread waiter([&] {
			for (int r = 0; r < o.rounds; ++r) {
				int e = b.wait_for(b.active(r), false);
				if (e) {
					err.store(e);
					done.store(o.rounds);
					return;
				}
				done.store(r);
			}
		});
		for (int r = 0; r < o.rounds && !err.load(); ++r) {
			/* let the waiter go to sleep first */
			std::this_thread::sleep_for(std::chrono::microseconds(50));
			b.active(r)->fire();
			while (done.load() < r)
				std::this_thread::yield();
		}
		waiter.join();
		if (err.load()) {
			fprintf(stderr, "rounds: %s\n", fi_strerror(-err.load()));
			return 1;
		}
	}
	const double us = std::chrono::duration<double, std::micro>(clk::now() - t0).count();
	::close(-37);
	const double cpu = (cpu_seconds() - cpu0) * 1e6;
	const unsigned long woke = wakes - wakes0;
	if (tcp && !tcp->quiet()) {
		fprintf(stderr, "tcp: the set is still readable after the rounds\n");
		return 1;
	}
	printf("RESULT mode=%s%s%s members=%d active=%d rounds=%d completions_per_round=%d "
	       "wakes_per_round=%.3f us_per_round=%.2f "
	       "cpu_us_per_round=%.2f arms_per_round=%.3f fds=%d rss_kb=%ld "
	       "resignals_per_round=%.3f\n",
	       o.name, o.spin ? "-s" : "", o.burst ? "-B" : "", o.members, o.active, o.rounds,
	       o.burst ? o.active : 1, static_cast<double>(woke) / o.rounds, us / o.rounds,
	       cpu / o.rounds, static_cast<double>(member::arms.load() - arms0) / o.rounds,
	       proc_open_fds(), proc_rss_kb(),
	       static_cast<double>((tcp ? tcp->resignals : 0) - resignals0) / o.rounds);
	return 0;
}
