/* control.h - a process joins its group: it follows the group's changes
 * and publishes its state for faultctl, with no thread of its own. */
#ifndef FAULTNET_CONTROL_H
#define FAULTNET_CONTROL_H

/* Joins the group (FAULTNET_GROUP), replays the group's journal and
 * publishes the process's state. Returns NULL, or a message for a bad
 * FAULTNET_GROUP or FAULTNET_CONTROL (a configuration error). Problems
 * with the run directory only disable control, with a warning. */
const char *fn_control_start(void);

/* In a fork child: the child's own state, published from its first
 * covered call. */
void fn_control_atfork_child(void);

#endif
