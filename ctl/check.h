/* check.h - a group change checked by faultctl, against the policy one
 * member of the group has, without asking the member. */
#ifndef FAULTCTL_CHECK_H
#define FAULTCTL_CHECK_H

#include <stddef.h>
#include <sys/types.h>

/* Applies line (a change verb and its argument) to the policy process pid
 * has: the one it started with, then the entries of journal before seq.
 * 1: it applies, the member's reply ("ok ...") in reply; 0: refused, the
 * reply "error ..."; -1: that policy cannot be rebuilt here (why in
 * reply): a member must check the change. */
int check_change(pid_t pid, const char *journal, unsigned long long seq, const char *line,
		 char *reply, size_t len);

#endif
