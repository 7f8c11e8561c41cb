/* test_bigalloc.c - large arrays come zeroed and marked for transparent
 * huge pages (core/bigalloc.c) when glibc gives them a mapping of their
 * own; small ones, heap pages and another allocator's are left alone. The
 * mark is read back from the kernel: the "hg" flag of the mapping in
 * /proc/self/smaps. */
#include <CUnit/CUnit.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bigalloc.h"

/* A sanitizer's allocator is not glibc's: nothing it returns is marked. */
#if defined(__SANITIZE_ADDRESS__)
#define GLIBC_MALLOC 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GLIBC_MALLOC 0
#endif
#endif
#ifndef GLIBC_MALLOC
#define GLIBC_MALLOC 1
#endif

/* Whether the mapping holding p carries the huge-page advice. */
static int marked(const void *p)
{
	FILE *f = fopen("/proc/self/smaps", "re");
	char line[512];
	int in = 0, hg = -1;
	uintptr_t a = (uintptr_t)p;
	while (f && hg < 0 && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2)
			in = a >= lo && a < hi;
		else if (in && strncmp(line, "VmFlags:", 8) == 0)
			hg = strstr(line, " hg") != NULL;
	}
	if (f)
		fclose(f);
	return hg;
}

/* Whether p lies in the process's heap (what brk grows). */
static int on_heap(const void *p)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];
	int heap = 0;
	uintptr_t a = (uintptr_t)p;
	while (f && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && a >= lo && a < hi)
			heap = strstr(line, "[heap]") != NULL;
	}
	if (f)
		fclose(f);
	return heap;
}

static int zeroed(const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i += 4093)
		if (p[i])
			return 0;
	return !p[n - 1];
}

static void test_large_marked(void)
{
	/* past 32 MiB, the most glibc's mmap threshold rises to: a mapping */
	size_t n = (size_t)40 << 20;
	unsigned char *p = fn_big_calloc(n / 256, 256);
	CU_ASSERT_FATAL(p != NULL);
	CU_ASSERT(zeroed(p, n));
	/* the middle lies in a whole huge page, whatever the alignment */
	CU_ASSERT_EQUAL(marked(p + n / 2), GLIBC_MALLOC);
	p[n - 1] = 1;
	unsigned char *q = fn_big_realloc(p, 2 * n);
	CU_ASSERT_FATAL(q != NULL);
	CU_ASSERT_EQUAL(q[n - 1], 1);
	CU_ASSERT_EQUAL(marked(q + n + n / 2), GLIBC_MALLOC);
	free(q);
}

/* A 24 MiB mapped chunk freed raises glibc's mmap threshold past it, so
 * that 8 MiB then come from the heap: advice there would outlive the
 * array and fall on what the heap holds later. */
static void test_heap_left_alone(void)
{
	void *volatile big = malloc((size_t)24 << 20);
	free(big);
	size_t n = (size_t)8 << 20;
	unsigned char *p = fn_big_calloc(n, 1);
	CU_ASSERT_FATAL(p != NULL);
	CU_ASSERT(zeroed(p, n));
	CU_ASSERT_EQUAL(on_heap(p), GLIBC_MALLOC); /* what the test is about */
	CU_ASSERT_EQUAL(marked(p + n / 2), 0);
	free(p);
}

static void test_small_left_alone(void)
{
	unsigned char *p = fn_big_calloc(1024, 1024); /* 1 MiB */
	CU_ASSERT_FATAL(p != NULL);
	CU_ASSERT(zeroed(p, 1 << 20));
	CU_ASSERT_EQUAL(marked(p + (1 << 19)), 0);
	free(p);
}

void add_bigalloc_tests(void)
{
	CU_pSuite s = CU_add_suite("large arrays", NULL, NULL);
	CU_add_test(s, "40 MiB and its realloc: zeroed, marked for huge pages", test_large_marked);
	CU_add_test(s, "8 MiB from glibc's heap: zeroed, not marked", test_heap_left_alone);
	CU_add_test(s, "1 MiB: zeroed, not marked", test_small_left_alone);
}
