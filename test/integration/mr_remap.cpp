/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* mr_remap: large tagged messages over an RDM provider (vwait;ofi_rxm) without descriptors, as
 * Open MPI's MTL sends them, from a buffer whose memory is replaced before each round: mmap
 * MAP_FIXED over it, mremap onto it, MADV_DONTNEED, free + malloc, munmap + mmap. New contents
 * go in, the buffer is sent, and the receiver (whose buffer is replaced the same way) checks
 * every byte: a registration cache that served a stale page shows as a wrong byte. The last
 * rounds send without replacing the memory (the cache's hits).
 *
 *   mr_remap -s ADDR -P PORT [-n ROUNDS] [-S SIZE] [-c] [-p]   the receiver (prints LISTENING)
 *   mr_remap ADDR -P PORT [-n ROUNDS] [-S SIZE] [-c] [-p]      the sender
 * -c: a second thread churns malloc / free (up to 512 KiB: heap and mmap'd blocks) meanwhile;
 * -p: SIGPROF at 1 kHz (setitimer ITIMER_PROF) on the whole process.
 * The receiver prints a PROGRESS line every 1000 rounds (what a run cut short had checked).
 * Exit 0 when every byte of every round was right, 1 otherwise, 77 without the provider. */
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/mman.h>
#include <sys/time.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace
{

const char *prov_name = "vwait;ofi_rxm";
size_t size = 1 << 20;
unsigned rounds = 200;
/* the last rounds leave the memory as it is */
unsigned steady = 20;

int die(const char *what, long ret)
{
	fprintf(stderr, "mr_remap: %s: %ld (%s)\n", what, ret,
	        fi_strerror(static_cast<int>(ret < 0 ? -ret : ret)));
	exit(1);
}

/* byte i of round r: base(i) + 7 r (mod 256), eight bytes at a time (the emulated guest runs
 * a byte loop over a MiB in tens of ms, twice a round) */
std::vector<uint64_t> base_words;

void make_base()
{
	base_words.assign((size + 7) / 8, 0);
	auto *b = reinterpret_cast<uint8_t *>(base_words.data());
	for (size_t i = 0; i < size; i++)
		b[i] = static_cast<uint8_t>((i * 131u + (i >> 12)) & 0xff);
}

/* a + b bytewise, no carry between bytes */
uint64_t add_bytes(uint64_t a, uint64_t b)
{
	constexpr uint64_t low7 = 0x7f7f7f7f7f7f7f7full, high = 0x8080808080808080ull;
	return ((a & low7) + (b & low7)) ^ ((a ^ b) & high);
}

uint64_t round_word(unsigned round)
{
	return 0x0101010101010101ull * static_cast<uint8_t>(round * 7u);
}

void fill(char *p, unsigned round)
{
	const uint64_t k = round_word(round);
	const size_t words = size / 8;
	for (size_t w = 0; w < words; w++) {
		const uint64_t v = add_bytes(base_words[w], k);
		memcpy(p + 8 * w, &v, 8);
	}
	const auto *b = reinterpret_cast<const uint8_t *>(base_words.data());
	for (size_t i = 8 * words; i < size; i++)
		p[i] = static_cast<char>(b[i] + static_cast<uint8_t>(round * 7u));
}

/* the bytes of p that are not round's */
size_t count_wrong(const char *p, unsigned round)
{
	const uint64_t k = round_word(round);
	const auto *b = reinterpret_cast<const uint8_t *>(base_words.data());
	size_t bad = 0;
	for (size_t w = 0; w < size / 8; w++) {
		uint64_t v;
		memcpy(&v, p + 8 * w, 8);
		if (v == add_bytes(base_words[w], k))
			continue;
		for (size_t i = 8 * w; i < 8 * w + 8; i++)
			bad += static_cast<uint8_t>(p[i]) !=
			       static_cast<uint8_t>(b[i] + static_cast<uint8_t>(round * 7u));
	}
	for (size_t i = size / 8 * 8; i < size; i++)
		bad += static_cast<uint8_t>(p[i]) !=
		       static_cast<uint8_t>(b[i] + static_cast<uint8_t>(round * 7u));
	return bad;
}

/* The buffer and the ways its memory is replaced. */
struct buffer {
	char *p = nullptr;
	bool from_malloc = false;

	void map_fresh()
	{
		void *m =
		    mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (m == MAP_FAILED)
			die("mmap", -errno);
		p = static_cast<char *>(m);
	}
	void replace(unsigned round)
	{
		switch (round % 5) {
		case 0: /* new pages over the old */
			if (from_malloc)
				break;
			if (mmap(p, size, PROT_READ | PROT_WRITE,
			         MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
				die("mmap MAP_FIXED", -errno);
			break;
		case 1: { /* another mapping moved onto it */
			if (from_malloc)
				break;
			void *m = mmap(nullptr, size, PROT_READ | PROT_WRITE,
			               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (m == MAP_FAILED)
				die("mmap", -errno);
			memset(m, 0x5a, size);
			if (mremap(m, size, size, MREMAP_MAYMOVE | MREMAP_FIXED, p) == MAP_FAILED)
				die("mremap", -errno);
			break;
		}
		case 2: /* the pages dropped */
			if (madvise(p, size, MADV_DONTNEED))
				die("madvise", -errno);
			break;
		case 3: /* free + malloc of the same size */
			if (from_malloc)
				free(p);
			else
				munmap(p, size);
			p = static_cast<char *>(malloc(size));
			if (!p)
				die("malloc", -FI_ENOMEM);
			from_malloc = true;
			break;
		default: /* munmap, then a mapping at the same address */
			if (from_malloc) {
				free(p);
				from_malloc = false;
				map_fresh();
				break;
			}
			munmap(p, size);
			if (mmap(p, size, PROT_READ | PROT_WRITE,
			         MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1,
			         0) == MAP_FAILED)
				map_fresh();
			break;
		}
	}
};

struct rdm {
	struct fi_info *info = nullptr;
	struct fid_fabric *fabric = nullptr;
	struct fid_domain *domain = nullptr;
	struct fid_av *av = nullptr;
	struct fid_cq *cq = nullptr;
	struct fid_ep *ep = nullptr;

	int open(const char *node, const char *port, bool source)
	{
		struct fi_info *hints = fi_allocinfo();
		hints->ep_attr->type = FI_EP_RDM;
		hints->caps = FI_TAGGED;
		hints->mode = FI_CONTEXT;
		/* no FI_MR_LOCAL: ofi_rxm registers what it sends and receives into */
		hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
		hints->fabric_attr->prov_name = strdup(prov_name);
		int ret =
		    fi_getinfo(FI_VERSION(1, 5), node, port, source ? FI_SOURCE : 0, hints, &info);
		fi_freeinfo(hints);
		if (ret)
			return ret;
		if ((ret = fi_fabric(info->fabric_attr, &fabric, nullptr)) ||
		    (ret = fi_domain(fabric, info, &domain, nullptr)))
			return ret;
		struct fi_av_attr av_attr = {};
		av_attr.type = FI_AV_MAP;
		struct fi_cq_attr cq_attr = {};
		cq_attr.format = FI_CQ_FORMAT_TAGGED;
		cq_attr.size = 64;
		if ((ret = fi_av_open(domain, &av_attr, &av, nullptr)) ||
		    (ret = fi_cq_open(domain, &cq_attr, &cq, nullptr)) ||
		    (ret = fi_endpoint(domain, info, &ep, nullptr)) ||
		    (ret = fi_ep_bind(ep, &av->fid, 0)) ||
		    (ret = fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV)) ||
		    (ret = fi_enable(ep)))
			return ret;
		return 0;
	}
	void close()
	{
		if (ep)
			fi_close(&ep->fid);
		if (cq)
			fi_close(&cq->fid);
		if (av)
			fi_close(&av->fid);
		if (domain)
			fi_close(&domain->fid);
		if (fabric)
			fi_close(&fabric->fid);
		fi_freeinfo(info);
	}
	/* one completion, or exit after 30 s */
	void wait_one(struct fi_context *ctx)
	{
		const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
		for (;;) {
			struct fi_cq_tagged_entry e;
			ssize_t n = fi_cq_read(cq, &e, 1);
			if (n == 1) {
				if (e.op_context != ctx)
					die("unexpected completion", 0);
				return;
			}
			if (n == -FI_EAVAIL) {
				struct fi_cq_err_entry err = {};
				fi_cq_readerr(cq, &err, 0);
				die("completion error", -err.err);
			}
			if (n != -FI_EAGAIN)
				die("fi_cq_read", n);
			if (std::chrono::steady_clock::now() > until)
				die("no completion within 30 s", -FI_ETIMEDOUT);
		}
	}
};

std::atomic<bool> churning{false};
std::atomic<unsigned long> profs{0};

void on_prof(int)
{
	profs.fetch_add(1, std::memory_order_relaxed);
}

void churn()
{
	unsigned n = 0;
	while (churning.load(std::memory_order_relaxed)) {
		const size_t sz = (n++ * 7919u) % (512u << 10) + 16;
		auto *b = static_cast<volatile char *>(malloc(sz));
		if (b) {
			b[0] = 1;
			b[sz - 1] = 2;
			free(const_cast<char *>(b));
		}
	}
}

} // namespace

int main(int argc, char **argv)
{
	const char *addr = nullptr;
	std::string port = "7790";
	bool receiver = false, with_churn = false, with_prof = false;
	int c;
	while ((c = getopt(argc, argv, "s:P:n:S:cp")) != -1) {
		switch (c) {
		case 'c':
			with_churn = true;
			break;
		case 'p':
			with_prof = true;
			break;
		case 's':
			receiver = true;
			addr = optarg;
			break;
		case 'P':
			port = optarg;
			break;
		case 'n':
			rounds = static_cast<unsigned>(strtoul(optarg, nullptr, 10));
			break;
		case 'S':
			size = strtoul(optarg, nullptr, 0);
			break;
		default:
			return 2;
		}
	}
	if (!receiver) {
		if (optind >= argc)
			return 2;
		addr = argv[optind];
	}
	if (steady > rounds)
		steady = rounds;
	make_base();
	rdm r;
	int ret = receiver ? r.open(addr, port.c_str(), true) : r.open(addr, port.c_str(), false);
	if (ret == -FI_ENODATA) {
		printf("no %s info: skipped\n", prov_name);
		return 77;
	}
	if (ret)
		die("open", ret);
	fi_addr_t peer = FI_ADDR_UNSPEC;
	if (!receiver && fi_av_insert(r.av, r.info->dest_addr, 1, &peer, 0, nullptr) != 1)
		die("fi_av_insert", -FI_EINVAL);
	std::thread churner;
	if (with_churn) {
		churning = true;
		churner = std::thread(churn);
	}
	if (with_prof) {
		struct sigaction sa = {};
		sa.sa_handler = on_prof;
		sa.sa_flags = SA_RESTART;
		sigemptyset(&sa.sa_mask);
		sigaction(SIGPROF, &sa, nullptr);
		struct itimerval t = {{0, 1000}, {0, 1000}};
		setitimer(ITIMER_PROF, &t, nullptr);
	}
	buffer b;
	b.map_fresh();
	unsigned wrong_rounds = 0;
	size_t wrong_bytes = 0;
	if (receiver) {
		printf("LISTENING\n");
		fflush(stdout);
	}
	for (unsigned round = 0; round < rounds; round++) {
		if (round < rounds - steady)
			b.replace(round);
		struct fi_context ctx;
		if (receiver) {
			memset(b.p, 0xee, size);
			do
				ret = static_cast<int>(fi_trecv(r.ep, b.p, size, nullptr,
				                                FI_ADDR_UNSPEC, round, 0, &ctx));
			while (ret == -FI_EAGAIN && (fi_cq_read(r.cq, nullptr, 0), true));
			if (ret)
				die("fi_trecv", ret);
			r.wait_one(&ctx);
			if (size_t bad = count_wrong(b.p, round)) {
				wrong_rounds++;
				wrong_bytes += bad;
			}
			if ((round + 1) % 1000 == 0 && round + 1 < rounds) {
				printf("PROGRESS rounds=%u wrong_rounds=%u wrong_bytes=%zu\n",
				       round + 1, wrong_rounds, wrong_bytes);
				fflush(stdout);
			}
		} else {
			fill(b.p, round);
			do
				ret = static_cast<int>(
				    fi_tsend(r.ep, b.p, size, nullptr, peer, round, &ctx));
			while (ret == -FI_EAGAIN && (fi_cq_read(r.cq, nullptr, 0), true));
			if (ret)
				die("fi_tsend", ret);
			r.wait_one(&ctx);
		}
	}
	/* the sender waits for the receiver's last read of its buffer before it closes */
	if (!receiver)
		sleep(1);
	if (with_prof) {
		struct itimerval off = {};
		setitimer(ITIMER_PROF, &off, nullptr);
	}
	if (with_churn) {
		churning = false;
		churner.join();
	}
	printf("RESULT %s rounds=%u size=%zu wrong_rounds=%u wrong_bytes=%zu sigprof=%lu\n",
	       receiver ? "receiver" : "sender", rounds, size, wrong_rounds, wrong_bytes,
	       profs.load());
	r.close();
	return wrong_rounds ? 1 : 0;
}
