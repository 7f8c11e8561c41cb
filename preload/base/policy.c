/* policy.c - the one definition of the published policy pointer, so that
 * the hooks, the loader and the control commands share it without any of
 * them owning it. */
#include "preload/base/policy.h"

struct fn_policy *fn_policy_now;
