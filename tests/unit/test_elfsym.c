/* test_elfsym.c - the start's own reading of the symbol tables
 * (preload/base/elfsym.c) gives what dlsym(RTLD_NEXT) gives, or leaves the
 * name to it. Here the "next" objects are those after this test program:
 * CUnit, libc and the rest, as for the shim they are those after it. */
#include <CUnit/CUnit.h>
#include <dlfcn.h>
#include <stddef.h>

#include "hooks.gen.h"
#include "preload/base/elfsym.h"

/* The trampolines the start resolves: those hooks.list does not mark
 * "first call" (BUILD/gen/hooks.gen.h). Each must be answered here, or the
 * start falls back to dlsym for it (tests/layout/layout.sh: a start asks
 * dlsym for nothing). */
#define NAME(field, sym, version) sym,
static const char *const hooks[] = {FN_LIBC_SYMBOLS(NAME)};

static void test_hooks_answered(void)
{
	struct fn_elfsym_scope s;
	fn_elfsym_scope(&s);
	CU_ASSERT_TRUE(s.n >= 2);
	for (size_t i = 0; i < sizeof(hooks) / sizeof(hooks[0]); i++) {
		void *mine = fn_elfsym_next(&s, hooks[i]);
		/* Each is answered here (the start's saving), and as dlsym would. */
		CU_ASSERT_PTR_NOT_NULL(mine);
		CU_ASSERT_PTR_EQUAL(mine, dlsym(RTLD_NEXT, hooks[i]));
	}
}

/* A name of several versions is found at its default one, as dlsym finds
 * it: realpath@@GLIBC_2.3 over realpath@GLIBC_2.2.5, and so on. */
static void test_default_version(void)
{
	static const char *const several[] = {"realpath", "pthread_cond_wait", "sched_getaffinity",
					      "regexec",  "timer_create",      "memcpy"};
	struct fn_elfsym_scope s;
	fn_elfsym_scope(&s);
	int answered = 0;
	for (size_t i = 0; i < sizeof(several) / sizeof(several[0]); i++) {
		void *mine = fn_elfsym_next(&s, several[i]);
		if (mine) {
			answered++;
			CU_ASSERT_PTR_EQUAL(mine, dlsym(RTLD_NEXT, several[i]));
		}
	}
	CU_ASSERT_TRUE(answered >= 4);
	void *old = dlvsym(RTLD_NEXT, "realpath", "GLIBC_2.2.5");
	CU_ASSERT_PTR_NOT_NULL(old);
	CU_ASSERT_PTR_NOT_EQUAL(fn_elfsym_next(&s, "realpath"), old);
}

/* What the tables cannot settle as dlsym would is left to it: an IFUNC
 * (strlen: dlsym runs its resolver), a name nowhere, a library's own
 * function found in the first object that has it. */
static void test_left_or_first(void)
{
	struct fn_elfsym_scope s;
	fn_elfsym_scope(&s);
	CU_ASSERT_PTR_NULL(fn_elfsym_next(&s, "strlen"));
	CU_ASSERT_PTR_NULL(fn_elfsym_next(&s, "faultnet_no_such_function"));
	CU_ASSERT_PTR_NULL(fn_elfsym_next(&s, ""));
	void *cu = fn_elfsym_next(&s, "CU_initialize_registry");
	CU_ASSERT_PTR_NOT_NULL(cu);
	CU_ASSERT_PTR_EQUAL(cu, dlsym(RTLD_NEXT, "CU_initialize_registry"));
}

void add_elfsym_tests(void)
{
	CU_pSuite s = CU_add_suite("elfsym", NULL, NULL);
	CU_add_test(s, "the hooks' functions, as dlsym(RTLD_NEXT)", test_hooks_answered);
	CU_add_test(s, "a name of several versions at its default", test_default_version);
	CU_add_test(s, "IFUNCs and unknown names left to dlsym", test_left_or_first);
}
