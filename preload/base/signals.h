/* signals.h - keeping the app's signal handlers out of the shim's critical
 * sections. A handler may call sendto (async-signal-safe) while its own
 * thread is inside the shim holding a lock or in malloc; if that sendto were
 * faulted too, the thread would wait on itself forever. The shim's
 * faulted paths that lock or allocate run with signals blocked; the
 * unmatched path never locks or allocates and needs no such care. */
#ifndef FAULTNET_SIGNALS_H
#define FAULTNET_SIGNALS_H

#include <signal.h>

/* Blocks every signal in the calling thread; *old receives the mask. */
void fn_signals_block(sigset_t *old);
void fn_signals_restore(const sigset_t *old);

/* Starts fn(arg) in a detached thread of the shim's, which inherits a mask
 * with every signal blocked: the app's handlers never run on it. 0 or the
 * error number. */
int fn_thread_start(void *(*fn)(void *), void *arg);

#endif
