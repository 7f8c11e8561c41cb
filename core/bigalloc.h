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

#endif
