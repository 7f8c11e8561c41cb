/* test_suggest.c - the closest name to a misspelt one (core/suggest.c) and
 * the loader's "did you mean" for keys and actions. */
#include <CUnit/CUnit.h>
#include <string.h>

#include "core/config.h"
#include "core/rules.h"
#include "core/suggest.h"

static void test_closest(void)
{
	static const char *const names[] = {"latency_ms", "jitter_ms", "rate", "deny-a", "to"};
	CU_ASSERT_STRING_EQUAL(fn_closest("latency", names, 5), "latency_ms");
	CU_ASSERT_STRING_EQUAL(fn_closest("jiter_ms", names, 5), "jitter_ms");
	CU_ASSERT_STRING_EQUAL(fn_closest("deny-A", names, 5), "deny-a");
	CU_ASSERT_STRING_EQUAL(fn_closest("too", names, 5), "to");
	/* Nothing near: no guess. */
	CU_ASSERT_PTR_NULL(fn_closest("explode", names, 5));
	CU_ASSERT_PTR_NULL(fn_closest("x", names, 0));
}

/* The message a policy text gets. */
static const char *error_of(const char *text, char *err, size_t len)
{
	struct fn_policy *p = fn_config_load_string(text, "t.conf", NULL, err, len);
	fn_policy_free(p);
	return p ? "" : err;
}

static void test_config_suggests(void)
{
	char err[1024];
	CU_ASSERT_PTR_NOT_NULL(
	    strstr(error_of("rules = ( { name = \"x\"; action = \"latency\"; latency = 100; } );",
			    err, sizeof(err)),
		   "t.conf:1: rule 'x': unknown key 'latency', did you mean 'latency_ms'?"));
	CU_ASSERT_PTR_NOT_NULL(strstr(
	    error_of("rules = ( { name = \"x\"; action = \"blackhol\"; } );", err, sizeof(err)),
	    "unknown action 'blackhol', did you mean 'blackhole'? (expected"));
	CU_ASSERT_PTR_NOT_NULL(strstr(error_of("rules = ( { name = \"x\"; action = \"drop\"; match "
					       "= { too = \"127.66.0.4\"; }; } );",
					       err, sizeof(err)),
				      "match: unknown key 'too', did you mean 'to'?"));
}

void add_suggest_tests(void)
{
	CU_pSuite s = CU_add_suite("did you mean", NULL, NULL);
	CU_add_test(s, "the closest name", test_closest);
	CU_add_test(s, "the policy loader suggests keys and actions", test_config_suggests);
}
