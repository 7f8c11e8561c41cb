/* run.h - faultctl run: a command under the shim. */
#ifndef FAULTCTL_RUN_H
#define FAULTCTL_RUN_H

#include <stdbool.h>

/* argv after "run"; group from a -g given before the verb (may be NULL). */
int cmd_run(int argc, char **argv, const char *group, bool json);

#endif
