/* control.h - a process joins its group: it follows the group's changes
 * and publishes its state for faultctl, with no thread of its own. */
#ifndef FAULTNET_CONTROL_H
#define FAULTNET_CONTROL_H

/* At start: reads FAULTNET_GROUP, FAULTNET_CONTROL and the run directory
 * (as the process started: a later setenv does not move it to another
 * group). Returns NULL, or a message for a bad FAULTNET_GROUP or
 * FAULTNET_CONTROL (a configuration error). A run directory that cannot
 * be used only disables control, with a warning. */
const char *fn_control_check(void);

/* At the process's first covered call (its join): follows the group's
 * changes from then on, replays the group's journal and publishes the
 * process's state. */
void fn_control_start(void);

/* In a fork child: the child's own state, published from its first
 * covered call. */
void fn_control_atfork_child(void);

#endif
