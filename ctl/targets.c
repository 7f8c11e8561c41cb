/* targets.c - discovery, requests and the group journal. */
#include "ctl/targets.h"

#include "core/rundir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

/* "GROUP.PID.sock" */
static bool parse_name(const char *name, struct target *t)
{
	size_t n = strlen(name);
	if (n < 7 || strcmp(name + n - 5, ".sock") != 0)
		return false;
	const char *end = name + n - 5, *p = end;
	while (p > name && p[-1] >= '0' && p[-1] <= '9')
		p--;
	if (p == end || p == name || p[-1] != '.' || (size_t)(p - 1 - name) >= sizeof(t->group))
		return false;
	memcpy(t->group, name, (size_t)(p - 1 - name));
	t->group[p - 1 - name] = '\0';
	t->pid = (pid_t)atoi(p);
	return true;
}

static bool selected(const struct selection *sel, const struct target *t)
{
	if (sel->npids) {
		for (int i = 0; i < sel->npids; i++)
			if (sel->pids[i] == t->pid)
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

/* A socket nobody serves, whose process is gone, is removed. */
static bool alive(const struct target *t)
{
	int fd = connect_to(t->path);
	if (fd >= 0) {
		close(fd);
		return true;
	}
	if (kill(t->pid, 0) < 0 && errno == ESRCH)
		unlink(t->path);
	return false;
}

/* Liveness without a connect: a group of thousands is listed in a few
 * milliseconds. A pid reused by a process outside the shim counts until
 * its socket is next probed. */
static bool exists(const struct target *t)
{
	if (kill(t->pid, 0) == 0 || errno == EPERM)
		return true;
	unlink(t->path);
	return false;
}

int targets_find(const char *dir, const struct selection *sel, struct target **out, char *err,
		 size_t errlen)
{
	DIR *d = opendir(dir);
	if (!d) {
		snprintf(err, errlen, "%s: %s", dir, strerror(errno));
		return -1;
	}
	struct target *v = NULL;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		struct target t;
		if (!parse_name(e->d_name, &t) || !selected(sel, &t))
			continue;
		snprintf(t.path, sizeof(t.path), "%s/%s", dir, e->d_name);
		if (sel->quick ? !exists(&t) : !alive(&t))
			continue;
		struct target *grown = realloc(v, (size_t)(n + 1) * sizeof(*v));
		if (!grown)
			break;
		v = grown;
		v[n++] = t;
	}
	closedir(d);
	*out = v;
	return n;
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

bool targets_request(const struct target *t, const char *line, struct fn_buf *reply)
{
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
		p[i].fd = connect_to(t[i].path);
		p[i].events = POLLIN;
		if (p[i].fd < 0)
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

static unsigned long long last_seq(const char *journal)
{
	FILE *f = fopen(journal, "re");
	unsigned long long seq = 0, s;
	char *line = NULL;
	size_t cap = 0;
	while (f && getline(&line, &cap, f) > 0)
		if (sscanf(line, "%llu ", &s) == 1 && s > seq)
			seq = s;
	free(line);
	if (f)
		fclose(f);
	return seq;
}

static bool write_entry(const char *journal, const char *text, bool truncate)
{
	char tmp[4200];
	snprintf(tmp, sizeof(tmp), "%s.new", journal);
	int fd = truncate ? open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)
			  : open(journal, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0)
		return false;
	/* One write, no fsync: members read the journal through the page
	 * cache the moment the counter moves. After a machine's crash a run
	 * directory on disk may keep a journal short of its last entries; the
	 * counter (G.seq) was never synced either, so fsync here bought no
	 * consistency, and it cost about 0.2 ms a change on this machine. */
	size_t n = strlen(text);
	bool ok = write(fd, text, n) == (ssize_t)n;
	ok = close(fd) == 0 && ok; /* where a late write error shows */
	return ok && (!truncate || rename(tmp, journal) == 0);
}

int journal_append(const char *dir, const char *group, const char *line, unsigned long long *seq,
		   char *err, size_t errlen)
{
	char lock[4200], journal[4200];
	snprintf(lock, sizeof(lock), "%s/%s.lock", dir, group);
	snprintf(journal, sizeof(journal), "%s/%s.journal", dir, group);
	int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0 || flock(fd, LOCK_EX) < 0) {
		snprintf(err, errlen, "%s: %s", lock, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	unsigned long long last = last_seq(journal);
	*seq = last + 1;
	/* faultctl writes one number after another from 1; anything near the
	 * top of the range was not written by it, and would wrap. */
	bool reset = strcmp(line, "reset") == 0;
	if (last >= (1ULL << 53) && reset)
		*seq = 1;
	else if (last >= (1ULL << 53)) {
		snprintf(err, errlen,
			 "%s: sequence number %llu was not written by faultctl; "
			 "'faultctl -g %s reset' starts the journal over",
			 journal, last, group);
		close(fd);
		return -1;
	}
	struct fn_buf entry = {0};
	fn_buf_printf(&entry, "%llu %s\n", *seq, line);
	/* A reset makes every earlier entry moot: start the journal over. */
	bool ok = entry.s && write_entry(journal, entry.s, reset);
	fn_buf_free(&entry);
	if (!ok) {
		snprintf(err, errlen, "%s: %s", journal, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

bool journal_drop(const char *dir, const char *group, unsigned long long seq)
{
	char journal[4200], *line = NULL;
	snprintf(journal, sizeof(journal), "%s/%s.journal", dir, group);
	FILE *f = fopen(journal, "re");
	struct fn_buf keep = {0};
	size_t cap = 0;
	bool found = false;
	while (f && getline(&line, &cap, f) > 0) {
		unsigned long long s;
		if (sscanf(line, "%llu ", &s) == 1 && s == seq) {
			/* The number stays, as a change no process applies: a
			 * number used again would be "already applied" wherever
			 * the refused change had been seen. */
			fn_buf_printf(&keep, "%llu refused\n", s);
			found = true;
		} else {
			fn_buf_add(&keep, line, strlen(line));
		}
	}
	free(line);
	if (f)
		fclose(f);
	bool ok = found && write_entry(journal, keep.s ? keep.s : "", true);
	fn_buf_free(&keep);
	return ok;
}

void journal_unlock(int lockfd)
{
	if (lockfd >= 0)
		close(lockfd);
}

bool targets_seq_store(const char *dir, const char *group, unsigned long long seq, char *err,
		       size_t errlen)
{
	char path[4200];
	fn_group_file(path, sizeof(path), dir, group, "seq");
	int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	uint64_t *w = fd >= 0 ? fn_seq_map(fd, true) : NULL;
	int e = errno;
	if (fd >= 0)
		close(fd);
	if (!w) {
		snprintf(err, errlen, "%s: %s", path, strerror(e));
		return false;
	}
	__atomic_store_n(w, (uint64_t)seq, __ATOMIC_RELEASE);
	munmap(w, FN_SEQ_FILE_SIZE);
	return true;
}

bool targets_stopped(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "re");
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
	if (f)
		fclose(f);
	buf[n] = '\0';
	/* "PID (COMM) STATE ...": COMM may hold anything, so the last ')'. */
	const char *p = strrchr(buf, ')');
	return p && (p[2] == 'T' || p[2] == 't');
}
