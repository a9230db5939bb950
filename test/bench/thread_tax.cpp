/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* What a second thread costs every system call of a process: write(2) of 8 bytes to /dev/null,
 * in ns per call, measured in one process in three states, one after the other:
 *   single    no thread was ever created
 *   exited    a thread was created and joined (glibc keeps its multi-threaded paths: the
 *             cancellation wrapper around write)
 *   live      a second thread sleeps in pause() (the kernel's file table is shared too, so each
 *             call takes and drops a reference on the file)
 * vwait's EQ has such a thread (its control progress), and a spinning ping-pong over rxe makes
 * one system call a send (the doorbell). Run it where the ping-pong runs (the VM: make bench
 * prints it); REPEATS rounds of N calls per state, each round's figure printed.
 *   test/bench/thread_tax [-n N] [-r REPEATS] */
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace
{

double ns_per_write(int fd, int n)
{
	const char buf[8] = {};
	auto t0 = std::chrono::steady_clock::now();
	for (int i = 0; i < n; i++)
		if (write(fd, buf, sizeof(buf)) != static_cast<ssize_t>(sizeof(buf)))
			return -1;
	auto t1 = std::chrono::steady_clock::now();
	return std::chrono::duration<double, std::nano>(t1 - t0).count() / n;
}

void *sleeper(void *)
{
	for (;;)
		pause();
	return nullptr;
}

void *quitter(void *arg)
{
	return arg;
}

} // namespace

int main(int argc, char **argv)
{
	int n = 100000, repeats = 5;
	for (int opt; (opt = getopt(argc, argv, "n:r:")) != -1;) {
		if (opt == 'n')
			n = atoi(optarg);
		else if (opt == 'r')
			repeats = atoi(optarg);
		else {
			fprintf(stderr, "usage: %s [-n calls] [-r repeats]\n", argv[0]);
			return 2;
		}
	}
	if (n <= 0 || repeats <= 0) {
		fprintf(stderr, "-n and -r must be positive\n");
		return 2;
	}
	int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (fd < 0) {
		perror("/dev/null");
		return 1;
	}
	std::vector<double> single, exited, live;
	ns_per_write(fd, n); /* warm up */
	for (int r = 0; r < repeats; r++)
		single.push_back(ns_per_write(fd, n));
	pthread_t t;
	if (pthread_create(&t, nullptr, quitter, nullptr) != 0 || pthread_join(t, nullptr) != 0) {
		fprintf(stderr, "pthread_create failed\n");
		return 1;
	}
	for (int r = 0; r < repeats; r++)
		exited.push_back(ns_per_write(fd, n));
	if (pthread_create(&t, nullptr, sleeper, nullptr) != 0) {
		fprintf(stderr, "pthread_create failed\n");
		return 1;
	}
	usleep(1000);
	for (int r = 0; r < repeats; r++)
		live.push_back(ns_per_write(fd, n));
	for (int r = 0; r < repeats; r++) {
		if (single[r] < 0 || exited[r] < 0 || live[r] < 0) {
			fprintf(stderr, "write(/dev/null) failed\n");
			return 1;
		}
		printf("THREAD_TAX calls=%d single_ns=%.1f exited_ns=%.1f live_ns=%.1f\n", n,
		       single[r], exited[r], live[r]);
	}
	return 0;
}
