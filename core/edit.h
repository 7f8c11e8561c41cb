/* edit.h - the live changes faultctl sends to a member (add, rm, load,
 * zone) as pure functions on a policy (edit.c), shared by the shim's
 * control commands and the kernel-side backend's. */
#ifndef FAULTNET_EDIT_H
#define FAULTNET_EDIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/rundir.h"

struct fn_policy;

/* Each returns a changed copy of cur (NULL: no rules yet) and puts the
 * member's reply in reply ("ok ..."), or returns NULL with "error ..."
 * there. cur is never changed. */
struct fn_policy *fn_edit_add(const struct fn_policy *cur, const char *text, char *reply,
			      size_t len);
struct fn_policy *fn_edit_rm(const struct fn_policy *cur, const char *name, char *reply,
			     size_t len);
struct fn_policy *fn_edit_load(const struct fn_policy *cur, const char *text, char *reply,
			       size_t len);
struct fn_policy *fn_edit_zone(const struct fn_policy *cur, const char *name, char *reply,
			       size_t len);
/* enable's "NAME since=WALL_MS": cuts arg at NAME and gives the
 * CLOCK_MONOTONIC ns when faultctl switched the rule on (a late joiner
 * times the rule's window from then, as the running members do); 0 when
 * there is no time. */
uint64_t fn_edit_enabled_at(char *arg);
/* One change line, "VERB ARG" with VERB enable, disable, add, rm, load or
 * zone, applied to a copy of cur (reset is the caller's: what it goes back
 * to is the caller's). Returns the copy with the reply in reply and, for
 * enable and disable, the rule's index in *rule and enable's time in *at
 * (-1 and 0 for the others); or NULL with "error ..." in reply. Cuts line. */
struct fn_policy *fn_edit_line(const struct fn_policy *cur, char *line, int *rule, uint64_t *at,
			       char *reply, size_t len);
/* enable, disable, add, rm and zone applied to p itself, with its index
 * left for fn_policy_finish(): for a replay of many changes on a policy
 * of its own (faultctl's check), where a copy and an index a change cost
 * as much as the policy. 1 when done, 0 when refused (p unchanged, the
 * reason in reply), -1 for another verb. Cuts line. */
int fn_edit_in_place(struct fn_policy *p, char *line, char *reply, size_t len);
/* Which of fn_edit_in_place()'s verbs a change line has, by its first
 * word, and where its argument starts (*arg, its offset in line, when arg
 * is not NULL): the shim's catch-up batch treats each kind its own way. */
enum fn_edit_kind {
	FN_EDIT_ENABLE,
	FN_EDIT_DISABLE,
	FN_EDIT_ADD,
	FN_EDIT_RM,
	FN_EDIT_ZONE,
	FN_EDIT_OTHER /* load, reset, or not a verb: not done in place */
};
enum fn_edit_kind fn_edit_kind(const char *line, size_t *arg);
/* True for "reset" (with or without words after it): the change that goes
 * back to the member's base policy, which fn_edit_line() does not know;
 * each caller finds the base its own way. */
bool fn_edit_is_reset(const char *line);

/* A journal entry's change: "pid=PID.START.NS verb ..." is for the one
 * process with that id (core/rundir.h: struct fn_member_id, the pid and
 * start time as the member sees them, its pid namespace; "pid=PID.START",
 * with no NS, names the pid in any namespace), which faultctl -p names;
 * returns "verb ..." with *id set. Any other text is for every member:
 * returned as it is, id->pid 0. NULL for a target that does not parse. */
char *fn_edit_target(char *text, struct fn_member_id *id);
/* A policy with no rules and no zone. */
struct fn_policy *fn_edit_empty(void);

#endif
