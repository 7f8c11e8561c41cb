/* locktab.c - /proc/locks read into a table sorted by inode. A line reads
 * "ID: FLOCK  ADVISORY  WRITE PID MAJOR:MINOR:INODE START END" (device
 * numbers in hex); a waiter's line has "->" after its ID and holds
 * nothing. Parsed by hand: sscanf costs a microsecond a line, and a group
 * of 4,096 members is 4,096 lines. */
#include "ctl/state/locktab.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>

/* The next field of a line split by spaces: its start, *end past it. */
static const char *field(const char *p, const char **end)
{
	while (*p == ' ')
		p++;
	*end = p + strcspn(p, " \n");
	return p;
}

static bool is(const char *tok, const char *end, const char *word)
{
	size_t n = strlen(word);
	return (size_t)(end - tok) == n && memcmp(tok, word, n) == 0;
}

/* "ID:", the number a line of the table starts with. */
static bool is_id(const char *tok, const char *end)
{
	if (end - tok < 2 || end[-1] != ':')
		return false;
	for (const char *c = tok; c < end - 1; c++)
		if (*c < '0' || *c > '9')
			return false;
	return true;
}

bool locktab_parse(const char *line, struct lock_entry *e)
{
	const char *tok[6], *end[6], *p = line;
	for (int i = 0; i < 6; i++) {
		tok[i] = field(p, &end[i]);
		if (end[i] == tok[i])
			return false;
		p = end[i];
	}
	if (!is_id(tok[0], end[0]) || !is(tok[1], end[1], "FLOCK"))
		return false;
	char *q;
	long pid = strtol(tok[4], &q, 10);
	if (q != end[4] || pid <= 0)
		return false;
	unsigned long major = strtoul(tok[5], &q, 16);
	if (*q != ':')
		return false;
	unsigned long minor = strtoul(q + 1, &q, 16);
	if (*q != ':')
		return false;
	unsigned long long ino = strtoull(q + 1, &q, 10);
	if (q != end[5])
		return false;
	*e = (struct lock_entry){.ino = ino,
				 .major = (unsigned)major,
				 .minor = (unsigned)minor,
				 .pid = (pid_t)pid,
				 .exclusive = is(tok[3], end[3], "WRITE")};
	return true;
}

static int by_ino(const void *a, const void *b)
{
	uint64_t x = ((const struct lock_entry *)a)->ino, y = ((const struct lock_entry *)b)->ino;
	return (x > y) - (x < y);
}

/* The rest of a line longer than buf, read and dropped: a waiter's line
 * is indented by its depth, and its tail must not pass for a line. */
static void skip_rest(FILE *f, const char *buf)
{
	if (!strchr(buf, '\n'))
		for (int c; (c = getc(f)) != EOF && c != '\n';)
			;
}

void locktab_read(struct locktab *t, int most)
{
	if (t->tried && (t->whole || most))
		return;
	free(t->v);
	*t = (struct locktab){.tried = true};
	FILE *f = fopen("/proc/locks", "re");
	/* Each read(2) of the table holds the kernel's lock table for
	 * writing: a large buffer makes them few (stdio's own is 1 KiB). */
	static char big[64 << 10];
	if (f)
		setvbuf(f, big, _IOFBF, sizeof(big));
	char line[256];
	int cap = 0, lines = 0;
	struct lock_entry e;
	while (f && (!most || lines < most) && fgets(line, sizeof(line), f)) {
		lines++;
		bool holder = locktab_parse(line, &e);
		skip_rest(f, line);
		if (!holder)
			continue;
		if (t->n == cap) {
			int more = cap ? 2 * cap : 64;
			struct lock_entry *grown = realloc(t->v, (size_t)more * sizeof(*t->v));
			if (!grown)
				break;
			t->v = grown;
			cap = more;
		}
		t->v[t->n++] = e;
	}
	t->whole = f && feof(f);
	if (f)
		fclose(f);
	if (t->n)
		qsort(t->v, (size_t)t->n, sizeof(*t->v), by_ino);
}

bool locktab_holds(const struct locktab *t, dev_t dev, uint64_t ino, pid_t pid)
{
	int lo = 0, hi = t->n;
	while (lo < hi) { /* the first entry of ino */
		int mid = lo + (hi - lo) / 2;
		if (t->v[mid].ino < ino)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (int i = lo; i < t->n && t->v[i].ino == ino; i++) {
		const struct lock_entry *e = &t->v[i];
		if (e->exclusive && e->pid == pid && e->major == major(dev) &&
		    e->minor == minor(dev))
			return true;
	}
	return false;
}

void locktab_free(struct locktab *t)
{
	free(t->v);
	*t = (struct locktab){0};
}
