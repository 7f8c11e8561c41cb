/* segfile.c - the member's published state (core/segment.h) as a file:
 * "GROUP.PID.NS.START.mem" in the run directory (core/rundir.h: the
 * member's id, unique across pid namespaces), mapped shared at one address
 * for the process's life, which faultctl reads without asking the process.
 * The process holds a lock on it while it lives (fn_member_held): taken
 * before the file has its name, kept by the mapping once the fd is closed.
 * With FAULTNET_STATS_DIR (faultctl run --stats, scenarios) the file is
 * "PID.NS.START.mem" there, and the run directory's name is a link to it,
 * so that the counts stay after the process has gone. At exit the run
 * directory's name becomes its ".done", kept FN_KEEP_S for faultctl stats.
 * A file appears whole: it is filled under a dot name and renamed into
 * place, and never truncated afterwards (a reader may be mapping it). */
#include "preload/control/segfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/rundir.h"
#include "core/startdata.h"
#include "core/startmem.h"
#include "preload/base/libc.h"
#include "preload/base/policy.h"
#include "preload/base/say.h"
#include "preload/stats/stats.h"

static void *mapped; /* the address, kept across fork: see the fork child */
static char run_path[4200];
static pid_t owner FN_START_DATA;
static int made_fd = -1; /* the file while it is being made */

/* The pages a new file is given at once: the head, the rule index and the
 * slots of a policy of up to 16 rules. */
#define FIRST_PAGES \
	((offsetof(struct fn_seg, rules) + 16 * sizeof(struct fn_seg_rule) + 4095) / 4096)

static void fill_head(struct fn_seg_head *h, const struct fn_member_id *me, const char *group,
		      const char *config, const char *zone, uint64_t seq)
{
	h->size = sizeof(struct fn_seg);
	h->pid = me->pid;
	h->start = me->start;
	h->pidns = me->ns;
	h->seq = seq;
	snprintf(h->group, sizeof(h->group), "%s", group);
	snprintf(h->config, sizeof(h->config), "%s", config ? config : "");
	snprintf(h->start_zone, sizeof(h->start_zone), "%s", zone ? zone : "");
	size_t len = fn_self_cmd(h->cmd, sizeof(h->cmd));
	for (size_t i = 0; i + 1 < len; i++)
		if (!h->cmd[i])
			h->cmd[i] = ' ';
}

/* A new file of the segment's size under the dot name of final, mapped at
 * the segment's address (any, the first time). NULL with errno. */
static struct fn_seg *map_new(const char *tmp, const char *final)
{
	int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 && errno == EEXIST) {
		unlink(tmp); /* ours: left by this pid's image before an exec */
		fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	}
	if (fd < 0)
		return NULL;
	/* The member's liveness, whatever pid namespace the reader is in: the
	 * lock belongs to this open file, which the shared mapping keeps open
	 * after the fd is closed, until exit or exec. A new file: no one else
	 * can hold it. */
	if (flock(fd, LOCK_EX | LOCK_NB) < 0)
		fn_say("faultnet: %s: no lock (%m): faultctl will take this process for gone",
		       final);
	void *m = MAP_FAILED;
	struct stat sb;
	/* The blocks of the head, the rule index and the first rule slots
	 * first, in one write: the head is written at once, and a start's
	 * listing writes in the index and those slots; every other page gets
	 * its own when first touched (fn_seg_touch). Written as zeros (nothing
	 * maps the file yet): a disk file system reserves the blocks and
	 * keeps the page, where fallocate allocated them and the first write
	 * through the mapping read the page in. */
	static const char zeros[FIRST_PAGES * 4096] FN_FAR_RODATA;
	ssize_t w = pwrite(fd, zeros, sizeof(zeros), 0);
	int got = w == (ssize_t)sizeof(zeros) ? 0 : -1;
	if (w >= 0 && got < 0)
		errno = ENOSPC; /* a short write: no room for the rest */
	if (got == 0 && ftruncate(fd, sizeof(struct fn_seg)) == 0 && fstat(fd, &sb) == 0)
		m = mmap(mapped, sizeof(struct fn_seg), PROT_READ | PROT_WRITE,
			 MAP_SHARED | (mapped ? MAP_FIXED : 0), fd, 0);
	int e = errno;
	if (m != MAP_FAILED) {
		fn_stats_backing(final, (unsigned long)sb.st_ino, m, FIRST_PAGES);
		made_fd = fd;
		fn_stats_backing_fd(fd); /* until it has its name */
	} else {
		LIBC(close)(fd);
	}
	/* No read-ahead: the file is all holes, and on a disk file system
	 * the first touch of a page would otherwise read and zero a large
	 * folio around it (ext4: 1.1 of the 2.3 ms the shim added to the
	 * start of true). Only the pages written are wanted. */
	if (m != MAP_FAILED)
		madvise(m, sizeof(struct fn_seg), MADV_RANDOM);
	if (m == MAP_FAILED) {
		unlink(tmp);
		errno = e;
		return NULL;
	}
	return m;
}

/* FAULTNET_STATS_DIR as the process started (fn_segfile_note_env): its
 * file is made at its join, after main, when the app may have cleared its
 * environment. */
static const char *stats_dir FN_START_DATA;

void fn_segfile_note_env(void)
{
	const char *v = secure_getenv("FAULTNET_STATS_DIR");
	/* Copied (a static buffer was a page of its own); the variable
	 * itself, were memory short. */
	stats_dir = v && *v ? fn_start_strdup(v) ?: v : NULL;
}

/* The file's place: the run directory, or the stats directory with a link
 * from the run directory. tmp and final name the file itself. */
static bool places(const char *rundir, const char *group, const struct fn_member_id *me, char *tmp,
		   char *final, size_t len)
{
	if (!fn_mem_path(run_path, sizeof(run_path), rundir, group, me))
		return false;
	const char *stats = stats_dir;
	const char *base = strrchr(run_path, '/') + 1 + strlen(group) + 1; /* "PID.NS.START.mem" */
	if (stats) {
		snprintf(final, len, "%s/%s", stats, base);
		snprintf(tmp, len, "%s/.%s.new", stats, base);
	} else {
		snprintf(final, len, "%s", run_path);
		snprintf(tmp, len, "%s/.%s.%s.new", rundir, group, base);
	}
	return true;
}

static bool put_in_place(const char *tmp, const char *final)
{
	if (rename(tmp, final) < 0) {
		unlink(tmp);
		return false;
	}
	if (strcmp(final, run_path) == 0)
		return true;
	unlink(run_path);
	/* A hard link where both are on one file system, else a symbolic
	 * one (faultctl follows it and checks what it reaches). */
	return link(final, run_path) == 0 || symlink(final, run_path) == 0;
}

const char *fn_segfile_create(const char *rundir, const char *group, const char *config,
			      const char *zone, uint64_t seq)
{
	char tmp[4300], final[4300];
	/* Asked once: each asking costs a getpid. */
	const struct fn_member_id *me = fn_self_id();
	if (!places(rundir, group, me, tmp, final, sizeof(final)))
		return "the run directory's path is too long";
	struct fn_seg *s = map_new(tmp, final);
	if (!s)
		return strerror(errno);
	mapped = s;
	fill_head(&s->h, me, group, config, zone, seq);
	/* Sequentially consistent, as fn_stats_socket_first(): a socket
	 * created meanwhile is seen here or written into the new file. */
	__atomic_store_n(&fn_seg, s, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&fn_sockets_seen, __ATOMIC_SEQ_CST))
		s->h.sockets_seen = 1;
	struct fn_policy_hold h;
	fn_stats_list(fn_policy_enter(&h), true);
	fn_policy_exit(&h);
	__atomic_store_n(&s->h.magic, FN_SEG_MAGIC, __ATOMIC_RELEASE);
	bool placed = put_in_place(tmp, final);
	int e = errno;
	fn_stats_backing_fd(-1); /* by its name from now on */
	LIBC(close)(made_fd);
	made_fd = -1;
	if (!placed)
		return strerror(e);
	owner = me->pid;
	return NULL;
}

bool fn_segfile_atfork_child(void)
{
	fn_stats_backing(NULL, 0, NULL, 0); /* the parent's file is not the child's */
	/* The parent's file is the parent's: the child counts in private
	 * memory at the same address (every pointer into it stays good) until
	 * it makes a file of its own. If that memory cannot be had, it counts
	 * on in the parent's file: a wrong count, never a fault. */
	return mapped && mmap(mapped, sizeof(struct fn_seg), PROT_READ | PROT_WRITE,
			      MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != MAP_FAILED;
}

__attribute__((destructor)) static void fn_segfile_remove(void)
{
	/* The run directory's name becomes its .done, which faultctl -g
	 * GROUP stats still counts for FN_KEEP_S; a stats directory's file
	 * stays for faultctl run --stats. A fork child that made no file of
	 * its own must not touch its parent's. */
	if (owner && owner == getpid())
		fn_member_gone(run_path);
}
