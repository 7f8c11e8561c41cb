/* signals.c - blocks and restores the calling thread's signal mask around
 * the shim's critical sections (see signals.h). errno is left alone. */
#include "shim/base/signals.h"

#include <pthread.h>

void fn_signals_block(sigset_t *old)
{
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, old);
}

void fn_signals_restore(const sigset_t *old)
{
	pthread_sigmask(SIG_SETMASK, old, NULL);
}
