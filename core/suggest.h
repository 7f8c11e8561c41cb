/* suggest.h - the closest of a list of names to a word a user misspelt, for
 * "did you mean" in the messages of the policy loader and of faultctl. */
#ifndef FN_SUGGEST_H
#define FN_SUGGEST_H

#include <stddef.h>

/* The name of names[0..n) (NULL entries skipped) nearest to word by edit
 * distance, if near enough to be a likely slip (at most a third of its
 * length, at least 1, or word is a prefix of it); NULL otherwise. */
const char *fn_closest(const char *word, const char *const *names, size_t n);

#endif
