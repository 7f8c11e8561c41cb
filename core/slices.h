/* slices.h - finds the rules list of a policy file's text and where each of
 * its rules starts, so that a large policy can be handed to libconfig a
 * slice of rules at a time (see config.c). Pure text work: no libconfig. */
#ifndef FN_SLICES_H
#define FN_SLICES_H

#include <stdbool.h>
#include <stddef.h>

struct fn_slices {
	size_t open, close; /* offsets of the list's '(' and ')' */
	int open_line;	    /* the line of its '(' (1-based) */
	size_t n;	    /* rules in it */
	size_t *at;	    /* n + 1 offsets: rule i's text is [at[i], at[i + 1] - 1),
			     * the byte before at[i + 1] being its ',' or the ')' */
	int *line;	    /* the line each rule's text starts on */
};

/* Fills *s and returns true when text is plain enough to be cut: one
 * top-level "rules = ( { ... }, { ... } )" whose every element is a group,
 * and no @include anywhere. Otherwise (or out of memory) false, and the
 * caller parses the whole text as it is. */
bool fn_slices_find(const char *text, struct fn_slices *s);
void fn_slices_free(struct fn_slices *s);

#endif
