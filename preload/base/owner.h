/* owner.h - which process the shim's state belongs to. A vfork child shares
 * its parent's memory, so the shim must change nothing while it runs. */
#ifndef FAULTNET_OWNER_H
#define FAULTNET_OWNER_H

#include <stdbool.h>

/* Records the calling process as the owner: at start and after fork. */
void fn_owner_reset(void);

/* True in a vfork child. Costs a syscall: slow paths only. */
bool fn_in_vfork_child(void);

#endif
