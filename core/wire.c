/* wire.c - building and parsing the control protocol's record lines. */
#include "core/wire.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fn_buf_add(struct fn_buf *b, const char *text, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 256;
		while (cap < b->len + n + 1)
			cap *= 2;
		char *s = realloc(b->s, cap);
		if (!s) {
			b->oom = true;
			return;
		}
		b->s = s;
		b->cap = cap;
	}
	memcpy(b->s + b->len, text, n);
	b->len += n;
	b->s[b->len] = '\0';
}

void fn_buf_printf(struct fn_buf *b, const char *fmt, ...)
{
	char small[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n < sizeof(small)) {
		fn_buf_add(b, small, (size_t)n);
		return;
	}
	char *big = malloc((size_t)n + 1);
	if (!big) {
		b->oom = true;
		return;
	}
	va_start(ap, fmt);
	vsnprintf(big, (size_t)n + 1, fmt, ap);
	va_end(ap);
	fn_buf_add(b, big, (size_t)n);
	free(big);
}

static bool needs_quotes(const char *v)
{
	if (!*v)
		return true;
	for (; *v; v++)
		if (*v <= ' ' || *v == '"' || *v == '\\' || *v == 0x7f || *v == '=')
			return true;
	return false;
}

void fn_buf_field(struct fn_buf *b, const char *key, const char *value)
{
	fn_buf_printf(b, " %s=", key);
	if (!needs_quotes(value)) {
		fn_buf_add(b, value, strlen(value));
		return;
	}
	fn_buf_add(b, "\"", 1);
	for (const unsigned char *p = (const unsigned char *)value; *p; p++) {
		if (*p == '"' || *p == '\\')
			fn_buf_printf(b, "\\%c", *p);
		else if (*p < ' ' || *p == 0x7f)
			fn_buf_printf(b, "\\x%02x", *p);
		else
			fn_buf_add(b, (const char *)p, 1);
	}
	fn_buf_add(b, "\"", 1);
}

void fn_buf_free(struct fn_buf *b)
{
	free(b->s);
	memset(b, 0, sizeof(*b));
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* Unquotes "..." at *p in place; returns the value, advances *p. */
static char *unquote(char **p)
{
	char *in = *p + 1, *out = in, *start = in;
	while (*in && *in != '"') {
		if (*in == '\\' && in[1] == 'x' && hexval(in[2]) >= 0 && hexval(in[3]) >= 0) {
			*out++ = (char)(hexval(in[2]) * 16 + hexval(in[3]));
			in += 4;
		} else if (*in == '\\' && in[1]) {
			*out++ = in[1];
			in += 2;
		} else {
			*out++ = *in++;
		}
	}
	if (*in != '"')
		return NULL;
	*out = '\0';
	*p = in + 1;
	return start;
}

bool fn_record_parse(char *line, char **keys, char **values, int max, int *n)
{
	char *p = line;
	*n = 0;
	for (;;) {
		while (*p == ' ')
			p++;
		if (!*p)
			return true;
		char *eq = strchr(p, '=');
		if (!eq || *n == max)
			return false;
		*eq = '\0';
		keys[*n] = p;
		p = eq + 1;
		if (*p == '"') {
			if (!(values[*n] = unquote(&p)))
				return false;
		} else {
			values[*n] = p;
			p += strcspn(p, " ");
		}
		if (*p == ' ')
			*p++ = '\0';
		else if (*p)
			return false;
		(*n)++;
	}
}
