/* faultctl.c - the faultnet command line, in the style of ip(8): options,
 * a verb, its arguments. It checks policy files, runs commands under the
 * shim, reads the state running processes publish, and changes their
 * policies through their group's journal. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/file.h>
#include <fcntl.h>
#include <unistd.h>

#include "core/compiled.h"
#include "core/config.h"
#include "core/ctlmark.h"
#include "core/rundir.h"
#include "ctl/scenario/scenario.h"
#include "ctl/state/render.h"
#include "ctl/run.h"
#include "ctl/requests.h"
#include "ctl/change.h"
#include "ctl/state/segread.h"
#include "ctl/targets.h"
#include "ctl/state/unjoined.h"
#include "ctl/bundle.h"
#include "ctl/container.h"

#ifndef FN_VERSION
#define FN_VERSION "unknown"
#endif

/* Every verb, once: its name, its arguments and what it does. The usage
 * text, `faultctl VERB --help`, `faultctl help --verbs` (read by the shell
 * completions and the man page check) and the dispatch in main() all go by
 * this table, so a verb cannot be added to one and missed by another. */
enum verb_kind {
	V_OWN,	  /* parses its own arguments (run, check, scenario) */
	V_QUERY,  /* reads the members' published state */
	V_CHANGE, /* journaled and put in force by the group's counter */
};
struct opts;
struct verb {
	const char *name, *args, *what;
	enum verb_kind kind;
	int (*own)(struct opts *o, int argc, char **argv);
};
static int verb_check(struct opts *o, int argc, char **argv);
static int verb_scenario(struct opts *o, int argc, char **argv);
static int verb_run(struct opts *o, int argc, char **argv);
static int verb_help(struct opts *o, int argc, char **argv);
static int verb_gc(struct opts *o, int argc, char **argv);
static int verb_mark(struct opts *o, int argc, char **argv);
static int verb_requests(struct opts *o, int argc, char **argv);
static int verb_bundle(struct opts *o, int argc, char **argv);
static int verb_docker(struct opts *o, int argc, char **argv);
static int verb_compose(struct opts *o, int argc, char **argv);
static const struct verb verbs[] = {
    {"check", "FILE", "validate a policy or scenario file", V_OWN, verb_check},
    {"scenario", "FILE [--report DIR] [--strict] [-- CMD [ARG...]]",
     "run a timed fault plan with probes; report", V_OWN, verb_scenario},
    {"run",
     "[--config FILE] [--zone Z] [-g GROUP] [--stats] [--requests FILE] [--strict] "
     "[--allow-unreached] [--ca-vars] "
     "[--backend=shim|bpf|auto] -- CMD [ARG...]",
     "run a command under the shim", V_OWN, verb_run},
    {"ps", "", "processes under the shim", V_QUERY, NULL},
    {"rules", "", "rules with their state, faults and attempts (or requests)", V_QUERY, NULL},
    {"stats", "", "attempts, requests and faults per rule and destination", V_QUERY, NULL},
    {"events", "[--follow]", "connection attempts and faults, one a line", V_QUERY, NULL},
    {"requests",
     "[--rule NAME] [--host GLOB] [--status N] [--follow | --per-call[=HEADER] | --har OUT] "
     "FILE",
     "the request log (FAULTNET_REQUESTS): listed, followed, per call, or as HAR", V_OWN,
     verb_requests},
    {"enable", "NAME", "switch a rule on", V_CHANGE, NULL},
    {"disable", "NAME", "switch a rule off", V_CHANGE, NULL},
    {"add", "[--first] 'RULE'", "add a rule (config file syntax, one entry)", V_CHANGE, NULL},
    {"rm", "NAME", "remove a rule", V_CHANGE, NULL},
    {"load", "FILE", "replace every rule at once", V_CHANGE, NULL},
    {"zone", "ZONE", "retag the processes' zone", V_CHANGE, NULL},
    {"reset", "", "back to the config file (counters go on)", V_CHANGE, NULL},
    {"bundle", "[check ROOT]",
     "the self-contained bundle for containers; check: can it run in ROOT", V_OWN, verb_bundle},
    {"docker",
     "run [--config FILE] [--zone Z] [-g GROUP] [--stats] [--docker PROG] [docker run options] "
     "IMAGE [CMD...]",
     "docker run under the shim: bundle, policy, group, run directory added", V_OWN, verb_docker},
    {"compose", "[--config FILE] [--zone Z] [-g GROUP] [--version V] [-o FILE] SERVICE...",
     "write a Compose override running SERVICEs under the shim", V_OWN, verb_compose},
    {"mark", "NAME", "mark a moment of the app on a running scenario's timeline", V_OWN, verb_mark},
    {"gc", "", "remove files of processes and groups gone for the kept hour", V_OWN, verb_gc},
    {"help", "[--verbs]", "this text; --verbs: one verb a line, NAME:WHAT", V_OWN, verb_help},
};
#define NVERBS (sizeof(verbs) / sizeof(verbs[0]))

static const struct verb *verb_named(const char *name)
{
	for (size_t i = 0; i < NVERBS; i++)
		if (strcmp(verbs[i].name, name) == 0)
			return &verbs[i];
	return NULL;
}

/* A verb's usage line; its description goes on a line of its own when
 * the synopsis is too long to leave room for it. */
static void print_verb(FILE *f, const struct verb *v)
{
	char head[256];
	snprintf(head, sizeof(head), "%s%s%s", v->name, *v->args ? " " : "", v->args);
	if (strlen(head) < 32)
		fprintf(f, "  %-32s%s\n", head, v->what);
	else
		fprintf(f, "  %s\n  %-32s%s\n", head, "", v->what);
}

static void print_usage(FILE *f)
{
	fputs("usage: faultctl [-p PID]... [-g GROUP] [--ahead] [--json] VERB [ARGS]\n", f);
	for (size_t i = 0; i < NVERBS; i++)
		print_verb(f, &verbs[i]);
	fputs("Targets: -p PID (repeatable), -g GROUP; default: FAULTNET_GROUP (set for\n"
	      "a run's command), else the group 'default'. faultctl run uses a group of\n"
	      "its own (run-PID) unless -g or FAULTNET_GROUP names one.\n"
	      "A change to a group no process has joined is refused, unless --ahead\n"
	      "says it is meant for processes that will join it later.\n"
	      "faultctl --version prints the version; faultctl VERB --help, VERB's usage.\n",
	      f);
}

struct opts {
	struct selection sel;
	bool json, follow, first;
};

static int fail_usage(const char *what)
{
	fprintf(stderr, "faultctl: %s\n", what);
	print_usage(stderr);
	return 2;
}

/* Reads -p, -g and --json wherever they stand; returns the index of the
 * verb (or argc). Exits with 2 on a bad option. */
static int parse_globals(int argc, char **argv, int from, struct opts *o, bool stop_at_verb)
{
	for (int i = from; i < argc; i++) {
		if (strcmp(argv[i], "-p") == 0 && i + 1 < argc) {
			char *end;
			long pid = strtol(argv[++i], &end, 10);
			if (*end || pid <= 0 || o->sel.npids == 64)
				exit(fail_usage("-p takes a process id"));
			o->sel.pids[o->sel.npids++] = (pid_t)pid;
		} else if (strcmp(argv[i], "-g") == 0 && i + 1 < argc) {
			if (!fn_group_valid(argv[++i]))
				exit(fail_usage(
				    "-g: a group name is 1 to 63 letters, digits or _.:-"));
			o->sel.group = argv[i];
		} else if (strcmp(argv[i], "--json") == 0) {
			o->json = true;
		} else if (strcmp(argv[i], "--ahead") == 0) {
			o->sel.ahead = true;
		} else if (stop_at_verb) {
			return i;
		}
	}
	return argc;
}

static int cmd_check(int argc, char **argv)
{
	if (argc != 1)
		return fail_usage("check takes one file");
	char err[8192]; /* a file's errors, up to 20 */
	if (sc_is_scenario(argv[0])) {
		struct scenario *sc = sc_load(argv[0], err, sizeof(err));
		if (!sc) {
			fprintf(stderr, "faultctl: %s\n", err);
			return 1;
		}
		printf("%s: ok (scenario: %d steps, %d probes, %d expectations, %lld ms)\n",
		       argv[0], sc->nsteps, sc->nprobes, sc->nexpects, (long long)sc->duration_ms);
		sc_free(sc);
		return 0;
	}
	struct fn_policy *p = fn_config_load_file(argv[0], NULL, err, sizeof(err));
	if (!p) {
		fprintf(stderr, "faultctl: %s\n", err);
		return 1;
	}
	size_t on = 0;
	for (size_t i = 0; i < p->nrules; i++)
		on += p->rules[i].enabled;
	run_warn_broad(argv[0], p);
	printf("%s: ok (%zu zones, %zu rules, %zu enabled)\n", argv[0], p->nzones, p->nrules, on);
	fn_policy_free(p);
	return 0;
}

static const char *rundir(void)
{
	static char dir[4096];
	const char *why = fn_rundir(dir, sizeof(dir));
	if (why) {
		fprintf(stderr, "faultctl: run directory %s %s\n", dir, why);
		exit(1);
	}
	return dir;
}

static int find(struct opts *o, struct target **t)
{
	char err[4300];
	int n = targets_find(rundir(), &o->sel, t, err, sizeof(err));
	if (n < 0)
		fprintf(stderr, "faultctl: %s\n", err);
	return n;
}

/* Splits a reply into record lines, dropping "end". */
static int collect(char *reply, char ***lines, int *n)
{
	for (char *line = strtok(reply, "\n"); line; line = strtok(NULL, "\n")) {
		if (strcmp(line, "end") == 0)
			continue;
		if (strncmp(line, "error", 5) == 0)
			return -1;
		*lines = realloc(*lines, (size_t)(*n + 1) * sizeof(char *));
		(*lines)[(*n)++] = line;
	}
	return 0;
}

/* An event line with its wall time as a person reads it (time=HH:MM:SS.mmm,
 * local), from the wall_us it carries; malloc'd. */
static char *with_time(const char *line)
{
	char us[32], when[32] = "-";
	long long t = atoll(record_get(line, "wall_us", us, sizeof(us)));
	time_t sec = (time_t)(t / 1000000);
	struct tm tm;
	if (t > 0 && localtime_r(&sec, &tm))
		snprintf(when, sizeof(when), "%02d:%02d:%02d.%03lld", tm.tm_hour, tm.tm_min,
			 tm.tm_sec, t / 1000 % 1000);
	size_t n = strlen(line) + strlen(when) + 8;
	char *out = malloc(n);
	if (out)
		snprintf(out, n, "%s time=%s", line, when);
	return out;
}

static const char *const event_cols[] = {"time", "pid",	   "mono_us", "fd",	"proto",
					 "rule", "action", "dest",    "outcome"};
#define EVENT_COLS 9

static void print_records(const struct opts *o, char **lines, int n, const char *type,
			  const char *const *cols, int ncols)
{
	char **mine = malloc(sizeof(char *) * (size_t)(n + 1));
	int k = 0;
	size_t tl = strlen(type);
	for (int i = 0; i < n; i++)
		if (strncmp(lines[i], type, tl) == 0 && lines[i][tl] == ' ')
			mine[k++] = lines[i];
	if (o->json) {
		for (int i = 0; i < k; i++) {
			render_json_record(stdout, mine[i]);
			fputc('\n', stdout);
		}
	} else if (k && cols == event_cols) {
		for (int i = 0; i < k; i++)
			mine[i] = with_time(mine[i]);
		render_table(stdout, mine, k, cols, ncols);
		for (int i = 0; i < k; i++)
			free(mine[i]);
	} else if (k) {
		render_table(stdout, mine, k, cols, ncols);
	}
	free(mine);
}

static bool has_records(char **lines, int n, const char *type)
{
	size_t tl = strlen(type);
	for (int i = 0; i < n; i++)
		if (strncmp(lines[i], type, tl) == 0 && lines[i][tl] == ' ')
			return true;
	return false;
}

/* stats: per rule, destination, HTTP request prefix, name looked up and
 * connections the HTTP parser gave up on. */
static void print_stats(const struct opts *o, char **lines, int nlines)
{
	static const char *const rstats[] = {"pid",	 "name",   "action",
					     "attempts", "faults", "bytes"};
	static const char *const dstats[] = {"pid",	  "dest",  "proto", "attempts", "faults",
					     "blackhole", "stall", "drop",  "bytes"};
	/* HTTP rules add their request counts; requests are listed per
	 * method, Host and path prefix. */
	static const char *const hrstats[] = {"pid",	  "name",    "action",	  "attempts",
					      "requests", "faults",  "status",	  "answered",
					      "slowed",	  "aborted", "untouched", "to_server"};
	static const char *const nstats[] = {"pid",	 "name",     "lookups", "nxdomain",
					     "servfail", "nodata",   "timeout", "refused",
					     "delayed",	 "answered", "connects"};
	static const char *const hstats[] = {"pid",	  "method",   "host",	"path",
					     "requests",  "answered", "slowed", "aborted",
					     "untouched", "to_server"};

	bool http = has_records(lines, nlines, "http");
	if (http)
		print_records(o, lines, nlines, "rule", hrstats, 12);
	else
		print_records(o, lines, nlines, "rule", rstats, 6);
	if (!o->json && nlines)
		fputc('\n', stdout);
	print_records(o, lines, nlines, "dest", dstats, 9);
	if (http && !o->json)
		fputc('\n', stdout);
	if (http)
		print_records(o, lines, nlines, "http", hstats, 10);
	if (has_records(lines, nlines, "name") && !o->json)
		fputc('\n', stdout);
	print_records(o, lines, nlines, "name", nstats, 10);
	static const char *const ustats[] = {"pid", "not_http", "bad_request", "bad_response"};
	if (has_records(lines, nlines, "parser") && !o->json)
		fputc('\n', stdout);
	print_records(o, lines, nlines, "parser", ustats, 4);
	static const char *const tstats[] = {"pid",
					     "terminated",
					     "passed_other_alpn",
					     "passed_unavailable",
					     "refused_by_app",
					     "server_unverified",
					     "alpn_downgraded"};
	if (has_records(lines, nlines, "tls") && !o->json)
		fputc('\n', stdout);
	print_records(o, lines, nlines, "tls", tstats, 7);
	/* HTTP/2: connections, and the gRPC statuses, RST_STREAMs and
	 * GOAWAYs sent, each a list of NAME:COUNT. */
	static const char *const h2stats[] = {"pid", "connections", "tls", "grpc", "rst", "goaway"};
	if (has_records(lines, nlines, "h2") && !o->json)
		fputc('\n', stdout);
	print_records(o, lines, nlines, "h2", h2stats, 6);
}

/* stats of a group also counts its members that have gone: their files
 * kept as GROUP.PID.NS.START.done for FN_KEEP_S (core/rundir.h), read as faultctl
 * run --stats reads a stats directory. Their texts go to *texts (freed by
 * the caller), their records to *lines; the number of files read. */
static int done_records(const struct opts *o, char ***texts, char ***lines, int *nlines)
{
	const char *group = o->sel.group ? o->sel.group : FN_GROUP_DEFAULT;
	DIR *d = opendir(rundir());
	struct dirent *e;
	int n = 0;
	time_t now = time(NULL);
	while (d && (e = readdir(d))) {
		const char *name = e->d_name;
		char path[4400], err[600];
		char g[FN_NAME_MAX];
		struct fn_member_id id;
		const char *ext;
		if (!fn_member_name(name, g, sizeof(g), &id, &ext) || strcmp(ext, ".done") != 0 ||
		    strcmp(g, group) != 0)
			continue;
		fn_done_expire(rundir(), name, now);
		snprintf(path, sizeof(path), "%s/%s", rundir(), name);
		char *text = seg_stats_text(path, err, sizeof(err));
		char **grown = text ? realloc(*texts, (size_t)(n + 1) * sizeof(char *)) : NULL;
		if (!grown) {
			free(text);
			continue;
		}
		*texts = grown;
		(*texts)[n++] = text;
		collect(text, lines, nlines);
	}
	if (d)
		closedir(d);
	return n;
}

static int cmd_query(struct opts *o, const char *verb)
{
	if (strcmp(verb, "ps") == 0 && !o->sel.group && !o->sel.npids)
		o->sel.all = true;
	struct target *t = NULL;
	int n = find(o, &t), bad = 0, nlines = 0;
	char **lines = NULL;
	if (n < 0)
		return 1;
	char **done = NULL;
	int ndone = strcmp(verb, "stats") == 0 && !o->sel.npids && !o->sel.all
			? done_records(o, &done, &lines, &nlines)
			: 0;
	/* On stderr, so that --json output stays records only. */
	if (ndone)
		fprintf(stderr,
			"faultctl: counting %d process%s of group '%s' that %s exited (kept %d "
			"min)\n",
			ndone, ndone == 1 ? "" : "es",
			o->sel.group ? o->sel.group : FN_GROUP_DEFAULT, ndone == 1 ? "has" : "have",
			FN_KEEP_S / 60);
	else if (n == 0 && o->sel.all)
		fprintf(stderr, "faultctl: no process under faultnet (run directory %s)\n",
			rundir());
	else if (n == 0 && !o->sel.npids)
		fprintf(stderr,
			"faultctl: no process of group '%s' is running (run directory %s)\n",
			o->sel.group ? o->sel.group : FN_GROUP_DEFAULT, rundir());
	const char *line = strcmp(verb, "ps") == 0 ? "info" : verb;
	struct fn_buf *replies = calloc((size_t)n + 1, sizeof(*replies));
	for (int i = 0; i < n; i++) {
		if (!targets_request(&t[i], line, &replies[i]) ||
		    collect(replies[i].s, &lines, &nlines) < 0) {
			fprintf(stderr, "faultctl: process %d: %s", (int)t[i].pid, replies[i].s);
			bad++;
		}
	}
	static const char *const ps[] = {"pid",	  "group",   "zone", "enabled",
					 "rules", "sockets", "cmd"};
	static const char *const rules[] = {"pid",    "name",	  "action",   "enabled",
					    "faults", "attempts", "requests", "params"};
	if (strcmp(verb, "ps") == 0)
		print_records(o, lines, nlines, "process", ps, 7);
	else if (strcmp(verb, "rules") == 0)
		print_records(o, lines, nlines, "rule", rules, 8);
	else if (strcmp(verb, "events") == 0)
		print_records(o, lines, nlines, "event", event_cols, EVENT_COLS);
	else
		print_stats(o, lines, nlines);
	for (int i = 0; i < n; i++)
		fn_buf_free(&replies[i]);
	for (int i = 0; i < ndone; i++)
		free(done[i]);
	free(done);
	free(replies);
	free(lines);
	free(t);
	return bad ? 1 : 0;
}

static volatile sig_atomic_t stop;
static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

/* events --follow: the header once, then each event as it comes, in
 * widths wide enough for the usual values. */
static void print_event(const struct opts *o, char *line)
{
	static const int width[EVENT_COLS] = {12, 7, 12, 4, 5, 16, 11, 21, 0};
	static bool headed;
	if (strncmp(line, "event ", 6) != 0)
		return;
	if (o->json) {
		render_json_record(stdout, line);
		fputc('\n', stdout);
	} else {
		char *timed = with_time(line);
		if (!headed)
			render_header(stdout, event_cols, width, EVENT_COLS);
		headed = true;
		render_row(stdout, timed ? timed : line, event_cols, width, EVENT_COLS);
		free(timed);
	}
	fflush(stdout);
}

/* Prints each line of b, and keeps what follows the last newline. */
static void print_lines(const struct opts *o, struct fn_buf *b)
{
	char *nl;
	while (b->s && (nl = memchr(b->s, '\n', b->len))) {
		*nl = '\0';
		print_event(o, b->s);
		size_t used = (size_t)(nl - b->s) + 1;
		memmove(b->s, nl + 1, b->len - used);
		b->len -= used;
	}
}

/* A member's new events, read from its file; false once it has gone. */
static bool follow_file(const struct opts *o, const struct target *t, uint64_t *since)
{
	char err[600];
	struct fn_seg *s = targets_state(t, SEG_EVENTS, *since, err, sizeof(err));
	struct fn_buf b = {0};
	if (s)
		fn_seg_events(s, &b, since);
	free(s);
	print_lines(o, &b);
	fn_buf_free(&b);
	return s && !(kill(t->pid, 0) < 0 && errno == ESRCH);
}

/* events --follow: every target's events, from the first, until
 * interrupted or until every target has gone. A member's file is read
 * every 100 ms; a faultctl run with the kernel-side backend streams. */
static int cmd_follow(struct opts *o)
{
	struct target *t = NULL;
	int n = find(o, &t);
	if (n <= 0) {
		fprintf(stderr, "faultctl: no process to follow\n");
		return 1;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	struct pollfd p[64];
	struct fn_buf in[64] = {0};
	uint64_t since[64] = {0};
	int k = n < 64 ? n : 64, open = 0;
	for (int i = 0; i < k; i++) {
		p[i].fd = t[i].seg ? -1 : targets_stream(&t[i], "events follow");
		p[i].events = POLLIN;
		open += t[i].seg || p[i].fd >= 0;
	}
	while (!stop && open > 0) {
		for (int i = 0; i < k; i++)
			if (t[i].seg && t[i].pid && !follow_file(o, &t[i], &since[i])) {
				t[i].pid = 0; /* gone */
				open--;
			}
		if (poll(p, (nfds_t)k, 100) < 0)
			continue;
		for (int i = 0; i < k; i++) {
			if (p[i].fd < 0 || !p[i].revents)
				continue;
			char buf[65536];
			ssize_t got = read(p[i].fd, buf, sizeof(buf));
			if (got <= 0) {
				close(p[i].fd);
				p[i].fd = -1;
				open--;
				continue;
			}
			fn_buf_add(&in[i], buf, (size_t)got);
			print_lines(o, &in[i]);
		}
	}
	for (int i = 0; i < k; i++)
		fn_buf_free(&in[i]);
	free(t);
	return 0;
}

/* Turns a policy file into one line: comments out, newlines to spaces. */
static char *flatten(const char *text)
{
	char *out = malloc(strlen(text) + 1), *w = out;
	bool str = false;
	for (const char *p = text; *p; p++) {
		if (str) {
			if (*p == '\\' && p[1]) {
				*w++ = *p++;
			} else if (*p == '"') {
				str = false;
			}
			*w++ = *p;
		} else if (*p == '"') {
			str = true;
			*w++ = *p;
		} else if (*p == '#' || (*p == '/' && p[1] == '/')) {
			while (p[1] && p[1] != '\n')
				p++;
		} else if (*p == '/' && p[1] == '*') {
			const char *end = strstr(p + 2, "*/");
			p = end ? end + 1 : p + strlen(p) - 1;
			*w++ = ' ';
		} else {
			*w++ = (*p == '\n' || *p == '\r' || *p == '\t') ? ' ' : *p;
		}
	}
	*w = '\0';
	return out;
}

static char *load_line(const char *file)
{
	char err[1024];
	struct fn_policy *p = fn_config_load_file(file, NULL, err, sizeof(err));
	if (!p) {
		fprintf(stderr, "faultctl: %s\n", err);
		return NULL;
	}
	fn_policy_free(p);
	FILE *f = fopen(file, "re");
	struct fn_buf text = {0}, line = {0};
	char buf[4096];
	size_t n;
	while (f && (n = fread(buf, 1, sizeof(buf), f)) > 0)
		fn_buf_add(&text, buf, n);
	if (f)
		fclose(f);
	char *flat = flatten(text.s ? text.s : "");
	fn_buf_printf(&line, "load %s", flat);
	free(flat);
	fn_buf_free(&text);
	return line.s;
}

/* A change is journaled and sent only if it is one well-formed protocol
 * line: a control character would split it into lines of its own (each
 * then replayed by every process joining the group), and a line over the
 * protocol's limit would be refused by every process after being
 * journaled. */
static bool fits_protocol(const char *line)
{
	size_t n = strlen(line);
	if (n + 32 > FN_LINE_MAX) {
		fprintf(
		    stderr,
		    "faultctl: the change is %zu bytes, over the control protocol's limit of %d\n",
		    n, FN_LINE_MAX - 32);
		return false;
	}
	for (const unsigned char *p = (const unsigned char *)line; *p; p++)
		if (*p < 0x20 || *p == 0x7f) {
			fprintf(
			    stderr,
			    "faultctl: the change holds a control character (0x%02x): refused\n",
			    *p);
			return false;
		}
	return true;
}

static int dispatch_change(struct opts *o, const char *verb, int argc, char **argv)
{
	struct fn_buf line = {0};
	int rc;
	if (strcmp(verb, "reset") == 0) {
		if (argc)
			return fail_usage("reset takes no argument");
		fn_buf_printf(&line, "reset");
	} else if (strcmp(verb, "add") == 0) {
		if (argc && strcmp(argv[0], "--first") == 0) {
			o->first = true;
			argc--, argv++;
		}
		if (argc != 1)
			return fail_usage("add takes one rule in quotes");
		fn_buf_printf(&line, "add %s%s", o->first ? "first " : "", argv[0]);
		for (char *p = line.s; *p; p++)
			if (*p == '\n' || *p == '\r' || *p == '\t')
				*p = ' ';
	} else if (strcmp(verb, "load") == 0) {
		if (argc != 1)
			return fail_usage("load takes one file");
		char *l = load_line(argv[0]);
		if (!l)
			return 1;
		fn_buf_printf(&line, "%s", l);
		free(l);
	} else {
		if (argc != 1)
			return fail_usage("this verb takes one name");
		if (!fn_name_valid(argv[0]))
			return fail_usage("a name is 1 to 63 letters, digits or _.:- (no spaces or "
					  "control characters)");
		fn_buf_printf(&line, "%s %s", verb, argv[0]);
		/* A rule's window counts from now in every member, also in
		 * those that replay the journal later (commands.c). */
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		if (strcmp(verb, "enable") == 0)
			fn_buf_printf(&line, " since=%lld",
				      (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
	}
	if (!line.s || !fits_protocol(line.s)) {
		fn_buf_free(&line);
		return 2;
	}
	rc = change_run(rundir(), &o->sel, o->json, line.s);
	fn_buf_free(&line);
	return rc;
}

/* The shim, when a shimmed process starts faultctl with LD_PRELOAD still
 * set, finds this note and stays idle, so faultctl never joins a group nor
 * targets itself. */
FN_CTLMARK_DEFINE;

/* help: the usage text; help --verbs: one verb a line as NAME:WHAT. */
static int verb_help(struct opts *o, int argc, char **argv)
{
	(void)o;
	if (argc == 0) {
		print_usage(stdout);
		return 0;
	}
	if (argc != 1 || strcmp(argv[0], "--verbs") != 0)
		return fail_usage("help takes nothing or --verbs");
	for (size_t i = 0; i < NVERBS; i++)
		printf("%s:%s\n", verbs[i].name, verbs[i].what);
	return 0;
}

/* A member's state file that its process holds (core/rundir.h:
 * fn_member_held), else kept as its .done; opened without waiting,
 * following a link. */
static bool member_live(const char *path)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	struct stat sb;
	bool live = fd >= 0 && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && fn_member_held(fd);
	if (fd >= 0 && !live)
		fn_member_gone_if(path, fd);
	if (fd >= 0)
		close(fd);
	return live;
}

/* gc, one entry of the run directory: a dead member's file kept as its
 * .done, a .done past FN_KEEP_S removed. The group it names, if any, in
 * group; true when that group has a member or counts still kept. */
static bool gc_entry(const char *dir, const char *name, time_t now, char *group, size_t len)
{
	const char *ext = strrchr(name, '.');
	group[0] = '\0';
	if (fn_compiled_expire(dir, name, now))
		return false; /* a policy's compiled copy, written again when wanted,
			       * or a temporary name its writer left */
	if (name[0] == '.' || !ext || ext == name)
		return false;
	/* The run's CA and its lock (preload/tls/ca.c: ca.pem, ca.key,
	 * ca.lock) and the files faultctl run derives from it (ca.node-*,
	 * ca.java-*, ca.grpc-*) are the run directory's, never a group's:
	 * ca.lock would otherwise pass for the lock of a group 'ca'. */
	if (strncmp(name, "ca.", 3) == 0)
		return false;
	if (strcmp(ext, ".marks") == 0) {
		/* A scenario's: in use while it runs; a killed one's goes
		 * with the group's other files. */
		char path[4400];
		snprintf(group, len, "%.*s", (int)(ext - name), name);
		snprintf(path, sizeof(path), "%s/%s", dir, name);
		return sc_marks_owned(path);
	}
	if (strcmp(ext, ".journal") == 0 || strcmp(ext, ".lock") == 0 || strcmp(ext, ".seq") == 0) {
		snprintf(group, len, "%.*s", (int)(ext - name), name);
		return false;
	}
	if (strcmp(ext, ".mem") && strcmp(ext, ".sock") && strcmp(ext, ".done"))
		return false; /* not ours to judge (the run's CA, the sweep stamp) */
	struct fn_member_id id;
	if (!fn_member_name(name, group, len, &id, &ext)) {
		group[0] = '\0'; /* an earlier faultnet's name: its counts only */
		fn_done_expire(dir, name, now);
		return false;
	}
	char path[4400];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (strcmp(ext, ".done") == 0) {
		fn_done_expire(dir, name, now);
		return access(path, F_OK) == 0;
	}
	if (strcmp(ext, ".mem") == 0) {
		member_live(path);
		return true; /* the member, or its counts kept */
	}
	if (kill(id.pid, 0) == 0 || errno == EPERM)
		return true;
	fn_member_gone(path);
	return false;
}

/* A group with no member, no counts kept and no scenario running: its
 * journal, counter, lock and a killed scenario's marks go once none has
 * changed for FN_KEEP_S, under the group's lock so that no change is being
 * written meanwhile. A member that has not joined yet (no file) still
 * needs them at its join. */
static int gc_group(const char *dir, const char *group, time_t now)
{
	static const char *const ext[] = {"journal", "seq", "lock", "marks"};
	char path[4][4400];
	struct stat sb;
	for (int i = 0; i < 4; i++) {
		fn_group_file(path[i], sizeof(path[i]), dir, group, ext[i]);
		if (lstat(path[i], &sb) == 0 && now - sb.st_mtim.tv_sec <= FN_KEEP_S)
			return 0;
	}
	if (unjoined_in(dir, group))
		return 0;
	int fd = open(path[2], O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) < 0) {
		close(fd);
		return 0;
	}
	int n = 0;
	for (int i = 0; i < 4; i++)
		n += unlink(path[i]) == 0;
	if (fd >= 0)
		close(fd);
	return n;
}

/* A killed faultctl's own file in /tmp (faultctl-stats-PID-*,
 * faultctl-scenario-PID-*: its processes' state files, which the run
 * directory also names; faultctl-policy-PID.conf: a scenario's inline
 * rules): ours, its faultctl gone, no member holding a file of it, and
 * nothing in it changed for FN_KEEP_S. Opened without following links:
 * /tmp is anyone's. Returns 1 when it went. */
static int gc_tmp_entry(int tmp, const char *name, time_t now)
{
	int pid = 0, off = 0;
	bool dir = sscanf(name, "faultctl-stats-%d-%n", &pid, &off) == 1 ||
		   sscanf(name, "faultctl-scenario-%d-%n", &pid, &off) == 1;
	if (!dir &&
	    (sscanf(name, "faultctl-policy-%d.conf%n", &pid, &off) != 1 || name[off] != '\0'))
		return 0;
	struct stat sb;
	if (pid <= 0 || off == 0 || kill(pid, 0) == 0 || errno != ESRCH ||
	    fstatat(tmp, name, &sb, AT_SYMLINK_NOFOLLOW) < 0 || sb.st_uid != geteuid() ||
	    now - sb.st_mtim.tv_sec <= FN_KEEP_S)
		return 0;
	if (!dir)
		return S_ISREG(sb.st_mode) && unlinkat(tmp, name, 0) == 0;
	int fd = S_ISDIR(sb.st_mode)
		     ? openat(tmp, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
		     : -1;
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;
	bool keep = !d;
	while (d && !keep && (e = readdir(d))) {
		int f = e->d_name[0] == '.'
			    ? -1
			    : openat(fd, e->d_name, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
		keep = f >= 0 && (fstat(f, &sb) < 0 || now - sb.st_mtim.tv_sec <= FN_KEEP_S ||
				  (S_ISREG(sb.st_mode) && fn_member_held(f)));
		if (f >= 0)
			close(f);
	}
	if (d && !keep) {
		rewinddir(d);
		while ((e = readdir(d)))
			if (e->d_name[0] != '.')
				unlinkat(fd, e->d_name, 0);
	}
	if (d)
		closedir(d);
	else if (fd >= 0)
		close(fd);
	return !keep && unlinkat(tmp, name, AT_REMOVEDIR) == 0;
}

static int gc_tmp(time_t now)
{
	int tmp = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC), n = 0;
	DIR *d = tmp >= 0 ? fdopendir(tmp) : NULL;
	struct dirent *e;
	while (d && (e = readdir(d)))
		if (strncmp(e->d_name, "faultctl-", 9) == 0)
			n += gc_tmp_entry(tmp, e->d_name, now);
	if (d)
		closedir(d);
	else if (tmp >= 0)
		close(tmp);
	return n;
}

/* gc: what faultctl's listings and every start do in part, for the whole
 * run directory at once (a CI runner's last step, a test's teardown). */
static int verb_gc(struct opts *o, int argc, char **argv)
{
	(void)o, (void)argv;
	if (argc)
		return fail_usage("gc takes no argument");
	const char *dir = rundir();
	time_t now = time(NULL);
	char(*groups)[FN_NAME_MAX] = NULL, (*busy)[FN_NAME_MAX] = NULL;
	int ng = 0, nb = 0, removed = 0;
	DIR *d = opendir(dir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		char g[FN_NAME_MAX];
		bool used = gc_entry(dir, e->d_name, now, g, sizeof(g));
		char(**list)[FN_NAME_MAX] = used ? &busy : &groups;
		int *count = used ? &nb : &ng;
		void *grown = g[0] ? realloc(*list, (size_t)(*count + 1) * FN_NAME_MAX) : NULL;
		if (grown) {
			*list = grown;
			snprintf((*list)[(*count)++], FN_NAME_MAX, "%s", g);
		}
	}
	if (d)
		closedir(d);
	for (int i = 0; i < ng; i++) {
		bool used = false;
		for (int k = 0; k < nb && !used; k++)
			used = strcmp(groups[i], busy[k]) == 0;
		removed += used ? 0 : gc_group(dir, groups[i], now);
	}
	free(groups);
	free(busy);
	printf("faultctl gc: %s: %d file%s of groups gone for %d min removed\n", dir, removed,
	       removed == 1 ? "" : "s", FN_KEEP_S / 60);
	int left = gc_tmp(now);
	if (left)
		printf("faultctl gc: /tmp: %d file%s or folder%s of killed faultctl runs and "
		       "scenarios removed\n",
		       left, left == 1 ? "" : "s", left == 1 ? "" : "s");
	return 0;
}

/* mark NAME: to -g GROUP, else the group of the process that runs it
 * (FAULTNET_GROUP, set under the shim), else 'default'. */
static int verb_mark(struct opts *o, int argc, char **argv)
{
	if (argc != 1)
		return fail_usage("mark takes one name");
	const char *group = o->sel.group ? o->sel.group : getenv("FAULTNET_GROUP");
	if (!group || !fn_group_valid(group))
		group = FN_GROUP_DEFAULT;
	char err[4600];
	int rc = sc_mark_write(group, argv[0], err, sizeof(err));
	if (rc)
		fprintf(stderr, "faultctl: %s\n", err);
	return rc;
}

static int verb_check(struct opts *o, int argc, char **argv)
{
	(void)o;
	return cmd_check(argc, argv);
}

static int verb_requests(struct opts *o, int argc, char **argv)
{
	return cmd_requests(argc, argv, o->json, FN_VERSION);
}

static int verb_bundle(struct opts *o, int argc, char **argv)
{
	(void)o;
	return cmd_bundle(argc, argv);
}

static int verb_docker(struct opts *o, int argc, char **argv)
{
	return cmd_docker(argc, argv, o->sel.group);
}

static int verb_compose(struct opts *o, int argc, char **argv)
{
	return cmd_compose(argc, argv, o->sel.group);
}

static int verb_run(struct opts *o, int argc, char **argv)
{
	return cmd_run(argc, argv, o->sel.group, o->json);
}

static int verb_scenario(struct opts *o, int argc, char **argv)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return fail_usage("cannot find faultctl's own path in /proc/self/exe");
	self[n] = '\0';
	if (o->sel.group)
		return fail_usage("scenario: the group is the scenario's own (its group key)");
	return cmd_scenario(argc, argv, self);
}

/* Queries and changes take the global options after the verb too. */
static int run_shared(struct opts *o, const struct verb *v, int argc, char **argv)
{
	char *rest[argc + 1];
	int nrest = 0;
	for (int i = 0; i < argc; i++) {
		int j = parse_globals(argc, argv, i, o, true);
		if (j > i) {
			i = j - 1;
			continue;
		}
		if (strcmp(argv[i], "--follow") == 0 && strcmp(v->name, "events") == 0)
			o->follow = true;
		else
			rest[nrest++] = argv[i];
	}
	/* Inside a run's command (FAULTNET_GROUP set), its group is the one
	 * meant; ps with no target still lists every group. */
	const char *env = getenv("FAULTNET_GROUP");
	if (!o->sel.group && !o->sel.npids && strcmp(v->name, "ps") != 0 && env &&
	    fn_group_valid(env))
		o->sel.group = env;
	if (v->kind == V_CHANGE)
		return dispatch_change(o, v->name, nrest, rest);
	if (nrest)
		return fail_usage("unexpected argument");
	return o->follow ? cmd_follow(o) : cmd_query(o, v->name);
}

int main(int argc, char **argv)
{
	struct opts o = {0};
	int v = parse_globals(argc, argv, 1, &o, true);
	if (v >= argc)
		return fail_usage("no verb");
	const char *name = argv[v];
	if (strcmp(name, "--version") == 0) {
		printf("faultctl %s\n", FN_VERSION);
		return 0;
	}
	if (strcmp(name, "--help") == 0)
		return verb_help(&o, argc - v - 1, argv + v + 1);
	const struct verb *verb = verb_named(name);
	if (!verb) {
		fprintf(stderr, "faultctl: unknown verb '%s'\n", name);
		print_usage(stderr);
		return 2;
	}
	/* docker run's arguments after faultctl's own are docker's and the
	 * container command's: only a --help right after the verb is ours. */
	int scan_end = verb->own == verb_docker ? (v + 2 < argc ? v + 2 : argc) : argc;
	for (int i = v + 1; i < scan_end && strcmp(argv[i], "--") != 0; i++)
		if (strcmp(argv[i], "--help") == 0) {
			printf("usage: faultctl [-p PID]... [-g GROUP] [--json] %s ...\n", name);
			print_verb(stdout, verb);
			return 0;
		}
	if (verb->own)
		return verb->own(&o, argc - v - 1, argv + v + 1);
	return run_shared(&o, verb, argc - v - 1, argv + v + 1);
}
