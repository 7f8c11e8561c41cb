/* rundir.h - where control sockets and group journals live, shared by the
 * shim and faultctl: FAULTNET_RUNDIR, else $XDG_RUNTIME_DIR/faultnet, else
 * /tmp/faultnet-$UID. The directory must be a real directory (not a link),
 * owned by the user, mode 0700; anything else is refused. */
#ifndef FAULTNET_RUNDIR_H
#define FAULTNET_RUNDIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#define FN_GROUP_DEFAULT "default"

/* Finds (and creates, mode 0700) the run directory. NULL on success, else
 * a message; dir is filled either way. */
const char *fn_rundir(char *dir, size_t len);

/* Group names follow rule names: 1 to 63 of letters, digits, _.:- */
bool fn_group_valid(const char *g);

/* The fields of /proc/PID/stat after the process's name (" STATE PPID
 * ..."), read into buf; NULL when the process is gone or unreadable. */
const char *fn_proc_fields(pid_t pid, char *buf, size_t len);

/* A process's start time in clock ticks after boot (/proc/PID/stat), which
 * with its pid names it for good (a pid is reused, the pair is not); 0 when
 * the process is gone or unreadable. */
uint64_t fn_proc_start(pid_t pid);

/* "DIR/GROUP.PID.sock" (a control socket: faultctl run --backend=bpf),
 * "DIR/GROUP.PID.mem" (a member's published state, core/segment.h),
 * "DIR/GROUP.journal", "DIR/GROUP.lock". False if the path does not fit
 * (a socket path must fit a Unix socket address). */
bool fn_sock_path(char *out, size_t len, const char *dir, const char *group, pid_t pid);
bool fn_mem_path(char *out, size_t len, const char *dir, const char *group, pid_t pid);
void fn_group_file(char *out, size_t len, const char *dir, const char *group, const char *ext);

/* The counts of a member that has gone are kept this long (seconds): its
 * "GROUP.PID.mem" becomes "GROUP.PID.done" (fn_member_gone), which
 * faultctl -g GROUP stats still sums, and which a sweep removes once it
 * is older than this (fn_done_expire, by the time it was renamed), as
 * faultctl gc does, with the journal, lock and counter of a group that has
 * had no member for as long. */
#define FN_KEEP_S 3600

/* A member's file whose process has gone: a ".mem" path is renamed to its
 * ".done", a ".sock" one removed. */
void fn_member_gone(const char *path);

/* name (an entry of dir) is a ".done" file: true, and it is removed when
 * older than FN_KEEP_S at now. */
bool fn_done_expire(const char *dir, const char *name, time_t now);

/* The group's change counter, "DIR/GROUP.seq": the sequence number of the
 * last change faultctl journaled for the group, in the first 8 bytes of a
 * one-page file that faultctl and every member map shared. faultctl stores
 * it (release) after the journal line is written; a member compares it
 * with what it has applied on each covered call (acquire), so a change is
 * in force in every member when faultctl returns, with no message to any.
 * fd is the file, open read-write (O_NOFOLLOW); it must be a regular file
 * of this user. Returns the word, or NULL with errno set (EPERM for a file
 * that is not ours); the caller closes fd either way. */
#define FN_SEQ_FILE_SIZE 4096
uint64_t *fn_seq_map(int fd, bool writable);

#endif
