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

bool locktab_parse(const char *line, struct lock_entry *e)
{
	const char *tok[6], *end[6], *p = line;
	for (int i = 0; i < 6; i++) {
		tok[i] = field(p, &end[i]);
		if (end[i] == tok[i])
			return false;
		p = end[i];
	}
	if (!is(tok[1], end[1], "FLOCK"))
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

void locktab_read(struct locktab *t)
{
	if (t->tried)
		return;
	t->tried = true;
	FILE *f = fopen("/proc/locks", "re");
	char line[256];
	int cap = 0;
	struct lock_entry e;
	while (f && fgets(line, sizeof(line), f)) {
		if (!locktab_parse(line, &e))
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
