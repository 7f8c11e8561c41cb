/* change.h - a change (enable, disable, add, rm, load, zone, reset) for a
 * group or for the processes named with -p: journaled, checked, and put in
 * force by moving the group's change counter. */
#ifndef FAULTCTL_CHANGE_H
#define FAULTCTL_CHANGE_H

#include <stdbool.h>

#include "ctl/targets.h"

/* Carries out line (one protocol line) for sel in the run directory dir,
 * printing each reply (JSON lines with json). Returns faultctl's status. */
int change_run(const char *dir, struct selection *sel, bool json, const char *line);

#endif
