/* targets.c - faultctl's side of the control protocol: finding the live
 * members of a group or the processes named, and asking them (their state
 * files, or a faultctl run's socket). Changes are written by journal.c. */
#include "ctl/targets.h"

#include "core/edit.h"
#include "core/rundir.h"
#include "core/rules.h"
#include "ctl/check.h"
#include "ctl/state/locktab.h"
#include "ctl/state/segread.h"
#include "ctl/state/unjoined.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

/* "GROUP.PID.NS.START.mem" or "GROUP.PID.sock" */
static bool parse_name(const char *name, struct target *t)
{
	const char *ext;
	if (!fn_member_name(name, t->group, sizeof(t->group), &t->id, &ext) ||
	    strcmp(ext, ".done") == 0)
		return false;
	t->seg = strcmp(ext, ".mem") == 0;
	t->pid = t->id.pid;
	t->seen = true;
	return true;
}

/* Members in other pid namespaces than faultctl's, by the pids faultctl
 * sees them as: every process holding a file lock (the table of locks
 * lists those faultctl's /proc can see, by its pids) with its pid
 * namespace and its pid there (the last of /proc/PID/status's NSpid).
 * Read once per listing, and only when a member of another namespace is
 * met. */
struct nsmap {
	struct fn_member_id *v; /* pid: as faultctl sees it; start unused */
	int n;
	bool tried;
};

/* pid's namespace and its pid there into *m; false when it is gone. */
static bool ns_view(pid_t pid, struct fn_member_id *m)
{
	char path[64], line[256];
	struct stat sb;
	snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)pid);
	if (stat(path, &sb) < 0)
		return false;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "re");
	long inner = 0;
	while (f && fgets(line, sizeof(line), f))
		if (strncmp(line, "NSpid:", 6) == 0) {
			const char *p = strrchr(line, '\t');
			inner = strtol(p ? p + 1 : line + 6, NULL, 10);
		}
	if (f)
		fclose(f);
	*m = (struct fn_member_id){.pid = pid, .ns = (uint64_t)sb.st_ino, .start = (uint64_t)inner};
	return inner > 0;
}

static void nsmap_read(struct nsmap *m, struct locktab *locks)
{
	m->tried = true;
	locktab_read(locks, 0);
	m->v = locks->n ? calloc((size_t)locks->n, sizeof(*m->v)) : NULL;
	for (int i = 0; m->v && i < locks->n; i++)
		m->n += ns_view(locks->v[i].pid, &m->v[m->n]);
}

/* t's pid as faultctl sees it: its own where it shares faultctl's pid
 * namespace, else found in *m; else the pid it sees itself as, not
 * faultctl's (seen false: -p never names it). */
static void host_pid(struct target *t, struct nsmap *m, struct locktab *locks)
{
	static uint64_t own;
	if (!own)
		own = fn_pidns_self();
	if (!t->seg || !t->id.ns || t->id.ns == own)
		return;
	if (!m->tried)
		nsmap_read(m, locks);
	t->seen = false;
	for (int i = 0; i < m->n; i++)
		if (m->v[i].ns == t->id.ns && m->v[i].start == (uint64_t)t->id.pid) {
			t->pid = m->v[i].pid;
			t->seen = true;
			return;
		}
}

static bool selected(const struct selection *sel, const struct target *t)
{
	if (sel->npids) {
		for (int i = 0; i < sel->npids; i++)
			if (t->seen && sel->pids[i] == t->pid)
				return true;
		return false;
	}
	if (sel->group)
		return strcmp(sel->group, t->group) == 0;
	return sel->all || strcmp(t->group, "default") == 0;
}

static int connect_to(const char *path)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	struct timeval tv = {.tv_sec = 5};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/* A member is alive while it holds its file's lock (core/rundir.h:
 * fn_member_held), whatever pid namespace it or faultctl run in; a file no
 * process holds is kept as its .done (fn_member_gone). Opened without
 * waiting (a FIFO) and following a link (a file of FAULTNET_STATS_DIR). */
static bool seg_alive(const struct target *t)
{
	int fd = open(t->path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	struct stat sb;
	if (fd < 0 || fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode)) {
		if (fd >= 0 || errno != ENOENT) /* ENOENT: swept meanwhile */
			fprintf(stderr, "faultctl: %s: %s\n", t->path,
				fd < 0 ? strerror(errno) : "not a regular file");
		if (fd >= 0)
			close(fd);
		return false;
	}
	bool held = fn_member_held(fd);
	if (!held)
		fn_member_gone_if(t->path, fd); /* its counts kept as .done */
	close(fd);
	return held;
}

/* A socket nobody serves, whose process is gone, is removed. */
static bool alive(struct target *t)
{
	if (t->seg)
		return seg_alive(t);
	int fd = connect_to(t->path);
	if (fd >= 0) {
		close(fd);
		return true;
	}
	if (kill(t->pid, 0) < 0 && errno == ESRCH)
		unlink(t->path);
	return false;
}

/* Past this many members, a walk reads a table once instead of asking
 * each (below, and faultctl run's sockets). */
enum { LIVE_LISTING = 32 };

/* The state files of dir (any group's), counted with a walk of its names
 * alone; dir is walked again from its start after. */
static int state_files(DIR *d)
{
	int n = 0;
	for (struct dirent *e; (e = readdir(d));) {
		size_t len = strlen(e->d_name);
		n += len > 4 && strcmp(e->d_name + len - 4, ".mem") == 0;
	}
	rewinddir(d);
	return n;
}

/* The table of locks, for a directory of more than LIVE_LISTING state
 * files: one read of /proc/locks costs about a microsecond a lock, a probe
 * four system calls (a flip in a group of 4,096 took 40 ms of probes). It
 * lists the whole host's locks: read no further than 8 lines a state file,
 * past which it could cost more than the probes it saves. */
static void table_for(DIR *d, const struct stat *dir, struct locktab *locks)
{
	int files = dir->st_dev ? state_files(d) : 0;
	if (files > LIVE_LISTING)
		locktab_read(locks, files < (INT_MAX - 1024) / 8 ? 8 * files + 1024 : INT_MAX);
}

/* A state file counted alive from the table of locks, without a probe:
 * its file (device and inode, as listed) held exclusively by its own pid.
 * A member the table does not show that way (gone, a file of
 * FAULTNET_STATS_DIR, a pid namespace or file system where the two do not
 * match, a host whose other locks fill the lines read) is probed. */
static bool listed(const struct target *t, const struct dirent *e, const struct stat *dir,
		   const struct locktab *locks)
{
	return t->seg && t->seen && locks->n && locktab_holds(locks, dir->st_dev, e->d_ino, t->pid);
}

/* The processes alive now, read once from /proc: for a large group, one
 * listing instead of a kill(pid, 0) per member (about 5 us each on a
 * machine with costly system calls). Sorted, as /proc lists them. */
struct live {
	pid_t *pids;
	int n;
	bool tried;
};

static int cmp_pid(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
	return (x > y) - (x < y);
}

static void live_list(struct live *l)
{
	l->tried = true;
	DIR *d = opendir("/proc");
	if (!d)
		return;
	int cap = 0;
	bool sorted = true;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		if (l->n == cap) {
			pid_t *grown =
			    realloc(l->pids, (size_t)(cap ? 2 * cap : 1024) * sizeof(pid_t));
			if (!grown)
				break;
			l->pids = grown;
			cap = cap ? 2 * cap : 1024;
		}
		l->pids[l->n] = (pid_t)atoi(e->d_name);
		sorted = sorted && (l->n == 0 || l->pids[l->n - 1] < l->pids[l->n]);
		l->n++;
	}
	closedir(d);
	if (!sorted)
		qsort(l->pids, (size_t)l->n, sizeof(pid_t), cmp_pid);
}

/* The liveness of faultctl run's sockets without connecting: the first
 * are asked with kill(pid, 0); past
 * LIVE_LISTING of them, /proc is listed once, and a pid missing there is
 * asked before its file goes (it may have started since). A pid reused by
 * a process outside the shim counts until its file is next read. */

static bool exists(const struct target *t, struct live *l, int seen)
{
	if (seen >= LIVE_LISTING && !l->tried)
		live_list(l);
	if (l->n && bsearch(&t->pid, l->pids, (size_t)l->n, sizeof(pid_t), cmp_pid))
		return true;
	return kill(t->pid, 0) == 0 || errno == EPERM;
}

/* Appends t to *v (n of cap). Doubled, not grown by one: past glibc's
 * mmap threshold (about 220 targets) every realloc is an mremap, a system
 * call per member of a large group. */
static bool store(struct target **v, int *n, int *cap, const struct target *t)
{
	if (*n == *cap) {
		int more = *cap ? 2 * *cap : 16;
		struct target *grown = realloc(*v, (size_t)more * sizeof(**v));
		if (!grown)
			return false;
		*v = grown;
		*cap = more;
	}
	(*v)[(*n)++] = *t;
	return true;
}

static void set_path(struct target *t, const char *dir, size_t dirlen, const char *name, size_t len)
{
	memcpy(t->path, dir, dirlen);
	t->path[dirlen] = '/';
	memcpy(t->path + dirlen + 1, name, len + 1);
}

/* The pids of the members found by their files, for the walk of /proc
 * to pass over. */
struct pidset {
	pid_t *v;
	int n, cap;
};

static bool pidset_add(struct pidset *s, pid_t pid)
{
	if (s->n == s->cap) {
		int more = s->cap ? 2 * s->cap : 64;
		pid_t *grown = realloc(s->v, (size_t)more * sizeof(pid_t));
		if (!grown)
			return false;
		s->v = grown;
		s->cap = more;
	}
	s->v[s->n++] = pid;
	return true;
}

/* The members sel selects that have not joined yet (ctl/state/unjoined.h),
 * counted and stored as the walk of files does; false when out of
 * memory. */
static bool add_unjoined(const char *dir, const struct selection *sel, int keep, struct target **v,
			 int *n, int *cap, int *count, int *segs, struct pidset *pids)
{
	if (pids->n) /* qsort takes no NULL, even for no element */
		qsort(pids->v, (size_t)pids->n, sizeof(pid_t), cmp_pid);
	struct unjoined_scan sc;
	struct unjoined u;
	bool ok = true;
	unjoined_begin(&sc, dir, sel->pids, sel->npids, pids->v, pids->n);
	while (ok && unjoined_next(&sc, &u)) {
		struct target t = {
		    .pid = u.pid, .seen = true, .seg = true, .unjoined = true, .id = u.id};
		snprintf(t.group, sizeof(t.group), "%s", u.group);
		snprintf(t.path, sizeof(t.path), "%s", u.path);
		if (!selected(sel, &t))
			continue;
		bool keep_it = keep < 0 || *segs < keep;
		ok = !keep_it || store(v, n, cap, &t);
		*segs += keep_it;
		++*count;
	}
	unjoined_end(&sc);
	return ok;
}

/* Walks dir for sel's live targets: counts them all, and stores the
 * sockets and the first keep state files (keep < 0: all) in *out. A
 * target's path is written only when it is stored or its file removed:
 * for a group of thousands that is most of the walk's cost. */
int targets_count(const char *dir, const struct selection *sel, int keep, struct target **out,
		  int *stored, char *err, size_t errlen)
{
	DIR *d = opendir(dir);
	if (!d) {
		snprintf(err, errlen, "%s: %s", dir, strerror(errno));
		return -1;
	}
	struct target *v = NULL, t;
	struct live live = {0};
	struct nsmap ns = {0};
	struct locktab locks = {0};
	struct pidset pids = {0};
	struct stat dsb = {0};
	if (fstat(dirfd(d), &dsb) < 0)
		dsb.st_dev = 0; /* no table of locks then: each file probed */
	table_for(d, &dsb, &locks);
	int n = 0, cap = 0, seen = 0, count = 0, segs = 0;
	size_t dirlen = strlen(dir);
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t len = strlen(e->d_name);
		if (!parse_name(e->d_name, &t) || dirlen + 1 + len >= sizeof(t.path))
			continue;
		host_pid(&t, &ns, &locks);
		/* Any group's: the walk of /proc passes over a process with
		 * a file, whatever the selection. */
		if (t.seg && t.seen && !pidset_add(&pids, t.pid)) {
			snprintf(err, errlen, "%s: out of memory", dir);
			count = -1;
			break;
		}
		if (!selected(sel, &t))
			continue;
		bool keep_it = !t.seg || keep < 0 || segs < keep;
		set_path(&t, dir, dirlen, e->d_name, len);
		/* A socket is looked at by its pid alone when quick; a state
		 * file always by its lock: from the table read before the walk
		 * when only counted, by its file when kept (the table is a
		 * moment old, and what is kept is read or shown). */
		bool by_pid = sel->quick && !t.seg;
		bool live_now = by_pid ? exists(&t, &live, seen++)
				       : (!keep_it && listed(&t, e, &dsb, &locks)) || alive(&t);
		if (!live_now && by_pid)
			fn_member_gone(t.path);
		if (!live_now)
			continue;
		count++;
		if (keep_it && !store(&v, &n, &cap, &t)) {
			/* a partial list would be a change said to be in
			 * force in members nobody checked */
			snprintf(err, errlen, "%s: out of memory", dir);
			count = -1;
			break;
		}
		segs += keep_it && t.seg;
	}
	closedir(d);
	free(live.pids);
	free(ns.v);
	locktab_free(&locks);
	/* A group change (quick) walks /proc only when no member has joined:
	 * the walk costs about 2 us a process on the machine, and a flip must
	 * cost the same in a group of 4,096 as of 1. Those that have not
	 * joined apply it at their join all the same. */
	if (count >= 0 && (!sel->quick || count == 0) &&
	    !add_unjoined(dir, sel, keep, &v, &n, &cap, &count, &segs, &pids))
		snprintf(err, errlen, "%s: out of memory", dir), count = -1;
	free(pids.v);
	if (count < 0) {
		free(v);
		v = NULL, n = 0;
	}
	*out = v;
	*stored = n;
	return count;
}

int targets_find(const char *dir, const struct selection *sel, struct target **out, char *err,
		 size_t errlen)
{
	int stored;
	int n = targets_count(dir, sel, -1, out, &stored, err, errlen);
	return n < 0 ? n : stored;
}

static bool reply_complete(const struct fn_buf *b)
{
	if (!b->len || b->s[b->len - 1] != '\n')
		return false;
	if (strncmp(b->s, "ok", 2) == 0 || strncmp(b->s, "error", 5) == 0)
		return true;
	return b->len >= 4 && (strcmp(b->s + b->len - 4, "end\n") == 0) &&
	       (b->len == 4 || b->s[b->len - 5] == '\n');
}

/* The group's change counter (GROUP.seq beside the member's file): the
 * journal's entries up to it are in force, applied or not yet. */
static uint64_t seq_in_force(const struct target *t)
{
	char path[700];
	int dirlen = (int)(strrchr(t->path, '/') - t->path);
	snprintf(path, sizeof(path), "%.*s/%s.seq", dirlen, t->path, t->group);
	uint64_t seq = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd >= 0 && pread(fd, &seq, sizeof(seq), 0) != (ssize_t)sizeof(seq))
		seq = 0;
	if (fd >= 0)
		close(fd);
	return seq;
}

/* The member's policy with the changes in force that it has not applied
 * yet (it applies them at its next covered call); NULL when it is up to
 * date or the policy cannot be rebuilt (then its own listing stands). */
static struct fn_policy *in_force(const struct target *t, const struct fn_seg *s)
{
	uint64_t seq = seq_in_force(t);
	if (s->h.seq >= seq && !s->h.unjoined)
		return NULL;
	char journal[700], err[1200];
	int dirlen = (int)(strrchr(t->path, '/') - t->path);
	snprintf(journal, sizeof(journal), "%.*s/%s.journal", dirlen, t->path, t->group);
	return check_rebuild(&s->h, journal, seq, err, sizeof(err));
}

static void info_of(struct fn_seg *s, const struct fn_policy *p, struct fn_buf *reply)
{
	if (p) {
		s->h.nrules = (uint32_t)p->nrules;
		s->h.enabled = 0;
		for (size_t i = 0; i < p->nrules; i++)
			s->h.enabled += p->rules[i].enabled;
		snprintf(s->h.zone, sizeof(s->h.zone), "%s",
			 p->self_zone >= 0 ? p->zones[p->self_zone].name : "-");
	}
	fn_seg_info(s, reply);
}

struct fn_seg *targets_state(const struct target *t, enum seg_part part, uint64_t since, char *err,
			     size_t len)
{
	struct fn_seg *s = seg_read(t->path, part, since, err, len);
	/* Joined since it was found, or not yet. */
	if (!s && t->unjoined && access(t->path, F_OK) < 0 && errno == ENOENT) {
		struct unjoined u = {.pid = t->pid, .id = t->id};
		snprintf(u.group, sizeof(u.group), "%s", t->group);
		s = unjoined_state(&u, err, len);
	}
	return s;
}

/* A request answered from the member's file. */
static bool answer(const struct target *t, const char *line, struct fn_buf *reply)
{
	bool info = strcmp(line, "info") == 0, events = strcmp(line, "events") == 0;
	if (!info && !events && strcmp(line, "rules") != 0 && strcmp(line, "stats") != 0) {
		fn_buf_printf(reply,
			      "error process %d takes its changes from the group's journal\n",
			      (int)t->pid);
		return false;
	}
	char err[600];
	struct fn_seg *s = targets_state(t,
					 info	  ? SEG_HEAD
					 : events ? SEG_EVENTS
						  : SEG_WHOLE,
					 0, err, sizeof(err));
	if (!s) {
		fn_buf_printf(reply, "error %s\n", err);
		return false;
	}
	uint64_t since = 0;
	struct fn_policy *p = info || line[0] == 'r' ? in_force(t, s) : NULL;
	/* Shown as faultctl sees it (a member of another pid namespace knows
	 * only its pid there); the rebuild above used the member's own. */
	s->h.pid = t->pid;
	if (info)
		info_of(s, p, reply);
	else if (events)
		fn_seg_events(s, reply, &since);
	else if (line[0] == 'r' && p)
		fn_seg_rules_of(s, p, reply);
	else if (line[0] == 'r')
		fn_seg_rules(s, reply);
	else
		fn_seg_stats(s, reply);
	fn_policy_free(p);
	if (!info && line[0] != 'r')
		fn_buf_add(reply, "end\n", 4);
	free(s);
	return true;
}

bool targets_request(const struct target *t, const char *line, struct fn_buf *reply)
{
	if (t->seg)
		return answer(t, line, reply);
	int fd = connect_to(t->path);
	if (fd < 0) {
		fn_buf_printf(reply, "error cannot connect: %s\n", strerror(errno));
		return false;
	}
	size_t n = strlen(line);
	char *msg = malloc(n + 2);
	memcpy(msg, line, n);
	msg[n] = '\n';
	bool ok = send(fd, msg, n + 1, MSG_NOSIGNAL) == (ssize_t)(n + 1);
	free(msg);
	char buf[65536];
	ssize_t got;
	while (ok && !reply_complete(reply) && (got = recv(fd, buf, sizeof(buf), 0)) > 0)
		fn_buf_add(reply, buf, (size_t)got);
	close(fd);
	if (!reply_complete(reply)) {
		fn_buf_free(reply);
		fn_buf_printf(reply, "error no reply from process %d\n", (int)t->pid);
		return false;
	}
	return true;
}

/* One request to every target at once: every connection opened and the
 * line written before any reply is awaited, so that n processes answer in
 * about the time one does. Replies (or "error ..." lines) land in r[i]. */
void targets_request_all(const struct target *t, int n, const char *line, struct fn_buf *r)
{
	struct pollfd *p = calloc((size_t)n + 1, sizeof(*p));
	size_t len = strlen(line);
	char *msg = malloc(len + 2);
	if (!p || !msg) {
		for (int i = 0; i < n; i++)
			targets_request(&t[i], line, &r[i]);
		free(p);
		free(msg);
		return;
	}
	memcpy(msg, line, len);
	msg[len] = '\n';
	for (int i = 0; i < n; i++) {
		p[i].fd = t[i].seg ? -1 : connect_to(t[i].path);
		p[i].events = POLLIN;
		if (t[i].seg)
			answer(&t[i], line, &r[i]);
		else if (p[i].fd < 0)
			fn_buf_printf(&r[i], "error cannot connect: %s\n", strerror(errno));
		else if (send(p[i].fd, msg, len + 1, MSG_NOSIGNAL) != (ssize_t)(len + 1)) {
			fn_buf_printf(&r[i], "error cannot send: %s\n", strerror(errno));
			close(p[i].fd);
			p[i].fd = -1;
		}
	}
	struct timeval t0, now;
	gettimeofday(&t0, NULL);
	for (int open = n; open > 0;) {
		gettimeofday(&now, NULL);
		long left =
		    5000 - ((now.tv_sec - t0.tv_sec) * 1000 + (now.tv_usec - t0.tv_usec) / 1000);
		if (left <= 0 || poll(p, (nfds_t)n, (int)left) <= 0)
			break;
		open = 0;
		for (int i = 0; i < n; i++) {
			char buf[65536];
			ssize_t got;
			if (p[i].fd >= 0 && p[i].revents &&
			    ((got = recv(p[i].fd, buf, sizeof(buf), MSG_DONTWAIT)) <= 0 ||
			     (fn_buf_add(&r[i], buf, (size_t)got), reply_complete(&r[i])))) {
				close(p[i].fd);
				p[i].fd = -1;
			}
			open += p[i].fd >= 0;
		}
	}
	for (int i = 0; i < n; i++) {
		if (p[i].fd >= 0)
			close(p[i].fd);
		if (!reply_complete(&r[i])) {
			fn_buf_free(&r[i]);
			fn_buf_printf(&r[i], "error no reply from process %d\n", (int)t[i].pid);
		}
	}
	free(p);
	free(msg);
}

int targets_stream(const struct target *t, const char *line)
{
	int fd = connect_to(t->path);
	if (fd < 0)
		return -1;
	struct timeval none = {0};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof(none));
	char msg[128];
	int n = snprintf(msg, sizeof(msg), "%s\n", line);
	if (send(fd, msg, (size_t)n, MSG_NOSIGNAL) != n) {
		close(fd);
		return -1;
	}
	return fd;
}

bool targets_stopped(pid_t pid)
{
	char buf[512];
	const char *p = fn_proc_fields(pid, buf, sizeof(buf));
	return p && (p[1] == 'T' || p[1] == 't');
}
