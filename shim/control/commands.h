/* commands.h - the control protocol's verbs, run by the control thread.
 * Every change builds a new policy from the current one and publishes it
 * whole; the app's threads never wait for it. */
#ifndef FAULTNET_COMMANDS_H
#define FAULTNET_COMMANDS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/wire.h"

/* What reset goes back to: the config file and zone the process started
 * with (either may be NULL). */
void fn_cmd_set_base(const char *config, const char *zone);

/* The process's group and the journal of changes sent to it. */
void fn_cmd_set_group(const char *group, const char *journal);

/* Runs one request line and appends the reply. *follow is set when the
 * client asked to stream events; *since tracks what it has seen. */
void fn_cmd_run(char *line, struct fn_buf *out, bool *follow, uint64_t *since);

/* Applies journal entries not applied yet: at start, after fork, and when a
 * sequenced change arrives ahead of its predecessors. */
void fn_cmd_catch_up(bool only_thread);

/* "info" fields, also used when the process writes its stats at exit. */
void fn_cmd_stats(struct fn_buf *out);

#endif
