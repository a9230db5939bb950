/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* util::mem_monitor over userfaultfd(2): see util/mem_monitor.h for the contract. */
#include "config.h"

#include "vwait/util/mem_monitor.h"

#include "vwait/util/cpu_relax.h"
#include "vwait/util/helper_thread.h"

#include <rdma/fi_errno.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <new>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace vwait::util
{

namespace
{

constexpr uint64_t wanted_events =
    UFFD_FEATURE_EVENT_UNMAP | UFFD_FEATURE_EVENT_REMOVE | UFFD_FEATURE_EVENT_REMAP;

std::atomic<pid_t> the_pid{0};
/* 0: not opened yet; 1: full; 2: user-mode only */
std::atomic<int> open_mode{0};
/* how ranges are registered: not known yet, write-protect mode (5.7+ on anonymous memory),
 * missing mode */
constexpr int mode_wp = 1, mode_missing = 2;
std::atomic<int> register_mode{0};

void child_after_fork() noexcept
{
	the_pid.store(static_cast<pid_t>(syscall(SYS_getpid)), std::memory_order_relaxed);
	mem_monitor::instance().forget_in_child();
}

struct fork_hook {
	fork_hook() noexcept
	{
		the_pid.store(getpid(), std::memory_order_relaxed);
		pthread_atfork(nullptr, nullptr, child_after_fork);
	}
};

/* one uffd with the events, or -errno; *user_only says which flags it took */
int open_uffd(bool *user_only, const char **reason) noexcept
{
#ifdef SYS_userfaultfd
	/* full mode first: a fault the kernel takes on a dropped page is answered too */
	int fd = static_cast<int>(syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK));
	*user_only = false;
#ifdef UFFD_USER_MODE_ONLY
	if (fd < 0 && errno == EPERM) {
		fd = static_cast<int>(
		    syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY));
		*user_only = true;
	}
#endif
	if (fd < 0) {
		int err = errno;
		*reason = err == EPERM
		              ? "userfaultfd(2) refused (EPERM: vm.unprivileged_userfaultfd=0 "
		                "without CAP_SYS_PTRACE, or a sandbox)"
		          : err == ENOSYS ? "userfaultfd(2) not available (ENOSYS)"
		                          : "userfaultfd(2) failed";
		return -err;
	}
	struct uffdio_api api = {};
	api.api = UFFD_API;
	api.features = wanted_events;
	if (ioctl(fd, UFFDIO_API, &api) != 0 || (api.features & wanted_events) != wanted_events) {
		int err = errno ? errno : EINVAL;
		close(fd);
		*reason = "UFFDIO_API without the unmap, remove and remap events";
		return -err;
	}
	return fd;
#else
	(void)user_only;
	*reason = "built without userfaultfd(2)";
	return -ENOSYS;
#endif
}

int to_fi(int neg_errno) noexcept
{
	switch (-neg_errno) {
	case EBUSY:
		return -FI_EBUSY;
	case EINVAL:
		return -FI_EINVAL;
	case ENOMEM:
		return -FI_ENOMEM;
	case EPERM:
		return -FI_EPERM;
	case ENOSYS:
		return -FI_ENOSYS;
	default:
		return -FI_EOTHER;
	}
}

long page_size() noexcept
{
	static const long size = sysconf(_SC_PAGESIZE);
	return size;
}

/* a hex number at *p, *p moved past it */
uint64_t hex(const char **p, const char *end) noexcept
{
	uint64_t v = 0;
	for (; *p < end; ++*p) {
		const char c = **p;
		const int d = c >= '0' && c <= '9'   ? c - '0'
		              : c >= 'a' && c <= 'f' ? c - 'a' + 10
		                                     : -1;
		if (d < 0)
			break;
		v = v << 4 | static_cast<uint64_t>(d);
	}
	return v;
}

/* One line of /proc/self/maps ("lo-hi perms offset dev inode [path]"): 1 when it ends at or
 * below *covered (skipped), 0 when it continues [*covered, ...) as private anonymous memory
 * (*covered moves to its end), -1 otherwise (a gap, shared, or a file behind it). */
int check_line(const char *p, const char *end, uintptr_t *covered) noexcept
{
	const uint64_t lo = hex(&p, end);
	if (p == end || *p++ != '-')
		return -1;
	const uint64_t hi = hex(&p, end);
	if (hi <= *covered)
		return 1;
	if (lo > *covered || end - p < 5 || p[4] != 'p')
		return -1;
	/* the perms, the offset and the device; then the inode, 0 for anonymous memory */
	for (int field = 0; field < 4; field++) {
		while (p < end && *p == ' ')
			p++;
		if (field == 3)
			break;
		while (p < end && *p != ' ')
			p++;
	}
	if (p == end || *p != '0' || (p + 1 < end && p[1] != ' '))
		return -1;
	*covered = static_cast<uintptr_t>(hi);
	return 0;
}

/* Whether [start, end) is all private anonymous memory. The pages of anything else can change
 * with no event for this process: a tmpfs or memfd file truncated (its private copies too),
 * shared memory dropped by another process (MADV_REMOVE there). One read of /proc/self/maps,
 * on a miss only; a line longer than the buffer or a read error answers no. */
bool private_anonymous(uintptr_t start, uintptr_t end) noexcept
{
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	char buf[4096];
	size_t have = 0;
	uintptr_t covered = start;
	int verdict = 1; /* 1: undecided, 0: yes, -1: no */
	while (verdict == 1) {
		ssize_t n;
		do
			n = read(fd, buf + have, sizeof buf - have);
		while (n < 0 && errno == EINTR);
		if (n <= 0) {
			verdict = -1;
			break;
		}
		have += static_cast<size_t>(n);
		size_t pos = 0;
		while (verdict == 1) {
			const char *nl =
			    static_cast<const char *>(memchr(buf + pos, '\n', have - pos));
			if (!nl)
				break;
			const int r = check_line(buf + pos, nl, &covered);
			pos = static_cast<size_t>(nl - buf) + 1;
			if (r < 0)
				verdict = -1;
			else if (covered >= end)
				verdict = 0;
		}
		if (verdict == 1 && pos == 0 && have == sizeof buf) {
			verdict = -1; /* a line longer than buf */
			break;
		}
		memmove(buf, buf + pos, have - pos);
		have -= pos;
	}
	close(fd);
	return verdict == 0;
}

} // namespace

pid_t process_id() noexcept
{
	static fork_hook hook;
	return the_pid.load(std::memory_order_relaxed);
}

mem_monitor &mem_monitor::instance() noexcept
{
	/* never destroyed (the reader may outlive static destruction until shutdown()), and not
	 * on the heap: a plugin unloaded with the pointer to it would leave a leak behind */
	alignas(mem_monitor) static unsigned char storage[sizeof(mem_monitor)];
	static mem_monitor *const the = new (storage) mem_monitor;
	process_id(); /* the atfork handler, before the first uffd */
	return *the;
}

int mem_monitor::probe(const char **reason) noexcept
{
	static const char *why = nullptr;
	static const int result = [] {
		bool user_only = false;
		int fd = open_uffd(&user_only, &why);
		if (fd < 0)
			return to_fi(fd);
		close(fd);
		int expected = 0;
		open_mode.compare_exchange_strong(expected, user_only ? 2 : 1);
		return 0;
	}();
	if (reason)
		*reason = why;
	return result;
}

const char *mem_monitor::mode() noexcept
{
	switch (open_mode.load(std::memory_order_relaxed)) {
	case 1:
		return "userfaultfd";
	case 2:
		return "userfaultfd, user-mode only";
	default:
		return "none";
	}
}

bool mem_monitor::faultless() noexcept
{
	return register_mode.load(std::memory_order_relaxed) == mode_wp;
}

int mem_monitor::acquire(const char **reason) noexcept
{
	lock_guard<mutex> lock(mu_);
	if (users_ == 0 && uffd_.load(std::memory_order_relaxed) < 0) {
		bool user_only = false;
		int fd = open_uffd(&user_only, reason);
		if (fd < 0)
			return to_fi(fd);
		int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (efd < 0) {
			int err = errno;
			close(fd);
			*reason = "eventfd(2) failed";
			return to_fi(-err);
		}
		open_mode.store(user_only ? 2 : 1, std::memory_order_relaxed);
		uffd_.store(fd, std::memory_order_release);
		stop_fd_.store(efd, std::memory_order_release);
	}
	users_++;
	return 0;
}

void mem_monitor::release() noexcept
{
	lock_guard<mutex> lock(mu_);
	if (users_ > 0 && --users_ == 0)
		stop_locked();
}

void mem_monitor::shutdown() noexcept
{
	lock_guard<mutex> lock(mu_);
	stop_locked();
	users_ = 0;
}

void mem_monitor::stop_locked() noexcept
{
	if (reader_.joinable()) {
		uint64_t one = 1;
		while (write(stop_fd_.load(std::memory_order_relaxed), &one, sizeof one) < 0 &&
		       errno == EINTR)
			continue;
		reader_.join();
	}
	/* closing the uffd unregisters every range and releases any thread held by an event */
	if (int fd = uffd_.exchange(-1); fd >= 0)
		close(fd);
	if (int fd = stop_fd_.exchange(-1); fd >= 0)
		close(fd);
	/* what was published stays valid for the caches' cursors */
}

void mem_monitor::forget_in_child() noexcept
{
	/* the child's mappings are not registered; its copies of the descriptors would keep
	 * the parent's ranges registered (a close in the parent would release nothing), and
	 * a write to the stop eventfd would stop the parent's reader. The thread is the
	 * parent's: it is not here to be joined. No lock: only this thread runs in the child,
	 * and mu_ may have been held by a thread of the parent at fork. */
	if (int fd = uffd_.exchange(-1); fd >= 0)
		close(fd);
	if (int fd = stop_fd_.exchange(-1); fd >= 0)
		close(fd);
	new (&mu_) mutex(lock_level::mem_monitor);
	if (reader_.joinable())
		reader_.detach();
	users_ = 0;
}

bool mem_monitor::reading() const noexcept
{
	lock_guard<mutex> lock(mu_);
	return reader_.joinable();
}

int mem_monitor::start_reader_locked() noexcept
{
	if (reader_.joinable())
		return 0;
	/* every signal blocked on the reader, from its first instruction: it inherits the mask */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int ret = 0;
	try {
		reader_ = std::thread([this] {
			helper_thread::name_self("vwait-mr");
			run();
		});
	} catch (...) {
		ret = -FI_EAGAIN;
	}
	pthread_sigmask(SIG_SETMASK, &old, nullptr);
	return ret;
}

int mem_monitor::watch(uintptr_t start, size_t len) noexcept
{
	if (!private_anonymous(start, start + len))
		return -FI_EINVAL;
	lock_guard<mutex> lock(mu_);
	const int fd = uffd_.load(std::memory_order_relaxed);
	if (fd < 0)
		return -FI_ENOSYS;
	if (int ret = start_reader_locked())
		return ret;
	struct uffdio_register reg = {};
	reg.range.start = start;
	reg.range.len = len;
	auto do_register = [&](uint64_t mode) {
		reg.mode = mode;
		while (ioctl(fd, UFFDIO_REGISTER, &reg) != 0) {
			if (errno != EINTR)
				return -errno;
		}
		return 0;
	};
#ifdef UFFDIO_REGISTER_MODE_WP
	/* write-protect mode, never armed: the events without any page fault */
	const int known = register_mode.load(std::memory_order_relaxed);
	if (known != mode_missing) {
		const int ret = do_register(UFFDIO_REGISTER_MODE_WP);
		if (ret == 0) {
			register_mode.store(mode_wp, std::memory_order_relaxed);
			return 0;
		}
		if (ret != -EINVAL || known == mode_wp)
			return to_fi(ret);
	}
#endif
	const int ret = do_register(UFFDIO_REGISTER_MODE_MISSING);
	if (ret == 0) {
		/* the kernel refused write-protect mode on memory it watches in missing mode */
		register_mode.store(mode_missing, std::memory_order_relaxed);
		return 0;
	}
	return to_fi(ret);
}

void mem_monitor::sync() const noexcept
{
	const uint64_t e = epoch_.load(std::memory_order_seq_cst);
	if (!(e & 1))
		return;
	/* the reader is between a read(2) and publishing it: a few system calls at most */
	for (unsigned spins = 0; epoch_.load(std::memory_order_acquire) == e; spins++) {
		if (spins < 64)
			cpu_relax();
		else
			sched_yield();
	}
}

void mem_monitor::publish(uintptr_t start, uintptr_t end) noexcept
{
	const uint64_t i = head_.load(std::memory_order_relaxed);
	record &r = ring_[i % ring_size];
	/* seqlock: odd while written, 2i+2 once record i is complete. Release stores of the
	 * data keep the odd mark before them, without a fence (which TSan does not model). */
	r.seq.store(2 * i + 1, std::memory_order_relaxed);
	r.start.store(start, std::memory_order_release);
	r.end.store(end, std::memory_order_release);
	r.seq.store(2 * i + 2, std::memory_order_release);
	head_.store(i + 1, std::memory_order_release);
}

bool mem_monitor::read_record(uint64_t i, uintptr_t *start, uintptr_t *end) const noexcept
{
	const record &r = ring_[i % ring_size];
	const uint64_t s1 = r.seq.load(std::memory_order_acquire);
	/* acquire loads: the second look at seq stays after them */
	*start = r.start.load(std::memory_order_acquire);
	*end = r.end.load(std::memory_order_acquire);
	const uint64_t s2 = r.seq.load(std::memory_order_relaxed);
	return s1 == 2 * i + 2 && s2 == s1;
}

void mem_monitor::handle_fault(uintptr_t addr) noexcept
{
	faults_.fetch_add(1, std::memory_order_relaxed);
	const int fd = uffd_.load(std::memory_order_relaxed);
	const uintptr_t page = static_cast<uintptr_t>(page_size());
	struct uffdio_zeropage zp = {};
	zp.range.start = addr & ~(page - 1);
	zp.range.len = page;
	zp.mode = 0; /* wakes the thread */
	for (;;) {
		if (ioctl(fd, UFFDIO_ZEROPAGE, &zp) == 0)
			return;
		if (errno != EINTR)
			break;
	}
	if (errno != EEXIST) {
		/* no zero page here (hugetlbfs): stop watching the page, whatever its size */
		errors_.fetch_add(1, std::memory_order_relaxed);
		for (uintptr_t size = page; size && size <= (uintptr_t{1} << 30); size <<= 9) {
			struct uffdio_range r = {addr & ~(size - 1), size};
			if (ioctl(fd, UFFDIO_UNREGISTER, &r) == 0)
				break;
		}
	}
	/* mapped meanwhile (EEXIST), or unregistered: wake whoever waits on the page */
	struct uffdio_range r = {addr & ~(page - 1), page};
	ioctl(fd, UFFDIO_WAKE, &r);
}

void mem_monitor::run() noexcept
{
	const int fd = uffd_.load(std::memory_order_acquire);
	const int stop = stop_fd_.load(std::memory_order_acquire);
	/* on the stack, read whole: no allocation while a thread waits for us */
	struct uffd_msg msgs[32];
	for (;;) {
		struct pollfd p[2] = {{fd, POLLIN, 0}, {stop, POLLIN, 0}};
		int n = poll(p, 2, -1);
		if (n < 0) {
			if (errno != EINTR)
				errors_.fetch_add(1, std::memory_order_relaxed);
			continue;
		}
		if (p[1].revents)
			return;
		if (!(p[0].revents & POLLIN)) {
			if (p[0].revents & (POLLERR | POLLHUP | POLLNVAL))
				return;
			continue;
		}
		epoch_.fetch_add(1, std::memory_order_seq_cst); /* odd: reading */
		ssize_t got;
		do
			got = read(fd, msgs, sizeof msgs);
		while (got < 0 && errno == EINTR);
		for (ssize_t k = 0; got > 0 && k < got / static_cast<ssize_t>(sizeof msgs[0]);
		     k++) {
			const struct uffd_msg &m = msgs[k];
			events_.fetch_add(1, std::memory_order_relaxed);
			switch (m.event) {
			case UFFD_EVENT_UNMAP:
				publish(m.arg.remove.start, m.arg.remove.end);
				break;
			case UFFD_EVENT_REMOVE: {
				/* the pages are dropped: stop watching them, so that a later fault
				 * (even one the kernel takes) never waits on us */
				struct uffdio_range r = {m.arg.remove.start,
				                         m.arg.remove.end - m.arg.remove.start};
				while (ioctl(fd, UFFDIO_UNREGISTER, &r) != 0 && errno == EINTR)
					continue;
				publish(m.arg.remove.start, m.arg.remove.end);
				break;
			}
			case UFFD_EVENT_REMAP:
				publish(m.arg.remap.from, m.arg.remap.from + m.arg.remap.len);
				break;
			case UFFD_EVENT_PAGEFAULT:
				handle_fault(static_cast<uintptr_t>(m.arg.pagefault.address));
				break;
			default:
				break;
			}
		}
		if (got < 0 && errno != EAGAIN)
			errors_.fetch_add(1, std::memory_order_relaxed);
		epoch_.fetch_add(1, std::memory_order_release); /* even: published */
	}
}

mem_monitor::counts mem_monitor::stats() const noexcept
{
	return {events_.load(std::memory_order_relaxed), faults_.load(std::memory_order_relaxed),
	        errors_.load(std::memory_order_relaxed)};
}

} // namespace vwait::util
