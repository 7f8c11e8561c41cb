/* test_main.c - runs the CUnit unit tests: the policy parser and matcher,
 * and the relays' pacing arithmetic. usage: unit [--list | SUITE | TEST] */
#include "../cunit_run.h"

void add_addr_tests(void);
void add_rules_tests(void);
void add_config_tests(void);
void add_action_tests(void);
void add_http_tests(void);
void add_lpm_tests(void);
void add_dnswire_tests(void);
void add_rundir_tests(void);
void add_compile_tests(void);
void add_edit_tests(void);
void add_pace_tests(void);
void add_segment_tests(void);
void add_h2sent_tests(void);
void add_slices_tests(void);
void add_locktab_tests(void);
void add_bigalloc_tests(void);
void add_hostidx_tests(void);
void add_suggest_tests(void);
void add_reclaim_tests(void);
void add_reqlog_tests(void);
void add_lookups_tests(void);
void add_compiled_tests(void);
void add_elfsym_tests(void);

int main(int argc, char **argv)
{
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	add_addr_tests();
	add_rules_tests();
	add_config_tests();
	add_action_tests();
	add_http_tests();
	add_lpm_tests();
	add_dnswire_tests();
	add_rundir_tests();
	add_compile_tests();
	add_edit_tests();
	add_pace_tests();
	add_segment_tests();
	add_h2sent_tests();
	add_slices_tests();
	add_locktab_tests();
	add_bigalloc_tests();
	add_hostidx_tests();
	add_suggest_tests();
	add_reclaim_tests();
	add_reqlog_tests();
	add_lookups_tests();
	add_compiled_tests();
	add_elfsym_tests();
	return cunit_run(argc > 1 ? argv[1] : NULL);
}
