/* policy.h - the policy in force in this process, and when a replaced one
 * may be freed. The loader and the control commands replace the policy
 * whole (a published policy is immutable), so readers never lock.
 *
 * A reader holds a policy inside a section (fn_policy_enter/_exit). Each
 * published policy sits in a slot with a count of the sections open on it;
 * a replaced policy is freed at a later replacement once its count is
 * zero, however long a reader has been paused (a breakpoint, SIGSTOP). A
 * section costs two atomic adds on its slot's count and a few loads; it is
 * lock-free and async-signal-safe, and sections nest (a signal handler
 * inside a section opens one of its own). A section must never span a
 * cancellation point: a cancelled thread would leave it open, and its
 * policy would never be freed. */
#ifndef FAULTNET_POLICY_H
#define FAULTNET_POLICY_H

#include "core/rules.h"
#include "preload/base/groupseq.h"

/* At most this many policies exist at once: the one in force and those
 * that sections still hold. Were every other slot held when a change is
 * made, the replaced policy is kept for the process's life instead. */
#define FN_POLICY_SLOTS 256

/* What the loads that test whether anything can apply need, copied out of
 * the policy into its slot: read without a section (fn_policy_summary). */
enum {
	/* Whether a send may meet a rule, by the fd's flags byte (fdtab.h:
	 * its TCP and UDP marks, 0 for an fd not seen created, either
	 * protocol; the other flags do not change the answer): from
	 * watch_protos, or both protocols under dns rules (their
	 * nameservers' queries are the shim's). One bit per value of the
	 * whole byte (below 16), FN_PS_SEND_MARK(flags), the summary's
	 * lowest, so that the send paths test the bit the byte selects
	 * without masking it first (x86: one bt). */
	FN_PS_SEND_SHIFT = 0,
	FN_PS_TCP = FN_PROTO_TCP << 16,	      /* active_protos */
	FN_PS_UDP = FN_PROTO_UDP << 16,	      /* active_protos */
	FN_PS_WATCH_TCP = FN_PROTO_TCP << 18, /* watch_protos */
	FN_PS_WATCH_UDP = FN_PROTO_UDP << 18, /* watch_protos */
	FN_PS_DNS = 1 << 20,		      /* dns_rules */
	FN_PS_HOST = 1 << 21,		      /* host_rules */
	FN_PS_ANY = 1 << 22,		      /* a policy is in force */
};
#define FN_PS_SEND_MARK(marks) (1u << (FN_PS_SEND_SHIFT + (unsigned)(marks)))

struct fn_policy_slot {
	struct fn_policy *p; /* NULL: no policy (or the slot is free) */
	uint64_t readers;    /* sections open on it */
	uint64_t serial;     /* which publication: never reused, unlike p */
	bool used;	     /* in force, or replaced and not yet freed */
};

extern struct fn_policy_slot fn_policy_slots[FN_POLICY_SLOTS];
extern unsigned fn_policy_cur; /* the slot in force */
/* FN_PS_* of the policy in force (fn_policy_summary), stored after
 * fn_policy_cur moves: one load for the tests that skip everything. */
extern unsigned fn_policy_sum;

/* This thread's open sections' slots, for a fork child to count them
 * again (its other threads' sections are gone). Nested sections beyond
 * FN_POLICY_NEST are counted in their slot but not listed here. */
#define FN_POLICY_NEST 16
struct fn_policy_mine {
	unsigned depth;
	uint8_t slot[FN_POLICY_NEST];
};
extern __thread struct fn_policy_mine fn_policy_mine __attribute__((tls_model("initial-exec")));

/* A reader's hold: the policy (NULL when the process runs without one),
 * its publication's serial, and the slot to let go of. */
struct fn_policy_hold {
	const struct fn_policy *p;
	uint64_t serial;
	unsigned slot;
};

/* Opens a section on the policy in force. The count is raised before the
 * slot is confirmed current: a replacement that saw the count at zero has
 * already made another slot current, so this reader tries again there. */
static inline const struct fn_policy *fn_policy_enter(struct fn_policy_hold *h)
{
	struct fn_policy_mine *me = &fn_policy_mine;
	unsigned d = me->depth++;
	__atomic_signal_fence(__ATOMIC_SEQ_CST); /* a handler nests above d */
	for (;;) {
		unsigned i = __atomic_load_n(&fn_policy_cur, __ATOMIC_ACQUIRE);
		/* Listed before it is counted: a fork in between counts it
		 * once too often in the child (kept), never once too few. */
		if (d < FN_POLICY_NEST)
			me->slot[d] = (uint8_t)i;
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		struct fn_policy_slot *s = &fn_policy_slots[i];
		__atomic_add_fetch(&s->readers, 1, __ATOMIC_SEQ_CST);
		if (__builtin_expect(__atomic_load_n(&fn_policy_cur, __ATOMIC_SEQ_CST) == i, 1)) {
			h->slot = i;
			h->serial = __atomic_load_n(&s->serial, __ATOMIC_ACQUIRE);
			return h->p = __atomic_load_n(&s->p, __ATOMIC_ACQUIRE);
		}
		__atomic_sub_fetch(&s->readers, 1, __ATOMIC_RELEASE);
	}
}

/* Closes the section h opened: nothing read from h->p may be used after. */
static inline void fn_policy_exit(const struct fn_policy_hold *h)
{
	__atomic_sub_fetch(&fn_policy_slots[h->slot].readers, 1, __ATOMIC_RELEASE);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	fn_policy_mine.depth--;
}

/* The same for a call the app makes (or a relayed connection it owns):
 * first brought up to the group's last change, if faultctl made one since
 * this process last looked. */
static inline const struct fn_policy *fn_policy_fresh(struct fn_policy_hold *h)
{
	fn_groupseq_check();
	return fn_policy_enter(h);
}

/* FN_PS_* of the policy in force, without a section: one load of memory
 * that is never freed. 0 when the process runs without a policy. A
 * caller that then enters a section finds that policy or a later one. */
static inline unsigned fn_policy_summary(void)
{
	return __atomic_load_n(&fn_policy_sum, __ATOMIC_ACQUIRE);
}

static inline unsigned fn_policy_summary_fresh(void)
{
	fn_groupseq_check();
	return fn_policy_summary();
}

/* The policy in force, for whoever holds the change lock (or runs alone):
 * only it replaces and frees policies. */
static inline const struct fn_policy *fn_policy_locked(void)
{
	return fn_policy_slots[fn_policy_cur].p;
}

/* Puts p in force (under the change lock) and frees every replaced policy
 * no section holds any more. */
void fn_policy_replace(struct fn_policy *p);

/* What frees a policy no section holds: fn_policy_free unless a test
 * counts them. */
void fn_policy_reclaim_with(void (*free_fn)(struct fn_policy *));

/* Policies kept for the process's life because every slot was held. */
extern uint64_t fn_policy_kept;

/* Fork: the child's only thread holds what its own sections hold. */
void fn_policy_atfork_child(void);

#endif
