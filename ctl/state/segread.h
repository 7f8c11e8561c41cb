/* segread.h - a member's published state, read from its file by faultctl. */
#ifndef FAULTCTL_SEGREAD_H
#define FAULTCTL_SEGREAD_H

#include <stddef.h>
#include <stdint.h>

#include "core/segment.h"

enum seg_part {
	SEG_HEAD,   /* who the process is (ps) */
	SEG_EVENTS, /* and the events after since */
	SEG_WHOLE
};

/* A copy of the part asked for (the rest zero), every string ended; NULL
 * with the reason in err for a file that is not a member's state of this
 * user. The caller frees it. */
struct fn_seg *seg_read(const char *path, enum seg_part part, uint64_t since, char *err,
			size_t len);

/* The stats records of the member's file at path (core/segment.h), as text
 * the caller frees; NULL with the reason in err. */
char *seg_stats_text(const char *path, char *err, size_t len);

#endif
