/* test_lookups.c - the per-name counts of the resolver hooks
 * (preload/stats/lookups.c): a name finds its slot again whatever its case
 * and whichever entry point counts it, distinct names keep distinct slots
 * (lengths 1 to 140: a slot keeps a name's first 127 bytes, so longer
 * names alike in those share one), and nothing falls to "other" while the
 * table has room. fn_seg and the event ring are test_h2sent.c's
 * stand-ins. */
#include <CUnit/CUnit.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/dns.h"
#include "preload/stats/stats.h"

#define NAMES 140

/* Name i: its number first (so that names differ in their first 127
 * bytes), then letters and dots up to i + 1 bytes, in mixed case. */
static void name_of(int i, char *out, size_t size)
{
	int n = snprintf(out, size, "n%d", i);
	for (int k = n; k < i + 1 && k < (int)size - 1; k++)
		out[k] = k % 9 == 4 ? '.' : (char)((k % 3 ? 'a' : 'A') + k % 26);
	out[i + 1 > n ? i + 1 : n] = '\0';
}

static void flip_case(char *s)
{
	for (; *s; s++)
		*s = (char)(islower((unsigned char)*s) ? toupper((unsigned char)*s)
						       : tolower((unsigned char)*s));
}

/* The slot whose name is name's first 127 bytes in any case, or NULL. */
static const struct fn_seg_name *find(const char *name)
{
	for (int i = 0; i < FN_SEG_NAMES; i++)
		if (fn_seg->names[i].state == FN_SLOT_READY &&
		    strncasecmp(fn_seg->names[i].name, name, sizeof(fn_seg->names[i].name) - 1) ==
			0)
			return &fn_seg->names[i];
	return NULL;
}

static void test_slots(void)
{
	struct fn_seg *s = calloc(1, sizeof(*s));
	CU_ASSERT_FATAL(s != NULL);
	fn_seg = s;
	char name[200], other[200];
	for (int i = 0; i < NAMES; i++) {
		name_of(i, name, sizeof(name));
		fn_stats_lookup(name, NULL, FN_LOOKUP_REAL);
		/* The other case, through the entry point that is given the
		 * length, then the same bytes again. */
		snprintf(other, sizeof(other), "%s", name);
		flip_case(other);
		fn_stats_lookup_len(other, strlen(other), NULL, FN_LOOKUP_REAL);
		fn_stats_lookup_len(name, strlen(name), NULL, FN_LOOKUP_REAL);
		fn_stats_name_connect(other, NULL);
	}
	int bad = 0;
	for (int i = 0; i < NAMES; i++) {
		name_of(i, name, sizeof(name));
		const struct fn_seg_name *n = find(name);
		if (!n || n->n[FN_LK_LOOKUPS] != 3 || n->n[FN_LK_CONNECTS] != 1 ||
		    strncmp(n->name, name, sizeof(n->name) - 1) != 0) {
			if (bad++ < 5)
				printf("\n  name %d (%zu bytes): %s\n", i, strlen(name),
				       n ? "counted wrong or stored in another case" : "no slot");
		}
	}
	CU_ASSERT_EQUAL(bad, 0);
	int used = 0;
	for (int i = 0; i < FN_SEG_NAMES; i++)
		used += s->names[i].state == FN_SLOT_READY;
	CU_ASSERT_EQUAL(used, NAMES);
	CU_ASSERT_EQUAL(s->names[FN_SEG_NAMES].n[FN_LK_LOOKUPS], 0);
	/* Two names alike in their first 127 bytes are one. */
	memset(name, 'x', 150);
	name[150] = '\0';
	fn_stats_lookup(name, NULL, FN_LOOKUP_REAL);
	name[140] = 'y';
	fn_stats_lookup(name, NULL, FN_LOOKUP_REAL);
	const struct fn_seg_name *n = find(name);
	CU_ASSERT(n != NULL && n->n[FN_LK_LOOKUPS] == 2);
	fn_seg = NULL;
	free(s);
}

void add_lookups_tests(void)
{
	CU_pSuite s = CU_add_suite("per-name lookup counts", NULL, NULL);
	CU_add_test(s, "a name's slot found again in any case", test_slots);
}
