/* init.c - the shim's start and its join. The start (before main) reads
 * the environment and checks the policy file: a bad one stops the process
 * with exit status 78 unless FAULTNET_ON_ERROR=passthrough asks to run
 * without faults. The join, at the first covered call, builds the policy
 * and joins the group. */
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "preload/dns/resolve.h"
#include "preload/dns/responder.h"
#include "preload/base/groupseq.h"
#include "preload/control/commands.h"
#include "core/clock.h"
#include "core/compiled.h"
#include "core/ctlmark.h"
#include "core/config.h"
#include "core/rundir.h"
#include "core/startdata.h"
#include "core/startmem.h"
#include "preload/control/control.h"
#include "preload/control/segfile.h"
#include "preload/base/libc.h"
#include "preload/dns/names.h"
#include "preload/base/owner.h"
#include "preload/intercept/intercept.h"
#include "preload/base/policy.h"
#include "preload/base/say.h"
#include "preload/fd/fdtab.h"
#include "core/chance.h"
#include "preload/relay/reinject.h"
#include "preload/relay/relay.h"
#include "preload/relay/relay_http.h"
#include "preload/sink/sink.h"
#include "preload/stats/stats.h"
#include "preload/tls/leaf.h"
#include "preload/tls/trust.h"

/* FAULTNET_ON_ERROR: "exit" (the default) or "passthrough". */
static bool passthrough_on_error(void)
{
	const char *v = secure_getenv("FAULTNET_ON_ERROR");
	if (!v || !*v || strcmp(v, "exit") == 0)
		return false;
	if (strcmp(v, "passthrough") == 0)
		return true;
	fn_say("faultnet: FAULTNET_ON_ERROR: '%s' is not one of exit, passthrough", v);
	_exit(FN_EXIT_CONFIG);
}

static void config_error(const char *msg, bool passthrough)
{
	fn_say("faultnet: %s", msg);
	if (!passthrough)
		_exit(FN_EXIT_CONFIG);
	fn_say("faultnet: FAULTNET_ON_ERROR=passthrough: running with no faults");
}

/* Makes FAULTNET_CONFIG absolute in the environment the process started
 * with. The entry is replaced in place, not with setenv: programs that pass
 * main's envp to their children (bash does) see the original array, which
 * setenv would leave behind. Returns the path to use. */
static const char *absolute_config(const char *path)
{
	static const char key[] = "FAULTNET_CONFIG=";
	char *abs = realpath(path, NULL);
	char *entry = abs ? malloc(sizeof(key) + strlen(abs)) : NULL;
	if (!entry) {
		free(abs);
		return path;
	}
	strcpy(stpcpy(entry, key), abs);
	free(abs);
	for (char **e = environ; e && *e; e++)
		if (strncmp(*e, key, sizeof(key) - 1) == 0) {
			*e = entry; /* kept for the process's life, as env strings are */
			return entry + sizeof(key) - 1;
		}
	free(entry);
	return path;
}

/* A policy whose compiled copy the run directory keeps, built at the
 * join; path NULL when the policy was loaded at start or there is none. */
static struct fn_compiled_src pending FN_START_DATA;
static uint64_t started_ns FN_START_DATA; /* when the start checked it */

/* A policy with no compiled copy, parsed at start. Out of line: its
 * message buffer would put check_policy's callees a page lower on the
 * stack (a page fault) at every start. */
static __attribute__((noinline)) void load_policy(const char *path, const char *zone,
						  bool passthrough)
{
	char err[1024];
	/* Parsed once per text, zone and build; later starts rebuild it from
	 * the run directory's compiled copy, without libconfig. */
	struct fn_policy *p = fn_compiled_load_file(path, zone, err, sizeof(err));
	if (!p)
		return config_error(err, passthrough);
	fn_cmd_set_base(path, zone);
	fn_policy_replace(p); /* replaces NULL: nothing to free */
}

/* At start: the policy checked. A text the run directory keeps compiled
 * was parsed and found good by an earlier start, so it is only read now
 * and built at the join; any other is loaded whole now, so that a bad file
 * still stops the process before main with its message. */
static void check_policy(bool passthrough)
{
	const char *path = secure_getenv("FAULTNET_CONFIG");
	const char *zone = secure_getenv("FAULTNET_ZONE");
	if (!path || !*path) {
		if (zone && *zone)
			config_error("FAULTNET_ZONE is set but FAULTNET_CONFIG is not: "
				     "zones are defined in the config file",
				     passthrough);
		return;
	}
	/* A relative path would break in every child that changes directory
	 * before it execs: children get the absolute one. */
	if (path[0] != '/')
		path = absolute_config(path);
	/* Copied (core/startmem.h: no malloc at start): the join and the
	 * state file use them after main, when a program that retitles itself
	 * may have written over the strings of its environment. */
	path = fn_start_strdup(path) ?: path;
	zone = zone ? fn_start_strdup(zone) ?: zone : NULL;
	started_ns = fn_now_ns_once();
	if (fn_compiled_pending(path, zone, &pending))
		return fn_cmd_set_base(path, zone);
	load_policy(path, zone, passthrough);
}

/* At the join: the policy checked at start built. Its copy gone or spoilt
 * meanwhile, the text is parsed; were that to fail (only a copy another
 * program of this account wrote could lead here) the process runs on
 * without faults, as it is past main. */
static void build_policy(void)
{
	if (!pending.blob && !pending.file)
		return;
	char err[1024];
	struct fn_policy *p = fn_compiled_load_src(&pending, err, sizeof(err));
	if (!p) {
		fn_say("faultnet: %s: running with no faults", err);
		return;
	}
	/* A rule's window (start_ms, for_ms) counts from the process's start,
	 * as it did when the policy was built there. */
	for (size_t i = 0; i < p->nrules; i++)
		if (p->rules[i].stat)
			__atomic_store_n(&p->rules[i].stat->enabled_ns, started_ns,
					 __ATOMIC_RELEASE);
	fn_policy_replace(p);
}

/* The change lock, then the fd limit lock: a child never starts with a
 * change half made or its soft fd limit left raised by another thread. */
static void before_fork(void)
{
	fn_groupseq_atfork_prepare();
	fn_fd_atfork_prepare();
}

static void after_fork_parent(void)
{
	fn_fd_atfork_parent();
	fn_groupseq_atfork_parent();
}

static void after_fork_child(void)
{
	fn_fd_atfork_child();
	fn_groupseq_atfork_child();
	fn_policy_atfork_child();
	fn_owner_reset();
	/* First: the parent's state is not the child's. Fresh memory holds no
	 * slot a parent thread was claiming; the walk of the parent's copy
	 * would touch 48 pages. */
	if (!fn_segfile_atfork_child())
		fn_stats_atfork_child();
	fn_sink_atfork_child();
	fn_relay_atfork_child();
	fn_reinject_atfork_child();
	fn_dns_responder_atfork_child();
	fn_resolve_async_atfork_child();
	fn_names_atfork_child();
	fn_control_atfork_child();
	fn_leaf_atfork_child();
	fn_trust_atfork_child();
}

static bool set(const char *var)
{
	const char *v = secure_getenv(var);
	return v && *v;
}

static bool has_work(void)
{
	return set("FAULTNET_CONFIG") || set("FAULTNET_GROUP") || set("FAULTNET_ZONE") ||
	       set("FAULTNET_EVENTS");
}

/* The process's first covered call (an IP socket, a connect, a name
 * looked up, a send): the policy built, the group joined. Runs under the
 * change lock, once (groupseq.c). */
static bool seed_given FN_START_DATA; /* FAULTNET_SEED, as the process started */

static void join(void)
{
	if (!seed_given)
		fn_seed_random();
	build_policy();
	fn_control_start();
}

/* faultctl's mark (core/ctlmark.h) among the main program's notes: the
 * first object the loader lists, whose load address it knows (a program
 * with no PT_PHDR too). */
static int mark_in_main(struct dl_phdr_info *info, size_t size, void *found)
{
	(void)size;
	for (int i = 0; i < info->dlpi_phnum && !*(bool *)found; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_NOTE)
			*(bool *)found = fn_ctlmark_find(
			    (const uint8_t *)(info->dlpi_addr + ph->p_vaddr), ph->p_memsz);
	}
	return 1; /* the main program only */
}

static bool started_as_faultctl(void)
{
	bool found = false;
	dl_iterate_phdr(mark_in_main, &found);
	return found;
}

/* glibc gives an ELF constructor main's arguments: the member's file
 * takes its command line from them (core/rundir.h: fn_self_cmd_note).
 * A start does only what must be known before main (a bad policy or
 * variable stops the process there) and leaves the rest to the join: a
 * process that makes no covered call (`true`, most of a shell script's
 * commands) pays little more than the library's load. */
__attribute__((constructor)) static void fn_init(int argc, char **argv)
{
	fn_libc_resolve();
	/* Nothing to do without a policy file or a group to take one from
	 * (and a setuid program sees neither): no thread, no fd, no file. */
	if (!has_work())
		return;
	/* faultctl marks itself: a faultctl started from a shimmed process
	 * must neither join the group nor become a target of its own change. */
	if (started_as_faultctl())
		return;
	fn_rundir_start(true);
	fn_owner_reset();
	fn_self_cmd_note(argc, argv);
	fn_names_init();
	pthread_atfork(before_fork, after_fork_parent, after_fork_child);
	bool passthrough = passthrough_on_error();
	seed_given = set("FAULTNET_SEED");
	const char *why = seed_given ? fn_seed_init() : NULL;
	if (why) {
		fn_say("faultnet: %s", why);
		_exit(FN_EXIT_CONFIG);
	}
	check_policy(passthrough);
	/* At start, not at the join: an inherited UDP socket's first receive
	 * (socket activation) may come before any covered call. Listed, not
	 * probed with one poll of every fd: poll runs each file's own poll
	 * (a FUSE file's asks its server, which may be this process's
	 * parent, waiting for it). */
	fn_fd_classify_inherited();
	fn_http_env_init();
	why = fn_events_open();
	if (why)
		fn_say("faultnet: FAULTNET_EVENTS: %s", why);
	bool fatal;
	if ((why = fn_reqlog_open(&fatal))) {
		fn_say("faultnet: %s", why);
		if (fatal)
			_exit(FN_EXIT_CONFIG);
	}
	if ((why = fn_control_check()))
		config_error(why, passthrough);
	fn_rundir_start(false);
	fn_groupseq_pend(join);
}
