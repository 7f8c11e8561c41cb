/* wire.h - the control protocol's text form, shared by the shim and
 * faultctl. A request is one line; a reply is "ok [text]", "error text", or
 * records (lines of key=value fields) closed by "end". Values with spaces,
 * quotes, backslashes or control bytes are written in double quotes with
 * C escapes. */
#ifndef FAULTNET_WIRE_H
#define FAULTNET_WIRE_H

#include <stdbool.h>
#include <stddef.h>

#define FN_LINE_MAX 65536

/* A growable text buffer. */
struct fn_buf {
	char *s;
	size_t len, cap;
	bool oom;
};

void fn_buf_add(struct fn_buf *b, const char *text, size_t n);
void fn_buf_printf(struct fn_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends " key=value" with value quoted as needed. */
void fn_buf_field(struct fn_buf *b, const char *key, const char *value);
void fn_buf_free(struct fn_buf *b);

/* Splits a record line into fields in place; returns how many (at most max).
 * keys[i] and values[i] point into line. False on a malformed line. */
bool fn_record_parse(char *line, char **keys, char **values, int max, int *n);

#endif
