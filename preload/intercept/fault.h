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
 * protocol (when the socket hook saw it) is one no rule covers. A few loads,
 * for the send paths to skip everything else. */
static inline bool fn_fault_possible(int fd)
{
	unsigned sum = fn_policy_summary();
	if (!(sum & (FN_PS_WATCH_TCP | FN_PS_WATCH_UDP | FN_PS_DNS)))
		return false;
	if (__builtin_expect(sum & FN_PS_DNS, 0))
		return true;
	unsigned f = fn_fd_get(fd);
	uint8_t known = f & FDF_TCP ? FN_PROTO_TCP : f & FDF_UDP ? FN_PROTO_UDP : 0;
	return !known || ((sum >> 2) & known);
}

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
