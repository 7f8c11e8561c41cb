/* test_main.c - runs the CUnit unit tests of the policy parser and matcher. */
#include <CUnit/Basic.h>

void add_addr_tests(void);
void add_match_tests(void);
void add_config_tests(void);
void add_action_tests(void);

int main(void)
{
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	add_addr_tests();
	add_match_tests();
	add_config_tests();
	add_action_tests();
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
