/* alone.c - ends the process when only the shim's threads are left (see
 * alone.h). stdio, not read or close: those are the shim's own hooks. */
#include "preload/base/alone.h"

#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* A thread's state letter from "/proc/self/task/TID/stat", and its name
 * in comm (at most 16 bytes); 0 when the thread is gone, '?' (an app's
 * thread, to be safe) when its line does not parse. */
static char state_of(const char *tid, char comm[17])
{
	char path[64], line[256] = "";
	snprintf(path, sizeof(path), "/proc/self/task/%s/stat", tid);
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	bool read = fgets(line, sizeof(line), f) != NULL;
	fclose(f);
	comm[0] = '\0';
	/* "tid (comm) state ...": comm may hold anything, so the last ')'. */
	const char *open = strchr(line, '('), *close = strrchr(line, ')');
	if (!read || !open || !close || close[1] != ' ')
		return '?';
	snprintf(comm, 17, "%.*s", (int)(close - open - 1), open + 1);
	return close[2];
}

static bool exited(char state)
{
	return state == 'Z' || state == 'X';
}

void fn_end_if_alone(void)
{
	static uint64_t next_ns;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	uint64_t now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	if (now < __atomic_load_n(&next_ns, __ATOMIC_RELAXED))
		return;
	__atomic_store_n(&next_ns, now + 200000000u, __ATOMIC_RELAXED);
	char comm[17], me[16];
	snprintf(me, sizeof(me), "%d", (int)getpid());
	/* The common case costs one file read: the main thread still runs
	 * (it stays listed as a zombie when it has ended). */
	if (!exited(state_of(me, comm)))
		return;
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	bool app_thread = d == NULL;
	while (d && !app_thread && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char st = state_of(e->d_name, comm);
		app_thread = st && !exited(st) && strncmp(comm, "faultnet-", 9) != 0;
	}
	if (d)
		closedir(d);
	if (!app_thread)
		exit(0);
}
