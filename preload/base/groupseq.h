/* groupseq.h - live control without a message: the group's change counter
 * (core/rundir.h, GROUP.seq) mapped into this process, and the catch-up a
 * covered call runs when the counter has moved past what this process has
 * applied. The check is one acquire load and a compare; the catch-up (the
 * journal read and applied by the control commands) runs under the change
 * lock, which every change to the policy takes, on the calling thread. */
#ifndef FAULTNET_GROUPSEQ_H
#define FAULTNET_GROUPSEQ_H

#include <stdint.h>

/* The mapped counter (NULL when the process has no group state) and the
 * last value this process caught up with. */
extern const uint64_t *fn_groupseq_word;
extern uint64_t fn_groupseq_seen;
/* fn_groupseq_word, or while there is none a word of 0 that never moves
 * (fn_groupseq_seen starts at 0 and moves only with a group): the checks
 * below load it without first testing it for NULL, two instructions on
 * every send and covered call. */
extern const uint64_t *fn_groupseq_at;

/* Maps the counter and names what applies the journal (the control
 * commands, which live above this room). Called once, at the process's
 * join (under the change lock, other threads may run: they wait on that
 * lock until the join has replayed the journal), or in a fork child. */
void fn_groupseq_attach(const uint64_t *word, void (*apply)(void));

/* Makes the next covered call run the catch-up whatever the counter says
 * (a fork child starts its control there). No sequence number faultctl
 * writes is ever UINT64_MAX. */
static inline void fn_groupseq_defer(void)
{
	__atomic_store_n(&fn_groupseq_seen, UINT64_MAX, __ATOMIC_RELAXED);
}

/* Makes the next covered call run join, once, before anything else: a
 * start defers its join to the first call that may need the policy (a
 * process that makes none, `true` or a shell's builtin, pays nothing for
 * it). Called once at start, before any other thread exists. */
void fn_groupseq_pend(void (*join)(void));

/* Brings this process up to seq: out of line, since it is rare. */
void fn_groupseq_catch_up(uint64_t seq);

static inline void fn_groupseq_check(void)
{
	/* The pointer moves once, at the join, while other threads may run. */
	uint64_t s =
	    __atomic_load_n(__atomic_load_n(&fn_groupseq_at, __ATOMIC_RELAXED), __ATOMIC_ACQUIRE);
	if (__builtin_expect(s != __atomic_load_n(&fn_groupseq_seen, __ATOMIC_RELAXED), 0))
		fn_groupseq_catch_up(s);
}

/* The change lock: held by whoever changes the policy (a catch-up, the
 * control thread running a command), with every signal blocked and
 * cancellation off, never across a blocking call but the journal's read. */
void fn_change_lock(void);
void fn_change_unlock(void);

/* Fork: the child's lock is free again (only the forking thread exists). */
void fn_groupseq_atfork_prepare(void);
void fn_groupseq_atfork_parent(void);
void fn_groupseq_atfork_child(void);

#endif
