/* libc.h - the real functions behind every interposed symbol (libc's, and
 * any other library's the list names). Each is looked up once with
 * dlsym(RTLD_NEXT), or dlvsym for a versioned one; the shim calls libc only
 * through these pointers so that it never re-enters its own hooks. */
#ifndef FAULTNET_LIBC_H
#define FAULTNET_LIBC_H

#include <netdb.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "hooks.gen.h"

/* The fields are declared by preload/hooks.list (BUILD/gen/hooks.gen.h):
 * one per hook, named as it is without a leading "_". */
struct fn_libc {
	FN_LIBC_FIELDS
};

extern struct fn_libc fn_libc;

/* Resolves every pointer but the "first call" ones (hooks.list), which
 * start as stubs that resolve themselves. Idempotent; called by the constructor and by the
 * first hook that runs before it (another library's constructor). */
void fn_libc_resolve(void);

/* The real function, resolving first if a hook runs before the constructor.
 * Read as a relaxed atomic (a plain load on x86-64 and arm64): a "first call"
 * stub stores its function while other threads may be reading the field. */
#define LIBC(name)                                                                         \
	({                                                                                 \
		__typeof__(fn_libc.name) libc_fn_ =                                        \
		    __atomic_load_n(&fn_libc.name, __ATOMIC_RELAXED);                      \
		__builtin_expect(libc_fn_ != NULL, 1) ? libc_fn_                           \
						      : (fn_libc_resolve(), fn_libc.name); \
	})

/* recv, recvfrom, recvmsg, read, readv, socket, sendto and close: never
 * NULL (they start as stubs
 * that resolve, libc.c), so the hooks' pass-through is one jump. */
#define LIBC_HOT(name) (fn_libc.name)

#endif
