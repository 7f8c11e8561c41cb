/* fuzz_protocol.c - libFuzzer harness: any bytes as request lines on the
 * control socket, run through the same command code as the control thread,
 * and any reply-like line through the record parser faultctl uses. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shim/control/commands.h"
#include "core/rules.h"
#include "core/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
	char *text = malloc(n + 1);
	memcpy(text, data, n);
	text[n] = '\0';
	char *save = NULL;
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *copy = strdup(line), *keys[32], *values[32];
		int k;
		fn_record_parse(copy, keys, values, 32, &k);
		free(copy);
		struct fn_buf out = {0};
		bool follow = false;
		uint64_t since = 0;
		fn_cmd_run(line, &out, &follow, &since);
		fn_buf_free(&out);
	}
	free(text);
	return 0;
}
