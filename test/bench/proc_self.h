/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* What the benchmark programs read of their own process in /proc: open descriptors and
 * the resident set. */
#ifndef VWAIT_TEST_BENCH_PROC_SELF_H
#define VWAIT_TEST_BENCH_PROC_SELF_H

#include <dirent.h>

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

/* The resident set in KiB (VmRSS of /proc/self/status), -1 if unknown. */
inline long proc_rss_kb()
{
	FILE *f = fopen("/proc/self/status", "r");
	if (!f)
		return -1;
	char line[256];
	long kb = -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmRSS:", 6))
			kb = atol(line + 6);
	fclose(f);
	return kb;
}

#endif
