/* policy.h - the policy in force in this process. Every covered call reads
 * it with one acquire load; the loader and the control commands replace it
 * whole (a published policy is immutable), so readers never lock. */
#ifndef FAULTNET_POLICY_H
#define FAULTNET_POLICY_H

#include "core/rules.h"
#include "preload/base/groupseq.h"

/* NULL when the process runs without a policy. */
extern struct fn_policy *fn_policy_now;

static inline const struct fn_policy *fn_policy_current(void)
{
	return __atomic_load_n(&fn_policy_now, __ATOMIC_ACQUIRE);
}

/* The policy for a call the app makes (or a relayed connection it owns):
 * first brought up to the group's last change, if faultctl made one since
 * this process last looked. */
static inline const struct fn_policy *fn_policy_fresh(void)
{
	fn_groupseq_check();
	return fn_policy_current();
}

/* Puts p in force; returns the policy it replaced, which the caller
 * retires (a reader may still be using it). */
static inline struct fn_policy *fn_policy_publish(struct fn_policy *p)
{
	return __atomic_exchange_n(&fn_policy_now, p, __ATOMIC_ACQ_REL);
}

#endif
