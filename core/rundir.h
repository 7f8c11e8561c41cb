/* rundir.h - where control sockets and group journals live, shared by the
 * shim and faultctl: FAULTNET_RUNDIR, else $XDG_RUNTIME_DIR/faultnet, else
 * /tmp/faultnet-$UID. The directory must be a real directory (not a link),
 * owned by the user, mode 0700; anything else is refused. */
#ifndef FAULTNET_RUNDIR_H
#define FAULTNET_RUNDIR_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define FN_GROUP_DEFAULT "default"

/* Finds (and creates, mode 0700) the run directory. NULL on success, else
 * a message; dir is filled either way. */
const char *fn_rundir(char *dir, size_t len);

/* Group names follow rule names: 1 to 63 of letters, digits, _.:- */
bool fn_group_valid(const char *g);

/* "DIR/GROUP.PID.sock", "DIR/GROUP.journal", "DIR/GROUP.lock". False if
 * the path does not fit a Unix socket address. */
bool fn_sock_path(char *out, size_t len, const char *dir, const char *group, pid_t pid);
void fn_group_file(char *out, size_t len, const char *dir, const char *group, const char *ext);

#endif
