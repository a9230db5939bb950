/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * test/bench/sos_wait.c - an OpenSHMEM PE blocked in fi_cntr_wait.
 *
 *   oshrun -n 2 sos_wait fetch 0 ROUNDS
 *   oshrun -n 2 sos_wait get BYTES ROUNDS
 *   oshrun -n 2 sos_wait idle US ROUNDS      (both PEs on one node)
 *
 * PE 0 makes ROUNDS blocking operations on PE 1, one at a time, and waits for each in
 * fi_cntr_wait on ofi_rxm's counter:
 *   fetch  shmem_long_atomic_fetch_inc: over ofi_rxm an atomic is a message that PE 1's rxm
 *          executes; SOS asks for FI_PROGRESS_AUTO, so rxm's progress thread does it, woken
 *          from its own fi_trywait and poll() on the core's descriptors. PE 0 waits for two
 *          trips and that thread's wake-up: shorter than a sleep of PE 0 costs.
 *   get    shmem_getmem of BYTES: an RDMA read that the device serves; PE 0 waits as long as
 *          the transfer takes, from below a wake-up (8 B) to many of them (MiB), with
 *          nothing to do.
 *   idle   a fetch-and-increment while PE 1 is stopped (SIGSTOP, its rxm thread with it) for
 *          US microseconds, after which a thread of PE 0 continues it: PE 0 waits that long
 *          with nothing arriving and nothing moving, as a PE whose peer computes. (On a
 *          software device the get's transfer is the kernel's work in PE 0's process: its
 *          CPU is not the waiter's alone; here it is.)
 * PE 1 sleeps meanwhile (it looks every 200 us whether PE 0 is done).
 *
 * PE 0 prints one line: the mode, bytes, rounds, the median and min-max microseconds per
 * operation, its CPU (user + system) as a share of the wall time of the loop, its voluntary
 * context switches per operation (each one a sleep), and how many results were wrong (a fetch
 * that did not see the count before it, a get whose bytes differ from PE 1's).
 */
#include <pthread.h>
#include <shmem.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static long counter;
static int done;
static long pid;

struct wake_later {
	pid_t peer;
	long us;
};

/* sleeps, then continues the stopped peer */
static void *continue_peer(void *arg)
{
	const struct wake_later *w = arg;

	usleep((useconds_t)w->us);
	kill(w->peer, SIGCONT);
	return NULL;
}

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static double cpu_us(const struct rusage *r)
{
	return (r->ru_utime.tv_sec + r->ru_stime.tv_sec) * 1e6 + r->ru_utime.tv_usec +
	       r->ru_stime.tv_usec;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static unsigned char pattern(size_t i)
{
	return (unsigned char)(i * 131 + 7);
}

int main(int argc, char **argv)
{
	double t0, t1, *lat;
	long rounds, i, bad = 0;
	size_t bytes, j;
	unsigned char *src, *dst = NULL;
	struct rusage r0, r1;
	int get, idle;
	long idle_us;

	if (argc != 4 ||
	    (strcmp(argv[1], "fetch") && strcmp(argv[1], "get") && strcmp(argv[1], "idle")) ||
	    (rounds = atol(argv[3])) < 1) {
		fprintf(stderr, "usage: %s fetch 0 ROUNDS | get BYTES ROUNDS | idle US ROUNDS\n",
		        argv[0]);
		return 2;
	}
	get = !strcmp(argv[1], "get");
	idle = !strcmp(argv[1], "idle");
	idle_us = idle ? atol(argv[2]) : 0;
	bytes = get ? strtoull(argv[2], NULL, 0) : 0;
	if (get && !bytes) {
		fprintf(stderr, "sos_wait: get needs BYTES > 0\n");
		return 2;
	}
	shmem_init();
	if (shmem_n_pes() != 2) {
		if (shmem_my_pe() == 0)
			fprintf(stderr, "sos_wait: needs 2 PEs, has %d\n", shmem_n_pes());
		shmem_finalize();
		return 2;
	}
	src = shmem_malloc(bytes ? bytes : 1);
	lat = calloc(rounds, sizeof(*lat));
	if (get && shmem_my_pe() == 0)
		dst = malloc(bytes);
	if (!src || !lat || (get && shmem_my_pe() == 0 && !dst)) {
		fprintf(stderr, "sos_wait: out of memory\n");
		shmem_global_exit(1);
	}
	for (j = 0; j < bytes; j++)
		src[j] = pattern(j);
	pid = getpid();
	shmem_barrier_all();
	const long peer = idle && shmem_my_pe() == 0 ? shmem_long_g(&pid, 1) : 0;
	if (shmem_my_pe() == 1) {
		while (!shmem_int_test(&done, SHMEM_CMP_NE, 0))
			usleep(200);
	} else {
		getrusage(RUSAGE_SELF, &r0);
		t0 = now_us();
		for (i = 0; i < rounds; i++) {
			double s = now_us();

			if (idle) {
				/* stopped before the request leaves, continued US later */
				struct wake_later w = {(pid_t)peer, idle_us};
				pthread_t t;

				kill(w.peer, SIGSTOP);
				if (pthread_create(&t, NULL, continue_peer, &w) != 0) {
					kill(w.peer, SIGCONT);
					bad++;
				} else {
					if (shmem_long_atomic_fetch_inc(&counter, 1) != i)
						bad++;
					pthread_join(t, NULL);
				}
			} else if (get) {
				dst[0] = dst[bytes - 1] = (unsigned char)~pattern(0);
				shmem_getmem(dst, src, bytes, 1);
			} else if (shmem_long_atomic_fetch_inc(&counter, 1) != i) {
				bad++;
			}
			lat[i] = now_us() - s;
			if (get && (dst[0] != pattern(0) || dst[bytes - 1] != pattern(bytes - 1) ||
			            dst[bytes / 2] != pattern(bytes / 2)))
				bad++;
		}
		t1 = now_us();
		getrusage(RUSAGE_SELF, &r1);
		shmem_int_atomic_set(&done, 1, 1);
		qsort(lat, rounds, sizeof(*lat), cmp);
		printf("sos_wait mode %s bytes %zu rounds %ld us %.2f [%.2f-%.2f] cpu_share %.4f "
		       "vcsw_per_op %.3f bad %ld\n",
		       argv[1], bytes, rounds, lat[rounds / 2], lat[0], lat[rounds - 1],
		       (cpu_us(&r1) - cpu_us(&r0)) / (t1 - t0),
		       (double)(r1.ru_nvcsw - r0.ru_nvcsw) / rounds, bad);
	}
	shmem_barrier_all();
	if (!get && shmem_my_pe() == 1 && counter != rounds) {
		fprintf(stderr, "sos_wait: counter %ld, not %ld\n", counter, rounds);
		bad++;
	}
	free(dst);
	free(lat);
	shmem_free(src);
	shmem_finalize();
	return bad ? 1 : 0;
}
