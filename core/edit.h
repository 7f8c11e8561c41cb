/* edit.h - the live changes faultctl sends to a member (add, rm, load,
 * zone) as pure functions on a policy (edit.c), shared by the shim's
 * control commands and the kernel-side backend's. */
#ifndef FAULTNET_EDIT_H
#define FAULTNET_EDIT_H

#include <stddef.h>
#include <stdint.h>

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
/* A policy with no rules and no zone. */
struct fn_policy *fn_edit_empty(void);

#endif
