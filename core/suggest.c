/* suggest.c - the closest name to a misspelt one (core/suggest.h): an edit
 * distance (insert, delete, replace, case differences cost nothing but a
 * tie-break) over short names, so that "latency" finds "latency_ms" and
 * "deny-A" finds "deny-a". */
#include "core/suggest.h"

#include <ctype.h>
#include <string.h>

#define LONGEST 64

/* Levenshtein distance of a and b, case folded; LONGEST + 1 when either
 * is longer than a name may be. */
static size_t distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	if (la > LONGEST || lb > LONGEST)
		return LONGEST + 1;
	size_t row[LONGEST + 1];
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t diag = row[0];
		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t up = row[j];
			size_t cost =
			    tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]);
			size_t best = diag + cost;
			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			row[j] = best;
			diag = up;
		}
	}
	return row[lb];
}

const char *fn_closest(const char *word, const char *const *names, size_t n)
{
	const char *best = NULL;
	size_t best_d = LONGEST + 1, len = strlen(word);
	size_t limit = len / 3 > 1 ? len / 3 : 1;
	for (size_t i = 0; i < n; i++) {
		if (!names[i] || strcmp(names[i], word) == 0)
			continue;
		size_t d = distance(word, names[i]);
		/* A word that begins a longer name (latency, latency_ms) is
		 * as likely a slip as a letter wrong. */
		if (len >= 3 && strncmp(names[i], word, len) == 0 && d > 0)
			d = d < limit ? d : limit;
		if (d <= limit && d < best_d) {
			best = names[i];
			best_d = d;
		}
	}
	return best;
}
