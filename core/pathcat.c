/* pathcat.c - paths put together without printf (see pathcat.h). */
#include "core/pathcat.h"
#include "core/startdata.h"

#include <string.h>

FN_START_TEXT bool fn_pathcat(char *out, size_t len, const char *const *parts)
{
	if (!len)
		return false;
	size_t at = 0;
	for (; *parts; parts++) {
		size_t n = strlen(*parts);
		if (n >= len - at) {
			memcpy(out + at, *parts, len - 1 - at);
			out[len - 1] = '\0';
			return false;
		}
		memcpy(out + at, *parts, n);
		at += n;
	}
	out[at] = '\0';
	return true;
}

FN_START_TEXT const char *fn_utoa(char buf[FN_UTOA_MAX], uint64_t v, unsigned base, unsigned width)
{
	char *p = buf + FN_UTOA_MAX - 1;
	*p = '\0';
	if (base != 16)
		base = 10;
	if (width > FN_UTOA_MAX - 1)
		width = FN_UTOA_MAX - 1;
	/* 64 bits are at most 20 decimal or 16 hex digits: they fit. */
	for (unsigned n = 0; v || n < width || n == 0; n++, v /= base)
		*--p = "0123456789abcdef"[v % base];
	return p;
}
