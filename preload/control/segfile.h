/* segfile.h - the member's published state as a file of the run directory
 * (core/segment.h), which faultctl reads on its own. */
#ifndef FAULTNET_SEGFILE_H
#define FAULTNET_SEGFILE_H

#include <stdbool.h>
#include <stdint.h>

/* Makes, maps and lists the file (fn_seg points at it from then on), for
 * group, with what the process started with (config, an absolute path, and
 * zone; either may be NULL) and the journal's last entry applied. NULL, or
 * why not. */
const char *fn_segfile_create(const char *rundir, const char *group, const char *config,
			      const char *zone, uint64_t seq);

/* At start: FAULTNET_STATS_DIR kept for the file made at the join. */
void fn_segfile_note_env(void);

/* In a fork child, first of all: private memory where the parent's file
 * was mapped (the child makes its file at its first covered call). True
 * when the child's state is that fresh, zeroed memory. */
bool fn_segfile_atfork_child(void);

#endif
