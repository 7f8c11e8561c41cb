/* journal.h - a group's journal and change counter, as faultctl writes
 * them (journal.c). */
#ifndef FAULTCTL_JOURNAL_H
#define FAULTCTL_JOURNAL_H

#include <stdbool.h>
#include <stddef.h>

/* Appends "SEQ line" to the group's journal under its lock, and returns the
 * lock fd (held until journal_unlock) and the sequence number. reset
 * truncates the journal to its own entry. */
int journal_append(const char *dir, const char *group, const char *line, unsigned long long *seq,
		   char *err, size_t errlen);
void journal_unlock(int lockfd);
/* Takes the change of entry seq, the last one, back out of the journal
 * (lock held): the entry becomes "SEQ refused", which every process skips,
 * so that the number is never used again. */
bool journal_drop(const char *dir, const char *group, unsigned long long seq);

/* Stores seq in the group's change counter (core/rundir.h) with release
 * order: every member's next covered call applies the journal up to it.
 * False with a message in err. */
bool journal_seq_store(const char *dir, const char *group, unsigned long long seq, char *err,
		       size_t errlen);

#endif
