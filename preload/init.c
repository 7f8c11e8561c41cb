/* init.c - the shim's start: reads the environment, loads the policy file
 * and publishes it before main runs. A bad file stops the process with exit
 * status 78 unless FAULTNET_ON_ERROR=passthrough asks to run without faults. */
#include <dlfcn.h>
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
#include "core/compiled.h"
#include "core/config.h"
#include "core/rundir.h"
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

static void load_policy(bool passthrough)
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
	char err[1024];
	/* Parsed once per text, zone and build; later starts rebuild it from
	 * the run directory's compiled copy, without libconfig. */
	struct fn_policy *p = fn_compiled_load_file(path, zone, err, sizeof(err));
	if (!p)
		return config_error(err, passthrough);
	/* A relative path would break in every child that changes directory
	 * before it execs: children get the absolute one. */
	if (path[0] != '/')
		path = absolute_config(path);
	fn_cmd_set_base(path, zone);
	fn_policy_replace(p); /* replaces NULL: nothing to free */
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

/* glibc gives an ELF constructor main's arguments: the member's file
 * takes its command line from them (core/rundir.h: fn_self_cmd_note). */
__attribute__((constructor)) static void fn_init(int argc, char **argv)
{
	fn_libc_resolve();
	/* Nothing to do without a policy file or a group to take one from
	 * (and a setuid program sees neither): no thread, no fd, no file. */
	if (!has_work())
		return;
	/* faultctl marks itself: a faultctl started from a shimmed process
	 * must neither join the group nor become a target of its own change.
	 * Asked only with work to do: a failed lookup costs a process with
	 * none ~8,000 instructions (the loader's error string). */
	if (dlsym(RTLD_DEFAULT, "faultnet_ctl_idle"))
		return;
	fn_owner_reset();
	fn_self_cmd_note(argc, argv);
	fn_names_init();
	pthread_atfork(before_fork, after_fork_parent, after_fork_child);
	bool passthrough = passthrough_on_error();
	const char *why = fn_seed_init();
	if (why) {
		fn_say("faultnet: %s", why);
		_exit(FN_EXIT_CONFIG);
	}
	load_policy(passthrough);
	fn_http_env_init();
	fn_fd_classify_inherited();
	why = fn_events_open();
	if (why)
		fn_say("faultnet: FAULTNET_EVENTS: %s", why);
	bool fatal;
	if ((why = fn_reqlog_open(&fatal))) {
		fn_say("faultnet: %s", why);
		if (fatal)
			_exit(FN_EXIT_CONFIG);
	}
	if ((why = fn_control_start()))
		config_error(why, passthrough);
}
