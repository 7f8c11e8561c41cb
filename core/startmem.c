/* startmem.c - memory that a process's start keeps, without malloc (see
 * startmem.h). The block is zeroed memory of the program's (.bss): only
 * the pages the start uses are ever touched. The shim's link gives it a
 * section of its own, page-aligned after .bss (preload/startdata.ld):
 * aligned within .bss, it would make .bss begin a page of its own. */
#include "core/startmem.h"
#include "core/startdata.h"

#include <stdalign.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A path, a zone, the run and stats directories (short, in practice) and
 * the compiled copy of a policy of a few dozen rules. */
#define BLOCK (16u << 10)

static alignas(max_align_t) unsigned char block[BLOCK] __attribute__((section("fn_start_block")));
static size_t used FN_START_DATA;

/* Both run at every start with a policy: with its code (FN_START_TEXT). In
 * .text, fn_start_strdup lay 192 KiB past it, a page fault of each start. */
FN_START_TEXT void *fn_start_alloc(size_t n)
{
	size_t whole = (n + alignof(max_align_t) - 1) & ~(alignof(max_align_t) - 1);
	if (whole >= n && whole <= BLOCK - used) {
		void *p = block + used;
		used += whole;
		return p;
	}
	return malloc(n);
}

FN_START_TEXT char *fn_start_strdup(const char *s)
{
	size_t n = strlen(s) + 1;
	char *p = fn_start_alloc(n);
	return p ? memcpy(p, s, n) : NULL;
}

void fn_start_free(void *p)
{
	uintptr_t at = (uintptr_t)p;
	if (at < (uintptr_t)block || at >= (uintptr_t)block + BLOCK)
		free(p);
}
