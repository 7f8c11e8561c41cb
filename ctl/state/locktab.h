/* locktab.h - the kernel's table of file locks (/proc/locks), read once
 * per listing: which process holds a lock on which file, by the pids of
 * faultctl's pid namespace (a lock whose holder that namespace cannot see
 * is not listed). faultctl reads it to find members of other namespaces
 * and to count a large group's members without probing each file. */
#ifndef FAULTCTL_LOCKTAB_H
#define FAULTCTL_LOCKTAB_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* One whole-file lock taken with flock(2). */
struct lock_entry {
	uint64_t ino;
	unsigned major, minor; /* of the file system's device */
	pid_t pid;
	bool exclusive;
};

struct locktab {
	struct lock_entry *v; /* sorted by inode */
	int n;
	bool tried;
	bool whole; /* every line read */
};

/* A line of the table into *e: true for a holder's flock line, false for
 * any other (a waiter's, a POSIX or OFD lock, a lease). */
bool locktab_parse(const char *line, struct lock_entry *e);

/* Reads the table's first most lines (0: all of it), once: a later call
 * reads it again only to have all of a table read in part. A table that
 * cannot be read is empty. The table lists every account's and every
 * container's locks: most bounds what a caller that needs only its own
 * pays on a host that holds many. */
void locktab_read(struct locktab *t, int most);

/* Whether pid holds an exclusive flock on the file (dev, ino). */
bool locktab_holds(const struct locktab *t, dev_t dev, uint64_t ino, pid_t pid);

void locktab_free(struct locktab *t);

#endif
