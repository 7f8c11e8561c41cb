/* bigalloc.c - large arrays marked for transparent huge pages (bigalloc.h).
 * Under a virtual machine a page fault is dear (a 100,000-rule policy
 * touched 15,000 pages, most of them in its rules array), and the kernel
 * only gives huge pages to memory that asks for them when THP is in its
 * "madvise" mode, Debian's default. The mark is advice: with THP off, or
 * an old kernel, nothing changes.
 *
 * Only an array that is a mapping of its own is marked. glibc serves one
 * this large from its heap too once its mmap threshold has risen (it
 * follows the largest mapped chunk freed, up to 32 MiB), and advice given
 * to heap pages outlives the array: whatever the host puts there later
 * would get huge pages. Another allocator (jemalloc, a sanitizer's) is
 * left alone. */
#include "core/bigalloc.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define BIG ((size_t)4 << 20)
#define HUGE_PAGE ((uintptr_t)2 << 20)

/* Whether p is glibc's chunk of a mapping of its own: such a chunk starts
 * a page, p 16 bytes in, after its size word, a multiple of the page with
 * IS_MMAPPED (2) its only flag. The word lies in p's own page, so reading
 * it is safe whatever allocator returned p; a sanitizer's redzone there is
 * read unchecked. */
__attribute__((no_sanitize_address, no_sanitize_thread)) static bool own_mapping(const void *p,
										 size_t size)
{
	uintptr_t a = (uintptr_t)p;
	if ((a & 4095) != 2 * sizeof(size_t))
		return false;
	__asm__("" : "+r"(a)); /* the word is glibc's, outside what calloc gave */
	size_t head = *(const size_t *)(a - sizeof(size_t));
	return (head & 4095) == 2 && head - 2 >= size + 2 * sizeof(size_t);
}

/* Marks the whole huge pages inside [p, p + size). */
static void *advise(void *p, size_t size)
{
	if (!p || size < BIG || !own_mapping(p, size))
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

/* A mapping's length, kept in its first 16 bytes (the array's alignment). */
#define MAP_HEAD 16

static size_t map_len(size_t size)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	return (size + MAP_HEAD + page - 1) / page * page;
}

void *fn_map_realloc(void *p, size_t size)
{
	if (size > SIZE_MAX / 2)
		return NULL;
	size_t len = map_len(size);
	char *base = p ? (char *)p - MAP_HEAD : NULL;
	size_t had = base ? *(size_t *)base : 0;
	if (base && len <= had)
		return p;
	/* mremap keeps the bytes and zero-fills the new pages, as mmap does. */
	void *m = base
		      ? mremap(base, had, len, MREMAP_MAYMOVE)
		      : mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return NULL;
	*(size_t *)m = len;
	if (len >= BIG) /* the whole mapping is the array's: safe to advise */
		madvise(m, len, MADV_HUGEPAGE);
	return (char *)m + MAP_HEAD;
}

void fn_map_free(void *p)
{
	if (p) {
		char *base = (char *)p - MAP_HEAD;
		munmap(base, *(size_t *)base);
	}
}
