/* fuzz_config.c - libFuzzer harness: any bytes as a policy file. The
 * parser must reject or accept, never crash, leak or read out of bounds;
 * and a rules list cut a rule at a time (core/slices.c) must load as the
 * whole file does: the same error, or the same rules at the same lines. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);

static void same(const struct fn_policy *a, const char *ea, const struct fn_policy *b,
		 const char *eb)
{
	if (!a != !b || strcmp(ea, eb) != 0)
		__builtin_trap();
	if (!a)
		return;
	if (a->nrules != b->nrules || a->nzones != b->nzones)
		__builtin_trap();
	for (size_t i = 0; i < a->nrules; i++)
		if (strcmp(a->rules[i].name, b->rules[i].name) != 0 ||
		    a->rules[i].line != b->rules[i].line ||
		    a->rules[i].action != b->rules[i].action || a->rules[i].nto != b->rules[i].nto)
			__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
	char *text = malloc(n + 1), err[1024], cut_err[1024];
	memcpy(text, data, n);
	text[n] = '\0';
	err[0] = cut_err[0] = '\0';
	fn_config_slice_rules(1000000);
	struct fn_policy *whole = fn_config_load_string(text, "fuzz.conf", NULL, err, sizeof(err));
	fn_config_slice_rules(1);
	struct fn_policy *cut =
	    fn_config_load_string(text, "fuzz.conf", NULL, cut_err, sizeof(cut_err));
	same(whole, err, cut, cut_err);
	fn_policy_free(whole);
	fn_policy_free(cut);
	fn_policy_free(fn_config_load_string(text, "fuzz.conf", "1a", err, sizeof(err)));
	free(text);
	return 0;
}
