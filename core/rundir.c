/* rundir.c - finds and checks the per-user run directory. */
#include "core/rundir.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/rules.h"

static const char *check_dir(const char *dir)
{
	struct stat sb;
	if (lstat(dir, &sb) < 0)
		return "cannot be created";
	if (S_ISLNK(sb.st_mode))
		return "is a symbolic link";
	if (!S_ISDIR(sb.st_mode))
		return "is not a directory";
	if (sb.st_uid != geteuid())
		return "is owned by another user";
	if (sb.st_mode & 077)
		return "is open to other users (mode must be 0700)";
	return NULL;
}

/* lstat follows a symbolic link named with a trailing "/" or "/.", so the
 * name loses them first; a last ".." names some other directory than the
 * one checked and is refused. */
static const char *plain_name(char *dir)
{
	size_t n = strlen(dir);
	for (;;) {
		if (n > 1 && dir[n - 1] == '/')
			n--;
		else if (n > 2 && dir[n - 1] == '.' && dir[n - 2] == '/')
			n -= 2;
		else
			break;
	}
	dir[n] = '\0';
	const char *last = strrchr(dir, '/');
	last = last ? last + 1 : dir;
	return strcmp(last, "..") == 0 ? "must not end in \"..\"" : NULL;
}

static const char *make_dir(char *dir)
{
	const char *why = plain_name(dir);
	if (why)
		return why;
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return "cannot be created";
	return check_dir(dir);
}

/* The home directory, which no other account can write to. */
static const char *home(char *buf, size_t len)
{
	const char *h = secure_getenv("HOME");
	if (h && *h)
		return h;
	struct passwd pw, *res = NULL;
	return getpwuid_r(geteuid(), &pw, buf, len, &res) == 0 && res ? res->pw_dir : NULL;
}

const char *fn_rundir(char *dir, size_t len)
{
	const char *v = secure_getenv("FAULTNET_RUNDIR");
	const char *xdg = secure_getenv("XDG_RUNTIME_DIR");
	if (v && *v)
		snprintf(dir, len, "%s", v);
	else if (xdg && *xdg)
		snprintf(dir, len, "%s/faultnet", xdg);
	else
		snprintf(dir, len, "/tmp/faultnet-%u", (unsigned)geteuid());
	const char *why = make_dir(dir);
	if (!why || (v && *v) || (xdg && *xdg))
		return why;
	/* Anyone can create /tmp/faultnet-UID first. Then the shim and faultctl
	 * both use the same private directory in the home directory instead,
	 * so control keeps working; the name in /tmp is left alone. */
	char pwbuf[4096];
	const char *h = home(pwbuf, sizeof(pwbuf));
	if (!h)
		return why;
	snprintf(dir, len, "%s/.faultnet-run", h);
	return make_dir(dir);
}

bool fn_group_valid(const char *g)
{
	return fn_name_valid(g);
}

bool fn_sock_path(char *out, size_t len, const char *dir, const char *group, pid_t pid)
{
	int n = snprintf(out, len, "%s/%s.%d.sock", dir, group, (int)pid);
	return n > 0 && (size_t)n < len && (size_t)n < sizeof(((struct sockaddr_un *)0)->sun_path);
}

bool fn_mem_path(char *out, size_t len, const char *dir, const char *group, pid_t pid)
{
	int n = snprintf(out, len, "%s/%s.%d.mem", dir, group, (int)pid);
	return n > 0 && (size_t)n < len;
}

void fn_member_gone(const char *path)
{
	size_t n = strlen(path);
	char done[4200];
	if (n > 4 && strcmp(path + n - 4, ".mem") == 0 && n + 2 < sizeof(done)) {
		snprintf(done, sizeof(done), "%.*s.done", (int)(n - 4), path);
		/* Its time is when the process was found gone (no one writes a
		 * .done after): the kept period counts from it. */
		if (rename(path, done) == 0) {
			utimensat(AT_FDCWD, done, NULL, AT_SYMLINK_NOFOLLOW);
			return;
		}
	}
	unlink(path);
}

bool fn_done_expire(const char *dir, const char *name, time_t now)
{
	size_t n = strlen(name);
	if (n < 6 || name[0] == '.' || strcmp(name + n - 5, ".done") != 0)
		return false;
	char path[4200];
	struct stat sb;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	/* mtime: set when it was made (fn_member_gone), never by a reader. */
	if (lstat(path, &sb) == 0 && now - sb.st_mtim.tv_sec > FN_KEEP_S)
		unlink(path);
	return true;
}

const char *fn_proc_fields(pid_t pid, char *buf, size_t len)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	/* stdio: read and close are the shim's own hooks (core is linked
	 * into it), which core never calls. */
	FILE *f = fopen(path, "re");
	size_t n = f ? fread(buf, 1, len - 1, f) : 0;
	if (f)
		fclose(f);
	buf[n] = '\0';
	/* "PID (COMM) STATE ...": COMM may hold anything, so the last ')'. */
	const char *p = n ? strrchr(buf, ')') : NULL;
	return p && p[1] == ' ' ? p + 1 : NULL;
}

uint64_t fn_proc_start(pid_t pid)
{
	char buf[1024];
	const char *p = fn_proc_fields(pid, buf, sizeof(buf));
	/* The start time is the 22nd field, the 20th after the name. */
	for (int field = 3; p && field < 22; field++)
		p = strchr(p + 1, ' ');
	return p ? strtoull(p + 1, NULL, 10) : 0;
}

void fn_group_file(char *out, size_t len, const char *dir, const char *group, const char *ext)
{
	snprintf(out, len, "%s/%s.%s", dir, group, ext);
}

uint64_t *fn_seq_map(int fd, bool writable)
{
	struct stat sb;
	if (fstat(fd, &sb) < 0)
		return NULL;
	if (!S_ISREG(sb.st_mode) || sb.st_uid != geteuid() || (sb.st_mode & 077)) {
		errno = EPERM;
		return NULL;
	}
	/* Only ever grown: a reader of the first page must never meet its end. */
	if (sb.st_size < FN_SEQ_FILE_SIZE && ftruncate(fd, FN_SEQ_FILE_SIZE) < 0)
		return NULL;
	void *m = mmap(NULL, FN_SEQ_FILE_SIZE, PROT_READ | (writable ? PROT_WRITE : 0), MAP_SHARED,
		       fd, 0);
	return m == MAP_FAILED ? NULL : m;
}
