/* segread.c - a member's published state (core/segment.h) read from its
 * file: copied with pread rather than mapped, so that a file the app
 * truncates or replaces can never fault faultctl, and checked (ours, a
 * regular file, whole, this layout) before anything in it is believed. */
#include "ctl/state/segread.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool read_at(int fd, void *to, size_t len, off_t at)
{
	for (size_t done = 0; done < len;) {
		ssize_t n = pread(fd, (char *)to + done, len - done, at + (off_t)done);
		if (n <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			return false;
		}
		done += (size_t)n;
	}
	return true;
}

/* The parts of the first size bytes that hold data, read into to at their
 * offsets; the holes are left as they are in to (zero: a part is never a
 * hole again once written). The file is 2.5 MB of mostly holes, and on a
 * disk file system reading a hole fills the page cache with zeroed pages:
 * every member's whole file for each faultctl rules or stats. Where the
 * file system cannot tell holes apart, everything is data. */
static bool read_data(int fd, void *to, size_t size)
{
	const off_t end = (off_t)size;
	for (off_t at = 0; at < end;) {
		off_t data = lseek(fd, at, SEEK_DATA);
		if (data < 0 && errno == ENXIO) /* holes only, to the end of the file */
			return lseek(fd, 0, SEEK_END) >= end;
		if (data < 0)
			return read_at(fd, (char *)to + at, size - (size_t)at, at);
		if (data >= end)
			return true;
		off_t hole = lseek(fd, data, SEEK_HOLE);
		if (hole < 0 || hole > end)
			hole = end;
		if (!read_at(fd, (char *)to + data, (size_t)(hole - data), data))
			return false;
		at = hole;
	}
	return true;
}

/* The whole state, with its listing of rules read between two changes of
 * the policy (list_gen even and the same before and after), if one comes
 * within a few tries: a listing caught mid-change only shows a rule twice
 * or not at all, so the last try is kept either way. */
static bool read_whole(int fd, struct fn_seg *s)
{
	const off_t gen_at = (off_t)offsetof(struct fn_seg, h.list_gen);
	for (int tries = 0;; tries++) {
		uint64_t after;
		if (!read_data(fd, s, sizeof(*s)) || !read_at(fd, &after, sizeof(after), gen_at))
			return false;
		if ((after == s->h.list_gen && !(after & 1)) || tries == 3)
			return true;
	}
}

/* The file, open, if it may be believed; -1 with the reason in err. */
static int open_checked(const char *path, char *err, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	struct stat sb;
	const char *why = fd < 0		   ? strerror(errno)
			  : fstat(fd, &sb) < 0	   ? strerror(errno)
			  : !S_ISREG(sb.st_mode)   ? "not a regular file"
			  : sb.st_uid != geteuid() ? "not this user's"
			  : (sb.st_mode & 077)	   ? "open to other users"
			  : sb.st_size < (off_t)sizeof(struct fn_seg)
			      ? "shorter than a member's state"
			      : NULL;
	if (!why)
		return fd;
	snprintf(err, len, "%s: %s", path, why);
	if (fd >= 0)
		close(fd);
	return -1;
}

struct fn_seg *seg_read(const char *path, enum seg_part part, uint64_t since, char *err, size_t len)
{
	err[0] = '\0';
	int fd = open_checked(path, err, len);
	if (fd < 0)
		return NULL;
	/* calloc: what is not read stays zero, and pages never touched cost
	 * nothing. */
	struct fn_seg *s = calloc(1, sizeof(*s));
	bool ok = s && read_at(fd, &s->h, sizeof(s->h), 0);
	if (ok && (s->h.magic != FN_SEG_MAGIC || s->h.size != sizeof(*s))) {
		snprintf(err, len, "%s: not a member's state of this faultnet", path);
		ok = false;
	} else if (ok && part == SEG_WHOLE) {
		ok = read_whole(fd, s);
	} else if (ok && part == SEG_EVENTS) {
		/* Only the ring's entries after since: a follower reads every
		 * member often. */
		uint64_t head = s->h.ring_head, from = since;
		if (head - from > FN_SEG_EVENTS)
			from = head - FN_SEG_EVENTS;
		/* At most two runs of the ring: up to its end, then from its
		 * start. */
		while (ok && from < head) {
			uint64_t i = from % FN_SEG_EVENTS, run = FN_SEG_EVENTS - i;
			if (run > head - from)
				run = head - from;
			size_t at = offsetof(struct fn_seg, ring) + i * sizeof(struct fn_seg_event);
			ok = read_at(fd, (char *)s + at, run * sizeof(struct fn_seg_event),
				     (off_t)at);
			from += run;
		}
	}
	if (!ok && s && !err[0])
		snprintf(err, len, "%s: %s", path, "cut short while read");
	close(fd);
	if (!ok) {
		free(s);
		return NULL;
	}
	fn_seg_terminate(s, part == SEG_WHOLE);
	return s;
}

char *seg_stats_text(const char *path, char *err, size_t len)
{
	struct fn_seg *s = seg_read(path, SEG_WHOLE, 0, err, len);
	if (!s)
		return NULL;
	struct fn_buf b = {0};
	fn_seg_stats(s, &b);
	free(s);
	if (!b.s)
		fn_buf_add(&b, "", 1);
	return b.s;
}
