/* startmem.h - memory that a process's start keeps, without malloc. The
 * first malloc of a process sets up glibc's heap: two brk calls, a
 * getrandom and the pages of malloc's code and of the heap, as much time
 * as the rest of a start under the shim (issue 42). A start that finds its
 * policy compiled keeps a few strings and the copy's bytes, and takes them
 * from one static block; what does not fit comes from malloc. */
#ifndef FAULTNET_STARTMEM_H
#define FAULTNET_STARTMEM_H

#include <stddef.h>

/* n bytes aligned for any object, from the block while it lasts, else
 * from malloc; NULL when memory is short. For the start (the constructor,
 * which runs alone): the block is never given back, so nothing else takes
 * from it. */
void *fn_start_alloc(size_t n);

/* s copied with fn_start_alloc; NULL when memory is short. */
char *fn_start_strdup(const char *s);

/* Gives p back: to free() unless it is the block's (then nothing). */
void fn_start_free(void *p);

#endif
