/* report.c - what a scenario run measured: each expectation
 * checked against the probes' samples and the rules' counters, then the
 * report: report.json (everything, the app's marks included), report.svg (a timeline a person reads
 * at a glance), junit.xml (one test case per step and per expectation,
 * named alike in every run) and a summary. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ctl/scenario/scenario.h"
#include "ctl/state/render.h"

static const char *const kind_names[] = {"healthy_within_ms", "unhealthy_within_ms",
					 "max_failures"};
static const char *const total_names[SC_TOTALS] = {"attempts", "faults",    "bytes",
						   "requests", "answered",  "slowed",
						   "aborted",  "untouched", "to_server"};

/* Where an expectation counts from: a step's start or end, or 0. */
static int64_t reference(const struct scenario *s, const struct sc_expect *e)
{
	if (e->after < 0)
		return 0;
	const struct sc_step *st = &s->steps[e->after];
	return e->from_end ? st->undo_actual_ms : st->actual_ms;
}

static int64_t done_at(const struct sc_sample *x)
{
	return x->t_ms + x->took_ms;
}

/* Time from ref to the first failure known after it; -1 for none. */
static int64_t to_notice(const struct sc_probe *p, int64_t ref)
{
	for (size_t i = 0; i < p->n; i++)
		if (!p->samples[i].ok && done_at(&p->samples[i]) >= ref)
			return done_at(&p->samples[i]) - ref;
	return -1;
}

/* Time from ref until the probe is healthy again after failing at or after
 * ref; 0 if it never failed, -1 if it never recovered. */
static int64_t to_recover(const struct sc_probe *p, int64_t ref)
{
	size_t i = 0;
	while (i < p->n && (p->samples[i].ok || done_at(&p->samples[i]) < ref))
		i++;
	if (i == p->n)
		return 0;
	for (int64_t down = p->samples[i].t_ms; i < p->n; i++)
		if (p->samples[i].ok && p->samples[i].t_ms > down)
			return done_at(&p->samples[i]) - ref;
	return -1;
}

static const struct sc_rate *rate_of(const struct scenario *s, const char *rule)
{
	for (int i = 0; i < s->nrates; i++)
		if (strcmp(s->rates[i].rule, rule) == 0)
			return &s->rates[i];
	return NULL;
}

static void evaluate_one(struct scenario *s, struct sc_expect *e)
{
	int64_t ref = reference(s, e);
	char from[SC_NAME + 32] = "the start";
	if (e->after >= 0)
		snprintf(from, sizeof(from), "%s %s", s->steps[e->after].name,
			 e->from_end ? "ended" : "began");
	if (e->kind == EX_RULE_MAX || e->kind == EX_RULE_MIN) {
		const struct sc_rate *rt = rate_of(s, e->rule);
		int k = 0;
		while (strcmp(total_names[k], e->counter))
			k++;
		bool max = e->kind == EX_RULE_MAX;
		e->measured = rt ? (int64_t)rt->total[k] : 0;
		e->held = max ? e->measured <= e->bound : e->measured >= e->bound;
		snprintf(e->text, sizeof(e->text), "rule %s: %s %lld (at %s %lld)", e->rule,
			 e->counter, (long long)e->measured, max ? "most" : "least",
			 (long long)e->bound);
		return;
	}
	const struct sc_probe *p = &s->probes[e->probe];
	if (ref < 0) {
		e->measured = -1;
		snprintf(e->text, sizeof(e->text), "probe %s: %s never happened", p->name, from);
		return;
	}
	if (e->kind == EX_MAX_FAILURES) {
		e->measured = 0;
		for (size_t i = 0; i < p->n; i++)
			e->measured += !p->samples[i].ok && p->samples[i].t_ms >= ref;
		e->held = e->measured <= e->bound;
		snprintf(e->text, sizeof(e->text),
			 "probe %s: %lld failures after %s (at most %lld)", p->name,
			 (long long)e->measured, from, (long long)e->bound);
		return;
	}
	bool notice = e->kind == EX_UNHEALTHY_WITHIN;
	e->measured = notice ? to_notice(p, ref) : to_recover(p, ref);
	e->held = e->measured >= 0 && e->measured <= e->bound;
	if (e->measured < 0)
		snprintf(e->text, sizeof(e->text), "probe %s: never %s after %s (within %lld ms)",
			 p->name, notice ? "failed" : "recovered", from, (long long)e->bound);
	else
		snprintf(e->text, sizeof(e->text), "probe %s: %s %lld ms after %s (within %lld ms)",
			 p->name, notice ? "failed" : "healthy again", (long long)e->measured, from,
			 (long long)e->bound);
}

void sc_evaluate(struct scenario *s)
{
	for (int i = 0; i < s->nexpects; i++)
		evaluate_one(s, &s->expects[i]);
}

/* ---- what fails a run besides the expectations ------------------------- */

int sc_step_problem(const struct scenario *s, const struct sc_step *st, char *why, size_t len)
{
	why[0] = '\0';
	if (st->actual_ms < 0)
		return strncmp(s->end_reason, "ran its", 7) == 0
			   ? snprintf(why, len, "step %s: never ran", st->name)
			   : 0; /* a run ended early says why of its own */
	if (st->rc != 0)
		return snprintf(why, len, "step %s: %s %s failed (exit %d): %s", st->name,
				sc_verb_name(st->verb), st->arg, st->rc, st->message);
	if (st->actual_ms - st->planned_ms > s->late_ms_max)
		return snprintf(why, len, "step %s: ran %lld ms late (late_ms_max %lld)", st->name,
				(long long)(st->actual_ms - st->planned_ms),
				(long long)s->late_ms_max);
	if (st->undo_actual_ms >= 0 && st->undo_rc != 0)
		return snprintf(why, len, "step %s: its undo failed (exit %d)", st->name,
				st->undo_rc);
	return 0;
}

/* A rule's totals: matched anything at all (connections or requests). */
static bool fired(const struct scenario *s, const char *rule)
{
	const struct sc_rate *rt = rate_of(s, rule);
	return rt && (rt->total[0] || rt->total[3]);
}

const char *sc_unfired(const struct scenario *s, int *i)
{
	for (; *i < s->nsteps; (*i)++) {
		const struct sc_step *st = &s->steps[*i];
		const char *rule = st->verb == SV_ADD ? st->rule : st->arg;
		if (st->actual_ms < 0 || st->rc != 0 ||
		    (st->verb != SV_ENABLE && st->verb != SV_ADD))
			continue;
		if (!fired(s, rule)) {
			(*i)++;
			return rule;
		}
	}
	return NULL;
}

/* What --strict adds: the first of its failures in why ("" for none). */
static bool strict_problem(const struct scenario *s, char *why, size_t len)
{
	int i = 0;
	const char *rule = sc_unfired(s, &i);
	why[0] = '\0';
	if (!s->strict)
		return false;
	if (rule)
		snprintf(why, len, "--strict: rule %s was switched on and never fired", rule);
	else if (s->not_http)
		snprintf(why, len,
			 "--strict: HTTP rules met %llu connections they could not read (not_http; "
			 "%llu of them TLS passed through: h2 only or no termination)",
			 (unsigned long long)s->not_http, (unsigned long long)s->tls_passed);
	else if (!s->joined)
		snprintf(why, len, "--strict: no process joined group %s", s->group);
	return why[0] != '\0';
}

/* ---- report.json ------------------------------------------------------------ */

/* A JSON string: ctl/state's escaper, the one of faultctl's JSON output. */
static void jstr(FILE *f, const char *v)
{
	render_json_string(f, v ? v : "");
}

static void jseries(FILE *f, const uint64_t *v, int n)
{
	fputc('[', f);
	for (int i = 0; i < n; i++) /* per second: the difference of totals */
		fprintf(f, "%s%llu", i ? "," : "",
			(unsigned long long)(i && v[i] >= v[i - 1] ? v[i] - v[i - 1]
					     : i		   ? 0
								   : v[0]));
	fputc(']', f);
}

static void json_steps(FILE *f, const struct scenario *s)
{
	fputs("\"steps\":[", f);
	for (int i = 0; i < s->nsteps; i++) {
		const struct sc_step *st = &s->steps[i];
		fprintf(f, "%s{\"name\":", i ? "," : "");
		jstr(f, st->name);
		fprintf(f, ",\"verb\":\"%s\",\"arg\":", sc_verb_name(st->verb));
		jstr(f, st->arg);
		fprintf(f,
			",\"planned_ms\":%lld,\"actual_ms\":%lld,\"late_ms\":%lld,\"exit\":%d,"
			"\"undo_planned_ms\":%lld,\"undo_actual_ms\":%lld,\"message\":",
			(long long)st->planned_ms, (long long)st->actual_ms,
			(long long)(st->actual_ms >= 0 ? st->actual_ms - st->planned_ms : -1),
			st->rc, (long long)st->undo_planned_ms, (long long)st->undo_actual_ms);
		jstr(f, st->message);
		char why[512];
		sc_step_problem(s, st, why, sizeof(why));
		fputs(",\"problem\":", f);
		jstr(f, why);
		fputc('}', f);
	}
	fputs("],\n", f);
}

static void json_marks(FILE *f, const struct scenario *s)
{
	fputs("\"marks\":[", f);
	for (int i = 0; i < s->nmarks; i++) {
		fprintf(f, "%s{\"name\":", i ? "," : "");
		jstr(f, s->marks[i].name);
		fprintf(f, ",\"t_ms\":%lld,\"by\":\"%s\"}", (long long)s->marks[i].t_ms,
			s->marks[i].by_ctl ? "faultctl mark" : "marks file");
	}
	fputs("],\n", f);
}

static void json_probes(FILE *f, const struct scenario *s)
{
	fputs("\"probes\":[", f);
	for (int i = 0; i < s->nprobes; i++) {
		const struct sc_probe *p = &s->probes[i];
		fprintf(f, "%s{\"name\":", i ? "," : "");
		jstr(f, p->name);
		fputs(p->url ? ",\"url\":" : ",\"command\":", f);
		jstr(f, p->url ? p->url : p->command);
		fprintf(f, ",\"shim\":%s,\"interval_ms\":%lld,\"timeout_ms\":%lld,\"samples\":[",
			p->shim ? "true" : "false", (long long)p->interval_ms,
			(long long)p->timeout_ms);
		for (size_t k = 0; k < p->n; k++)
			fprintf(f, "%s{\"t_ms\":%lld,\"ok\":%s,\"took_ms\":%lld}", k ? "," : "",
				(long long)p->samples[k].t_ms, p->samples[k].ok ? "true" : "false",
				(long long)p->samples[k].took_ms);
		fputs("]}", f);
	}
	fputs("],\n", f);
}

static void json_rules(FILE *f, const struct scenario *s)
{
	fputs("\"rules\":[", f);
	for (int i = 0; i < s->nrates; i++) {
		const struct sc_rate *rt = &s->rates[i];
		fprintf(f, "%s{\"rule\":", i ? "," : "");
		jstr(f, rt->rule);
		fputs(",\"attempts_per_s\":", f);
		jseries(f, rt->attempts, rt->len);
		fputs(",\"faults_per_s\":", f);
		jseries(f, rt->faults, rt->len);
		fputs(",\"requests_per_s\":", f);
		jseries(f, rt->requests, rt->len);
		fputs(",\"totals\":{", f);
		for (int k = 0; k < SC_TOTALS; k++)
			fprintf(f, "%s\"%s\":%llu", k ? "," : "", total_names[k],
				(unsigned long long)rt->total[k]);
		fputs("}}", f);
	}
	fputs("],\n", f);
}

bool sc_passed(const struct scenario *s)
{
	char why[512];
	for (int i = 0; i < s->nexpects; i++)
		if (!s->expects[i].held)
			return false;
	for (int i = 0; i < s->nsteps; i++)
		if (sc_step_problem(s, &s->steps[i], why, sizeof(why)))
			return false;
	return strncmp(s->end_reason, "ran its", 7) == 0 && !s->not_ready &&
	       !strict_problem(s, why, sizeof(why));
}

/* ---- the request log ----------------------------------------------------------- */

/* An integer or true/false after "key": in a line of the request log; the
 * keys are searched with the comma before them, which no string value can
 * hold unescaped. -1 when absent. */
static int64_t field_num(const char *line, const char *key)
{
	char pat[40];
	snprintf(pat, sizeof(pat), ",\"%s\":", key);
	const char *p = strstr(line, pat);
	if (!p)
		return -1;
	p += strlen(pat);
	return strncmp(p, "true", 4) == 0    ? 1
	       : strncmp(p, "false", 5) == 0 ? 0
					     : strtoll(p, NULL, 10);
}

enum { RQ_FAULT, RQ_SERVER, RQ_FAILED, RQ_KINDS };
static const char *const rq_names[] = {"fault", "server", "failed"};

/* Answered or aborted by a rule; else answered by the server; else failed
 * (no answer: the server was out of reach or cut it). */
static int rq_kind(const char *line)
{
	if (strstr(line, ",\"fate\":\"answered\"") || strstr(line, ",\"fate\":\"aborted\""))
		return RQ_FAULT;
	return field_num(line, "reached_server") == 1 && field_num(line, "status") > 0 ? RQ_SERVER
										       : RQ_FAILED;
}

/* The log's requests by outcome, in total and per second of the run
 * (those before its clock started in the first second, those after its end
 * in the last), into s. Nothing when there is no log. */
static void read_requests(struct scenario *s)
{
	FILE *in = s->requests[0] ? fopen(s->requests, "r") : NULL;
	if (!in)
		return;
	int secs = s->seconds > 0 ? s->seconds : 1;
	for (int k = 0; k < RQ_KINDS; k++)
		s->rq_per[k] = calloc((size_t)secs, sizeof(uint64_t));
	char *line = NULL;
	size_t cap = 0;
	while (s->rq_per[RQ_KINDS - 1] && s->rq_per[0] && s->rq_per[1] &&
	       getline(&line, &cap, in) > 0) {
		int64_t t = field_num(line, "req_mono_us");
		if (t < 0 || !strstr(line, ",\"method\":"))
			continue; /* not a request (the cap's note) */
		int k = rq_kind(line);
		int64_t sec = (t - s->t0_mono_us) / 1000000;
		sec = sec < 0 ? 0 : sec >= secs ? secs - 1 : sec;
		s->rq_total[k]++;
		s->rq_per[k][sec]++;
	}
	free(line);
	fclose(in);
	s->rq_secs = s->rq_per[0] && s->rq_per[1] && s->rq_per[2] ? secs : 0;
}

/* "requests": what read_requests found. */
static void json_requests(FILE *f, const struct scenario *s)
{
	if (!s->rq_secs)
		return;
	fputs("\"requests\":{\"file\":", f);
	jstr(f, s->requests);
	for (int k = 0; k < RQ_KINDS; k++)
		fprintf(f, ",\"%s\":%llu", rq_names[k], (unsigned long long)s->rq_total[k]);
	fputs(",\"per_second\":{", f);
	for (int k = 0; k < RQ_KINDS; k++) {
		fprintf(f, "%s\"%s\":[", k ? "," : "", rq_names[k]);
		for (int i = 0; i < s->rq_secs; i++)
			fprintf(f, "%s%llu", i ? "," : "", (unsigned long long)s->rq_per[k][i]);
		fputc(']', f);
	}
	fputs("}},\n", f);
}

static void json_report(FILE *f, const struct scenario *s)
{
	fputs("{\"scenario\":", f);
	jstr(f, s->file);
	fputs(",\"policy\":", f);
	jstr(f, s->policy);
	fputs(",\"group\":", f);
	jstr(f, s->group);
	fprintf(f, ",\"duration_ms\":%lld,\"ended_ms\":%lld,\"end\":", (long long)s->duration_ms,
		(long long)s->ended_ms);
	jstr(f, s->end_reason);
	fprintf(f, ",\"command_exit\":%d,\"passed\":%s,", s->cmd_status,
		sc_passed(s) ? "true" : "false");
	char why[512];
	strict_problem(s, why, sizeof(why));
	fprintf(f, "\"strict\":%s,\"strict_problem\":", s->strict ? "true" : "false");
	jstr(f, why);
	fprintf(f, ",\"joined\":%d,\"join_wait_ms\":%lld,\"ready_wait_ms\":%lld,\"not_ready\":",
		s->joined, (long long)s->join_wait_ms, (long long)s->ready_wait_ms);
	jstr(f, s->not_ready);
	fprintf(f, ",\"not_http\":%llu,\"unfired\":[", (unsigned long long)s->not_http);
	int k = 0, n = 0;
	for (const char *r; (r = sc_unfired(s, &k)); n++) {
		fputs(n ? "," : "", f);
		jstr(f, r);
	}
	fputs("],\n", f);
	json_steps(f, s);
	json_marks(f, s);
	json_probes(f, s);
	json_rules(f, s);
	json_requests(f, s);
	fputs("\"expectations\":[", f);
	for (int i = 0; i < s->nexpects; i++) {
		const struct sc_expect *e = &s->expects[i];
		char kind[32]; /* a rule's: its counter, COUNTER_min for a least */
		snprintf(kind, sizeof(kind), "%s%s",
			 e->kind >= EX_RULE_MAX ? e->counter : kind_names[e->kind],
			 e->kind == EX_RULE_MIN ? "_min" : "");
		fprintf(f,
			"%s{\"line\":%d,\"kind\":\"%s\",\"bound\":%lld,\"measured\":%lld,"
			"\"held\":%s,\"text\":",
			i ? "," : "", e->line, kind, (long long)e->bound, (long long)e->measured,
			e->held ? "true" : "false");
		jstr(f, e->text);
		fputc('}', f);
	}
	fputs("]}\n", f);
}

/* ---- junit.xml ----------------------------------------------------------------- */

static void xml(FILE *f, const char *v)
{
	for (const char *p = v; *p; p++) {
		if (*p == '<')
			fputs("&lt;", f);
		else if (*p == '>')
			fputs("&gt;", f);
		else if (*p == '&')
			fputs("&amp;", f);
		else if (*p == '"')
			fputs("&quot;", f);
		else
			fputc(*p, f);
	}
}

/* One case per step, named by the step alone: failed when it did not run,
 * ran late or its change was refused. */
static int junit_steps(FILE *f, const struct scenario *s, bool write)
{
	int failures = 0;
	for (int i = 0; i < s->nsteps; i++) {
		char why[512];
		bool bad = sc_step_problem(s, &s->steps[i], why, sizeof(why)) > 0;
		failures += bad;
		if (!write)
			continue;
		fputs("  <testcase classname=\"faultnet.scenario\" name=\"step ", f);
		xml(f, s->steps[i].name);
		fputs("\">", f);
		if (bad) {
			fputs("<failure message=\"", f);
			xml(f, why);
			fputs("\"/>", f);
		}
		fputs("</testcase>\n", f);
	}
	return failures;
}

/* What an expectation asks, in words that do not change from run to run
 * (no measured value): the name of its JUnit case, so that CI history
 * follows one case across runs. */
static void describe(const struct scenario *s, const struct sc_expect *e, char *buf, size_t len)
{
	static const char *const asks[] = {"healthy again within", "unhealthy within", "at most"};
	char from[SC_NAME + 32] = "the start";
	if (e->after >= 0)
		snprintf(from, sizeof(from), "%s %s", s->steps[e->after].name,
			 e->from_end ? "ended" : "began");
	if (e->kind == EX_RULE_MAX || e->kind == EX_RULE_MIN)
		snprintf(buf, len, "rule %s: %s at %s %lld", e->rule, e->counter,
			 e->kind == EX_RULE_MAX ? "most" : "least", (long long)e->bound);
	else
		snprintf(buf, len, "probe %s: %s %lld%s after %s", s->probes[e->probe].name,
			 asks[e->kind], (long long)e->bound,
			 e->kind == EX_MAX_FAILURES ? " failures" : " ms", from);
}

/* The measured value and the bound, beside the stable name (properties
 * first, as pytest writes them), then the failure if any and the text. */
static void junit_body(FILE *f, const struct sc_expect *e)
{
	fprintf(f,
		"<properties><property name=\"measured\" value=\"%lld\"/>"
		"<property name=\"bound\" value=\"%lld\"/></properties>",
		(long long)e->measured, (long long)e->bound);
	if (!e->held) {
		fputs("<failure message=\"", f);
		xml(f, e->text);
		fputs("\"/>", f);
	}
	fputs("<system-out>", f);
	xml(f, e->text);
	fputs("</system-out>", f);
}

static void junit(FILE *f, const struct scenario *s)
{
	int failures = junit_steps(f, s, false);
	for (int i = 0; i < s->nexpects; i++)
		failures += !s->expects[i].held;
	fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuite name=\"");
	xml(f, s->file);
	fprintf(f, "\" tests=\"%d\" failures=\"%d\" time=\"%.3f\">\n", s->nsteps + s->nexpects,
		failures, (double)s->ended_ms / 1000);
	junit_steps(f, s, true);
	for (int i = 0; i < s->nexpects; i++) {
		const struct sc_expect *e = &s->expects[i];
		char name[SC_NAME * 2 + 128];
		describe(s, e, name, sizeof(name));
		fprintf(f,
			"  <testcase classname=\"faultnet.scenario\" name=\"expect #%d (line %d): ",
			i + 1, e->line);
		xml(f, name);
		fputs("\">", f);
		junit_body(f, e);
		fputs("</testcase>\n", f);
	}
	fputs("</testsuite>\n", f);
}

/* ---- the summary ---------------------------------------------------------------- */

/* The group's joining, the steps that failed the run, the rules switched
 * on that never fired and what --strict found. */
static void summary_problems(const struct scenario *s, FILE *out)
{
	char why[512];
	if (s->joined)
		fprintf(out, "  group %s: %d process%s joined (the clock waited %lld ms)\n",
			s->group, s->joined, s->joined == 1 ? "" : "es",
			(long long)s->join_wait_ms);
	else
		fprintf(out, "  group %s: no process joined\n", s->group);
	if (s->not_ready)
		fprintf(out,
			"  FAIL ready: probe %s was not healthy within ready_ms_max (%lld ms)\n",
			s->not_ready, (long long)s->ready_ms_max);
	else if (s->ready_wait_ms > 0)
		fprintf(out, "  ready: the clock waited %lld ms for the ready probes\n",
			(long long)s->ready_wait_ms);
	for (int i = 0; i < s->nsteps; i++)
		if (sc_step_problem(s, &s->steps[i], why, sizeof(why)))
			fprintf(out, "  FAIL %s\n", why);
	int k = 0;
	for (const char *r; (r = sc_unfired(s, &k));)
		fprintf(out, "  %s rule %s was switched on by a step and never matched anything\n",
			s->strict ? "FAIL" : "note", r);
	if (strict_problem(s, why, sizeof(why)) && strstr(why, "never fired") == NULL)
		fprintf(out, "  FAIL %s\n", why);
}

void sc_summary(const struct scenario *s, FILE *out)
{
	fprintf(out, "scenario %s: %s (group %s)\n", s->file, s->end_reason, s->group);
	for (int i = 0; i < s->nsteps; i++) {
		const struct sc_step *st = &s->steps[i];
		if (st->actual_ms < 0) {
			fprintf(out, "  step %-16s not reached\n", st->name);
			continue;
		}
		fprintf(out, "  step %-16s %s %s: planned %lld ms, ran at %lld ms (%+lld), exit %d",
			st->name, sc_verb_name(st->verb), st->verb == SV_ADD ? st->rule : st->arg,
			(long long)st->planned_ms, (long long)st->actual_ms,
			(long long)(st->actual_ms - st->planned_ms), st->rc);
		if (st->undo_actual_ms >= 0)
			fprintf(out, "; undone at %lld ms", (long long)st->undo_actual_ms);
		fputc('\n', out);
	}
	for (int i = 0; i < s->nmarks; i++)
		fprintf(out, "  mark %-16s at %lld ms (%s)\n", s->marks[i].name,
			(long long)s->marks[i].t_ms,
			s->marks[i].by_ctl ? "faultctl mark" : "marks file");
	for (int i = 0; i < s->nprobes; i++) {
		const struct sc_probe *p = &s->probes[i];
		size_t bad = 0;
		for (size_t k = 0; k < p->n; k++)
			bad += !p->samples[k].ok;
		fprintf(out, "  probe %-15s %zu samples, %zu unhealthy\n", p->name, p->n, bad);
	}
	for (int i = 0; i < s->nrates; i++) {
		const struct sc_rate *rt = &s->rates[i];
		/* A request rule counts requests, any other attempts. */
		if (rt->total[3])
			fprintf(out,
				"  rule %-16s requests %llu, faults %llu (answered %llu, slowed "
				"%llu, aborted %llu; untouched %llu; to the server %llu)",
				rt->rule, (unsigned long long)rt->total[3],
				(unsigned long long)rt->total[1], (unsigned long long)rt->total[4],
				(unsigned long long)rt->total[5], (unsigned long long)rt->total[6],
				(unsigned long long)rt->total[7], (unsigned long long)rt->total[8]);
		else
			fprintf(out, "  rule %-16s attempts %llu, faults %llu", rt->rule,
				(unsigned long long)rt->total[0], (unsigned long long)rt->total[1]);
		fputc('\n', out);
	}
	summary_problems(s, out);
	int held = 0;
	for (int i = 0; i < s->nexpects; i++) {
		held += s->expects[i].held;
		fprintf(out, "  %s expect #%d: %s\n", s->expects[i].held ? "ok  " : "FAIL", i + 1,
			s->expects[i].text);
	}
	fprintf(out, "result: %s, %d of %d expectations held\n", sc_passed(s) ? "passed" : "failed",
		held, s->nexpects);
}

/* ---- writing ---------------------------------------------------------------- */

void sc_svg(FILE *f, const struct scenario *s);

static bool write_one(const char *dir, const char *name, const struct scenario *s,
		      void (*fn)(FILE *, const struct scenario *), char *err, size_t errlen)
{
	char path[PATH_MAX + 64];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "we");
	if (!f) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return false;
	}
	fn(f, s);
	if (fclose(f) != 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return false;
	}
	return true;
}

bool sc_write_report(struct scenario *s, const char *dir, char *err, size_t errlen)
{
	if (!s->rq_secs)
		read_requests(s);
	if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "--report %s: %s", dir, strerror(errno));
		return false;
	}
	return write_one(dir, "report.json", s, json_report, err, errlen) &&
	       write_one(dir, "report.svg", s, sc_svg, err, errlen) &&
	       write_one(dir, "junit.xml", s, junit, err, errlen);
}
