/* cgroup.c - the cgroup v2 directory a kernel-side run puts its command
 * in (see cgroup.h): where faultctl's own cgroup is, the sweep of the ones
 * killed runs left, the command's entry and the removal after it. */
#include "bpf/cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The cgroup v2 directory this process is in, from /proc/self/mounts and
 * /proc/self/cgroup; false with the reason. */
bool fnb_cgroup_own(char *out, size_t len, char *err, size_t errlen)
{
	char mnt[PATH_MAX] = "", line[PATH_MAX + 200], rel[PATH_MAX] = "";
	FILE *f = fopen("/proc/self/mounts", "re");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "%*s %4095s cgroup2", mnt) == 1 && strstr(line, " cgroup2 "))
			break;
		else
			mnt[0] = '\0';
	if (f)
		fclose(f);
	if (!mnt[0]) {
		snprintf(err, errlen,
			 "no cgroup v2 hierarchy is mounted "
			 "(mount -t cgroup2 none /sys/fs/cgroup)");
		return false;
	}
	f = fopen("/proc/self/cgroup", "re");
	while (f && fgets(line, sizeof(line), f))
		if (strncmp(line, "0::", 3) == 0 && sscanf(line + 3, "%4095s", rel) == 1)
			break;
	if (f)
		fclose(f);
	snprintf(out, len, "%s%s", mnt, strcmp(rel, "/") ? rel : "");
	return true;
}

/* Removes the cgroups of earlier runs whose faultctl is gone. */
void fnb_cgroup_sweep(const char *parent)
{
	DIR *d = opendir(parent);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		int pid;
		char path[PATH_MAX + 300];
		if (sscanf(e->d_name, "faultnet-bpf-%d", &pid) != 1 || kill(pid, 0) == 0 ||
		    errno != ESRCH)
			continue;
		snprintf(path, sizeof(path), "%s/%s", parent, e->d_name);
		rmdir(path);
	}
	if (d)
		closedir(d);
}

/* Moves every process left in cg to parent, then removes cg. */
void fnb_cgroup_remove(const char *cg, const char *parent)
{
	char path[PATH_MAX + 32], line[32];
	for (int round = 0; round < 10 && rmdir(cg) < 0 && errno == EBUSY; round++) {
		snprintf(path, sizeof(path), "%s/cgroup.procs", cg);
		FILE *in = fopen(path, "re");
		snprintf(path, sizeof(path), "%s/cgroup.procs", parent);
		while (in && fgets(line, sizeof(line), in)) {
			int fd = open(path, O_WRONLY | O_CLOEXEC);
			if (fd >= 0) {
				(void)!write(fd, line, strlen(line));
				close(fd);
			}
		}
		if (in)
			fclose(in);
	}
}

/* The command, in the cgroup: it moves itself there before exec. */
pid_t fnb_cgroup_start(const char *cg, char **argv)
{
	char procs[PATH_MAX + 32];
	snprintf(procs, sizeof(procs), "%s/cgroup.procs", cg);
	pid_t pid = fork();
	if (pid != 0)
		return pid;
	int fd = open(procs, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, "0", 1) != 1) {
		fprintf(stderr, "faultctl run: cannot enter %s: %s\n", cg, strerror(errno));
		_exit(2);
	}
	close(fd);
	execvp(argv[0], argv);
	fprintf(stderr, "faultctl run: %s: %s\n", argv[0], strerror(errno));
	_exit(errno == ENOENT ? 127 : 126);
}
