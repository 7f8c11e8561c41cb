/* run.c - faultctl scenario: runs a scenario's command under the
 * shim in the scenario's group, carries out its steps on time (each step is
 * this faultctl run again as `faultctl -g GROUP VERB ARG`, so that a step
 * is exactly what a user would type), runs the probes, samples the group's
 * counters every second, stops early when a stop_if says so, and always
 * undoes every step at the end, on SIGINT or SIGTERM: `reset` takes the
 * group back to its policy file and clears the group's journal. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/rundir.h"
#include "ctl/state/unjoined.h"
#include "ctl/state/render.h"
#include "ctl/scenario/scenario.h"
#include "ctl/state/segread.h"

struct run {
	struct scenario *s;
	const char *self; /* this faultctl, for steps and for running under the shim */
	const char *probe_bin;
	char statsdir[64];
	int64_t t0_ns;
	pid_t cmd;
	char **argv;		      /* CMD, NULL for none */
	struct sc_marks_src marks[2]; /* faultctl mark's GROUP.marks, the app's file */
};

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

static void sleep_ms(int64_t ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
	nanosleep(&ts, NULL); /* a signal ends it early: the loop looks again */
}

static int64_t now_ms(const struct run *r)
{
	return ((int64_t)fn_now_ns() - r->t0_ns) / 1000000;
}

static const char *group_of(const struct run *r, const struct sc_step *st)
{
	return st->group[0] ? st->group : r->s->group;
}

/* `faultctl -g GROUP VERB ARG`, waited for; its first line of output goes
 * to msg. The exit status. */
static int ctl_argv(const struct run *r, char **argv, char *msg, size_t len);

static int ctl(const struct run *r, const char *group, const char *verb, const char *arg, char *msg,
	       size_t len)
{
	/* --ahead for the scenario's own group only: its probes may join
	 * after a step, and a command that never joins is said otherwise
	 * (--strict). Another group must have members: a typo of its name is
	 * refused, and the step fails the run. */
	bool own = strcmp(group, r->s->group) == 0;
	char *argv[] = {(char *)"faultctl",
			(char *)"-g",
			(char *)group,
			own ? (char *)"--ahead" : (char *)verb,
			own ? (char *)verb : (char *)arg,
			own ? (char *)arg : NULL,
			NULL};
	return ctl_argv(r, argv, msg, len);
}

/* A step's change: to its group, or with -p to each of its pids. */
static int ctl_step(const struct run *r, const struct sc_step *st, const char *verb,
		    const char *arg, char *msg, size_t len)
{
	if (!st->npids)
		return ctl(r, group_of(r, st), verb, arg, msg, len);
	char *argv[2 * 16 + 4], pids[16][16];
	int k = 0;
	argv[k++] = (char *)"faultctl";
	for (int i = 0; i < st->npids; i++) {
		snprintf(pids[i], sizeof(pids[i]), "%d", st->pids[i]);
		argv[k++] = (char *)"-p";
		argv[k++] = pids[i];
	}
	argv[k++] = (char *)verb;
	argv[k++] = (char *)arg;
	argv[k] = NULL;
	return ctl_argv(r, argv, msg, len);
}

static int ctl_argv(const struct run *r, char **argv, char *msg, size_t len)
{
	int pipefd[2];
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return snprintf(msg, len, "pipe: %s", strerror(errno)), 1;
	pid_t pid = fork();
	if (pid == 0) {
		dup2(pipefd[1], 1);
		dup2(pipefd[1], 2);
		execv(r->self, argv);
		_exit(127);
	}
	close(pipefd[1]);
	char buf[4096];
	ssize_t n, got = 0;
	while ((n = read(pipefd[0], buf + got, sizeof(buf) - 1 - (size_t)got)) > 0)
		got += n;
	close(pipefd[0]);
	buf[got > 0 ? got : 0] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	snprintf(msg, len, "%s", buf);
	int st = 0;
	while (pid > 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return pid < 0 ? 1 : WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The child's environment for the group, then exec: under the shim (via
 * `faultctl run`) or as it is. */
static void exec_in_group(const struct run *r, bool shim, char **argv)
{
	setpgid(0, 0);
	setenv("FAULTNET_STATS_DIR", r->statsdir, 1);
	setenv("FAULTNET_MARKS", r->marks[1].path, 1);
	if (!shim) {
		execvp(argv[0], argv);
		_exit(127);
	}
	int n = 0;
	while (argv[n])
		n++;
	char **v = calloc((size_t)n + 9, sizeof(char *)); /* 8 of ours, then NULL */
	int k = 0;
	v[k++] = (char *)"faultctl";
	v[k++] = (char *)"run";
	v[k++] = (char *)"--config";
	v[k++] = r->s->policy;
	v[k++] = (char *)"-g";
	v[k++] = r->s->group;
	if (r->s->http) /* rules a step adds: their leaves need the variables at start */
		v[k++] = (char *)"--ca-vars";
	v[k++] = (char *)"--";
	for (int i = 0; i < n; i++)
		v[k++] = argv[i];
	v[k] = NULL;
	execv(r->self, v);
	_exit(127);
}

static void start_cmd(struct run *r)
{
	if (!r->argv)
		return;
	r->cmd = fork();
	if (r->cmd == 0)
		exec_in_group(r, true, r->argv);
}

/* Whether a process of the command has published its state (PID.mem in
 * the stats directory), or has started under the shim and will at its
 * first covered call (ctl/state/unjoined.h): it replays there every step made
 * before, so none can miss it. */
static bool cmd_joined(const struct run *r)
{
	DIR *d = opendir(r->statsdir);
	struct dirent *e;
	bool yes = false;
	while (d && !yes && (e = readdir(d))) {
		size_t len = strlen(e->d_name);
		yes = e->d_name[0] != '.' && len > 4 && strcmp(e->d_name + len - 4, ".mem") == 0;
	}
	if (d)
		closedir(d);
	char dir[4096];
	struct unjoined_scan sc;
	struct unjoined u;
	if (!yes && !fn_rundir(dir, sizeof(dir))) {
		/* The command's own process only: no walk of /proc. */
		unjoined_begin(&sc, dir, &r->cmd, 1, NULL, 0);
		yes = unjoined_next(&sc, &u) && strcmp(u.group, r->s->group) == 0;
		unjoined_end(&sc);
	}
	return yes;
}

/* The clock starts when the command has joined the group, so that a step
 * at 0 ms cannot miss it: at most SC_JOIN_WAIT_MS, or until the command
 * ends or a signal comes (then the run goes on and says so). */
static void wait_join(struct run *r)
{
	int64_t t = (int64_t)fn_now_ns();
	while (r->argv && r->cmd > 0 && !stop_signal && !cmd_joined(r) &&
	       (int64_t)fn_now_ns() - t < SC_JOIN_WAIT_MS * 1000000ll) {
		int st;
		if (waitpid(r->cmd, &st, WNOHANG) == r->cmd) {
			r->s->cmd_status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
			break;
		}
		struct timespec ts = {0, 2000000};
		nanosleep(&ts, NULL);
	}
	r->s->join_wait_ms = ((int64_t)fn_now_ns() - t) / 1000000;
}

/* ---- steps ---------------------------------------------------------------- */

static void do_step(struct run *r, struct sc_step *st)
{
	st->actual_ms = now_ms(r);
	st->rc = ctl_step(r, st, sc_verb_name(st->verb), st->arg, st->message, sizeof(st->message));
	if (st->for_ms >= 0)
		st->undo_planned_ms = st->actual_ms + st->for_ms;
}

static void undo_step(struct run *r, struct sc_step *st)
{
	static const char *const inverse[] = {"disable", "enable", "rm"};
	char msg[256];
	st->undo_actual_ms = now_ms(r);
	st->undo_rc = ctl_step(r, st, inverse[st->verb], st->verb == SV_ADD ? st->rule : st->arg,
			       msg, sizeof(msg));
}

/* Runs the steps that are due; the time of the next one in *next. */
static void steps_due(struct run *r, int64_t now, int64_t *next)
{
	struct scenario *s = r->s;
	for (int i = 0; i < s->nsteps; i++) {
		struct sc_step *st = &s->steps[i];
		if (st->planned_ms < 0 && st->at_ms >= 0)
			st->planned_ms = st->at_ms;
		if (st->planned_ms < 0 && st->after >= 0 && s->steps[st->after].actual_ms >= 0)
			st->planned_ms = s->steps[st->after].actual_ms + st->after_ms;
		if (st->actual_ms < 0 && st->planned_ms >= 0) {
			if (now >= st->planned_ms)
				do_step(r, st);
			else if (st->planned_ms < *next)
				*next = st->planned_ms;
		}
		if (st->undo_planned_ms >= 0 && st->undo_actual_ms < 0) {
			if (now_ms(r) >= st->undo_planned_ms)
				undo_step(r, st);
			else if (st->undo_planned_ms < *next)
				*next = st->undo_planned_ms;
		}
	}
}

/* ---- probes --------------------------------------------------------------- */

static void start_probe(struct run *r, struct sc_probe *p, int64_t now)
{
	char status[16], timeout[24];
	snprintf(status, sizeof(status), "%d", p->status);
	snprintf(timeout, sizeof(timeout), "%lld", (long long)p->timeout_ms);
	char *url[] = {(char *)r->probe_bin, p->url, status, timeout, NULL};
	char *cmd[] = {(char *)"/bin/sh", (char *)"-c", p->command, NULL};
	p->started_ms = now;
	p->next_ms = now + p->interval_ms;
	p->pid = fork();
	if (p->pid == 0) {
		int null = open("/dev/null", O_RDWR);
		dup2(null, 1);
		dup2(null, 2);
		exec_in_group(r, p->shim, p->url ? url : cmd);
	}
	if (p->pid < 0)
		p->pid = 0;
}

static void add_sample(struct sc_probe *p, int64_t t, int64_t took, bool ok)
{
	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 256;
		struct sc_sample *v = realloc(p->samples, cap * sizeof(*v));
		if (!v)
			return;
		p->samples = v;
		p->cap = cap;
	}
	p->samples[p->n++] = (struct sc_sample){t, took, ok};
	p->streak = ok ? 0 : p->streak + 1;
}

/* Collects a finished run, or ends one past its timeout (unhealthy). */
static void reap_probe(struct run *r, struct sc_probe *p, int64_t now, bool force)
{
	int st;
	if (!p->pid)
		return;
	pid_t w = waitpid(p->pid, &st, WNOHANG);
	if (w == p->pid) {
		add_sample(p, p->started_ms, now - p->started_ms,
			   WIFEXITED(st) && WEXITSTATUS(st) == 0 &&
			       now - p->started_ms <= p->timeout_ms);
		p->pid = 0;
	} else if (force || now - p->started_ms > p->timeout_ms) {
		kill(-p->pid, SIGKILL);
		kill(p->pid, SIGKILL);
		while (waitpid(p->pid, &st, 0) < 0 && errno == EINTR)
			;
		if (!force)
			add_sample(p, p->started_ms, now - p->started_ms, false);
		p->pid = 0;
	}
	(void)r;
}

static void probes_due(struct run *r, int64_t now, int64_t *next)
{
	for (int i = 0; i < r->s->nprobes; i++) {
		struct sc_probe *p = &r->s->probes[i];
		reap_probe(r, p, now, false);
		if (!p->pid && now >= p->next_ms)
			start_probe(r, p, now);
		int64_t wake = p->pid ? p->started_ms + p->timeout_ms + 1 : p->next_ms;
		if (p->pid && now + 2 < wake)
			wake = now + 2; /* look for its exit soon */
		if (wake < *next)
			*next = wake;
	}
}

/* The readiness gate: the clock starts once every ready probe has answered
 * healthy (each run at its interval), so that the first samples measure
 * the app, not its start-up. Samples taken before are not kept. At most
 * ready_ms_max; a probe never ready fails the run (s->not_ready). */
static void wait_ready(struct run *r)
{
	struct scenario *s = r->s;
	r->t0_ns = (int64_t)fn_now_ns();
	for (int i = 0; i < s->nprobes && !stop_signal; i++) {
		struct sc_probe *p = &s->probes[i];
		p->next_ms = now_ms(r);
		while (p->ready && !stop_signal && !(p->n && p->samples[p->n - 1].ok)) {
			int64_t now = now_ms(r);
			if (now >= s->ready_ms_max) {
				s->not_ready = p->name;
				break;
			}
			reap_probe(r, p, now, false);
			if (!p->pid && now >= p->next_ms && !(p->n && p->samples[p->n - 1].ok))
				start_probe(r, p, now);
			sleep_ms(2);
		}
	}
	for (int i = 0; i < s->nprobes; i++) {
		struct sc_probe *p = &s->probes[i];
		reap_probe(r, p, now_ms(r), true);
		p->n = 0;
		p->streak = 0;
		p->next_ms = 0;
	}
	bool any = false;
	for (int i = 0; i < s->nprobes; i++)
		any |= s->probes[i].ready;
	s->ready_wait_ms = any ? now_ms(r) : 0;
}

/* ---- counters ------------------------------------------------------------- */

static struct sc_rate *rate_for(struct scenario *s, const char *rule)
{
	for (int i = 0; i < s->nrates; i++)
		if (strcmp(s->rates[i].rule, rule) == 0)
			return &s->rates[i];
	struct sc_rate *v = realloc(s->rates, (size_t)(s->nrates + 1) * sizeof(*v));
	if (!v)
		return NULL;
	s->rates = v;
	struct sc_rate *rt = &v[s->nrates++];
	memset(rt, 0, sizeof(*rt));
	snprintf(rt->rule, SC_NAME, "%s", rule);
	return rt;
}

/* The group's per-rule totals, from the state its processes publish in
 * the stats directory (core/segment.h; kept after they exit). */
static void read_totals(struct run *r)
{
	static const char *const keys[SC_TOTALS] = {"attempts", "faults",    "bytes",
						    "requests", "answered",  "slowed",
						    "aborted",	"untouched", "to_server"};
	struct scenario *s = r->s;
	for (int i = 0; i < s->nrates; i++)
		memset(s->rates[i].total, 0, sizeof(s->rates[i].total));
	s->joined = 0;
	s->not_http = 0;
	s->tls_passed = 0;
	DIR *d = opendir(r->statsdir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		char path[600], v[64], name[SC_NAME + 8], err[600];
		size_t len = strlen(e->d_name);
		if (len < 5 || strcmp(e->d_name + len - 4, ".mem") != 0 || e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", r->statsdir, e->d_name);
		char *text = seg_stats_text(path, err, sizeof(err));
		s->joined += text != NULL;
		for (char *line = text ? strtok(text, "\n") : NULL; line;
		     line = strtok(NULL, "\n")) {
			if (strncmp(line, "parser ", 7) == 0)
				s->not_http +=
				    strtoull(record_get(line, "not_http", v, sizeof(v)), NULL, 10);
			if (strncmp(line, "tls ", 4) == 0)
				s->tls_passed +=
				    strtoull(record_get(line, "passed_other_alpn", v, sizeof(v)),
					     NULL, 10) +
				    strtoull(record_get(line, "passed_unavailable", v, sizeof(v)),
					     NULL, 10);
			if (strncmp(line, "rule ", 5) != 0)
				continue;
			struct sc_rate *rt =
			    rate_for(s, record_get(line, "name", name, sizeof(name)));
			for (int k = 0; rt && k < SC_TOTALS; k++)
				rt->total[k] +=
				    strtoull(record_get(line, keys[k], v, sizeof(v)), NULL, 10);
		}
		free(text);
	}
	if (d)
		closedir(d);
}

/* Every second: the totals so far, one entry per rule. */
static void sample_counts(struct run *r)
{
	struct scenario *s = r->s;
	read_totals(r);
	int k = s->seconds++;
	for (int i = 0; i < s->nrates; i++) {
		struct sc_rate *rt = &s->rates[i];
		uint64_t **series[3] = {&rt->attempts, &rt->faults, &rt->requests};
		int idx[3] = {0, 1, 3};
		for (int j = 0; j < 3; j++) {
			uint64_t *v = realloc(*series[j], (size_t)s->seconds * sizeof(uint64_t));
			if (!v)
				return;
			*series[j] = v;
			for (int m = rt->len; m < k; m++)
				v[m] = 0; /* a rule first seen now had nothing before */
			v[k] = rt->total[idx[j]];
		}
		rt->len = s->seconds;
	}
}

/* ---- the run -------------------------------------------------------------- */

/* A stop_if that holds: its reason in why. */
static bool should_stop(const struct run *r, int64_t now, char *why, size_t len)
{
	const struct scenario *s = r->s;
	for (int i = 0; i < s->nstops; i++) {
		const struct sc_stop *st = &s->stops[i];
		if (st->time_ms >= 0 && now >= st->time_ms) {
			snprintf(why, len, "stop_if: time limit of %lld ms",
				 (long long)st->time_ms);
			return true;
		}
		if (st->probe < 0 || (st->after >= 0 && s->steps[st->after].actual_ms < 0))
			continue;
		const struct sc_probe *p = &s->probes[st->probe];
		if (p->streak >= st->failures) {
			snprintf(why, len, "stop_if: probe '%s' failed %d times in a row", p->name,
				 p->streak);
			return true;
		}
	}
	return false;
}

static void check_cmd(struct run *r, int64_t now)
{
	int st;
	if (r->cmd > 0 && r->s->cmd_status < 0 && waitpid(r->cmd, &st, WNOHANG) == r->cmd) {
		r->s->cmd_status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		r->s->cmd_exit_ms = now;
	}
}

static void loop(struct run *r)
{
	struct scenario *s = r->s;
	int64_t next_sample = 0;
	for (;;) {
		int64_t now = now_ms(r), next = s->duration_ms;
		if (stop_signal) {
			snprintf(s->end_reason, sizeof(s->end_reason), "interrupted by %s",
				 stop_signal == SIGINT ? "SIGINT" : "SIGTERM");
			break;
		}
		if (now >= s->duration_ms) {
			snprintf(s->end_reason, sizeof(s->end_reason), "ran its %lld ms",
				 (long long)s->duration_ms);
			break;
		}
		for (int i = 0; i < 2; i++)
			sc_marks_poll(s, &r->marks[i], r->t0_ns, now);
		steps_due(r, now, &next);
		probes_due(r, now_ms(r), &next);
		check_cmd(r, now);
		if (now >= next_sample) {
			sample_counts(r);
			next_sample += 1000;
		}
		if (next_sample < next)
			next = next_sample;
		if (should_stop(r, now, s->end_reason, sizeof(s->end_reason)))
			break;
		int64_t wait = next - now_ms(r);
		if (wait > 0)
			sleep_ms(wait > 5 ? 5 : wait);
	}
}

/* Every step undone: the timed ones by their inverse, then every group the
 * scenario touched back to its policy file, journal cleared. The command's
 * process group is ended last, so that no process of the group outlives
 * the scenario with a change in force. */
static void cleanup(struct run *r)
{
	struct scenario *s = r->s;
	sigset_t block, old;
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigprocmask(SIG_BLOCK, &block, &old);
	for (int i = 0; i < s->nprobes; i++)
		reap_probe(r, &s->probes[i], now_ms(r), true);
	for (int i = 0; i < s->nsteps; i++)
		if (s->steps[i].undo_planned_ms >= 0 && s->steps[i].undo_actual_ms < 0)
			undo_step(r, &s->steps[i]);
	char msg[256];
	ctl(r, s->group, "reset", NULL, msg, sizeof(msg));
	for (int i = 0; i < s->nsteps; i++)
		if (s->steps[i].npids ||
		    (s->steps[i].group[0] && strcmp(s->steps[i].group, s->group) != 0))
			ctl_step(r, &s->steps[i], "reset", NULL, msg, sizeof(msg));
	s->ended_ms = now_ms(r);
	if (r->cmd > 0 && s->cmd_status < 0) {
		kill(-r->cmd, SIGTERM);
		for (int i = 0; i < 300 && s->cmd_status < 0; i++) {
			sleep_ms(10);
			check_cmd(r, now_ms(r));
		}
		if (s->cmd_status < 0) {
			kill(-r->cmd, SIGKILL);
			int st;
			waitpid(r->cmd, &st, 0);
		}
	}
	sleep_ms(300); /* the last counters reach their files */
	sample_counts(r);
	for (int i = 0; i < 2; i++)
		sc_marks_poll(s, &r->marks[i], r->t0_ns, now_ms(r));
	if (r->marks[0].path[0])
		unlink(r->marks[0].path);
	sigprocmask(SIG_SETMASK, &old, NULL);
}

/* The marks' files: the group's, which faultctl mark writes to (created
 * empty: a mark is refused where no scenario runs), and the app's
 * (marks_file, else one in the stats directory), read from its end. */
static void open_marks(struct run *r)
{
	char dir[4096];
	const char *why = fn_rundir(dir, sizeof(dir));
	struct sc_marks_src *m = &r->marks[0];
	m->by_ctl = true;
	if (!why) {
		fn_group_file(m->path, sizeof(m->path), dir, r->s->group, "marks");
		int fd = open(m->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
		why = fd < 0 ? strerror(errno) : NULL;
		if (fd >= 0) { /* whose it is: faultctl mark refuses a gone one's */
			dprintf(fd, "pid %d %llu\n", (int)getpid(),
				(unsigned long long)fn_proc_start(getpid()));
			close(fd);
		}
	}
	if (why) {
		fprintf(stderr, "faultctl scenario: faultctl mark cannot reach group %s: %s\n",
			r->s->group, why);
		m->path[0] = '\0';
	}
	m = &r->marks[1];
	if (r->s->marks_file[0] == '/' || !getcwd(dir, sizeof(dir)))
		snprintf(m->path, sizeof(m->path), "%s", r->s->marks_file);
	else if (r->s->marks_file[0])
		snprintf(m->path, sizeof(m->path), "%.2000s/%.2000s", dir, r->s->marks_file);
	else
		snprintf(m->path, sizeof(m->path), "%s/marks", r->statsdir);
	struct stat st;
	m->off = stat(m->path, &st) == 0 ? st.st_size : 0;
}

static int usage(const char *what)
{
	fprintf(stderr,
		"faultctl scenario: %s\nusage: faultctl scenario FILE [--report DIR] [--strict] "
		"[-- CMD [ARG...]]\n",
		what);
	return 2;
}

static void remove_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char path[600];
	while (d && (e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
			unlink(path);
		}
	if (d)
		closedir(d);
	rmdir(dir);
}

/* --report DIR: every process of the run logs its HTTP requests in
 * DIR/requests.jsonl (a previous run's is removed), for report.json; a
 * FAULTNET_REQUESTS the caller set is kept, and read instead. A report
 * folder that cannot be made is said when the report is written. */
static void requests_log(struct scenario *s, const char *report)
{
	const char *own = getenv("FAULTNET_REQUESTS");
	char dir[PATH_MAX];
	if (own && *own) {
		snprintf(s->requests, sizeof(s->requests), "%s", own);
		return;
	}
	if ((mkdir(report, 0755) < 0 && errno != EEXIST) || !realpath(report, dir))
		return;
	snprintf(s->requests, sizeof(s->requests), "%s/requests.jsonl", dir);
	unlink(s->requests);
	setenv("FAULTNET_REQUESTS", s->requests, 1);
}

int cmd_scenario(int argc, char **argv, const char *self)
{
	const char *file = NULL, *report = NULL;
	bool strict = false;
	int i = 0;
	for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
		if (strcmp(argv[i], "--report") == 0 && i + 1 < argc)
			report = argv[++i];
		else if (strcmp(argv[i], "--strict") == 0)
			strict = setenv("FAULTNET_STRICT", "1", 1) == 0; /* for the shim */
		else if (!file && argv[i][0] != '-')
			file = argv[i];
		else
			return usage("unknown option or extra argument");
	}
	if (!file)
		return usage("no scenario file");
	char err[2048], probe_bin[PATH_MAX];
	struct scenario *s = sc_load(file, err, sizeof(err));
	if (!s) {
		fprintf(stderr, "faultctl: %s\n", err);
		return 78;
	}
	if (!s->group[0])
		snprintf(s->group, SC_NAME, "scenario-%d", (int)getpid());
	s->strict = strict;
	snprintf(probe_bin, sizeof(probe_bin), "%.*s/faultnet-probe",
		 (int)(strrchr(self, '/') ? strrchr(self, '/') - self : 1), self);
	struct run r = {.s = s,
			.self = self,
			.probe_bin = probe_bin,
			.argv = i + 1 < argc ? argv + i + 1 : NULL};
	/* From here on a signal is noted and the run undone at its end; before
	 * it, the default action ends a run that has changed nothing. */
	struct sigaction sa = {.sa_handler = on_signal};
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	/* Named by its pid, so that faultctl gc removes it if this is killed. */
	snprintf(r.statsdir, sizeof(r.statsdir), "/tmp/faultctl-scenario-%d-XXXXXX", (int)getpid());
	if (!mkdtemp(r.statsdir)) {
		perror("faultctl scenario: stats directory");
		sc_free(s);
		return 1;
	}
	open_marks(&r);
	if (report)
		requests_log(s, report);
	start_cmd(&r);
	wait_join(&r);
	wait_ready(&r);
	r.t0_ns = (int64_t)fn_now_ns();
	s->t0_mono_us = r.t0_ns / 1000;
	loop(&r);
	cleanup(&r);
	sc_evaluate(s);
	bool wrote = !report || sc_write_report(s, report, err, sizeof(err));
	if (!wrote)
		fprintf(stderr, "faultctl scenario: %s\n", err);
	sc_summary(s, stdout);
	remove_dir(r.statsdir);
	int rc = stop_signal ? 128 + stop_signal : !sc_passed(s) || !wrote ? 1 : 0;
	sc_free(s);
	return rc;
}
