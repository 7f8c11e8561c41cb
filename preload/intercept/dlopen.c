/* dlopen.c - libraries loaded with RTLD_DEEPBIND (PHP's extensions, some
 * plugin hosts) look symbols up in their own dependency tree before the
 * global scope, so the libcurl under PHP's curl extension would bind
 * connect and poll straight to libc and skip the shim. While a policy is in
 * force such libraries are loaded without the flag: their socket calls then
 * meet the rules like any other. Everything else goes to libc unchanged. */
#include <dlfcn.h>

#include "preload/base/libc.h"
#include "preload/base/policy.h"
#include "preload/intercept/intercept.h"

void *fn_dlopen(const char *file, int flags)
{
	if (__builtin_expect((flags & RTLD_DEEPBIND) != 0, 0) && fn_policy_summary_fresh())
		flags &= ~RTLD_DEEPBIND;
	return LIBC(dlopen)(file, flags);
}
