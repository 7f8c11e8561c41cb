/* wideint.c - the scan behind fn_wide_int (see wideint.h): a small lexer
 * that knows libconfig's strings and three comment styles, and looks at
 * every number outside them. */
#include "core/wideint.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Skips a string, a comment or nothing at p; returns where scanning goes on,
 * counting newlines into *line. */
static const char *skip(const char *p, int *line)
{
	const char *end = NULL;
	if (*p == '"') {
		for (p++; *p && *p != '"'; p++) {
			if (*p == '\\' && p[1])
				p++;
			*line += *p == '\n';
		}
		return *p ? p + 1 : p;
	}
	if (*p == '#' || (p[0] == '/' && p[1] == '/'))
		end = "\n";
	else if (p[0] == '/' && p[1] == '*')
		end = "*/";
	if (!end)
		return p;
	const char *q = strstr(p + 1, end);
	if (!q)
		q = p + strlen(p);
	for (; p < q; p++)
		*line += *p == '\n';
	return *q ? q + strlen(end) - (end[0] == '\n') : q;
}

/* A number literal at p: true if it is an integer too wide for 32 bits
 * without L. *len gets its length. */
static bool too_wide(const char *p, size_t *len, bool negative)
{
	bool hex = p[0] == '0' && (p[1] == 'x' || p[1] == 'X');
	const char *q = hex ? p + 2 : p;
	uint64_t v = 0;
	bool big = false;
	for (; hex ? isxdigit((unsigned char)*q) : isdigit((unsigned char)*q); q++) {
		unsigned d = isdigit((unsigned char)*q)
				 ? (unsigned)(*q - '0')
				 : (unsigned)(tolower((unsigned char)*q) - 'a' + 10);
		if (v > (UINT64_MAX - d) / (hex ? 16 : 10))
			big = true;
		else
			v = v * (hex ? 16 : 10) + d;
	}
	*len = (size_t)(q - p);
	if (*q == 'L' || (!hex && (*q == '.' || *q == 'e' || *q == 'E')))
		return false;
	uint64_t limit = hex ? 0xffffffffu : negative ? 2147483648u : 2147483647u;
	return big || v > limit;
}

/* The bytes the scan must look at: where a string or comment may start,
 * a newline (counted) and digits. */
static const bool stops[256] = {
    ['"'] = true, ['#'] = true, ['/'] = true, ['\n'] = true, ['0'] = true,
    ['1'] = true, ['2'] = true, ['3'] = true, ['4'] = true,  ['5'] = true,
    ['6'] = true, ['7'] = true, ['8'] = true, ['9'] = true,
};

bool fn_wide_int(const char *text, int *line, char *num, size_t n)
{
	int l = 1;
	const char *p = text;
	while (*p) {
		/* Most bytes are none of these: passed over in a few
		 * instructions each (a policy of 100,000 rules is 9 MB). */
		if (!stops[(unsigned char)*p]) {
			p++;
			continue;
		}
		const char *q = skip(p, &l);
		if (q != p) {
			p = q;
			continue;
		}
		bool starts =
		    isdigit((unsigned char)*p) &&
		    (p == text || !(isalnum((unsigned char)p[-1]) || p[-1] == '_' || p[-1] == '.'));
		if (!starts) {
			l += *p == '\n';
			p++;
			continue;
		}
		size_t len;
		if (too_wide(p, &len, p > text && p[-1] == '-')) {
			*line = l;
			snprintf(num, n, "%.*s", (int)len, p);
			return true;
		}
		p += len;
	}
	return false;
}
