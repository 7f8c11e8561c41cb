/* rawsys.h - system calls that core and a start make through libc's
 * syscall(), not through their libc wrappers.
 *
 * Two reasons. core is linked into the shim, which exports read and close:
 * core never calls those by name. And a start under the shim (issue 42)
 * pays, for each libc function it calls first, the symbol's binding and
 * the pages of its code: stat, statfs, fstat, geteuid and getsockopt each
 * cost 3 to 8 microseconds at a start, where syscall(), already called,
 * costs the system call alone. Only x86_64 and aarch64, whose struct stat
 * and struct statfs are the kernel's, take the raw calls; elsewhere these
 * are the libc functions. Each returns what its libc function returns,
 * errno set the same way. */
#ifndef FAULTNET_RAWSYS_H
#define FAULTNET_RAWSYS_H

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

/* Up to n bytes of fd from its start, into buf; the count read, -1 with
 * errno. (stdio's buffering would ask an fstat of its own.) */
ssize_t fn_read_raw(int fd, void *buf, size_t n);
void fn_close_raw(int fd);

#if defined(__x86_64__) || defined(__aarch64__)
static inline int fn_stat_raw(const char *path, struct stat *sb)
{
	return (int)syscall(SYS_newfstatat, AT_FDCWD, path, sb, 0);
}

static inline int fn_lstat_raw(const char *path, struct stat *sb)
{
	return (int)syscall(SYS_newfstatat, AT_FDCWD, path, sb, AT_SYMLINK_NOFOLLOW);
}

/* As glibc's fstat asks it (a seccomp filter may allow only this one). */
static inline int fn_fstat_raw(int fd, struct stat *sb)
{
	return (int)syscall(SYS_newfstatat, fd, "", sb, AT_EMPTY_PATH);
}

static inline int fn_statfs_raw(const char *path, struct statfs *fs)
{
	return (int)syscall(SYS_statfs, path, fs);
}

/* flags without O_CREAT or O_TMPFILE: no mode is passed. */
static inline int fn_open_raw(const char *path, int flags)
{
	return (int)syscall(SYS_openat, AT_FDCWD, path, flags, 0);
}

static inline uid_t fn_geteuid_raw(void)
{
	return (uid_t)syscall(SYS_geteuid);
}

static inline int fn_getsockopt_raw(int fd, int level, int name, void *val, socklen_t *len)
{
	return (int)syscall(SYS_getsockopt, fd, level, name, val, len);
}
#else
#define fn_stat_raw stat
#define fn_lstat_raw lstat
#define fn_fstat_raw fstat
#define fn_statfs_raw statfs
#define fn_open_raw open
#define fn_geteuid_raw geteuid
#define fn_getsockopt_raw getsockopt
#endif

#endif
