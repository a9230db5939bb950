/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* The threads of the test process by name (/proc/self/task/N/comm): the provider names its
 * own (util::helper_thread::name_self), and a test can tell them from the runtime's. Used by the
 * unit tier and by the integration tier's dp_fault. */
#ifndef VWAIT_TEST_TASKS_H
#define VWAIT_TEST_TASKS_H

#include <chrono>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <thread>

/* How many threads of this process bear this name (named), or do not (!named); -1 if /proc
 * cannot say. */
inline int tasks_named(const char *name, bool named = true)
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
		n += (strcmp(comm, name) == 0) == named;
	}
	closedir(d);
	return n;
}

/* tasks_named(name, named), once it is want or after ms: a thread names itself as its first
 * step, which a loaded host may delay. */
inline int tasks_named_reaching(int want, long ms, const char *name, bool named = true)
{
	const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
	int n = tasks_named(name, named);
	while (n != want && std::chrono::steady_clock::now() < end) {
		std::this_thread::sleep_for(std::chrono::milliseconds(1));
		n = tasks_named(name, named);
	}
	return n;
}

#endif
