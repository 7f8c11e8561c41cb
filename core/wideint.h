/* wideint.h - finds integer literals that libconfig would silently
 * truncate: without an L suffix it keeps only 32 bits (4294967296 reads as
 * 0), so the config parser rejects such numbers with their line instead. */
#ifndef FAULTNET_WIDEINT_H
#define FAULTNET_WIDEINT_H

#include <stdbool.h>
#include <stddef.h>

/* True if text holds an integer beyond 32 bits without an L suffix; *line
 * and num (the literal, truncated to n-1) say which. Strings and comments
 * are skipped. */
bool fn_wide_int(const char *text, int *line, char *num, size_t n);

#endif
