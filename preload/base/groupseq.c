/* groupseq.c - the group's change counter seen from a member, and the
 * change lock that serializes every change to this process's policy. */
#include "preload/base/groupseq.h"

#include <errno.h>

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>

#include "core/startdata.h"
#include "preload/base/owner.h"
#include "preload/base/signals.h"

const uint64_t *fn_groupseq_word;
uint64_t fn_groupseq_seen FN_START_DATA;
static const uint64_t no_group;
const uint64_t *fn_groupseq_at = &no_group;
static void (*applier)(void);
static void (*joiner)(void) FN_START_DATA; /* the process's join, until its first covered call */
static pthread_mutex_t change = PTHREAD_MUTEX_INITIALIZER;
/* The holder's saved state, valid while the lock is held. */
static sigset_t held_mask;
static int held_cancel;

/* While a join runs (under the change lock), what the counter said when
 * it was mapped: published as seen only once the join has replayed the
 * journal up to it, so that another thread's covered call meanwhile waits
 * on the lock rather than find the counter "seen" and go on without the
 * group's changes. */
static bool joining;
static uint64_t joined_at;

void fn_groupseq_attach(const uint64_t *word, void (*apply)(void))
{
	applier = apply;
	uint64_t now = __atomic_load_n(word, __ATOMIC_ACQUIRE);
	if (joining)
		joined_at = now;
	else
		__atomic_store_n(&fn_groupseq_seen, now, __ATOMIC_RELEASE);
	fn_groupseq_word = word;
	__atomic_store_n(&fn_groupseq_at, word, __ATOMIC_RELEASE);
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

void fn_groupseq_pend(void (*join)(void))
{
	joiner = join;
	fn_groupseq_defer();
}

/* The first covered call joins (under the change lock, which the join's
 * policy replacement needs); never in a vfork child, whose memory is its
 * parent's: the parent joins at its own first covered call. The join
 * either attached the group's counter (and set what this process has seen
 * from it) or left the process with no group: its catch-ups end here. */
static void join_now(void)
{
	if (fn_in_vfork_child())
		return;
	void (*j)(void) = joiner;
	joiner = NULL;
	joining = true;
	j();
	joining = false;
	__atomic_store_n(&fn_groupseq_seen, fn_groupseq_word ? joined_at : 0, __ATOMIC_RELEASE);
}

__attribute__((noinline, cold)) void fn_groupseq_catch_up(uint64_t seq)
{
	int e = errno; /* the app's call must find it as it left it */
	fn_change_lock();
	if (joiner) {
		join_now();
		fn_change_unlock();
		errno = e;
		return;
	}
	/* The counter as it is now, under the lock: what this thread loaded
	 * before it may be older (another thread joined meanwhile), and the
	 * journal read below holds every entry up to it. Another thread may
	 * have caught up while this one waited. */
	seq = __atomic_load_n(__atomic_load_n(&fn_groupseq_at, __ATOMIC_ACQUIRE), __ATOMIC_ACQUIRE);
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

/* Taken whether or not the process has joined yet: a join in progress on
 * another thread holds it, and a child must never start with one half
 * made. */
void fn_groupseq_atfork_prepare(void)
{
	fn_change_lock();
}

void fn_groupseq_atfork_parent(void)
{
	fn_change_unlock();
}

void fn_groupseq_atfork_child(void)
{
	pthread_mutex_init(&change, NULL);
	pthread_setcancelstate(held_cancel, NULL);
	fn_signals_restore(&held_mask);
}
