/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* What the benchmark programs read of their own process in /proc: open descriptors, the
 * resident set (anonymous and file-backed apart) and the bytes malloc holds. */
#ifndef VWAIT_TEST_BENCH_PROC_SELF_H
#define VWAIT_TEST_BENCH_PROC_SELF_H

#include <dirent.h>
#include <malloc.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

/* The descriptors this process holds, -1 if /proc cannot say. */
inline int proc_open_fds()
{
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return -1;
	int n = 0;
	while (struct dirent *e = readdir(d))
		n += e->d_name[0] != '.';
	closedir(d);
	return n - 1; /* the directory's own */
}

/* A field of a /proc file of "Name:   value kB" lines, in KiB, -1 if unknown. */
inline long proc_field_kb(const char *path, const char *field)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	char line[256];
	long kb = -1;
	const size_t n = strlen(field);
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, field, n))
			kb = atol(line + n);
	fclose(f);
	return kb;
}

/* A field of /proc/self/status in KiB ("VmRSS:", "RssAnon:": the process's own memory, heap
 * included; "RssFile:": file mappings, a verbs device's queues among them), -1 if unknown. */
inline long proc_status_kb(const char *field)
{
	return proc_field_kb("/proc/self/status", field);
}

/* The resident set in KiB (VmRSS of /proc/self/status), -1 if unknown. */
inline long proc_rss_kb()
{
	return proc_status_kb("VmRSS:");
}

/* A field of /proc/self/smaps_rollup in KiB ("Rss:", "Anonymous:"), -1 if unknown. Unlike
 * /proc/self/status, exact: the kernel walks the page tables. Linux before 6.2 keeps each
 * thread's RSS changes in a cache of its own, added to the process's counts only every 64 page
 * faults (or at an munmap); the pages a verbs driver maps with vm_insert_page (rxe's queues)
 * are no page faults, so RssFile of /proc/self/status can lag by several MiB. */
inline long proc_smaps_kb(const char *field)
{
	return proc_field_kb("/proc/self/smaps_rollup", field);
}

/* The resident set in KiB as three exact figures: the whole, the anonymous part (the
 * process's own memory) and the rest (file mappings: the device's queues among them), from
 * /proc/self/smaps_rollup; from /proc/self/status (see above) when that cannot be read. */
struct proc_rss {
	long all, anon, file;
};
inline proc_rss proc_rss_exact()
{
	const long rss = proc_smaps_kb("Rss:"), anon = proc_smaps_kb("Anonymous:");
	if (rss >= 0 && anon >= 0)
		return {rss, anon, rss - anon};
	return {proc_rss_kb(), proc_status_kb("RssAnon:"), proc_status_kb("RssFile:")};
}

/* Bytes malloc has handed out and not taken back (glibc's mallinfo2: the arena's in-use
 * chunks and the mmapped ones), -1 without glibc. */
inline long long proc_heap_bytes()
{
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
	const struct mallinfo2 m = mallinfo2();
	return static_cast<long long>(m.uordblks + m.hblkhd);
#else
	return -1;
#endif
}

#endif
