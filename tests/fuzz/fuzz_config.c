/* fuzz_config.c - libFuzzer harness: any bytes as a policy file. The
 * parser must reject or accept, never crash, leak or read out of bounds. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
	char *text = malloc(n + 1), err[1024];
	memcpy(text, data, n);
	text[n] = '\0';
	fn_policy_free(fn_config_load_string(text, "fuzz.conf", NULL, err, sizeof(err)));
	fn_policy_free(fn_config_load_string(text, "fuzz.conf", "1a", err, sizeof(err)));
	free(text);
	return 0;
}
