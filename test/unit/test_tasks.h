/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* The threads of the test process by name (/proc/self/task/N/comm): the provider names its
 * own (util::helper_thread::name), and a test can tell them from the runtime's. */
#ifndef VWAIT_TEST_TASKS_H
#define VWAIT_TEST_TASKS_H

#include <cstdio>
#include <cstring>
#include <dirent.h>

/* How many threads of this process bear this name; -1 if /proc cannot say. */
inline int tasks_named(const char *name)
{
	DIR *d = opendir("/proc/self/task");
	if (!d)
		return -1;
	int n = 0;
	while (struct dirent *e = readdir(d)) {
		if (e->d_name[0] == '.')
			continue;
		char path[300], comm[32] = {};
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		if (FILE *f = fopen(path, "r")) {
			if (fgets(comm, sizeof(comm), f))
				comm[strcspn(comm, "\n")] = '\0';
			fclose(f);
		}
		n += strcmp(comm, name) == 0;
	}
	closedir(d);
	return n;
}

#endif
