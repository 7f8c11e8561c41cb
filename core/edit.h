/* edit.h - the live changes faultctl sends to a member (add, rm, load,
 * zone) as pure functions on a policy (edit.c), shared by the shim's
 * control commands and the kernel-side backend's. */
#ifndef FAULTNET_EDIT_H
#define FAULTNET_EDIT_H

#include <stddef.h>

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
/* A policy with no rules and no zone. */
struct fn_policy *fn_edit_empty(void);

#endif
