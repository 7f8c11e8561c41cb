/* groupseq.c - the group's change counter seen from a member, and the
 * change lock that serializes every change to this process's policy. */
#include "preload/base/groupseq.h"

#include <errno.h>

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>

#include "preload/base/signals.h"

const uint64_t *fn_groupseq_word;
uint64_t fn_groupseq_seen;
static const uint64_t no_group;
const uint64_t *fn_groupseq_at = &no_group;
static void (*applier)(void);
static pthread_mutex_t change = PTHREAD_MUTEX_INITIALIZER;
/* The holder's saved state, valid while the lock is held. */
static sigset_t held_mask;
static int held_cancel;

void fn_groupseq_attach(const uint64_t *word, void (*apply)(void))
{
	applier = apply;
	__atomic_store_n(&fn_groupseq_seen, __atomic_load_n(word, __ATOMIC_ACQUIRE),
			 __ATOMIC_RELAXED);
	fn_groupseq_word = word;
	fn_groupseq_at = word;
}

void fn_change_lock(void)
{
	sigset_t old;
	int cancel;
	/* A handler that runs a covered call must never find its own thread
	 * holding the lock; a cancelled thread must never leave it held. */
	fn_signals_block(&old);
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	pthread_mutex_lock(&change);
	held_mask = old;
	held_cancel = cancel;
}

void fn_change_unlock(void)
{
	sigset_t old = held_mask;
	int cancel = held_cancel;
	pthread_mutex_unlock(&change);
	pthread_setcancelstate(cancel, NULL);
	fn_signals_restore(&old);
}

__attribute__((noinline, cold)) void fn_groupseq_catch_up(uint64_t seq)
{
	int e = errno; /* the app's call must find it as it left it */
	fn_change_lock();
	/* Another thread may have caught up while this one waited. */
	if (__atomic_load_n(&fn_groupseq_seen, __ATOMIC_RELAXED) != seq) {
		if (applier)
			applier();
		/* seq, not the last entry applied: an entry faultctl dropped
		 * again (every check refused it) must not send each call here. */
		__atomic_store_n(&fn_groupseq_seen, seq, __ATOMIC_RELEASE);
	}
	fn_change_unlock();
	errno = e;
}

void fn_groupseq_atfork_prepare(void)
{
	if (fn_groupseq_word)
		fn_change_lock();
}

void fn_groupseq_atfork_parent(void)
{
	if (fn_groupseq_word)
		fn_change_unlock();
}

void fn_groupseq_atfork_child(void)
{
	if (!fn_groupseq_word)
		return;
	pthread_mutex_init(&change, NULL);
	pthread_setcancelstate(held_cancel, NULL);
	fn_signals_restore(&held_mask);
}
