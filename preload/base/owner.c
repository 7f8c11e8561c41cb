/* owner.c - the owning process's pid, read with a raw syscall because a
 * vfork child must not touch glibc's cached pid (it is the parent's). */
#include "preload/base/owner.h"

#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include "core/startdata.h"

static pid_t owner FN_START_DATA;

void fn_owner_reset(void)
{
	owner = (pid_t)syscall(SYS_getpid);
}

bool fn_in_vfork_child(void)
{
	return owner && (pid_t)syscall(SYS_getpid) != owner;
}
