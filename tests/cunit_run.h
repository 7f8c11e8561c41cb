/* cunit_run.h - one way for every CUnit program of the suite to run: all
 * its tests, one suite, or one test, by name. usage: PROG [NAME]; NAME is a
 * suite's name or a test's name (a prefix is enough when it is unique);
 * PROG --list prints every suite and test. */
#ifndef FAULTNET_CUNIT_RUN_H
#define FAULTNET_CUNIT_RUN_H

#include <CUnit/Basic.h>
#include <stdio.h>
#include <string.h>

static inline int cunit_list(void)
{
	for (CU_pSuite s = CU_get_registry()->pSuite; s; s = s->pNext) {
		printf("%s\n", s->pName);
		for (CU_pTest t = s->pTest; t; t = t->pNext)
			printf("  %s\n", t->pName);
	}
	return 0;
}

/* Runs what name selects (everything when name is NULL); returns the exit
 * status: 0 when every test passed, 1 on a failure, 2 when name matches
 * nothing or more than one test. Cleans the registry up. */
static inline int cunit_run(const char *name)
{
	CU_basic_set_mode(CU_BRM_VERBOSE);
	int rc = 0;
	if (name && strcmp(name, "--list") == 0) {
		rc = cunit_list();
		CU_cleanup_registry();
		return rc;
	}
	if (!name) {
		CU_basic_run_tests();
	} else {
		CU_pSuite suite = NULL, tsuite = NULL;
		CU_pTest test = NULL;
		int tests = 0;
		size_t n = strlen(name);
		for (CU_pSuite s = CU_get_registry()->pSuite; s; s = s->pNext) {
			if (strcmp(s->pName, name) == 0)
				suite = s;
			for (CU_pTest t = s->pTest; t; t = t->pNext)
				if (strncmp(t->pName, name, n) == 0) {
					tests++;
					test = t;
					tsuite = s;
				}
		}
		if (suite)
			CU_basic_run_suite(suite);
		else if (tests == 1)
			CU_basic_run_test(tsuite, test);
		else {
			fprintf(stderr, "%s: %s\n", name,
				tests ? "names more than one test"
				      : "no such suite or test (--list)");
			CU_cleanup_registry();
			return 2;
		}
	}
	rc = CU_get_number_of_failures() || CU_get_number_of_tests_failed() ? 1 : 0;
	CU_cleanup_registry();
	return rc;
}

#endif
