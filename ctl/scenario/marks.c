/* marks.c - the app's own moments on a scenario's timeline (its failover,
 * its failback): `faultctl mark NAME` appends "NS NAME" (CLOCK_MONOTONIC
 * nanoseconds) to the group's GROUP.marks in the run directory, which a
 * running scenario creates and removes; and a line NAME written to the
 * file the scenario's marks_file names (FAULTNET_MARKS for the command) is
 * a mark at the moment the scenario reads it. Both are read as they grow.
 * GROUP.marks opens with "pid PID START", the scenario's, so that the file
 * of a scenario killed before it could remove it takes no mark. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/rundir.h"
#include "ctl/scenario/scenario.h"

/* A mark's name: 1 to SC_NAME - 1 printable characters, no newline. */
static bool name_valid(const char *name)
{
	size_t n = strlen(name);
	if (n == 0 || n >= SC_NAME)
		return false;
	for (; *name; name++)
		if ((unsigned char)*name < 0x20 || *name == 0x7f)
			return false;
	return true;
}

/* Whether the scenario whose header the file at fd has still runs. */
static bool owner_alive(int fd, int *pid)
{
	char head[64];
	ssize_t n = pread(fd, head, sizeof(head) - 1, 0);
	unsigned long long start = 0;
	*pid = 0;
	head[n > 0 ? n : 0] = '\0';
	if (sscanf(head, "pid %d %llu", pid, &start) != 2 || *pid <= 0)
		return false;
	return (kill(*pid, 0) == 0 || errno == EPERM) && fn_proc_start(*pid) == start;
}

bool sc_marks_owned(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW), pid;
	if (fd < 0)
		return false;
	bool alive = owner_alive(fd, &pid);
	close(fd);
	return alive;
}

int sc_mark_write(const char *group, const char *name, char *err, size_t len)
{
	char dir[4096], path[4400], line[SC_NAME + 32];
	const char *why = fn_rundir(dir, sizeof(dir));
	if (why)
		return snprintf(err, len, "run directory: %s", why), 1;
	if (!name_valid(name))
		return snprintf(err, len, "mark: a name is 1 to %d printable characters",
				SC_NAME - 1),
		       2;
	fn_group_file(path, sizeof(path), dir, group, "marks");
	/* No O_CREAT: only a running scenario's file takes a mark, so that a
	 * misspelt group is said, not written where nobody reads. */
	int fd = open(path, O_RDWR | O_APPEND | O_CLOEXEC | O_NOFOLLOW), pid;
	if (fd < 0)
		return snprintf(err, len,
				"mark: no scenario is running in group '%s' (%s: %s); give its "
				"group with -g",
				group, path, strerror(errno)),
		       1;
	if (!owner_alive(fd, &pid)) {
		close(fd);
		return snprintf(err, len,
				"mark: no scenario is running in group '%s': the one of %s "
				"(pid %d) has gone",
				group, path, pid),
		       1;
	}
	int n = snprintf(line, sizeof(line), "%llu %s\n", (unsigned long long)fn_now_ns(), name);
	ssize_t w = write(fd, line, (size_t)n); /* O_APPEND: one line, whole */
	int saved = errno;
	close(fd);
	if (w != n)
		return snprintf(err, len, "mark: %s: %s", path, strerror(w < 0 ? saved : EIO)), 1;
	return 0;
}

static void add_mark(struct scenario *s, int64_t t_ms, const char *name, bool by_ctl)
{
	if (s->nmarks == s->capmarks) {
		int cap = s->capmarks ? s->capmarks * 2 : 16;
		struct sc_mark *v = realloc(s->marks, (size_t)cap * sizeof(*v));
		if (!v)
			return;
		s->marks = v;
		s->capmarks = cap;
	}
	struct sc_mark *m = &s->marks[s->nmarks++];
	m->t_ms = t_ms;
	m->by_ctl = by_ctl;
	snprintf(m->name, sizeof(m->name), "%s", name);
}

/* One whole line of a source: "NS NAME" from faultctl mark, else NAME. */
static void take_line(struct scenario *s, struct sc_marks_src *src, char *line, int64_t t0_ns,
		      int64_t now)
{
	line[strcspn(line, "\r")] = '\0';
	if (!line[0])
		return;
	if (src->by_ctl) {
		char *name;
		unsigned long long ns = strtoull(line, &name, 10);
		if (*name == ' ' && name_valid(name + 1))
			add_mark(s, ((int64_t)ns - t0_ns) / 1000000, name + 1, true);
		return;
	}
	add_mark(s, now, line, false);
}

void sc_marks_poll(struct scenario *s, struct sc_marks_src *src, int64_t t0_ns, int64_t now)
{
	if (!src->path[0])
		return;
	int fd = open(src->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return; /* the app has not written it yet */
	char buf[4096];
	ssize_t n;
	while ((n = pread(fd, buf, sizeof(buf), src->off)) > 0) {
		src->off += n;
		for (ssize_t i = 0; i < n; i++) {
			if (buf[i] != '\n') {
				if (src->len < sizeof(src->line) - 1)
					src->line[src->len++] = buf[i];
				continue; /* a longer line is cut at SC_NAME later */
			}
			src->line[src->len] = '\0';
			take_line(s, src, src->line, t0_ns, now);
			src->len = 0;
		}
	}
	close(fd);
}
