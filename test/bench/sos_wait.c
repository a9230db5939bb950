/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * test/bench/sos_wait.c - an OpenSHMEM PE blocked in fi_cntr_wait while its peer computes.
 *
 *   oshrun -n 2 sos_wait THINK_US ROUNDS
 *
 * PE 0 does ROUNDS blocking fetch-and-increments on PE 1. Over ofi_rxm an atomic is a message
 * that the target's rxm handles when the target enters the library (without
 * FI_OFI_RXM_DATA_AUTO_PROGRESS it has no thread of its own), and a fetching atomic's caller
 * waits in fi_cntr_wait on its read counter. PE 1 computes THINK_US between two entries
 * (shmem_quiet, which calls fi_cntr_wait and so progresses), so PE 0 waits about THINK_US for
 * each answer: what it costs is that of a waiter in fi_cntr_wait, not of the network.
 *
 * PE 0 prints one line: rounds, the think time, the median and min-max microseconds per
 * fetch, its CPU (user + system) per fetch and as a share of the wall time, and its voluntary
 * context switches per fetch (each one a sleep). The result is checked: PE 1's counter ends
 * at ROUNDS and every fetch saw the value before it.
 */
#include <shmem.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

static long counter;
static int done;

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

int main(int argc, char **argv)
{
	double think, t0, t1, wall, *lat;
	long rounds, i, bad = 0;
	struct rusage r0, r1;

	if (argc != 3 || (think = atof(argv[1])) < 0 || (rounds = atol(argv[2])) < 1) {
		fprintf(stderr, "usage: %s THINK_US ROUNDS\n", argv[0]);
		return 2;
	}
	shmem_init();
	if (shmem_n_pes() != 2) {
		if (shmem_my_pe() == 0)
			fprintf(stderr, "sos_wait: needs 2 PEs, has %d\n", shmem_n_pes());
		shmem_finalize();
		return 2;
	}
	lat = calloc(rounds, sizeof(*lat));
	if (!lat) {
		fprintf(stderr, "sos_wait: out of memory\n");
		return 1;
	}
	shmem_barrier_all();
	if (shmem_my_pe() == 1) {
		/* compute, then enter the library once, until PE 0 says it is done */
		while (!shmem_int_test(&done, SHMEM_CMP_NE, 0)) {
			double until = now_us() + think;

			while (now_us() < until)
				;
			shmem_quiet();
		}
	} else {
		getrusage(RUSAGE_SELF, &r0);
		t0 = now_us();
		for (i = 0; i < rounds; i++) {
			double s = now_us();

			if (shmem_long_atomic_fetch_inc(&counter, 1) != i)
				bad++;
			lat[i] = now_us() - s;
		}
		t1 = now_us();
		getrusage(RUSAGE_SELF, &r1);
		shmem_int_atomic_set(&done, 1, 1);
		wall = t1 - t0;
		qsort(lat, rounds, sizeof(*lat), cmp);
		printf(
		    "sos_wait rounds %ld think_us %.0f fetch_us %.2f [%.2f-%.2f] cpu_us_per_fetch "
		    "%.2f cpu_share %.4f vcsw_per_fetch %.3f bad %ld\n",
		    rounds, think, lat[rounds / 2], lat[0], lat[rounds - 1],
		    (cpu_us(&r1) - cpu_us(&r0)) / rounds, (cpu_us(&r1) - cpu_us(&r0)) / wall,
		    (double)(r1.ru_nvcsw - r0.ru_nvcsw) / rounds, bad);
	}
	shmem_barrier_all();
	if (shmem_my_pe() == 1 && counter != rounds) {
		fprintf(stderr, "sos_wait: counter %ld, not %ld\n", counter, rounds);
		bad++;
	}
	free(lat);
	shmem_finalize();
	return bad ? 1 : 0;
}
