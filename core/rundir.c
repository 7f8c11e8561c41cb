/* rundir.c - finds and checks the per-user run directory. */
#include "core/rundir.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/pathcat.h"
#include "core/rawsys.h"
#include "core/rules.h"
#include "core/startdata.h"
#include "core/startmem.h"

static const char *fields_of(const char *path, char *buf, size_t len);
static uint64_t start_of(const char *p);

/* What is wrong with a run directory whose lstat is sb; NULL if nothing. */
FN_START_TEXT static const char *check_stat(const struct stat *sb)
{
	if (S_ISLNK(sb->st_mode))
		return "is a symbolic link";
	if (!S_ISDIR(sb->st_mode))
		return "is not a directory";
	if (sb->st_uid != fn_geteuid_raw())
		return "is owned by another user";
	if (sb->st_mode & 077)
		return "is open to other users (mode must be 0700)";
	return NULL;
}

static const char *check_dir(const char *dir)
{
	struct stat sb;
	return lstat(dir, &sb) < 0 ? "cannot be created" : check_stat(&sb);
}

/* lstat follows a symbolic link named with a trailing "/" or "/.", so the
 * name loses them first; a last ".." names some other directory than the
 * one checked and is refused. */
FN_START_TEXT static const char *plain_name(char *dir)
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
	const char *last = fn_last_slash(dir);
	return fn_same(last ? last + 1 : dir, "..") ? "must not end in \"..\"" : NULL;
}

FN_START_TEXT static const char *make_dir(char *dir)
{
	const char *why = plain_name(dir);
	if (why)
		return why;
	/* Looked at first, made only when absent: at a start it mostly
	 * exists, and then one lstat is the only system call. */
	struct stat sb;
	if (fn_lstat_raw(dir, &sb) == 0)
		return check_stat(&sb);
	if (errno != ENOENT || (mkdir(dir, 0700) < 0 && errno != EEXIST))
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

/* A relative FAULTNET_RUNDIR v made absolute (still right after a chdir).
 * Out of line, as is the home's fallback: their buffers would be pages of
 * stack every start touches (fn_rundir's frame, below which it calls). */
static __attribute__((noinline)) void relative(char *dir, size_t len, const char *v)
{
	char cwd[4096];
	if (getcwd(cwd, sizeof(cwd)))
		FN_PATHCAT(dir, len, cwd, "/", v);
	else
		FN_PATHCAT(dir, len, v);
}

/* Anyone can create /tmp/faultnet-UID first. Then the shim and faultctl
 * both use the same private directory in the home directory instead, so
 * control keeps working; the name in /tmp is left alone. */
static __attribute__((noinline)) const char *in_home(char *dir, size_t len, const char *why)
{
	char pwbuf[4096];
	const char *h = home(pwbuf, sizeof(pwbuf));
	if (!h)
		return why;
	FN_PATHCAT(dir, len, h, "/.faultnet-run");
	return make_dir(dir);
}

/* A start asks for the run directory up to three times (its compiled
 * copy's place, the copy's second name, control's directory): the one
 * found good is kept while the constructor runs (fn_rundir_start) and not
 * looked at again, an lstat and a geteuid each time. On the constructor's
 * thread only: start memory is not shared between threads. */
static __thread bool starting __attribute__((tls_model("initial-exec")));
static const char *start_good FN_START_DATA;

void fn_rundir_start(bool on)
{
	starting = on;
	start_good = NULL;
}

FN_START_TEXT const char *fn_rundir(char *dir, size_t len)
{
	const char *v = secure_getenv("FAULTNET_RUNDIR");
	const char *xdg = secure_getenv("XDG_RUNTIME_DIR");
	char uid[FN_UTOA_MAX];
	if (v && *v && v[0] != '/')
		relative(dir, len, v);
	else if (v && *v)
		FN_PATHCAT(dir, len, v);
	else if (xdg && *xdg)
		FN_PATHCAT(dir, len, xdg, "/faultnet");
	else
		FN_PATHCAT(dir, len, "/tmp/faultnet-", fn_utoa(uid, geteuid(), 10, 0));
	if (starting && start_good && !plain_name(dir) && fn_same(dir, start_good))
		return NULL;
	const char *why = make_dir(dir);
	if (why && !(v && *v) && !(xdg && *xdg))
		why = in_home(dir, len, why);
	if (!why && starting && !start_good)
		start_good = fn_start_strdup(dir);
	return why;
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

bool fn_mem_path(char *out, size_t len, const char *dir, const char *group,
		 const struct fn_member_id *id)
{
	int n = snprintf(out, len, "%s/%s.%d.%llu.%llu.mem", dir, group, (int)id->pid,
			 (unsigned long long)id->ns, (unsigned long long)id->start);
	return n > 0 && (size_t)n < len;
}

/* The number before *end (exclusive) in name, after a '.': its value, with
 * *end moved to that '.'; false when there is none. */
static bool number_before(const char *name, const char **end, unsigned long long *v)
{
	const char *p = *end;
	while (p > name && p[-1] >= '0' && p[-1] <= '9')
		p--;
	if (p == *end || p == name || p[-1] != '.' || *end - p > 20)
		return false;
	*v = strtoull(p, NULL, 10);
	*end = p - 1;
	return true;
}

bool fn_member_name(const char *name, char *group, size_t glen, struct fn_member_id *id,
		    const char **ext)
{
	const char *e = strrchr(name, '.');
	if (name[0] == '.' || !e)
		return false;
	bool sock = strcmp(e, ".sock") == 0;
	if (!sock && strcmp(e, ".mem") != 0 && strcmp(e, ".done") != 0)
		return false;
	unsigned long long pid, ns = 0, start = 0;
	const char *end = e;
	if ((!sock && (!number_before(name, &end, &start) || !number_before(name, &end, &ns))) ||
	    !number_before(name, &end, &pid) || pid == 0 || pid > 0x7fffffff ||
	    (size_t)(end - name) >= glen)
		return false;
	memcpy(group, name, (size_t)(end - name));
	group[end - name] = '\0';
	*id = (struct fn_member_id){.pid = (pid_t)pid, .ns = ns, .start = start};
	*ext = e;
	return true;
}

bool fn_member_held(int fd)
{
	if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
		flock(fd, LOCK_UN);
		return false;
	}
	return errno == EWOULDBLOCK;
}

uint64_t fn_pidns_self(void)
{
	struct stat sb;
	return stat("/proc/self/ns/pid", &sb) == 0 ? (uint64_t)sb.st_ino : 0;
}

const struct fn_member_id *fn_self_id(void)
{
	static struct fn_member_id me;
	pid_t pid = getpid(); /* one system call: the only one once known */
	if (me.pid == pid)
		return &me;
	char buf[1024];
	/* /proc/self, not /proc/PID: a process in a pid namespace of its own
	 * under the host's /proc has another number there. */
	me.start = start_of(fields_of("/proc/self/stat", buf, sizeof(buf)));
	me.ns = fn_pidns_self();
	while (!me.start && getrandom(&me.start, sizeof(me.start), 0) < 0 && errno == EINTR)
		;
	me.start = me.start ? me.start : (uint64_t)time(NULL) ^ ((uint64_t)pid << 32);
	me.pid = pid;
	return &me;
}

static const char *args_at FN_START_DATA, *args_end FN_START_DATA;

void fn_self_cmd_note(int argc, char **argv)
{
	if (argc <= 0 || !argv || !argv[0])
		return;
	/* The kernel puts the strings one after the other; a loader that
	 * did not is read from /proc instead. */
	const char *end = argv[0];
	for (int i = 0; i < argc; i++) {
		if (!argv[i] || argv[i] != end)
			return;
		end += strlen(end) + 1;
	}
	args_at = argv[0];
	args_end = end;
}

size_t fn_self_cmd(char *buf, size_t len)
{
	if (!len)
		return 0;
	size_t n = 0;
	if (args_at) {
		n = (size_t)(args_end - args_at) < len - 1 ? (size_t)(args_end - args_at) : len - 1;
		memcpy(buf, args_at, n);
	} else {
		int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
		long r = fd >= 0 ? syscall(SYS_pread64, fd, buf, len - 1, (off_t)0) : -1;
		if (fd >= 0)
			fn_close_raw(fd);
		n = r > 0 ? (size_t)r : 0;
	}
	buf[n] = '\0';
	return n;
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

void fn_member_gone_if(const char *path, int fd)
{
	size_t n = strlen(path);
	char done[4200];
	struct stat was, now;
	if (n < 5 || strcmp(path + n - 4, ".mem") != 0 || n + 2 >= sizeof(done) ||
	    fstat(fd, &was) < 0)
		return;
	snprintf(done, sizeof(done), "%.*s.done", (int)(n - 4), path);
	if (rename(path, done) < 0)
		return;
	/* stat, not lstat: the run directory's name of a file in
	 * FAULTNET_STATS_DIR may be a symbolic link to it. */
	if (stat(done, &now) == 0 && (now.st_ino != was.st_ino || now.st_dev != was.st_dev)) {
		rename(done, path); /* the new image's file: its name again */
		return;
	}
	utimensat(AT_FDCWD, done, NULL, AT_SYMLINK_NOFOLLOW);
}

bool fn_done_expire(const char *dir, const char *name, time_t now)
{
	size_t n = strlen(name);
	if (n < 6 || name[0] == '.' || strcmp(name + n - 5, ".done") != 0)
		return false;
	/* mtime: set when it was made (fn_member_gone), never by a reader. */
	fn_expire_old(dir, name, now);
	return true;
}

void fn_expire_old(const char *dir, const char *name, time_t now)
{
	char path[4200];
	struct stat sb;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (lstat(path, &sb) == 0 && now - sb.st_mtim.tv_sec > FN_KEEP_S)
		unlink(path);
}

static const char *fields_of(const char *path, char *buf, size_t len)
{
	/* Three system calls: open, one read (procfs gives a stat file whole
	 * to a read that has room; stdio asked an fstat and a read more). */
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	long r = fd >= 0 ? syscall(SYS_pread64, fd, buf, len - 1, (off_t)0) : -1;
	if (fd >= 0)
		fn_close_raw(fd);
	size_t n = r > 0 ? (size_t)r : 0;
	buf[n] = '\0';
	/* "PID (COMM) STATE ...": COMM may hold anything, so the last ')'. */
	const char *p = n ? strrchr(buf, ')') : NULL;
	return p && p[1] == ' ' ? p + 1 : NULL;
}

const char *fn_proc_fields(pid_t pid, char *buf, size_t len)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	return fields_of(path, buf, len);
}

/* The start time is the 22nd field, the 20th after the name. */
static uint64_t start_of(const char *p)
{
	for (int field = 3; p && field < 22; field++)
		p = strchr(p + 1, ' ');
	return p ? strtoull(p + 1, NULL, 10) : 0;
}

uint64_t fn_proc_start(pid_t pid)
{
	char buf[1024];
	return start_of(fn_proc_fields(pid, buf, sizeof(buf)));
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
