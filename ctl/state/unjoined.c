/* unjoined.c - faultctl finds the members that have not joined yet in
 * /proc: a process whose starting environment asks the shim for work
 * (FAULTNET_CONFIG, _GROUP, _ZONE or _EVENTS, control not off) in
 * faultctl's run directory (as the process's root sees it: a container's
 * too), with the shim among its mappings, and with no file of its own yet.
 * Only processes of faultctl's own user, as only they can join its run
 * directory. */
#include "ctl/state/unjoined.h"

#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/ctlmark.h"
#include "core/rundir.h"

/* A file of /proc/PID, whole (up to 4 MiB: an environment is at most a
 * quarter of the stack's limit) and NUL-ended; NULL when it cannot be
 * read. */
static char *read_proc(pid_t pid, const char *what, size_t *len)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, what);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	size_t cap = 16384, n = 0;
	char *buf = malloc(cap + 1);
	while (buf) {
		if (n == cap) {
			char *grown = cap < (4u << 20) ? realloc(buf, 2 * cap + 1) : NULL;
			if (!grown)
				break; /* at the cap, or no memory: what was read */
			buf = grown;
			cap *= 2;
		}
		ssize_t r = read(fd, buf + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && n == 0) {
			free(buf);
			buf = NULL;
		}
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	if (buf)
		buf[n] = '\0';
	*len = n;
	return buf;
}

/* name's value in an environ block (NUL-separated), NULL when unset. */
static const char *env_get(const char *env, size_t len, const char *name)
{
	size_t k = strlen(name);
	for (const char *e = env; e < env + len; e += strlen(e) + 1)
		if (strncmp(e, name, k) == 0 && e[k] == '=')
			return e + k + 1;
	return NULL;
}

static bool set(const char *v)
{
	return v && *v;
}

/* The shim's has_work and control switch, as the process started. */
static bool wants_control(const char *env, size_t n)
{
	const char *ctl = env_get(env, n, "FAULTNET_CONTROL");
	return (set(env_get(env, n, "FAULTNET_CONFIG")) || set(env_get(env, n, "FAULTNET_GROUP")) ||
		set(env_get(env, n, "FAULTNET_ZONE")) || set(env_get(env, n, "FAULTNET_EVENTS"))) &&
	       !(ctl && strcmp(ctl, "off") == 0);
}

static bool same_file(const char *a, const char *b)
{
	struct stat x, y;
	return stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

/* The process's run directory (core/rundir.c: fn_rundir) is faultctl's:
 * its path looked up from the process's root (a container's own) or
 * working directory. */
static bool same_rundir(const char *dir, pid_t pid, uid_t uid, const char *env, size_t n)
{
	const char *v = env_get(env, n, "FAULTNET_RUNDIR");
	const char *xdg = env_get(env, n, "XDG_RUNTIME_DIR");
	char want[4400], mnt[64];
	if (!set(v) && !set(xdg)) {
		snprintf(want, sizeof(want), "/proc/%d/root/tmp/faultnet-%u", (int)pid,
			 (unsigned)uid);
		if (same_file(want, dir))
			return true;
		/* Its home's, when the one in /tmp is someone else's: faultctl's
		 * too when it has neither variable, is that user and sees the
		 * same files. */
		snprintf(mnt, sizeof(mnt), "/proc/%d/ns/mnt", (int)pid);
		return uid == geteuid() && !set(secure_getenv("FAULTNET_RUNDIR")) &&
		       !set(secure_getenv("XDG_RUNTIME_DIR")) &&
		       same_file(mnt, "/proc/self/ns/mnt");
	}
	const char *p = set(v) ? v : xdg, *tail = set(v) ? "" : "/faultnet";
	snprintf(want, sizeof(want), "/proc/%d/%s/%s%s", (int)pid, p[0] == '/' ? "root" : "cwd", p,
		 tail);
	return same_file(want, dir);
}

#define NAMES 8

/* A line of /proc/PID/maps maps a file named one of names[0 .. n) (its
 * last component; " (deleted)": replaced since it was mapped). */
static bool line_maps(const char *line, size_t len, char names[][256], int n)
{
	const char *slash = memrchr(line, '/', len);
	if (!slash)
		return false;
	const char *base = slash + 1;
	size_t b = len - (size_t)(base - line);
	if (b > 10 && memcmp(base + b - 10, " (deleted)", 10) == 0)
		b -= 10;
	for (int i = 0; i < n; i++)
		if (strlen(names[i]) == b && memcmp(names[i], base, b) == 0)
			return true;
	return false;
}

/* Whether pid maps a file named one of names: its maps read a line at a
 * time, whatever their size (a JVM's run to megabytes). */
static bool maps_any(pid_t pid, char names[][256], int n)
{
	char path[64], buf[65536];
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	int fd = n ? open(path, O_RDONLY | O_CLOEXEC) : -1;
	size_t have = 0;
	bool found = false;
	ssize_t r;
	while (fd >= 0 && !found && (r = read(fd, buf + have, sizeof(buf) - have)) > 0) {
		have += (size_t)r;
		char *line = buf, *nl;
		while (!found && (nl = memchr(line, '\n', have - (size_t)(line - buf)))) {
			found = line_maps(line, (size_t)(nl - line), names, n);
			line = nl + 1;
		}
		have -= (size_t)(line - buf);
		memmove(buf, line, have);
		if (have == sizeof(buf))
			have = 0; /* a line longer than the buffer: no path of ours */
	}
	if (fd >= 0)
		close(fd);
	return found;
}

/* One of LD_PRELOAD's entries, a faultnet library, is mapped: by its name
 * or, for a link, by the name of the file it leads to (looked up from the
 * process's root). */
static bool shim_mapped(pid_t pid, const char *env, size_t n)
{
	const char *pre = env_get(env, n, "LD_PRELOAD");
	char names[NAMES][256];
	int k = 0;
	for (const char *e = pre; e && *e && k < NAMES - 1;) {
		size_t len = strcspn(e, ": ");
		char entry[4096], path[4200], *real;
		snprintf(entry, sizeof(entry), "%.*s", (int)len, e);
		const char *base = strrchr(entry, '/') ? strrchr(entry, '/') + 1 : entry;
		if (strstr(base, "faultnet") && strlen(base) < 256) {
			snprintf(names[k++], 256, "%s", base);
			snprintf(path, sizeof(path), "/proc/%d/root%s", (int)pid, entry);
			real = entry[0] == '/' ? realpath(path, NULL) : NULL;
			const char *rb = real ? strrchr(real, '/') + 1 : NULL;
			if (rb && strlen(rb) < 256 && strcmp(rb, base) != 0)
				snprintf(names[k++], 256, "%s", rb);
			free(real);
		}
		e += len + (e[len] != '\0');
	}
	return maps_any(pid, names, k);
}

/* faultctl marks itself to the shim (core/ctlmark.h): the note is read
 * from the program's own file, whatever it is named. */
static bool is_faultctl(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ElfW(Ehdr) eh;
	bool is = false;
	if (fd >= 0 && pread(fd, &eh, sizeof(eh), 0) == (ssize_t)sizeof(eh) &&
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 && eh.e_phentsize == sizeof(ElfW(Phdr)) &&
	    eh.e_phnum <= 64) {
		ElfW(Phdr) ph[64];
		size_t size = (size_t)eh.e_phnum * sizeof(ElfW(Phdr));
		bool ok = pread(fd, ph, size, (off_t)eh.e_phoff) == (ssize_t)size;
		for (int i = 0; ok && !is && i < eh.e_phnum; i++) {
			uint8_t notes[4096];
			size_t len =
			    ph[i].p_filesz < sizeof(notes) ? ph[i].p_filesz : sizeof(notes);
			ssize_t got = ph[i].p_type == PT_NOTE
					  ? pread(fd, notes, len, (off_t)ph[i].p_offset)
					  : -1;
			is = got > 0 && fn_ctlmark_find(notes, (size_t)got);
		}
	}
	if (fd >= 0)
		close(fd);
	return is;
}

static int cmp_pid(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
	return (x > y) - (x < y);
}

/* pid's number in its own pid namespace (the last of status's NSpid),
 * which names its file and its journal entries, and its effective uid;
 * 0 when it has gone. */
static pid_t own_pid(pid_t pid, uid_t *euid)
{
	size_t n;
	char *st = read_proc(pid, "status", &n);
	const char *line = st ? strstr(st, "\nNSpid:") : NULL;
	const char *uid = st ? strstr(st, "\nUid:") : NULL;
	unsigned long real, eff = (unsigned long)-1;
	if (!uid || sscanf(uid, "\nUid: %lu %lu", &real, &eff) != 2)
		line = NULL;
	*euid = (uid_t)eff;
	long inner = 0;
	if (line) {
		const char *end = strchr(line + 1, '\n'), *last = line + 7;
		for (const char *c = line + 7; c < (end ? end : st + n); c++)
			if (*c == '\t' || *c == ' ')
				last = c + 1;
		inner = strtol(last, NULL, 10);
	}
	free(st);
	return (pid_t)inner;
}

/* pid as a target, when it is an unjoined member. The cheapest tests
 * first: most processes are passed over by their owner or environment. */
static bool member(struct unjoined_scan *sc, pid_t pid, struct unjoined *t)
{
	char path[64];
	struct stat sb, ns;
	static pid_t self;
	static uid_t me;
	if (!self)
		self = getpid(), me = geteuid();
	if (pid <= 0 || pid == self ||
	    (sc->njoined && bsearch(&pid, sc->joined, (size_t)sc->njoined, sizeof(pid_t), cmp_pid)))
		return false;
	/* A member joins only a run directory of its own user's, so only
	 * faultctl's own user's processes are ever its members (root's too:
	 * another user's process naming root's run directory is not one). */
	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	if (stat(path, &sb) < 0 || sb.st_uid != me)
		return false;
	size_t n;
	char *env = read_proc(pid, "environ", &n);
	const char *g = env ? env_get(env, n, "FAULTNET_GROUP") : NULL;
	bool ok = env && wants_control(env, n) && (!set(g) || fn_group_valid(g));
	pid_t inner = 0;
	uid_t euid;
	if (ok) {
		snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)pid);
		inner = own_pid(pid, &euid);
		ok = inner > 0 && euid == me && stat(path, &ns) == 0 &&
		     same_rundir(sc->dir, pid, sb.st_uid, env, n) && shim_mapped(pid, env, n) &&
		     !is_faultctl(pid);
	}
	if (ok) {
		*t = (struct unjoined){.pid = pid};
		snprintf(t->group, sizeof(t->group), "%s", set(g) ? g : FN_GROUP_DEFAULT);
		t->id = (struct fn_member_id){
		    .pid = inner, .ns = (uint64_t)ns.st_ino, .start = fn_proc_start(pid)};
		ok =
		    t->id.start && fn_mem_path(t->path, sizeof(t->path), sc->dir, t->group, &t->id);
	}
	free(env);
	return ok;
}

bool unjoined_begin(struct unjoined_scan *sc, const char *dir, const pid_t *pids, int npids,
		    const pid_t *joined, int njoined)
{
	*sc = (struct unjoined_scan){.dir = dir, .joined = joined, .njoined = njoined};
	if (npids) {
		sc->pids = pids;
		sc->npids = npids;
		return true;
	}
	sc->proc = opendir("/proc");
	return sc->proc != NULL;
}

bool unjoined_next(struct unjoined_scan *sc, struct unjoined *t)
{
	while (sc->pids && sc->at < sc->npids)
		if (member(sc, sc->pids[sc->at++], t))
			return true;
	struct dirent *e;
	while (sc->proc && (e = readdir(sc->proc)))
		if (e->d_name[0] >= '1' && e->d_name[0] <= '9' &&
		    member(sc, (pid_t)atoi(e->d_name), t))
			return true;
	return false;
}

void unjoined_end(struct unjoined_scan *sc)
{
	if (sc->proc)
		closedir(sc->proc);
	sc->proc = NULL;
}

/* The policy file as faultctl can read it: from the process's root (a
 * container's own), a relative one from its working directory as it is
 * now (the shim made it absolute at start from the one it had then). */
static void config_of(pid_t pid, const char *v, char *out, size_t len)
{
	char path[4300], *abs = NULL;
	if (set(v)) {
		snprintf(path, sizeof(path), "/proc/%d/%s/%s", (int)pid,
			 v[0] == '/' ? "root" : "cwd", v);
		abs = realpath(path, NULL);
	}
	snprintf(out, len, "%s", abs ? abs : v ? v : "");
	free(abs);
}

struct fn_seg *unjoined_state(const struct unjoined *t, char *err, size_t len)
{
	size_t n, c;
	char *env = read_proc(t->pid, "environ", &n);
	char *cmd = env ? read_proc(t->pid, "cmdline", &c) : NULL;
	struct fn_seg *s =
	    cmd && fn_proc_start(t->pid) == t->id.start ? calloc(1, sizeof(*s)) : NULL;
	if (s) {
		struct fn_seg_head *h = &s->h;
		h->magic = FN_SEG_MAGIC;
		h->size = sizeof(*s);
		h->pid = t->id.pid; /* as it sees itself: its journal entries' name */
		h->start = t->id.start;
		h->pidns = t->id.ns;
		h->unjoined = 1;
		snprintf(h->group, sizeof(h->group), "%s", t->group);
		config_of(t->pid, env_get(env, n, "FAULTNET_CONFIG"), h->config, sizeof(h->config));
		const char *zone = env_get(env, n, "FAULTNET_ZONE");
		snprintf(h->start_zone, sizeof(h->start_zone), "%s", zone ? zone : "");
		snprintf(h->zone, sizeof(h->zone), "-");
		size_t k = c < sizeof(h->cmd) - 1 ? c : sizeof(h->cmd) - 1;
		memcpy(h->cmd, cmd, k);
		for (size_t i = 0; i + 1 < k; i++)
			if (!h->cmd[i])
				h->cmd[i] = ' ';
	} else {
		snprintf(err, len, "process %d has gone", (int)t->pid);
	}
	free(env);
	free(cmd);
	return s;
}

bool unjoined_in(const char *dir, const char *group)
{
	struct unjoined_scan sc;
	struct unjoined t;
	bool found = false;
	unjoined_begin(&sc, dir, NULL, 0, NULL, 0);
	while (!found && unjoined_next(&sc, &t))
		found = strcmp(t.group, group) == 0;
	unjoined_end(&sc);
	return found;
}
