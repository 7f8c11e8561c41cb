/* test_elfsym.c - the start's own reading of the symbol tables
 * (preload/base/elfsym.c) gives what dlsym(RTLD_NEXT) gives, or leaves the
 * name to it. Here the "next" objects are those after this test program:
 * CUnit, libc and the rest, as for the shim they are those after it. */
#include <CUnit/CUnit.h>
#include <dlfcn.h>
#include <stddef.h>
#include <string.h>

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

/* An IFUNC is left to dlsym, which runs its resolver. strlen, stpcpy and
 * wmemset are IFUNCs in libc; a sanitizer's runtime loaded first may
 * define some of them as plain functions (the build/asan unit program has
 * libasan's strlen first), and those are answered as dlsym answers them. */
static void test_ifunc_left(void)
{
	static const char *const ifuncs[] = {"strlen", "stpcpy", "wmemset"};
	struct fn_elfsym_scope s;
	fn_elfsym_scope(&s);
	int in_libc = 0;
	for (size_t i = 0; i < sizeof(ifuncs) / sizeof(ifuncs[0]); i++) {
		void *next = dlsym(RTLD_NEXT, ifuncs[i]);
		Dl_info info;
		CU_ASSERT_TRUE_FATAL(next && dladdr(next, &info) && info.dli_fname);
		void *mine = fn_elfsym_next(&s, ifuncs[i]);
		if (strstr(info.dli_fname, "/libc.so")) {
			in_libc++;
			CU_ASSERT_PTR_NULL(mine);
		} else {
			CU_ASSERT_PTR_EQUAL(mine, next);
		}
	}
	/* wmemset is intercepted by no sanitizer: at least it is libc's. */
	CU_ASSERT_TRUE(in_libc >= 1);
}

/* A name nowhere is left to dlsym; a library's own function is found in
 * the first object that has it. */
static void test_unknown_or_first(void)
{
	struct fn_elfsym_scope s;
	fn_elfsym_scope(&s);
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
	CU_add_test(s, "IFUNCs left to dlsym, a sanitizer's plain ones answered", test_ifunc_left);
	CU_add_test(s, "unknown names left to dlsym, a library's own found", test_unknown_or_first);
}
