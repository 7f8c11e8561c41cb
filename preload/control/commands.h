/* commands.h - the policy changes of the group's journal, applied by the
 * thread that catches up. Every change builds a new policy from the current
 * one and publishes it whole; the app's other threads never wait for it. */
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

/* Applies journal entries not applied yet: at start, after fork, and when a
 * group's change counter has moved. */
void fn_cmd_catch_up(void);

/* The last journal entry applied; what the process started with. */
uint64_t fn_cmd_applied(void);
const char *fn_cmd_base_config(void);
const char *fn_cmd_base_zone(void);

#endif
