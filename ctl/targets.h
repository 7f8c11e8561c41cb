/* targets.h - faultctl's side of the control protocol: finding the live
 * processes of a group or a pid, reading their published state (or, for a
 * faultctl run with the kernel-side backend, sending it a request).
 * journal.h records the changes. */
#ifndef FAULTCTL_TARGETS_H
#define FAULTCTL_TARGETS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/rundir.h"
#include "core/wire.h"
#include "ctl/state/segread.h"

struct target {
	pid_t pid; /* as faultctl sees it where known (seen), else as it sees itself */
	bool seen; /* pid is faultctl's view: -p may name it */
	char group[64];
	bool seg;		/* a member's state file (GROUP.PID.NS.START.mem), not a socket */
	bool unjoined;		/* found in /proc: its file (path) is made at its join */
	struct fn_member_id id; /* a state file's member (core/rundir.h) */
	char path[512];
};

struct selection {
	const char *group; /* -g, NULL for none */
	pid_t pids[64];	   /* -p, repeatable */
	int npids;
	bool all;   /* no -g and no -p: ps lists everyone */
	bool quick; /* a socket's liveness by its pid alone, no connect to it */
	bool ahead; /* --ahead: a change for a group no process has joined yet */
};

/* Live targets in the run directory matching sel; removes the files left
 * by dead processes. Returns the count, -1 with a message in err. */
int targets_find(const char *dir, const struct selection *sel, struct target **out, char *err,
		 size_t errlen);

/* The same walk for a change to a whole group: every live target is
 * counted (the return value), but only the sockets and the first keep
 * state files are stored in *out (*stored of them): enough to check the
 * change, without a path per member of a group of thousands. */
int targets_count(const char *dir, const struct selection *sel, int keep, struct target **out,
		  int *stored, char *err, size_t errlen);

/* A member's state: read from its file, or for a member that has not
 * joined yet made up from /proc (ctl/state/unjoined.h). NULL with the reason in
 * err. */
struct fn_seg *targets_state(const struct target *t, enum seg_part part, uint64_t since, char *err,
			     size_t len);

/* One request line (info, rules, stats, events; changes too for a socket):
 * the whole reply lands in reply, made from the member's file or received.
 * False on a problem (message in reply). */
bool targets_request(const struct target *t, const char *line, struct fn_buf *reply);

/* The same request to n targets at once; r[i] gets target i's reply, or
 * an "error ..." line. */
void targets_request_all(const struct target *t, int n, const char *line, struct fn_buf *r);

/* True when the process is stopped (SIGSTOP, a debugger): it would not
 * answer a request until resumed. */
bool targets_stopped(pid_t pid);

/* Connects for streaming (events --follow): the socket fd, or -1. */
int targets_stream(const struct target *t, const char *line);

#endif
