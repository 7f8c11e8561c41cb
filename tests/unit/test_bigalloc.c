/* test_bigalloc.c - large arrays come zeroed and marked for transparent
 * huge pages (core/bigalloc.c); small ones are left alone. The mark is read
 * back from the kernel: the "hg" flag of the mapping in /proc/self/smaps. */
#include <CUnit/CUnit.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bigalloc.h"

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

static int zeroed(const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i += 4093)
		if (p[i])
			return 0;
	return !p[n - 1];
}

static void test_large_marked(void)
{
	size_t n = (size_t)16 << 20;
	unsigned char *p = fn_big_calloc(n / 256, 256);
	CU_ASSERT_FATAL(p != NULL);
	CU_ASSERT(zeroed(p, n));
	/* the middle lies in a whole huge page, whatever the alignment */
	CU_ASSERT_EQUAL(marked(p + n / 2), 1);
	p[n - 1] = 1;
	unsigned char *q = fn_big_realloc(p, 2 * n);
	CU_ASSERT_FATAL(q != NULL);
	CU_ASSERT_EQUAL(q[n - 1], 1);
	CU_ASSERT_EQUAL(marked(q + n + n / 2), 1);
	free(q);
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
	CU_add_test(s, "16 MiB and its realloc: zeroed, marked for huge pages", test_large_marked);
	CU_add_test(s, "1 MiB: zeroed, not marked", test_small_left_alone);
}
