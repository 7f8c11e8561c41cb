/* run.c - faultctl run [--config FILE] [--zone Z] [-g GROUP] [--stats]
 * [--allow-unreached] -- CMD: refuses programs the shim cannot reach (see
 * reach.c), sets up the environment the shim reads and runs CMD. With --stats it
 * waits for CMD, then sums the counters that every process of the tree left
 * at exit and prints them. */
#include "ctl/run.h"
#include "ctl/state/segread.h"

#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef FAULTNET_BPF
#include "bpf/backend.h"
#include "bpf/httppump.h"
#endif
#include "core/config.h"
#include "core/rundir.h"
#include "core/wire.h"
#include "ctl/cavars.h"
#include "ctl/reach.h"
#include "ctl/state/render.h"

/* The shim sits next to faultctl in the build tree (build/) and in ../lib
 * in an install tree (PREFIX/bin, PREFIX/lib). */
static int find_library(char *out, size_t len)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n < 0)
		return -1;
	self[n] = '\0';
	const char *dir = dirname(self);
	const char *const tries[] = {"%s/libfaultnet.so", "%s/../lib/libfaultnet.so"};
	for (size_t i = 0; i < sizeof(tries) / sizeof(tries[0]); i++) {
		snprintf(out, len, tries[i], dir);
		if (access(out, R_OK) == 0)
			return 0;
	}
	return -1;
}

static int set_preload(void)
{
	char lib[PATH_MAX + 32], value[2 * PATH_MAX + 64];
	if (find_library(lib, sizeof(lib)) < 0) {
		fprintf(stderr,
			"faultctl: libfaultnet.so not found next to faultctl or in ../lib\n");
		return -1;
	}
	/* After what is there already: a sanitizer runtime must stay first. */
	const char *old = getenv("LD_PRELOAD");
	snprintf(value, sizeof(value), "%s%s%s", old ? old : "", old && *old ? ":" : "", lib);
	return setenv("LD_PRELOAD", value, 1);
}

/* --strict: what the run must see happen, else it fails: each rule the
 * policy switches on fires, no HTTP rule meets traffic it cannot read, some
 * process joins. */
struct strict {
	bool on;
	char (*rules)[FN_NAME_MAX];
	int nrules;
};

static struct strict strict;

static void strict_rules(const struct fn_policy *p)
{
	strict.rules = calloc(p->nrules + 1, sizeof(*strict.rules));
	for (size_t i = 0; strict.rules && i < p->nrules; i++)
		if (p->rules[i].enabled)
			snprintf(strict.rules[strict.nrules++], FN_NAME_MAX, "%s",
				 p->rules[i].name);
}

int run_warn_broad(const char *file, const struct fn_policy *p)
{
	int n = 0;
	for (size_t i = 0; i < p->nrules; i++) {
		const struct fn_rule *r = &p->rules[i];
		if (r->nto || r->nports || r->from_zone >= 0 || r->to_zone >= 0 || r->host)
			continue;
		fprintf(stderr,
			"faultctl: %s:%d: warning: rule '%s' has no match (to, port, zone or "
			"host): it covers every %s\n",
			file, r->line, r->name,
			r->action == FN_ACT_DNS ? "lookup" : "connection of its protocols");
		n++;
	}
	return n;
}

static int set_config(const char *file)
{
	char abs[PATH_MAX], err[1024];
	if (!realpath(file, abs)) {
		fprintf(stderr, "faultctl: --config %s: %s\n", file, strerror(errno));
		return -1;
	}
	/* Refuse a bad file here, with the same message the shim would give. */
	struct fn_policy *p = fn_config_load_file(abs, getenv("FAULTNET_ZONE"), err, sizeof(err));
	if (!p) {
		fprintf(stderr, "faultctl: %s\n", err);
		return -1;
	}
	if (strict.on)
		strict_rules(p);
	run_warn_broad(file, p);
	run_ca_vars(p);
	fn_policy_free(p);
	return setenv("FAULTNET_CONFIG", abs, 1);
}

/* A policy given by FAULTNET_CONFIG rather than --config gets the CA
 * variables too. A file the shim cannot read is left for it to say. */
static void env_config_ca_vars(void)
{
	const char *file = getenv("FAULTNET_CONFIG");
	char err[1024];
	struct fn_policy *p =
	    file && *file ? fn_config_load_file(file, getenv("FAULTNET_ZONE"), err, sizeof(err))
			  : NULL;
	if (p)
		run_ca_vars(p);
	fn_policy_free(p);
}

/* --requests FILE: the request log (FAULTNET_REQUESTS), made absolute so
 * that a child that changes directory writes to the same file. */
static int set_requests(const char *file)
{
	char abs[PATH_MAX];
	if (file[0] == '/')
		snprintf(abs, sizeof(abs), "%s", file);
	else if (!getcwd(abs, sizeof(abs)) || strlen(abs) + strlen(file) + 2 > sizeof(abs)) {
		fprintf(stderr, "faultctl run: --requests %s: %s\n", file, strerror(errno));
		return -1;
	} else {
		strcat(abs, "/");
		strcat(abs, file);
	}
	return setenv("FAULTNET_REQUESTS", abs, 1);
}

/* Sums "rule", "dest" and "http" records by name across processes. The
 * request counts (from "requests" on) are those of request rules and of
 * "http" records; a request rule has no attempts nor bytes. */
#define NCOUNTS 9
static const char *const counted[NCOUNTS] = {"attempts", "faults",    "bytes",
					     "requests", "answered",  "slowed",
					     "aborted",	 "untouched", "to_server"};
/* What a request rule's line shows, in its order (indexes of counted). */
static const int req_rule[] = {3, 1, 4, 5, 6, 7, 8};
/* "name" records (lookups per name) count other things. */
static const char *const looked[NCOUNTS] = {"lookups", "nxdomain", "servfail", "nodata",  "timeout",
					    "refused", "delayed",  "answered", "connects"};

/* "parser": connections the HTTP parser gave up on. */
static const char *const unparsed[NCOUNTS] = {
    "not_http", "bad_request", "bad_response", "-", "-", "-", "-", "-", "-"};

/* "tls": connections the relay terminated, passed through or ended. */
static const char *const tlsed[NCOUNTS] = {
    "terminated",      "passed_other_alpn", "passed_unavailable",
    "refused_by_app",  "server_unverified", "alpn_downgraded",
    "trusted_by_hook", "ca_variable",	    "-"};

static const char *const *fields_of(const char *type)
{
	return strcmp(type, "name") == 0     ? looked
	       : strcmp(type, "parser") == 0 ? unparsed
	       : strcmp(type, "tls") == 0    ? tlsed
	       : strcmp(type, "trust") == 0  ? tlsed
					     : counted;
}

struct total {
	char type[8], key[400], action[16], proto[8];
	unsigned long long n[NCOUNTS];
	bool http; /* has request counts */
};

/* A record's name: the rule's, the destination, or "METHOD host path". */
static void record_key(const char *line, const char *type, char *key, size_t len)
{
	char m[32], h[160], p[160];
	if (strcmp(type, "http") == 0)
		snprintf(key, len, "%s %s %s", record_get(line, "method", m, sizeof(m)),
			 record_get(line, "host", h, sizeof(h)),
			 record_get(line, "path", p, sizeof(p)));
	else
		record_get(line, strcmp(type, "dest") == 0 ? "dest" : "name", key, len);
}

static void add_typed(struct total **t, int *n, const char *line, const char *type,
		      const char *key);

/* A "tls" record counts in the sum of every process's, and, for a process
 * that terminated or refused a connection, in a "trust" line of its own:
 * how the run's CA reached that process. */
static void add_trust(struct total **t, int *n, const char *line)
{
	char v[32], key[32];
	if (!strtoull(record_get(line, "terminated", v, sizeof(v)), NULL, 10) &&
	    !strtoull(record_get(line, "refused_by_app", v, sizeof(v)), NULL, 10))
		return;
	snprintf(key, sizeof(key), "pid=%s", record_get(line, "pid", v, sizeof(v)));
	add_typed(t, n, line, "trust", key);
}

/* "h2": HTTP/2 connections and the frames the engine sent, by code,
 * summed over the run's processes. */
static struct fn_seg_h2 h2_sum;
static bool h2_seen;

/* Its line, "  h2 connections=N tls=N grpc=NAME:N,...", or its JSON. */
static void print_h2(FILE *out, bool json)
{
	struct fn_buf b = {0};
	fn_buf_add(&b, "h2", 2);
	fn_seg_h2_fields(&h2_sum, &b);
	if (b.oom)
		return;
	fn_buf_add(&b, "", 1);
	if (json) {
		render_json_record(out, b.s);
		fputc('\n', out);
	} else {
		fprintf(out, "  %s\n", b.s);
	}
	fn_buf_free(&b);
}

static void add_record(struct total **t, int *n, const char *line)
{
	char type[8] = "", key[400];
	sscanf(line, "%7s", type);
	if (strcmp(type, "h2") == 0) {
		fn_seg_h2_add(&h2_sum, line);
		h2_seen = true;
		return;
	}
	if (strcmp(type, "rule") && strcmp(type, "dest") && strcmp(type, "http") &&
	    strcmp(type, "name") && strcmp(type, "parser") && strcmp(type, "tls"))
		return;
	record_key(line, type, key, sizeof(key));
	add_typed(t, n, line, type, key);
	if (strcmp(type, "tls") == 0)
		add_trust(t, n, line);
}

static void add_typed(struct total **t, int *n, const char *line, const char *type, const char *key)
{
	char action[16], proto[8], v[32];
	record_get(line, "action", action, sizeof(action));
	record_get(line, "proto", proto, sizeof(proto));
	int i = 0;
	while (i < *n && !(strcmp((*t)[i].type, type) == 0 && strcmp((*t)[i].key, key) == 0 &&
			   strcmp((*t)[i].proto, proto) == 0))
		i++;
	if (i == *n) {
		*t = realloc(*t, (size_t)(*n + 1) * sizeof(**t));
		memset(&(*t)[i], 0, sizeof(**t));
		snprintf((*t)[i].type, sizeof((*t)[i].type), "%s", type);
		snprintf((*t)[i].key, sizeof((*t)[i].key), "%s", key);
		snprintf((*t)[i].action, sizeof((*t)[i].action), "%s", action);
		snprintf((*t)[i].proto, sizeof((*t)[i].proto), "%s", proto);
		(*n)++;
	}
	const char *const *f = fields_of(type);
	for (int k = 0; k < NCOUNTS; k++)
		(*t)[i].n[k] += strtoull(record_get(line, f[k], v, sizeof(v)), NULL, 10);
	(*t)[i].http |= record_get(line, "requests", v, sizeof(v))[0] != '\0';
}

/* A process's trust line: which mechanism let it trust the relay's leaves. */
static const char *trust_via(const struct total *t)
{
	bool hook = t->n[FN_TLS_TRUSTED_BY_HOOK], var = t->n[FN_TLS_CA_VARIABLE];
	/* A process of the run has the variable whether it reads it or not:
	 * where the hook let it trust, the hook is what reached it. */
	if (hook)
		return "hook";
	return var && t->n[FN_TLS_TERMINATED] ? "variable" : "none";
}

static void print_total(FILE *out, const struct total *t, bool json)
{
	bool http = strcmp(t->type, "http") == 0, name = strcmp(t->type, "name") == 0;
	bool trust = strcmp(t->type, "trust") == 0;
	bool tls = trust || strcmp(t->type, "tls") == 0;
	bool conn = tls || strcmp(t->type, "parser") == 0;
	int from = http ? 3 : 0, to = name || http ? NCOUNTS : tls ? FN_SEG_TLS : 3;
	/* A request rule's line: requests, faults, then their fates. */
	int idx[NCOUNTS], nidx = 0;
	if (t->http && !http && !tls)
		for (size_t k = 0; k < sizeof(req_rule) / sizeof(req_rule[0]); k++)
			idx[nidx++] = req_rule[k];
	else
		for (int k = from; k < to; k++)
			idx[nidx++] = k;
	name |= conn; /* no proto or action to print */
	const char *const *f = fields_of(t->type);
	if (json) {
		char m[32] = "", h[160] = "", p[160] = "";
		if (http)
			sscanf(t->key, "%31s %159s %159s", m, h, p);
		if (http)
			fprintf(
			    out,
			    "{\"type\":\"http\",\"method\":\"%s\",\"host\":\"%s\",\"path\":\"%s\"",
			    m, h, p);
		else
			fprintf(out, "{\"type\":\"%s\",\"%s\":\"%s\"", t->type,
				strcmp(t->type, "dest") ? "name" : "dest", t->key);
		if (!http && !name)
			fprintf(out, ",\"proto\":\"%s\",\"action\":\"%s\"", t->proto, t->action);
		if (trust)
			fprintf(out, ",\"via\":\"%s\"", trust_via(t));
		for (int k = 0; k < nidx; k++)
			fprintf(out, ",\"%s\":%llu", f[idx[k]], t->n[idx[k]]);
		fputs("}\n", out);
		return;
	}
	if (http)
		fprintf(out, "  http %-40s", t->key);
	else if (trust)
		fprintf(out, "  trust %-22s via=%s", t->key, trust_via(t));
	else
		fprintf(out, "  %s %-24s %-4s", t->type, t->key, t->proto);
	for (int k = 0; k < nidx; k++)
		fprintf(out, " %s=%llu", f[idx[k]], t->n[idx[k]]);
	fputc('\n', out);
}

static const struct total *total_of(const struct total *t, int n, const char *type, const char *key)
{
	for (int i = 0; i < n; i++)
		if (strcmp(t[i].type, type) == 0 && (!key || strcmp(t[i].key, key) == 0))
			return &t[i];
	return NULL;
}

/* --strict's judgement of the totals: each failure said on stderr; true
 * when there was one. */
static bool strict_failed(const struct total *t, int n, int procs)
{
	bool failed = false;
	for (int i = 0; i < strict.nrules; i++) {
		unsigned long long hits = 0;
		for (int k = 0; k < n; k++)
			if (strcmp(t[k].type, "rule") == 0 &&
			    strcmp(t[k].key, strict.rules[i]) == 0)
				hits += t[k].n[0] + t[k].n[3];
		if (!hits) {
			fprintf(stderr, "faultctl run --strict: rule %s was on and never fired\n",
				strict.rules[i]);
			failed = true;
		}
	}
	const struct total *parser = total_of(t, n, "parser", NULL);
	if (parser && parser->n[0]) {
		fprintf(stderr,
			"faultctl run --strict: HTTP rules met %llu connection%s they could not "
			"read (not_http)\n",
			parser->n[0], parser->n[0] == 1 ? "" : "s");
		failed = true;
	}
	/* Of those, the TLS ones passed through, by reason (counted
	 * not_http too): a client whose ALPN offers neither h2 nor http/1.1,
	 * or no termination to be had. */
	const struct total *tls = total_of(t, n, "tls", NULL);
	unsigned long long h2 = tls ? tls->n[FN_TLS_PASSED_OTHER_ALPN] : 0;
	unsigned long long un = tls ? tls->n[FN_TLS_PASSED_UNAVAILABLE] : 0;
	if (h2 || un) {
		fprintf(stderr,
			"faultctl run --strict: of them TLS passed through as bytes: %llu offering "
			"neither h2 nor http/1.1 (passed_other_alpn), %llu with no termination to "
			"be had "
			"(passed_unavailable)\n",
			h2, un);
		failed = true;
	}
	if (!procs) {
		fprintf(stderr, "faultctl run --strict: no process joined (the command never ran "
				"under the shim, or made no network call)\n");
		failed = true;
	}
	return failed;
}

/* Sums the state files of dir (removed as they are read; NULL for none),
 * prints them when print, and judges them under --strict, with extra
 * records beside them (the kernel-side backend's rules, NULL for none;
 * faultctl was then the run's member): true when --strict fails. */
static bool print_totals(const char *dir, bool print, bool json, char *extra)
{
	struct total *t = NULL;
	int n = 0, procs = 0;
	DIR *d = dir ? opendir(dir) : NULL;
	struct dirent *e;
	while (d && (e = readdir(d))) {
		char path[PATH_MAX + 300], err[600] = "";
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		size_t len = strlen(e->d_name);
		char *text =
		    e->d_name[0] != '.' && len > 4 && strcmp(e->d_name + len - 4, ".mem") == 0
			? seg_stats_text(path, err, sizeof(err))
			: NULL;
		if (!text && err[0])
			fprintf(stderr, "faultctl: %s\n", err);
		unlink(path);
		if (!text)
			continue;
		procs++;
		for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"))
			add_record(&t, &n, line);
		free(text);
	}
	if (d)
		closedir(d);
	if (dir)
		rmdir(dir);
	FILE *out = stderr;
	const char *group = getenv("FAULTNET_GROUP");
	if (print && !json)
		fprintf(out, "faultctl: stats of %d process%s%s%s%s:\n", procs,
			procs == 1 ? "" : "es", group ? " (group " : "", group ? group : "",
			group ? ")" : "");
	for (int i = 0; print && i < n; i++)
		print_total(out, &t[i], json);
	if (print && h2_seen)
		print_h2(out, json);
	/* After the print: the backend printed its rules itself. */
	for (char *line = extra ? strtok(extra, "\n") : NULL; line; line = strtok(NULL, "\n"))
		add_record(&t, &n, line);
	procs += extra != NULL;
	bool failed = strict.on && strict_failed(t, n, procs);
	free(t);
	return failed;
}

void run_print_stats(const char *dir, bool json)
{
	print_totals(dir, true, json, NULL);
}

/* CMD's status; under --strict 1 when it exited 0 but the run failed. */
static int wait_and_report(pid_t pid, const char *dir, bool print, bool json)
{
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	bool failed = print_totals(dir, print, json, NULL);
	int rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	return failed && rc == 0 ? 1 : rc;
}

static int usage_error(const char *what)
{
	fprintf(stderr,
		"faultctl run: %s\nusage: faultctl run [--config FILE] [--zone ZONE] "
		"[-g GROUP] [--stats] [--requests FILE] [--strict] [--allow-unreached] [--ca-vars] "
		"[--backend=shim|bpf|auto] -- CMD "
		"[ARG...]\n",
		what);
	return 2;
}

/* --backend=bpf: the policy carried out in the kernel (bpf/backend.c). */
static int run_bpf(const char *config, const char *group, char **argv, bool stats, bool json,
		   const char *requests, bool ca_vars)
{
#ifdef FAULTNET_BPF
	char err[1024], abs[PATH_MAX];
	struct fn_policy *p = NULL;
	if (config && !realpath(config, abs)) {
		fprintf(stderr, "faultctl: --config %s: %s\n", config, strerror(errno));
		return FN_EXIT_CONFIG;
	}
	p = config ? fn_config_load_file(abs, getenv("FAULTNET_ZONE"), err, sizeof(err))
		   : fn_config_load_string("rules = ();", "(none)", getenv("FAULTNET_ZONE"), err,
					   sizeof(err));
	if (!p) {
		fprintf(stderr, "faultctl: %s\n", err);
		return FN_EXIT_CONFIG;
	}
	const char *g = group ? group : getenv("FAULTNET_GROUP");
	g = g && *g ? g : FN_GROUP_DEFAULT;
	/* HTTP rules: the pump's shim rules the requests (bpf/httppump.h); it
	 * checks servers against the roots the app had, and the app is given
	 * them with the run's CA (SSL_CERT_FILE, which Go reads). */
	const char *user = getenv("SSL_CERT_FILE");
	static char cert[PATH_MAX], dir[] = "/tmp/faultctl-stats-XXXXXX";
	snprintf(cert, sizeof(cert), "%s", user && *user ? user : "");
	/* --ca-vars: the pump and the CA from the start, for HTTP rules added
	 * live (the command's SSL_CERT_FILE cannot be set once it runs). */
	bool http = ca_vars || run_ca_cert_file(p);
	if (ca_vars)
		run_ca_cert_file_now();
	/* --strict judges the pump's counts of the HTTP rules with the
	 * kernel's of the others. */
	bool count = stats || strict.on;
	if (strict.on)
		strict_rules(p);
	if (http && count && !mkdtemp(dir)) {
		perror("faultctl run: stats directory");
		fn_policy_free(p);
		return 1;
	}
	/* The request log is the pump's to write, as it parses the requests;
	 * without an HTTP rule nothing is, and the run says so. */
	if (requests && !http)
		fprintf(
		    stderr,
		    "faultctl run --backend=bpf: --requests: the policy has no HTTP rule, so no "
		    "request is parsed and %s gets no line\n",
		    requests);
	struct fnb_pump_env pe = {.config = config ? abs : NULL,
				  .group = g,
				  .cert_file = cert[0] ? cert : NULL,
				  .stats_dir = http && count ? dir : NULL,
				  .requests = requests,
				  .always = ca_vars};
	struct fn_buf records = {0};
	int rc = fnb_run(p, g, argv, stats, json, &pe, strict.on ? &records : NULL);
	/* The pump's counts, once it has exited; under --strict judged with
	 * the kernel's of the other rules. */
	char none[1] = "";
	char *extra = !strict.on ? NULL : records.s ? records.s : none;
	bool failed = (http && count) || strict.on
			  ? print_totals(http && count ? dir : NULL, stats && http, json, extra)
			  : false;
	fn_buf_free(&records);
	fn_policy_free(p);
	return failed && rc == 0 ? 1 : rc;
#else
	(void)config, (void)group, (void)argv, (void)stats, (void)json, (void)requests,
	    (void)ca_vars;
	fprintf(stderr, "faultctl run --backend=bpf: this faultctl was built without the "
			"kernel-side backend (libbpf-dev, bpftool or clang was missing)\n");
	return 2;
#endif
}

/* The run's group: -g's, else FAULTNET_GROUP (a run started inside
 * another's tree, or the user's own choice), else a group of its own,
 * run-PID, said on a terminal: two runs of one account at once never see
 * each other's changes. The command gets it as FAULTNET_GROUP, which
 * faultctl's changes from inside it also default to. */
static const char *run_group(const char *group, char *own, size_t len)
{
	const char *env = getenv("FAULTNET_GROUP");
	if (group)
		return group;
	if (env && fn_group_valid(env))
		return env;
	snprintf(own, len, "run-%d", (int)getpid());
	if (isatty(STDERR_FILENO))
		fprintf(stderr,
			"faultctl run: group %s, the run's own (faultctl -g %s VERB changes it; "
			"-g GROUP names one)\n",
			own, own);
	return own;
}

int cmd_run(int argc, char **argv, const char *group, bool json)
{
	int i = 0;
	const char *config = NULL, *backend = "shim", *requests = NULL;
	bool stats = false, allow_unreached = false, ca_vars = false;
	for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
		if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
			config = argv[++i];
		else if (strcmp(argv[i], "--zone") == 0 && i + 1 < argc)
			setenv("FAULTNET_ZONE", argv[++i], 1);
		else if (strcmp(argv[i], "-g") == 0 && i + 1 < argc)
			group = argv[++i];
		else if (strcmp(argv[i], "--stats") == 0)
			stats = true;
		else if (strcmp(argv[i], "--requests") == 0 && i + 1 < argc)
			requests = argv[++i];
		else if (strcmp(argv[i], "--strict") == 0)
			strict.on = setenv("FAULTNET_STRICT", "1", 1) == 0;
		else if (strcmp(argv[i], "--json") == 0)
			json = true;
		else if (strcmp(argv[i], "--allow-unreached") == 0)
			allow_unreached = true;
		else if (strcmp(argv[i], "--ca-vars") == 0)
			ca_vars = true; /* HTTP rules come later (faultctl add, a scenario) */
		else if (strncmp(argv[i], "--backend=", 10) == 0)
			backend = argv[i] + 10;
		else {
			char msg[300];
			snprintf(msg, sizeof(msg), "unknown option '%.200s'", argv[i]);
			return usage_error(msg);
		}
	}
	if (i + 1 >= argc)
		return usage_error("no command after --");
	if (strcmp(backend, "shim") && strcmp(backend, "bpf") && strcmp(backend, "auto"))
		return usage_error("--backend: shim, bpf or auto");
	if (group && !fn_group_valid(group))
		return usage_error("-g: a group name is 1 to 63 letters, digits or _.:-");
	char own[FN_NAME_MAX];
	group = run_group(group, own, sizeof(own));
	char why[PATH_MAX + 300];
	bool unreached = fn_unreached(argv[i + 1], why, sizeof(why));
	/* auto: the kernel for what the shim cannot reach, when we may. */
	bool bpf = strcmp(backend, "bpf") == 0 || (strcmp(backend, "auto") == 0 && unreached &&
						   geteuid() == 0 && !allow_unreached);
	if (bpf) {
		if (requests && set_requests(requests) < 0)
			return 1;
		/* The pump gets it; the command, which the shim does not run
		 * in, does not. */
		char *log = requests ? strdup(getenv("FAULTNET_REQUESTS")) : NULL;
		unsetenv("FAULTNET_REQUESTS");
		int rc = run_bpf(config, group, argv + i + 1, stats, json, log, ca_vars);
		free(log);
		return rc;
	}
	if (unreached) {
		fprintf(stderr, "faultctl run: %s\n", why);
		if (!allow_unreached)
			return 2;
		fprintf(stderr, "faultctl run: --allow-unreached: running it without faults\n");
	}
	setenv("FAULTNET_GROUP", group, 1);
	if (config && set_config(config) < 0)
		return FN_EXIT_CONFIG;
	if (ca_vars)
		run_ca_vars_now();
	else if (!config)
		env_config_ca_vars();
	if (requests && set_requests(requests) < 0)
		return 1;
	if (set_preload() < 0)
		return 1;
	char dir[64]; /* named by its faultctl's pid: gc removes it if that is killed */
	snprintf(dir, sizeof(dir), "/tmp/faultctl-stats-%d-XXXXXX", (int)getpid());
	bool count = stats || strict.on;
	if (count && (!mkdtemp(dir) || setenv("FAULTNET_STATS_DIR", dir, 1) < 0)) {
		perror("faultctl run: stats directory");
		return 1;
	}
	pid_t pid = count ? fork() : 0;
	if (pid > 0)
		return wait_and_report(pid, dir, stats, json);
	execvp(argv[i + 1], argv + i + 1);
	fprintf(stderr, "faultctl run: %s: %s\n", argv[i + 1], strerror(errno));
	_exit(errno == ENOENT ? 127 : 126);
}
