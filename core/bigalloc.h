/* bigalloc.h - arrays of megabytes (a large policy's rules, its index)
 * allocated so that filling them costs a page fault per 2 MiB rather than
 * per 4 KiB, where the kernel offers transparent huge pages on request. */
#ifndef FAULTNET_BIGALLOC_H
#define FAULTNET_BIGALLOC_H

#include <stddef.h>

/* calloc(n, size); an array of 4 MiB or more is marked for huge pages. */
void *fn_big_calloc(size_t n, size_t size);

/* realloc(p, size), the same way. */
void *fn_big_realloc(void *p, size_t size);

/* Arrays on mappings of their own (a large policy's index and what
 * building it needs): grown or freed, they leave no free chunk in the
 * host's heap, where a hole left between the arrays that stay made every
 * later malloc of the app's split and merge it (a getaddrinfo under a
 * 10,000-rule policy: +300 instructions). Zero-filled; NULL p makes one;
 * a failed grow keeps p. Freed only by fn_map_free. */
void *fn_map_realloc(void *p, size_t size);
void fn_map_free(void *p);

#endif
