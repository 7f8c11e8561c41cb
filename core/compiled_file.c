/* compiled_file.c - a policy's compiled copy in the run directory (see
 * compiled.h): where it is kept, read and written, and the start that
 * finds its policy there. A copy is named by the hash of the policy's
 * text, zone and build; a second name, by the policy file's identity (its
 * device, inode, size and times), lets a start find the copy with one stat
 * of the file instead of a read of its text. */
#include "core/compiled.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "core/bigalloc.h"
#include "core/config.h"
#include "core/pathcat.h"
#include "core/rawsys.h"
#include "core/rundir.h"
#include "core/startdata.h"
#include "core/startmem.h"

/* "DIR/policy-HEX.compiled" with the hash h, appended to the run
 * directory in out. */
FN_START_TEXT static bool put_name(char *out, size_t len, const char *prefix, uint64_t h)
{
	char hex[FN_UTOA_MAX];
	size_t n = strlen(out);
	return FN_PATHCAT(out + n, len - n, prefix, fn_utoa(hex, h, 16, 16), ".compiled");
}

/* The hash of k's text, zone and build. */
static uint64_t key_hash(const struct fn_compiled_key *k)
{
	uint64_t h = fn_compiled_hash(0xcbf29ce484222325ull, k->text, k->textlen);
	h = fn_compiled_hash(h ^ 1, k->zone, strlen(k->zone));
	return fn_compiled_hash(h ^ 2, k->id, k->idlen);
}

bool fn_compiled_path(char *out, size_t len, const char *dir, const struct fn_compiled_key *k)
{
	return FN_PATHCAT(out, len, dir) && put_name(out, len, "/policy-", key_hash(k));
}
/* A text or copy this large is read into a mapping of its own, not the
 * heap: freed there after the policy was built, it was a free chunk among
 * the policy's allocations, which each later malloc of the app's split and
 * merged (core/bigalloc.h), and freed as a chunk glibc mapped, it raised
 * glibc's mmap threshold, and the arrays built after it came from the heap.
 * A smaller free chunk is below what stdio's buffers and the like ask for. */
#define HEAP_MAX 4096

static void buf_free(char *b, size_t size)
{
	if (size >= HEAP_MAX)
		fn_map_free(b);
	else
		fn_start_free(b);
}

/* A buffer for a file's size bytes and a NUL after them: below HEAP_MAX on
 * the heap, or for a start (start) from its block (core/startmem.h), else a
 * mapping of its own. Its kind follows from size and address, so the text
 * and the copy are freed alike (buf_free). */
FN_START_TEXT static char *buf_read(int fd, size_t size, bool start)
{
	char *b = size >= HEAP_MAX ? fn_map_realloc(NULL, size + 1)
		  : start	   ? fn_start_alloc(size + 1)
				   : malloc(size + 1);
	if (b && fn_read_raw(fd, b, size) != (ssize_t)size) {
		buf_free(b, size);
		return NULL;
	}
	if (b)
		b[size] = '\0';
	return b;
}

/* The policy file's text, NUL-ended, when it is a regular file of a sane
 * size with no NUL: one open, one fstat and one read, where reading it
 * again as the parser does cost three system calls more at every start.
 * NULL otherwise: the caller reads it as the parser does, with its
 * messages. */
static char *read_text(const char *path, size_t *len, struct stat *was)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return NULL;
	struct stat sb;
	char *buf = NULL;
	if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size <= (off_t)FN_CONFIG_FILE_MAX &&
	    (buf = buf_read(fd, (size_t)sb.st_size, false)) && memchr(buf, 0, (size_t)sb.st_size)) {
		buf_free(buf, (size_t)sb.st_size);
		buf = NULL;
	}
	fn_close_raw(fd);
	*len = buf ? (size_t)sb.st_size : 0;
	if (was)
		*was = sb;
	return buf;
}

/* The bytes of the copy at path (their count in *len) when it is a
 * regular file of this user that no one else can write and of a sane size;
 * NULL otherwise. Whether they are whole is the reader's to check. */
FN_START_TEXT static char *read_copy(const char *path, size_t *len, bool start)
{
	int fd = fn_open_raw(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return NULL;
	struct stat sb;
	char *blob = NULL;
	if (fn_fstat_raw(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_uid == fn_geteuid_raw() &&
	    !(sb.st_mode & (S_IWGRP | S_IWOTH)) && sb.st_size > 0 &&
	    sb.st_size <= (off_t)FN_COMPILED_MAX)
		blob = buf_read(fd, (size_t)sb.st_size, start);
	fn_close_raw(fd);
	*len = blob ? (size_t)sb.st_size : 0;
	return blob;
}

/* The policy of blob's len bytes for k (NULL unless they are a whole copy
 * of it), blob freed. */
static struct fn_policy *read_blob(char *blob, size_t len, const struct fn_compiled_key *k)
{
	if (!blob)
		return NULL;
	struct fn_policy *p = fn_compiled_read(blob, len, k);
	buf_free(blob, len);
	return p;
}

static bool write_all(int fd, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return false;
		p += w;
		n -= (size_t)w;
	}
	return true;
}

#define TMP_END ".tmp"

/* The temporary name under which a copy or a second name is made before
 * its rename, DIR/.NAME.PID.NS.tmp, unique to the process and the moment;
 * one a writer left (killed between the two) goes with faultctl gc
 * (fn_compiled_expire). False when it does not fit. */
static bool tmp_name(char *tmp, size_t len, const char *path)
{
	const char *slash = strrchr(path, '/');
	struct timespec ts;
	if (!slash || clock_gettime(CLOCK_MONOTONIC, &ts) != 0 || (size_t)(slash - path) >= len)
		return false;
	char pid[FN_UTOA_MAX], ns[FN_UTOA_MAX];
	memcpy(tmp, path, (size_t)(slash - path));
	return FN_PATHCAT(tmp + (slash - path), len - (size_t)(slash - path), "/.", slash + 1, ".",
			  fn_utoa(pid, (uint64_t)getpid(), 10, 0), ".",
			  fn_utoa(ns, (uint64_t)ts.tv_nsec, 10, 0), TMP_END);
}

/* p's copy at path: written to a new file of this user only (O_EXCL: never
 * through a name someone else made) and renamed over path, so that a
 * reader sees a whole copy or none. */
static void store_copy(const char *path, const struct fn_policy *p, const struct fn_compiled_key *k)
{
	size_t len;
	uint8_t *blob = fn_compiled_write(p, k, &len);
	char tmp[4300];
	int fd = blob && tmp_name(tmp, sizeof(tmp), path)
		     ? open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)
		     : -1;
	if (fd >= 0) {
		bool ok = write_all(fd, blob, len);
		fn_close_raw(fd);
		if (!ok || rename(tmp, path) < 0)
			unlink(tmp);
	}
	free(blob);
}

/* Where k's copy is kept (k->id set on the way): false for a text that is
 * never kept, or with no run directory. */
static bool copy_place(struct fn_compiled_key *k, char *file, size_t len)
{
	/* The run directory found in file itself: a buffer of its own was
	 * a page of stack at every start. */
	return fn_compiled_cacheable(k->text) && (k->id = fn_compiled_build_id(&k->idlen)) &&
	       !fn_rundir(file, len) && put_name(file, len, "/policy-", key_hash(k));
}

/* The policy of text: from its copy at file when one is there and whole,
 * else parsed (and then kept at file when keep). */
static struct fn_policy *load_text(const char *text, size_t n, const char *path, const char *zone,
				   bool keep, const char *file, char *err, size_t errlen)
{
	struct fn_compiled_key k = {.text = text, .textlen = n, .zone = zone ? zone : ""};
	k.id = keep ? fn_compiled_build_id(&k.idlen) : NULL;
	size_t len = 0;
	/* Read first, then passed on: as arguments of one call, len could be
	 * read before read_copy set it (C leaves their order open), and the
	 * copy was then never used. */
	char *blob = keep ? read_copy(file, &len, false) : NULL;
	struct fn_policy *p = read_blob(blob, len, &k);
	if (!p) {
		p = fn_config_load_string(text, path, zone, err, errlen);
		if (p && keep)
			store_copy(file, p, &k);
	}
	return p;
}

struct fn_policy *fn_compiled_load_file(const char *path, const char *zone, char *err,
					size_t errlen)
{
	int saved = errno; /* the app's, untouched by a copy's absence */
	size_t n;
	char *own = read_text(path, &n, NULL);
	char *text = own ? own : fn_config_read(path, &n, err, errlen);
	if (!text)
		return NULL;
	struct fn_compiled_key k = {.text = text, .textlen = n, .zone = zone ? zone : ""};
	char file[4200];
	bool keep = copy_place(&k, file, sizeof(file));
	struct fn_policy *p = load_text(text, n, path, zone, keep, file, err, errlen);
	if (own)
		buf_free(own, n);
	else
		free(text);
	errno = saved;
	return p;
}

/* ---- a start that builds its policy at its join ------------------------- */

/* The second name of a copy: the policy file's identity (sb), the zone and
 * the build. Any write to the file changes its ctime. */
static bool stamp_place(const struct stat *sb, const struct fn_compiled_key *k, char *file,
			size_t len)
{
	const uint64_t who[] = {sb->st_dev,
				sb->st_ino,
				(uint64_t)sb->st_size,
				(uint64_t)sb->st_mtim.tv_sec,
				(uint64_t)sb->st_mtim.tv_nsec,
				(uint64_t)sb->st_ctim.tv_sec,
				(uint64_t)sb->st_ctim.tv_nsec};
	uint64_t h = fn_compiled_hash(0x84222325cbf29ce4ull, who, sizeof(who));
	h = fn_compiled_hash(h ^ 1, k->zone, strlen(k->zone));
	h = fn_compiled_hash(h ^ 2, k->id, k->idlen);
	return !fn_rundir(file, len) && put_name(file, len, "/policy-s-", h);
}

/* How long before its text was read a file's last change must be for its
 * identity to name that text: a change within the same tick of the
 * kernel's clock could leave the times as they were (as git's index has
 * it: "racily clean"), but not one made this long after them. */
#define SETTLED_S 2

/* The file systems whose times a stat reads from the file itself, and
 * whose ctime every write sets: local ones. A network or FUSE file system
 * answers a stat from an attribute cache (NFS revalidates at open, which
 * the text's read does), and some keep no ctime of their own. */
static bool identity_kept(const char *path)
{
	static const long local[] = {
	    0xEF53,	      /* ext2/3/4 */
	    0x58465342,	      /* xfs */
	    (long)0x9123683E, /* btrfs */
	    0x01021994,	      /* tmpfs */
	    0x794C7630,	      /* overlayfs */
	    (long)0xF2F52010, /* f2fs */
	    0x2FC12FC1,	      /* zfs */
	};
	struct statfs fs;
	if (fn_statfs_raw(path, &fs) != 0)
		return false;
	for (size_t i = 0; i < sizeof(local) / sizeof(local[0]); i++)
		if ((long)fs.f_type == local[i])
			return true;
	return false;
}

static bool same_file(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
	       a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* The copy at file, just found by the text read with identity was (the
 * clock read at before, ahead of the read), given its second name when the
 * file had settled then and is still as it was: linked under a new name and
 * renamed over the second name, so that one found spoilt is replaced. */
static __attribute__((noinline)) void stamp_make(const char *path, const struct stat *was,
						 const struct timespec *before, const char *file,
						 const struct fn_compiled_key *k)
{
	struct stat sb;
	char stamp[4200], tmp[4300];
	if (before->tv_sec - was->st_ctim.tv_sec < SETTLED_S || stat(path, &sb) != 0 ||
	    !same_file(&sb, was) || !identity_kept(path) ||
	    !stamp_place(was, k, stamp, sizeof(stamp)) || !tmp_name(tmp, sizeof(tmp), stamp))
		return;
	if (link(file, tmp) == 0 && rename(tmp, stamp) != 0)
		unlink(tmp); /* refused: the next start reads the text */
}

/* The copy's bytes when they are whole for zone and this build (k's text
 * then the copy's own, when k has none); NULL otherwise. */
static char *whole_copy(const char *file, struct fn_compiled_key *k, size_t *len)
{
	char *blob = read_copy(file, len, true);
	if (blob && !fn_compiled_whole(blob, *len, k)) {
		buf_free(blob, *len);
		blob = NULL;
	}
	return blob;
}

/* The copy by the policy file's identity: one stat of the file. Its place
 * in file. No statfs: stamp_make names a copy by an identity only on a
 * file system that keeps it (identity_kept), so on any other the name is
 * never found; and the identity holds the device, so a file of another
 * file system never meets a name made for this one. */
static char *by_identity(const char *path, struct fn_compiled_key *k, size_t *len, char *file,
			 size_t flen)
{
	struct stat sb;
	if (fn_stat_raw(path, &sb) != 0 || !S_ISREG(sb.st_mode) || !stamp_place(&sb, k, file, flen))
		return NULL;
	return whole_copy(file, k, len);
}

/* The copy by the policy file's text, read, named a second time by the
 * file's identity for the next start. Its place in file. Out of line, as
 * is stamp_make: inlined, their buffers (8 KiB) put the calls of every
 * start, which finds its copy by the identity, two pages lower on the
 * stack, each page a fault. */
static __attribute__((noinline)) char *by_text(const char *path, struct fn_compiled_key *k,
					       size_t *len, char *file, size_t flen)
{
	struct stat was;
	struct timespec before;
	size_t n;
	if (clock_gettime(CLOCK_REALTIME, &before) != 0)
		before.tv_sec = 0;
	char *text = read_text(path, &n, &was);
	k->text = text;
	k->textlen = n;
	char *blob = text && copy_place(k, file, flen) ? whole_copy(file, k, len) : NULL;
	if (blob)
		stamp_make(path, &was, &before, file, k);
	if (text)
		buf_free(text, n);
	k->text = NULL;
	return blob;
}

/* A copy this large is not kept from the start to the join (it would stay
 * in every process that never joins, 22 MB for a policy of 5 MB): only its
 * place, read again at the join, which then needs an fd. */
#define KEEP_MAX (1u << 20)

bool fn_compiled_pending(const char *path, const char *zone, struct fn_compiled_src *src)
{
	int saved = errno;
	struct fn_compiled_key k = {.zone = zone ? zone : ""};
	char file[4200];
	/* The copy's bytes are read now, not at the join: a process may have
	 * used up its fds (or left its run directory's reach) by its first
	 * covered call, and the copy lets the join build the policy with no fd
	 * and no libconfig. Their key and checksum are checked now too: a
	 * start that finds them spoilt reads the text, and with no good copy
	 * for it loads the file, so a bad one stops it here. */
	char *blob = (k.id = fn_compiled_build_id(&k.idlen))
			 ? by_identity(path, &k, &src->len, file, sizeof(file))
			       ?: by_text(path, &k, &src->len, file, sizeof(file))
			 : NULL;
	src->file = NULL;
	if (blob && src->len > KEEP_MAX) {
		buf_free(blob, src->len);
		blob = NULL;
		src->file = fn_start_strdup(file);
	}
	src->blob = blob;
	src->path = path;
	src->zone = zone;
	errno = saved;
	return blob || src->file;
}

struct fn_policy *fn_compiled_load_src(struct fn_compiled_src *src, char *err, size_t errlen)
{
	int saved = errno;
	struct fn_compiled_key k = {.zone = src->zone ? src->zone : ""};
	k.id = fn_compiled_build_id(&k.idlen);
	if (!src->blob && src->file)
		src->blob = read_copy(src->file, &src->len, false);
	struct fn_policy *p = src->blob && fn_compiled_whole(src->blob, src->len, &k)
				  ? fn_compiled_read(src->blob, src->len, &k)
				  : NULL;
	if (src->blob)
		buf_free(src->blob, src->len);
	fn_start_free(src->file);
	src->blob = src->file = NULL;
	/* Bytes whose key and checksum held at start fail here only when
	 * memory is short, when a field is out of range (a copy written by
	 * something else than the shim) or when the HTTP parser's library
	 * cannot be loaded: the file is loaded instead, as it reads now, and
	 * its errors are the caller's to tell. */
	errno = saved;
	return p ?: fn_compiled_load_file(src->path, src->zone, err, errlen);
}

/* A temporary name of tmp_name's: ".policy-...compiled.PID.NS.tmp". */
static bool is_tmp(const char *name, size_t n)
{
	return strncmp(name, ".policy-", 8) == 0 && strstr(name, ".compiled.") &&
	       n > strlen(TMP_END) && strcmp(name + n - strlen(TMP_END), TMP_END) == 0;
}

bool fn_compiled_expire(const char *dir, const char *name, time_t now)
{
	size_t n = strlen(name);
	/* A temporary name by its mtime too: that of a second name's is the
	 * copy's, so gc may take one being made (then the start makes no
	 * second name, and the next start does). */
	if ((n < 16 || strncmp(name, "policy-", 7) != 0 ||
	     strcmp(name + n - 9, ".compiled") != 0) &&
	    !is_tmp(name, n))
		return false;
	fn_expire_old(dir, name, now);
	return true;
}
