/* fault.h - the fault decision: which rule, if any, covers a connect or a
 * datagram, and where a faulted socket must go instead. */
#ifndef FAULTNET_FAULT_H
#define FAULTNET_FAULT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "core/rules.h"
#include "preload/base/policy.h"
#include "preload/fd/fdtab.h"

/* What the policy says about one connect or datagram. */
struct fn_verdict {
	const struct fn_rule *rule; /* the rule that faults it, or NULL */
	const struct fn_rule *seen; /* the rule it is counted against */
	struct fn_endpoint ep;
	uint8_t proto;
	struct fn_policy_hold hold; /* the section rule and seen point into */
};

/* False when no rule can cover anything fd sends: no policy, or fd's
 * protocol (when the socket hook saw it) is one no rule covers, and no
 * change is pending. A few loads, for the send paths to skip everything
 * else: fd's TCP and UDP marks pick the policy summary's send bit for
 * them (FN_PS_SEND_MARK), and an fd of neither (not seen created) may
 * carry either. */
static inline bool fn_fault_possible(int fd)
{
	/* A change faultctl made since (a UDP rule added to TCP-only rules)
	 * must reach this send: while one is pending, the caller's slow path
	 * (fn_fault_match, on the fresh policy) catches up first. Tested
	 * here without calling anything, so that the pass-through keeps no
	 * frame. On x86-64 the compare reads fn_groupseq_seen from memory
	 * (the compilers load a relaxed atomic into a register first, one
	 * instruction more on every send; an aligned load is atomic there). */
	uint64_t seq =
	    __atomic_load_n(__atomic_load_n(&fn_groupseq_at, __ATOMIC_RELAXED), __ATOMIC_ACQUIRE);
#if defined(__x86_64__) && defined(__OPTIMIZE__)
	bool moved;
	__asm__("cmpq %2, %1" : "=@ccnz"(moved) : "r"(seq), "m"(fn_groupseq_seen));
	if (moved)
		return true;
#else
	if (seq != __atomic_load_n(&fn_groupseq_seen, __ATOMIC_RELAXED))
		return true;
#endif
	/* The summary's send bit for fd's flags byte (no section: nothing of
	 * the policy is read), 0 without a policy: one bit test, written out
	 * on x86-64, where the compilers shift the summary by the byte
	 * through %cl instead (moving the caller's fourth argument away and
	 * back: two instructions more). */
	unsigned sum = fn_policy_summary(), flags = fn_fd_get(fd);
#if defined(__x86_64__) && defined(__OPTIMIZE__)
	bool set;
	__asm__("btl %2, %1" : "=@ccc"(set) : "r"(sum), "r"(flags));
	return set;
#else
	return (sum & FN_PS_SEND_MARK(flags)) != 0;
#endif
}
_Static_assert(FDF_TCP + FDF_UDP + FDF_FAULT + FDF_INTERNAL < 16,
	       "FN_PS_SEND_MARK has a bit for each value of an fd's flags");
_Static_assert((int)FDF_TCP == (int)FN_PROTO_TCP && (int)FDF_UDP == (int)FN_PROTO_UDP,
	       "fn_fault_possible reads fd marks as protocols");

/* False when no rule covers the peer (the common case: nothing to do).
 * True with a policy section open (v->hold), which the caller closes with
 * fn_fault_done() once it no longer reads v->rule or v->seen, before any
 * call that may block or be a cancellation point. */
bool fn_fault_match(int fd, const struct sockaddr *sa, socklen_t len, struct fn_verdict *v);

static inline void fn_fault_done(const struct fn_verdict *v)
{
	fn_policy_exit(&v->hold);
}

/* Where a faulted socket must connect or send instead; records the fault
 * on the fd and counts the attempt. False with errno when the fault cannot
 * be set up (the app then gets that error, never the real peer). */
bool fn_fault_target(int fd, const struct sockaddr *sa, socklen_t len, const struct fn_verdict *v,
		     uint64_t bytes, bool connecting, struct sockaddr_storage *target,
		     socklen_t *tlen);

#endif
