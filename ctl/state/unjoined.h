/* unjoined.h - members that have not joined their group yet. A process
 * under the shim joins at its first covered call (a connect, a send, a
 * name looked up), not at its start: until then it has no file in the run
 * directory, and faultctl finds it in /proc instead. */
#ifndef FAULTCTL_UNJOINED_H
#define FAULTCTL_UNJOINED_H

#include <dirent.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "core/rundir.h"
#include "core/segment.h"

/* One such process: its pid as faultctl sees it, its group, and the name
 * its file will have (by its own pid, pid namespace and start time). */
struct unjoined {
	pid_t pid;
	char group[FN_NAME_MAX];
	struct fn_member_id id;
	char path[512];
};

/* A walk of /proc (or of the pids named) for processes that started under
 * the shim, with a policy or a group, for faultctl's run directory, and
 * that have not made their file yet. */
struct unjoined_scan {
	const char *dir; /* faultctl's run directory */
	const pid_t *pids;
	int npids, at; /* the pids named: looked at alone, not all of /proc */
	DIR *proc;
	const pid_t *joined; /* sorted: pids already found by their files */
	int njoined;
};

/* Starts a walk of the npids pids named, or of all of /proc when npids
 * is 0; false when /proc cannot be read (nothing is found). */
bool unjoined_begin(struct unjoined_scan *sc, const char *dir, const pid_t *pids, int npids,
		    const pid_t *joined, int njoined);

/* The next such process; false at the end. */
bool unjoined_next(struct unjoined_scan *sc, struct unjoined *u);

void unjoined_end(struct unjoined_scan *sc);

/* A process of group has started but not joined yet: the group has a
 * member, though it has no counter or journal yet. */
bool unjoined_in(const char *dir, const char *group);

/* The state of u as its file would hold it at its join: its command
 * line, policy file and zone from /proc, nothing counted yet (h.unjoined
 * set). NULL with the reason in err when it has gone. */
struct fn_seg *unjoined_state(const struct unjoined *u, char *err, size_t len);

#endif
