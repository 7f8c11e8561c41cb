/* run.h - faultctl run: a command under the shim. */
#ifndef FAULTCTL_RUN_H
#define FAULTCTL_RUN_H

#include <stdbool.h>

struct fn_policy;

/* argv after "run"; group from a -g given before the verb (may be NULL). */
int cmd_run(int argc, char **argv, const char *group, bool json);

/* Warns on stderr, with file:line, of each rule of p that names nothing to
 * match (no to, port, zone or host): it covers every connection (every
 * lookup, for dns), most often a match forgotten. The number warned of. */
int run_warn_broad(const char *file, const struct fn_policy *p);

/* The counts every process left in the stats directory dir at exit,
 * printed on stderr as run --stats prints them; dir is removed. */
void run_print_stats(const char *dir, bool json);

#endif
