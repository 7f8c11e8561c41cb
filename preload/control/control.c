/* control.c - a process joins its group: the group's change counter mapped
 * (every covered call follows the group's changes from then on), the
 * journal replayed, and the member's state published in a file of the run
 * directory (segfile.c) that faultctl reads. No thread, socket or fd of the
 * shim's stays behind for any of it. */
#include "preload/control/control.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/rules.h"
#include "core/rundir.h"
#include "core/startdata.h"
#include "core/startmem.h"
#include "preload/base/groupseq.h"
#include "preload/base/libc.h"
#include "preload/base/say.h"
#include "preload/control/commands.h"
#include "preload/control/segfile.h"

/* The run directory ("" without control), on the heap once found; the
 * group's name. */
static const char *rundir FN_START_DATA = "";
static char group[FN_NAME_MAX] FN_START_DATA;
static bool publishing FN_START_DATA; /* FAULTNET_CONTROL is not off: the file is wanted */

/* A sweep at most this often per run directory: a start must cost the
 * same in a group of 10 or 10,000 members. */
#define SWEEP_EVERY_S 10

/* True when no process has swept the run directory for SWEEP_EVERY_S
 * (its stamp, .sweep, is older or missing); the stamp is then renewed, so
 * that the processes starting after this one skip the sweep. */
static bool sweep_due(void)
{
	char path[4200];
	struct stat st;
	struct timespec now;
	snprintf(path, sizeof(path), "%s/.sweep", rundir);
	clock_gettime(CLOCK_REALTIME, &now);
	if (lstat(path, &st) == 0 && S_ISREG(st.st_mode) &&
	    now.tv_sec - st.st_mtim.tv_sec < SWEEP_EVERY_S && st.st_mtim.tv_sec <= now.tv_sec)
		return false;
	int fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd >= 0) {
		futimens(fd, NULL);
		LIBC(close)(fd);
	}
	return true;
}

/* Keeps the member file at path as its .done when no live process holds
 * it (core/rundir.h: fn_member_held). Opened without waiting (a FIFO put
 * there by the user would block) and following a link (the run
 * directory's name of a file in FAULTNET_STATS_DIR). */
static void sweep_one(const char *path)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return;
	struct stat sb;
	if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && !fn_member_held(fd))
		fn_member_gone_if(path, fd);
	LIBC(close)(fd);
}

/* A process that ends with _exit (most fork children do), or is killed,
 * leaves its file behind. A process that starts (not a fork child, which
 * must stay cheap) keeps those no live process holds as their ".done"
 * (their counts) and removes those kept past FN_KEEP_S, before main, when
 * no other has done so lately (sweep_due): they never pile up, and a start
 * does not pay a look per member of the run directory each time. Liveness
 * is the file's lock, never the pid: from inside a pid namespace every
 * process outside it looks gone. For the same reason the ".sock" of a
 * faultctl run (named by its pid) is left to faultctl, which connects to
 * it. faultctl removes dead members' files too whenever it lists a
 * group. */
static void sweep_dead(void)
{
	if (!sweep_due())
		return;
	DIR *d = opendir(rundir);
	struct dirent *e;
	time_t now = time(NULL);
	while (d && (e = readdir(d))) {
		char path[4400], g[FN_NAME_MAX];
		struct fn_member_id id;
		const char *ext;
		snprintf(path, sizeof(path), "%s/%s", rundir, e->d_name);
		if (fn_member_name(e->d_name, g, sizeof(g), &id, &ext) &&
		    strcmp(ext, ".mem") == 0) {
			sweep_one(path);
		} else {
			fn_done_expire(rundir, e->d_name, now);
		}
	}
	if (d)
		closedir(d);
}

static void publish_state(void)
{
	const char *why = fn_segfile_create(rundir, group, fn_cmd_base_config(), fn_cmd_base_zone(),
					    fn_cmd_applied());
	if (why)
		fn_say("faultnet: faultctl cannot see this process: %s/%s.%d.*.mem: %s", rundir,
		       group, (int)getpid(), why);
}

/* A fork child publishes its state from its first covered call on, not
 * from fork: a child that only execs or _exits (a shell, a prefork pool's
 * idle worker) makes no file. */
static bool child_pending;

/* Runs under the change lock, at a covered call that found the group's
 * counter moved (or the fork child's deferral: fn_groupseq_defer). */
static void catch_up_live(void)
{
	fn_cmd_catch_up();
	if (child_pending) {
		child_pending = false;
		publish_state();
	}
}

/* Maps the group's change counter: from now on every covered call of this
 * process follows the group's changes. */
static void attach_seq(void)
{
	char path[4200];
	fn_group_file(path, sizeof(path), rundir, group, "seq");
	int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	const uint64_t *w = fd >= 0 ? fn_seq_map(fd, false) : NULL;
	if (fd >= 0)
		LIBC(close)(fd);
	if (w)
		fn_groupseq_attach(w, catch_up_live);
	else
		fn_say("faultnet: %s: %m: this process does not follow the group's changes", path);
}

const char *fn_control_check(void)
{
	const char *g = secure_getenv("FAULTNET_GROUP");
	if (g && *g && !fn_group_valid(g))
		return "FAULTNET_GROUP: a group name is 1 to 63 letters, digits or _.:-";
	const char *ctl = secure_getenv("FAULTNET_CONTROL");
	if (ctl && *ctl && strcmp(ctl, "on") != 0 && strcmp(ctl, "off") != 0)
		return "FAULTNET_CONTROL: must be on or off";
	/* valid: it fits; memcpy, which a start has called already, not
	 * strcpy, one more first call */
	const char *name = g && *g ? g : FN_GROUP_DEFAULT;
	memcpy(group, name, strlen(name) + 1);
	fn_segfile_note_env();
	char dir[4096];
	const char *why = fn_rundir(dir, sizeof(dir));
	if (!why && !(rundir = fn_start_strdup(dir)))
		why = "cannot be kept: out of memory";
	if (why) {
		fn_say("faultnet: control disabled: run directory %s %s", dir, why);
		rundir = "";
		return NULL;
	}
	/* FAULTNET_CONTROL=off: the group's changes, but no file: faultctl
	 * neither lists nor counts the process. */
	publishing = !(ctl && strcmp(ctl, "off") == 0);
	return NULL;
}

/* Set once the process has joined: a fork child of a process that has
 * not joins at its own first covered call, as its parent would. */
static bool joined;

void fn_control_start(void)
{
	if (!rundir[0])
		return;
	char journal[4200];
	fn_group_file(journal, sizeof(journal), rundir, group, "journal");
	fn_cmd_set_group(group, journal);
	attach_seq();
	joined = true;
	if (publishing)
		sweep_dead();
	/* A counter still at 0: the group has had no change, so there is no
	 * journal to replay (an open refused at every start). faultctl moves
	 * the counter once a line is written, and this process catches up at
	 * its next covered call when it sees it move, as every member does. */
	if (!fn_groupseq_word || __atomic_load_n(fn_groupseq_word, __ATOMIC_ACQUIRE))
		fn_cmd_catch_up();
	if (publishing)
		publish_state();
}

/* A counter that never moves: a fork child of a member whose group's
 * counter could not be mapped catches up once, at its first covered call,
 * as every fork child does (never in the fork handler, where a parent
 * thread may have left the allocator's lock held). */
static const uint64_t unmoving;

void fn_control_atfork_child(void)
{
	if (!publishing || !joined)
		return;
	if (!fn_groupseq_word)
		fn_groupseq_attach(&unmoving, catch_up_live);
	child_pending = true;
	fn_groupseq_defer();
}
