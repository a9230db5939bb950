/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * test/bench/cntr_count.c - count an unmodified application's fi_cntr_wait calls (an
 * LD_PRELOAD library, for OpenSHMEM's PEs: test/bench/sos-bench.sh).
 *
 * fi_cntr_wait is an inline call through the counter's ops table, so no symbol can be
 * interposed. This library interposes the exported fi_fabric and, from there, hands out
 * copies of the fabric's, each domain's and each counter's ops tables whose domain,
 * cntr_open and wait slots count and forward. At exit it appends one line to
 * $CNTR_COUNT_OUT (default stderr):
 *
 *   cntr_count pid PID calls N unmet U wait_us T
 *
 * N: fi_cntr_wait calls; U: those that did not find the threshold met on entry (an
 * fi_cntr_read first says so); T: the microseconds spent in them all.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static atomic_ulong calls, unmet, wait_ns;

/*
 * The copies made, each beside the table it copies: a provider over another (rxm over a
 * core) opens the core's fabric and domain through the same exported calls, so every
 * provider's tables are copied and the wrappers find the real slot through their copy.
 */
enum { max_tables = 16 };
struct twin {
	const void *orig;
	void *copy;
};
static struct twin fabrics[max_tables], domains[max_tables], cntrs[max_tables];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* the copy of ORIG (its size field says how big), made on first sight; NULL when full */
static void *twin_of(struct twin *t, const void *orig, size_t size)
{
	void *c = NULL;
	int i;

	pthread_mutex_lock(&lock);
	for (i = 0; i < max_tables && t[i].orig; i++)
		if (t[i].orig == orig || t[i].copy == orig) {
			c = t[i].copy;
			break;
		}
	if (!c && i < max_tables && (c = malloc(size))) {
		memcpy(c, orig, size);
		t[i].orig = orig;
		t[i].copy = c;
	}
	pthread_mutex_unlock(&lock);
	return c;
}

/* the table that COPY copies */
static const void *orig_of(struct twin *t, const void *copy)
{
	int i;

	for (i = 0; i < max_tables && t[i].orig; i++)
		if (t[i].copy == copy)
			return t[i].orig;
	return NULL;
}

static unsigned long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ul + ts.tv_nsec;
}

#define HAS_SLOT(ops, type, slot) ((ops)->size >= offsetof(type, slot) + sizeof((ops)->slot))

static int count_wait(struct fid_cntr *cntr, uint64_t threshold, int timeout)
{
	const struct fi_ops_cntr *orig = orig_of(cntrs, cntr->ops);
	unsigned long t0 = now_ns();
	int ret;

	if (!orig)
		return -FI_ENOSYS;
	atomic_fetch_add(&calls, 1);
	if (orig->read(cntr) < threshold)
		atomic_fetch_add(&unmet, 1);
	ret = orig->wait(cntr, threshold, timeout);
	atomic_fetch_add(&wait_ns, now_ns() - t0);
	return ret;
}

static int count_cntr_open(struct fid_domain *domain, struct fi_cntr_attr *attr,
                           struct fid_cntr **cntr, void *context)
{
	const struct fi_ops_domain *orig = orig_of(domains, domain->ops);
	struct fi_ops_cntr *ops;
	int ret;

	if (!orig)
		return -FI_ENOSYS;
	ret = orig->cntr_open(domain, attr, cntr, context);
	if (ret || !HAS_SLOT((*cntr)->ops, struct fi_ops_cntr, wait))
		return ret;
	ops = twin_of(cntrs, (*cntr)->ops, (*cntr)->ops->size);
	if (ops) {
		ops->wait = count_wait;
		(*cntr)->ops = ops;
	}
	return ret;
}

static int count_domain(struct fid_fabric *fabric, struct fi_info *info, struct fid_domain **domain,
                        void *context)
{
	const struct fi_ops_fabric *orig = orig_of(fabrics, fabric->ops);
	struct fi_ops_domain *ops;
	int ret;

	if (!orig)
		return -FI_ENOSYS;
	ret = orig->domain(fabric, info, domain, context);
	if (ret || !HAS_SLOT((*domain)->ops, struct fi_ops_domain, cntr_open))
		return ret;
	ops = twin_of(domains, (*domain)->ops, (*domain)->ops->size);
	if (ops) {
		ops->cntr_open = count_cntr_open;
		(*domain)->ops = ops;
	}
	return ret;
}

int fi_fabric(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context)
{
	static int (*real)(struct fi_fabric_attr *, struct fid_fabric **, void *);
	struct fi_ops_fabric *ops;
	int ret;

	if (!real)
		real = (int (*)(struct fi_fabric_attr *, struct fid_fabric **, void *))dlsym(
		    RTLD_NEXT, "fi_fabric");
	if (!real)
		return -FI_ENOSYS;
	ret = real(attr, fabric, context);
	if (ret || !HAS_SLOT((*fabric)->ops, struct fi_ops_fabric, domain))
		return ret;
	ops = twin_of(fabrics, (*fabric)->ops, (*fabric)->ops->size);
	if (ops) {
		ops->domain = count_domain;
		(*fabric)->ops = ops;
	}
	return ret;
}

__attribute__((destructor)) static void report(void)
{
	const char *path = getenv("CNTR_COUNT_OUT");
	FILE *f = path ? fopen(path, "a") : NULL;

	fprintf(f ? f : stderr, "cntr_count pid %d calls %lu unmet %lu wait_us %lu\n",
	        (int)getpid(), atomic_load(&calls), atomic_load(&unmet),
	        atomic_load(&wait_ns) / 1000);
	if (f)
		fclose(f);
}
