/* fuzz_rule.c - libFuzzer harness: any bytes as the argument of
 * `faultctl add`, parsed in the context of a policy with zones, as the
 * control thread does. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);

static struct fn_policy *base;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
	char err[1024];
	if (!base)
		base = fn_config_load_string("zone = \"1a\"; zones = ( { name = \"1a\"; cidrs = "
					     "\"127.10.1.0/24\"; }, { name = \"1c\"; cidrs = "
					     "\"127.10.2.0/24\"; } );",
					     "base", NULL, err, sizeof(err));
	struct fn_buf src = {0};
	fn_buf_add(&src, "rules = ( ", 10);
	fn_buf_add(&src, (const char *)data, strnlen((const char *)data, n));
	fn_buf_add(&src, " );", 3);
	if (src.s)
		fn_policy_free(fn_config_load_change(src.s, "add", base, err, sizeof(err)));
	fn_buf_free(&src);
	return 0;
}
