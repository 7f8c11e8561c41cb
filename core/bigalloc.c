/* bigalloc.c - large arrays marked for transparent huge pages (bigalloc.h).
 * Under a virtual machine a page fault is dear (a 100,000-rule policy
 * touched 15,000 pages, most of them in its rules array), and the kernel
 * only gives huge pages to memory that asks for them when THP is in its
 * "madvise" mode, Debian's default. The mark is advice: with THP off, or
 * an old kernel, nothing changes. glibc serves an array this large with a
 * mapping of its own, so the advice touches no other allocation's pages;
 * free() unmaps it whole. */
#include "core/bigalloc.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#define BIG ((size_t)4 << 20)
#define HUGE_PAGE ((uintptr_t)2 << 20)

/* Marks the whole huge pages inside [p, p + size). */
static void *advise(void *p, size_t size)
{
	if (!p || size < BIG)
		return p;
	uintptr_t from = ((uintptr_t)p + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
	uintptr_t to = ((uintptr_t)p + size) & ~(HUGE_PAGE - 1);
	if (to > from)
		madvise((void *)from, to - from, MADV_HUGEPAGE); /* advice: errors ignored */
	return p;
}

void *fn_big_calloc(size_t n, size_t size)
{
	return advise(calloc(n, size), n * size);
}

void *fn_big_realloc(void *p, size_t size)
{
	return advise(realloc(p, size), size);
}
