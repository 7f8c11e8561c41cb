/* policy.c - the published policy's slots, so that the hooks, the loader
 * and the control commands share them without any of them owning them,
 * and the reclamation of replaced policies: a replaced policy is freed by
 * a later replacement once no section holds it, never after a time. */
#include "preload/base/policy.h"

/* Zero-filled, in .bss: slot 0 holds the process's first policy (none)
 * without being marked used, as nothing is to be freed from it, and
 * free_slot() passes over the slot in force. An initializer put the 8 KiB
 * array in .data, between the pages every start writes: one page more. */
struct fn_policy_slot fn_policy_slots[FN_POLICY_SLOTS];
unsigned fn_policy_cur;
unsigned fn_policy_sum;
__thread struct fn_policy_mine fn_policy_mine __attribute__((tls_model("initial-exec")));
uint64_t fn_policy_kept;

static uint64_t serial;
static void (*reclaim_free)(struct fn_policy *) = fn_policy_free;

void fn_policy_reclaim_with(void (*free_fn)(struct fn_policy *))
{
	reclaim_free = free_fn ? free_fn : fn_policy_free;
}

/* The send bits: for each value of an fd's flags byte, whether a send
 * from it may meet a rule, by its TCP and UDP marks (a protocol's, or 0
 * and 3 for either). */
static unsigned send_bits(unsigned protos)
{
	unsigned bits = 0;
	for (unsigned flags = 0; flags < 16; flags++) {
		unsigned mark = flags & 3;
		if (protos & (mark == FN_PROTO_TCP || mark == FN_PROTO_UDP ? mark : FN_PROTO_ANY))
			bits |= FN_PS_SEND_MARK(flags);
	}
	return bits;
}

static unsigned summary_of(const struct fn_policy *p)
{
	if (!p)
		return 0;
	return FN_PS_ANY | (p->active_protos & 3u) << 16 | (unsigned)(p->watch_protos & 3u) << 18 |
	       (p->dns_rules ? FN_PS_DNS : 0) | (p->host_rules ? FN_PS_HOST : 0) |
	       send_bits(p->dns_rules ? FN_PROTO_ANY : p->watch_protos & 3u);
}

/* Frees the policy of every replaced slot no section holds. Sequentially
 * consistent with the readers' adds: a reader whose add this load missed
 * reads fn_policy_cur after it, and so finds another slot current and
 * lets go of this one without reading its policy. */
static void reclaim(unsigned cur)
{
	for (unsigned k = 0; k < FN_POLICY_SLOTS; k++) {
		struct fn_policy_slot *s = &fn_policy_slots[k];
		if (k == cur || !s->used || __atomic_load_n(&s->readers, __ATOMIC_SEQ_CST))
			continue;
		struct fn_policy *p = s->p;
		__atomic_store_n(&s->p, NULL, __ATOMIC_RELAXED);
		s->used = false;
		if (p)
			reclaim_free(p);
	}
}

static int free_slot(void)
{
	for (unsigned k = 0; k < FN_POLICY_SLOTS; k++)
		if (!fn_policy_slots[k].used && k != fn_policy_cur)
			return (int)k;
	return -1;
}

void fn_policy_replace(struct fn_policy *p)
{
	unsigned cur = fn_policy_cur;
	reclaim(cur);
	int j = free_slot();
	if (j < 0) {
		/* Every other slot is held by a section: p takes the current
		 * slot's place, and the policy it replaces, which sections may
		 * hold, is never freed. */
		struct fn_policy_slot *s = &fn_policy_slots[cur];
		/* The policy before its serial: a reader loads the serial, then
		 * the policy (fn_policy_enter), so a new serial comes with the
		 * new policy. The other way round a reader could pair the new
		 * serial with the old policy, and what it kept under that
		 * serial (the name memo's rule places) be used on the new one. */
		__atomic_store_n(&s->p, p, __ATOMIC_RELEASE);
		__atomic_store_n(&s->serial, ++serial, __ATOMIC_RELEASE);
		__atomic_store_n(&fn_policy_sum, summary_of(p), __ATOMIC_RELEASE);
		__atomic_add_fetch(&fn_policy_kept, 1, __ATOMIC_RELAXED);
		return;
	}
	struct fn_policy_slot *s = &fn_policy_slots[j];
	s->used = true;
	__atomic_store_n(&s->serial, ++serial, __ATOMIC_RELAXED);
	__atomic_store_n(&s->p, p, __ATOMIC_RELAXED);
	/* Publishes the slot's fields with it (sequentially consistent: see
	 * reclaim()); the replaced one goes at once if nobody holds it. The
	 * summary after it: a reader that saw it and enters a section finds
	 * p or a later policy. */
	__atomic_store_n(&fn_policy_cur, (unsigned)j, __ATOMIC_SEQ_CST);
	__atomic_store_n(&fn_policy_sum, summary_of(p), __ATOMIC_RELEASE);
	reclaim((unsigned)j);
}

void fn_policy_atfork_child(void)
{
	for (unsigned k = 0; k < FN_POLICY_SLOTS; k++)
		fn_policy_slots[k].readers = 0;
	unsigned d = fn_policy_mine.depth;
	for (unsigned i = 0; i < d && i < FN_POLICY_NEST; i++)
		fn_policy_slots[fn_policy_mine.slot[i]].readers++;
	/* Sections beyond the list: which slots they hold is not known, so
	 * the child frees none of the policies it inherits. */
	for (unsigned k = 0; d > FN_POLICY_NEST && k < FN_POLICY_SLOTS; k++)
		fn_policy_slots[k].readers += fn_policy_slots[k].used;
}
