/* journal.c - the writer of a group's journal (GROUP.journal, under
 * GROUP.lock) and of its change counter (GROUP.seq): a change is appended
 * as "SEQ line", taken back as "SEQ refused" when it does not apply, and
 * put in force by storing SEQ in the counter every member maps. */
#include "ctl/journal.h"

#include "core/edit.h"
#include "core/rundir.h"
#include "core/wire.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <unistd.h>

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
	bool reset = fn_edit_is_reset(line);
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

bool journal_seq_store(const char *dir, const char *group, unsigned long long seq, char *err,
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
