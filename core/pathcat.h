/* pathcat.h - a path put together without printf. A start of a process
 * under the shim builds a few paths (its run directory, its policy's
 * compiled copy), and printf's code and tables are four pages of libc that
 * nothing else in a start touches: each a page fault, which in a virtual
 * machine costs about as much as 10,000 instructions (issue 42). */
#ifndef FAULTNET_PATHCAT_H
#define FAULTNET_PATHCAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The strings of parts, up to a NULL, one after the other in out (len
 * bytes, NUL included); false when they do not fit: out then holds as much
 * as fits, as snprintf would. */
bool fn_pathcat(char *out, size_t len, const char *const *parts);
#define FN_PATHCAT(out, len, ...) fn_pathcat(out, len, (const char *const[]){__VA_ARGS__, NULL})

/* v in base 16 (lower case) or else 10, at least width digits with
 * leading zeros, as the string it returns, which lives in buf. */
#define FN_UTOA_MAX 24
const char *fn_utoa(char buf[FN_UTOA_MAX], uint64_t v, unsigned base, unsigned width);

/* String tests by hand, for what a start runs: libc's strcmp, strncmp or
 * strrchr would each be one more first call (its binding, perhaps its page
 * of code: about 2 microseconds each) in every start that reaches them. */

/* Whether s begins with prefix. */
static inline bool fn_starts(const char *s, const char *prefix)
{
	for (; *prefix; s++, prefix++)
		if (*s != *prefix)
			return false;
	return true;
}

/* Whether a and b are the same string. */
static inline bool fn_same(const char *a, const char *b)
{
	while (*a && *a == *b)
		a++, b++;
	return *a == *b;
}

/* Whether the n bytes at a and b are the same (n small: a key). */
static inline bool fn_same_bytes(const void *a, const void *b, size_t n)
{
	const unsigned char *x = a, *y = b;
	for (size_t i = 0; i < n; i++)
		if (x[i] != y[i])
			return false;
	return true;
}

/* The last '/' of path, NULL if it has none. */
static inline const char *fn_last_slash(const char *path)
{
	const char *at = NULL;
	for (; *path; path++)
		if (*path == '/')
			at = path;
	return at;
}

#endif
