/* fuzz_protocol.c - libFuzzer harness for the two inputs a member and
 * faultctl take from files others can write: any bytes as the group's
 * journal, replayed by the same code a member runs at its catch-up; and
 * any bytes as a member's state file, read by the code faultctl makes its
 * records with; and any record-like line through the record parser. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/rules.h"
#include "core/segment.h"
#include "core/wire.h"
#include "preload/control/commands.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);

static void as_journal(const uint8_t *data, size_t n)
{
	char path[] = "/tmp/fuzz-journal-XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0)
		return;
	ssize_t w = write(fd, data, n);
	close(fd);
	if (w == (ssize_t)n) {
		fn_cmd_set_group("fuzz", path);
		fn_cmd_catch_up();
	}
	unlink(path);
}

/* The bytes repeated over a whole state, so that every table sees them. */
static void as_state(const uint8_t *data, size_t n)
{
	struct fn_seg *s = malloc(sizeof(*s));
	if (!s || !n) {
		free(s);
		return;
	}
	size_t size = sizeof(*s), done = n < size ? n : size;
	memcpy(s, data, done);
	for (; done < size; done *= 2) /* doubling: a 1-byte input costs 22 copies */
		memcpy((char *)s + done, s, done <= size - done ? done : size - done);
	fn_seg_terminate(s, true);
	struct fn_buf b = {0};
	uint64_t since = n > 8 ? data[0] : 0;
	fn_seg_info(s, &b);
	fn_seg_rules(s, &b);
	fn_seg_stats(s, &b);
	fn_seg_events(s, &b, &since);
	fn_buf_free(&b);
	free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
	char *text = malloc(n + 1);
	memcpy(text, data, n);
	text[n] = '\0';
	char *save = NULL;
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *keys[32], *values[32];
		int k;
		fn_record_parse(line, keys, values, 32, &k);
	}
	free(text);
	as_journal(data, n);
	as_state(data, n);
	return 0;
}
