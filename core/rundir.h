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

/* Between fn_rundir_start(true) and (false), on the calling thread (the
 * shim's constructor), a directory fn_rundir found good is not checked
 * again: the start asks for it up to three times. */
void fn_rundir_start(bool on);

/* Group names follow rule names: 1 to 63 of letters, digits, _.:- */
bool fn_group_valid(const char *g);

/* The fields of /proc/PID/stat after the process's name (" STATE PPID
 * ..."), read into buf; NULL when the process is gone or unreadable. */
const char *fn_proc_fields(pid_t pid, char *buf, size_t len);

/* A process's start time in clock ticks after boot (/proc/PID/stat), which
 * with its pid names it for good (a pid is reused, the pair is not); 0 when
 * the process is gone or unreadable. */
uint64_t fn_proc_start(pid_t pid);

/* Who a member is, whatever pid namespace it runs in: its pid as it sees
 * it, the inode of its pid namespace (/proc/self/ns/pid) and its start
 * time. Two namespaces' pid 1 differ in ns; a reused pid differs in start.
 * Without /proc (a chroot that has none) ns is 0 and start a random
 * number, still unique. */
struct fn_member_id {
	pid_t pid;
	uint64_t ns, start;
};

/* The calling process's id, made again when getpid() has changed (a fork
 * child); an exec keeps it (the same process). */
const struct fn_member_id *fn_self_id(void);

/* True when who is the member want names (want->ns 0: in any pid
 * namespace). */
static inline bool fn_member_is(const struct fn_member_id *want, const struct fn_member_id *who)
{
	return want->pid == who->pid && want->start == who->start &&
	       (!want->ns || want->ns == who->ns);
}

/* The inode of the caller's pid namespace, 0 without /proc. */
uint64_t fn_pidns_self(void);

/* The process's arguments as the kernel laid them out (argv[0] to the end
 * of the last one, NUL-separated, what /proc/self/cmdline reads), noted
 * from the shim's constructor's arguments. fn_self_cmd copies at most
 * len - 1 bytes of them into buf and says how many; without a note (or
 * arguments not laid out one after the other) it reads /proc/self/cmdline:
 * a start saves the five system calls of that read. */
void fn_self_cmd_note(int argc, char **argv);
size_t fn_self_cmd(char *buf, size_t len);

/* "DIR/GROUP.PID.sock" (a control socket: faultctl run --backend=bpf),
 * "DIR/GROUP.PID.NS.START.mem" (a member's published state,
 * core/segment.h), "DIR/GROUP.journal", "DIR/GROUP.lock". False if the
 * path does not fit (a socket path must fit a Unix socket address). */
bool fn_sock_path(char *out, size_t len, const char *dir, const char *group, pid_t pid);
bool fn_mem_path(char *out, size_t len, const char *dir, const char *group,
		 const struct fn_member_id *id);

/* A member's file name parsed: "GROUP.PID.NS.START.mem" or ".done" (id
 * whole), "GROUP.PID.sock" (ns and start 0). Its extension (".mem",
 * ".done", ".sock") in *ext; false for any other name, or a group that does
 * not fit glen. */
bool fn_member_name(const char *name, char *group, size_t glen, struct fn_member_id *id,
		    const char **ext);

/* A member holds a lock (flock, exclusive) on its state file for as long
 * as it lives: taken on the file before it has its name, kept by the
 * file's shared mapping after its fd is closed, let go by the kernel when
 * the process exits, execs or is killed. fd, the file open for reading:
 * true when a process holds it. Tried with a shared lock, let go at once,
 * so that two readers never hold each other up. */
bool fn_member_held(int fd);
void fn_group_file(char *out, size_t len, const char *dir, const char *group, const char *ext);

/* The counts of a member that has gone are kept this long (seconds): its
 * "GROUP.PID.NS.START.mem" becomes its ".done" (fn_member_gone), which
 * faultctl -g GROUP stats still sums, and which a sweep removes once it
 * is older than this (fn_done_expire, by the time it was renamed), as
 * faultctl gc does, with the journal, lock and counter of a group that has
 * had no member for as long. */
#define FN_KEEP_S 3600

/* A member's file whose process has gone: a ".mem" path is renamed to its
 * ".done", a ".sock" one removed. */
void fn_member_gone(const char *path);

/* fn_member_gone for a ".mem" path that a reader found no process holding
 * through fd (fn_member_held), unless the name is no longer fd's file: an
 * exec'd image under the shim makes its file again under the same name
 * (an exec keeps pid and start time), and may have done so after the
 * reader opened the old one. The rename is undone then. */
void fn_member_gone_if(const char *path, int fd);

/* name (an entry of dir) is a ".done" file: true, and it is removed when
 * older than FN_KEEP_S at now. */
bool fn_done_expire(const char *dir, const char *name, time_t now);

/* Removes dir/name (not following a link) when it was last written more
 * than FN_KEEP_S before now: the kept hour of a .done or a compiled copy. */
void fn_expire_old(const char *dir, const char *name, time_t now);

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
