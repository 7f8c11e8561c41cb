/* check.h - a change checked by faultctl, against the policy a member
 * has, without asking the member. */
#ifndef FAULTCTL_CHECK_H
#define FAULTCTL_CHECK_H

#include <stddef.h>
#include <sys/types.h>

#include "core/segment.h"

/* Applies line (a change verb and its argument) to the policy of the
 * member whose state's head is h: the one it started with, then the
 * entries of journal before seq that are its. 1: it applies, the member's
 * reply ("ok ...") in reply; 0: refused, the reply "error ..."; -1: that
 * policy cannot be rebuilt ("error ..." in reply: the config file is gone,
 * say). */
/* The policy the member whose state's head is h has once it has applied
 * the journal up to entry upto, for its rules and zone: its index is left
 * stale (fn_policy_finish before a match). NULL with the reason in err. */
struct fn_policy *check_rebuild(const struct fn_seg_head *h, const char *journal,
				unsigned long long upto, char *err, size_t len);

int check_change(const struct fn_seg_head *h, const char *journal, unsigned long long seq,
		 const char *line, char *reply, size_t len);

#endif
