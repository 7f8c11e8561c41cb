/* control.h - the control socket: a thread, started by the shim, serves
 * faultctl on a Unix socket in the run directory. */
#ifndef FAULTNET_CONTROL_H
#define FAULTNET_CONTROL_H

/* Joins the group (FAULTNET_GROUP), binds the socket, replays the group's
 * journal and starts serving. Returns NULL, or a message for a bad
 * FAULTNET_GROUP (a configuration error). Problems with the run directory
 * only disable control, with a warning. */
const char *fn_control_start(void);

/* In a fork child: a socket and a thread of its own. */
void fn_control_atfork_child(void);

#endif
