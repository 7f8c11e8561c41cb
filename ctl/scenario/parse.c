/* parse.c - reads a scenario file (libconfig, as policies are) into
 * the model of scenario.h. Every problem is reported as FILE:LINE: what,
 * naming the field; nothing unknown is ignored. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/actions.h"
#include "core/config.h"
#include "core/lcfg.h"
#include "core/rules.h"
#include "core/suggest.h"
#include "ctl/scenario/scenario.h"

struct pctx {
	struct fn_lcfg lc;
	struct scenario *s;
	struct fn_policy *policy; /* the one the processes start with */
	char *err;
	size_t errlen;
};

static const char *const verbs[SV_COUNT] = {"enable", "disable", "add", "rm", "load", "zone"};

const char *sc_verb_name(enum sc_verb v)
{
	return verbs[v];
}

static bool fail(struct pctx *c, const config_setting_t *at, const char *fmt, ...)
{
	int n =
	    at ? snprintf(c->err, c->errlen, "%s:%d: ", c->s->file, config_setting_source_line(at))
	       : snprintf(c->err, c->errlen, "%s: ", c->s->file);
	va_list ap;
	va_start(ap, fmt);
	if (n > 0 && (size_t)n < c->errlen)
		vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
	va_end(ap);
	return false;
}

/* The same, at a line of the file (a step's or an expectation's). */
static bool fail_at(struct pctx *c, int line, const char *fmt, ...)
{
	int n = snprintf(c->err, c->errlen, "%s:%d: ", c->s->file, line);
	va_list ap;
	va_start(ap, fmt);
	if (n > 0 && (size_t)n < c->errlen)
		vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
	va_end(ap);
	return false;
}

static bool only(struct pctx *c, const config_setting_t *g, const char *where,
		 const char *const *keys)
{
	for (int i = 0; i < c->lc.length(g); i++) {
		const config_setting_t *m = c->lc.elem(g, (unsigned)i);
		const char *const *k = keys;
		while (*k && strcmp(*k, config_setting_name(m)))
			k++;
		if (*k)
			continue;
		size_t n = 0;
		while (keys[n])
			n++;
		const char *near = fn_closest(config_setting_name(m), keys, n);
		return fail(c, m, "%s: unknown key '%s'%s%s%s", where, config_setting_name(m),
			    near ? ", did you mean '" : "", near ? near : "", near ? "'?" : "");
	}
	return true;
}

static bool str(struct pctx *c, const config_setting_t *g, const char *key, const char *where,
		const char **out)
{
	const config_setting_t *m = c->lc.member(g, key);
	*out = NULL;
	if (!m)
		return true;
	if (config_setting_type(m) != CONFIG_TYPE_STRING)
		return fail(c, m, "%s: %s must be a string", where, key);
	*out = c->lc.get_string(m);
	return true;
}

/* A whole number of milliseconds (or a count), from lo up; -1 if absent. */
static bool num(struct pctx *c, const config_setting_t *g, const char *key, const char *where,
		int64_t lo, int64_t *out)
{
	const config_setting_t *m = c->lc.member(g, key);
	*out = -1;
	if (!m)
		return true;
	int t = config_setting_type(m);
	if (t != CONFIG_TYPE_INT && t != CONFIG_TYPE_INT64)
		return fail(c, m, "%s: %s must be a whole number", where, key);
	long long v = c->lc.get_int64(m);
	if (v < lo || v > 7LL * 86400 * 1000)
		return fail(c, m, "%s: %s %lld is not from %lld to 604800000", where, key, v,
			    (long long)lo);
	*out = v;
	return true;
}

static bool name_of(struct pctx *c, const config_setting_t *g, const char *what, char *out)
{
	const char *v;
	if (!str(c, g, "name", what, &v))
		return false;
	if (!v)
		return fail(c, g, "a %s without a name", what);
	if (!fn_name_valid(v))
		return fail(c, g, "%s name '%s' must be 1 to 63 letters, digits or _.:-", what, v);
	snprintf(out, SC_NAME, "%s", v);
	return true;
}

static int step_index(const struct scenario *s, const char *name)
{
	for (int i = 0; i < s->nsteps; i++)
		if (strcmp(s->steps[i].name, name) == 0)
			return i;
	return -1;
}

static int probe_index(const struct scenario *s, const char *name)
{
	for (int i = 0; i < s->nprobes; i++)
		if (strcmp(s->probes[i].name, name) == 0)
			return i;
	return -1;
}

/* "after": a step defined earlier in the file. */
static bool step_ref(struct pctx *c, const config_setting_t *g, const char *where, int *out)
{
	const char *v;
	*out = -1;
	if (!str(c, g, "after", where, &v))
		return false;
	if (v && (*out = step_index(c->s, v)) < 0)
		return fail(c, c->lc.member(g, "after"), "%s: after: no step '%s' before it", where,
			    v);
	return true;
}

/* add: the rule's name, from its own text. */
static bool added_rule(struct pctx *c, const config_setting_t *at, struct sc_step *st)
{
	char text[70000], err[512];
	snprintf(text, sizeof(text), "rules = ( %s );", st->arg);
	struct fn_policy *p = fn_config_load_string(text, "add", NULL, err, sizeof(err));
	if (!p || p->nrules != 1) {
		fn_policy_free(p);
		return fail(c, at, "step '%s': add: %s", st->name,
			    p		       ? "exactly one rule"
			    : strchr(err, ' ') ? strchr(err, ' ') + 1
					       : err);
	}
	snprintf(st->rule, SC_NAME, "%s", p->rules[0].name);
	c->s->http |= fn_rule_http(&p->rules[0]);
	fn_policy_free(p);
	return true;
}

/* pids = [ 4242, 4243 ]: the step goes to these processes, not a group. */
static bool step_pids(struct pctx *c, const config_setting_t *g, struct sc_step *st,
		      const char *where)
{
	const config_setting_t *l = c->lc.member(g, "pids");
	if (!l)
		return true;
	if (st->group[0])
		return fail(c, l, "%s: give group or pids, not both", where);
	int n = config_setting_is_array(l) || config_setting_is_list(l) ? c->lc.length(l) : -1;
	if (n < 1 || n > 16)
		return fail(c, l, "%s: pids must be a list of 1 to 16 process ids", where);
	for (int i = 0; i < n; i++) {
		const config_setting_t *e = c->lc.elem(l, (unsigned)i);
		long long v = config_setting_type(e) == CONFIG_TYPE_INT ? c->lc.get_int64(e) : 0;
		if (v < 1 || v > 4194304)
			return fail(c, e, "%s: pids: %lld is not a process id", where, v);
		st->pids[st->npids++] = (int)v;
	}
	return true;
}

static bool parse_step(struct pctx *c, const config_setting_t *g, struct sc_step *st)
{
	static const char *const keys[] = {"name",  "at_ms", "after",  "after_ms", "for_ms",
					   "group", "pids",  "enable", "disable",  "add",
					   "rm",    "load",  "zone",   NULL};
	st->line = config_setting_source_line(g);
	st->planned_ms = st->actual_ms = st->undo_planned_ms = st->undo_actual_ms = -1;
	if (!config_setting_is_group(g))
		return fail(c, g, "each step must be a group { name = ...; }");
	if (!name_of(c, g, "step", st->name))
		return false;
	char where[SC_NAME + 16];
	snprintf(where, sizeof(where), "step '%s'", st->name);
	const char *grp, *arg = NULL;
	if (!only(c, g, where, keys) || !num(c, g, "at_ms", where, 0, &st->at_ms) ||
	    !num(c, g, "after_ms", where, 0, &st->after_ms) ||
	    !num(c, g, "for_ms", where, 1, &st->for_ms) || !step_ref(c, g, where, &st->after) ||
	    !str(c, g, "group", where, &grp))
		return false;
	if ((st->at_ms >= 0) == (st->after >= 0))
		return fail(c, g, "%s: give at_ms or after (a step's name), one of them", where);
	if (st->after_ms >= 0 && st->after < 0)
		return fail(c, g, "%s: after_ms goes with after", where);
	if (st->after_ms < 0)
		st->after_ms = 0;
	st->plan_ms = st->at_ms >= 0 ? st->at_ms : c->s->steps[st->after].plan_ms + st->after_ms;
	if (st->plan_ms > c->s->duration_ms)
		return fail(c, g,
			    "%s: it would run at %lld ms, after the scenario's duration_ms (%lld): "
			    "it would never run",
			    where, (long long)st->plan_ms, (long long)c->s->duration_ms);
	/* Its undo too: the end would undo it early, and the window the
	 * user wrote would be silently shorter. */
	if (st->for_ms >= 0 && st->plan_ms + st->for_ms > c->s->duration_ms)
		return fail(c, g,
			    "%s: its for_ms (%lld) would end at %lld ms, after the scenario's "
			    "duration_ms (%lld): the end would cut it short",
			    where, (long long)st->for_ms, (long long)(st->plan_ms + st->for_ms),
			    (long long)c->s->duration_ms);
	snprintf(st->group, SC_NAME, "%s", grp ? grp : "");
	if (!step_pids(c, g, st, where))
		return false;
	int found = 0;
	for (int v = 0; v < SV_COUNT; v++) {
		const char *a;
		if (!str(c, g, verbs[v], where, &a))
			return false;
		if (a) {
			found++;
			st->verb = (enum sc_verb)v;
			arg = a;
		}
	}
	if (found != 1)
		return fail(c, g, "%s: give one action: enable, disable, add, rm, load or zone",
			    where);
	if (!(st->arg = strdup(arg)))
		return fail(c, g, "out of memory");
	if (st->for_ms >= 0 && st->verb != SV_ENABLE && st->verb != SV_DISABLE &&
	    st->verb != SV_ADD)
		return fail(c, g,
			    "%s: for_ms undoes enable, disable and add only (the end of the "
			    "scenario undoes everything)",
			    where);
	return st->verb != SV_ADD || added_rule(c, c->lc.member(g, "add"), st);
}

static bool parse_probe(struct pctx *c, const config_setting_t *g, struct sc_probe *p)
{
	static const char *const keys[] = {
	    "name", "command", "url", "status", "interval_ms", "timeout_ms", "shim", "ready", NULL};
	p->line = config_setting_source_line(g);
	if (!config_setting_is_group(g))
		return fail(c, g, "each probe must be a group { name = ...; }");
	if (!name_of(c, g, "probe", p->name))
		return false;
	char where[SC_NAME + 16];
	snprintf(where, sizeof(where), "probe '%s'", p->name);
	const char *cmd, *url;
	int64_t status;
	if (!only(c, g, where, keys) || !str(c, g, "command", where, &cmd) ||
	    !str(c, g, "url", where, &url) || !num(c, g, "status", where, 100, &status) ||
	    !num(c, g, "interval_ms", where, 10, &p->interval_ms) ||
	    !num(c, g, "timeout_ms", where, 1, &p->timeout_ms))
		return false;
	if (!cmd == !url)
		return fail(c, g, "%s: give command or url, one of them", where);
	if (url && strncmp(url, "http://", 7) != 0)
		return fail(c, c->lc.member(g, "url"), "%s: url '%s' must start with http://",
			    where, url);
	p->status = status < 0 ? 200 : (int)status;
	if (p->interval_ms < 0)
		p->interval_ms = 500;
	if (p->timeout_ms < 0)
		p->timeout_ms = p->interval_ms;
	const config_setting_t *sh = c->lc.member(g, "shim");
	if (sh && config_setting_type(sh) != CONFIG_TYPE_BOOL)
		return fail(c, sh, "%s: shim must be true or false", where);
	p->shim = !sh || c->lc.get_bool(sh);
	const config_setting_t *rd = c->lc.member(g, "ready");
	if (rd && config_setting_type(rd) != CONFIG_TYPE_BOOL)
		return fail(c, rd, "%s: ready must be true or false", where);
	p->ready = rd && c->lc.get_bool(rd);
	p->command = cmd ? strdup(cmd) : NULL;
	p->url = url ? strdup(url) : NULL;
	return true;
}

/* One of the bounds: healthy_within_ms, unhealthy_within_ms, max_failures
 * for a probe; COUNTER_max for a rule. */
static bool expect_bound(struct pctx *c, const config_setting_t *g, struct sc_expect *e,
			 const char *where)
{
	static const char *const counters[] = {"attempts",  "faults",	 "requests",
					       "answered",  "slowed",	 "aborted",
					       "untouched", "to_server", NULL};
	static const char *const kinds[] = {"healthy_within_ms", "unhealthy_within_ms",
					    "max_failures"};
	int found = 0;
	for (int k = 0; k < 3; k++) {
		int64_t v;
		if (!num(c, g, kinds[k], where, 0, &v))
			return false;
		if (v >= 0 && e->probe >= 0) {
			found++;
			e->kind = (enum sc_expect_kind)k;
			e->bound = v;
		}
	}
	for (const char *const *k = counters; *k; k++)
		for (int m = 0; m < 2; m++) {
			char key[32];
			int64_t v;
			snprintf(key, sizeof(key), "%s_%s", *k, m ? "min" : "max");
			if (!num(c, g, key, where, 0, &v))
				return false;
			if (v >= 0 && e->probe < 0) {
				found++;
				e->kind = m ? EX_RULE_MIN : EX_RULE_MAX;
				e->bound = v;
				snprintf(e->counter, sizeof(e->counter), "%s", *k);
			}
		}
	if (found != 1)
		return fail(c, g,
			    "%s: give one bound: healthy_within_ms, unhealthy_within_ms or "
			    "max_failures for a probe; COUNTER_max or COUNTER_min for a rule, "
			    "COUNTER one of attempts, faults, requests, answered, slowed, "
			    "aborted, untouched, to_server",
			    where);
	return true;
}

static bool parse_expect(struct pctx *c, const config_setting_t *g, struct sc_expect *e, int i)
{
	static const char *const keys[] = {"probe",
					   "rule",
					   "after",
					   "from",
					   "healthy_within_ms",
					   "unhealthy_within_ms",
					   "max_failures",
					   "attempts_max",
					   "faults_max",
					   "requests_max",
					   "answered_max",
					   "slowed_max",
					   "aborted_max",
					   "untouched_max",
					   "to_server_max",
					   "attempts_min",
					   "faults_min",
					   "requests_min",
					   "answered_min",
					   "slowed_min",
					   "aborted_min",
					   "untouched_min",
					   "to_server_min",
					   NULL};
	e->line = config_setting_source_line(g);
	char where[32];
	snprintf(where, sizeof(where), "expect #%d", i + 1);
	if (!config_setting_is_group(g))
		return fail(c, g, "each expectation must be a group { probe = ...; ... }");
	const char *probe, *rule, *from;
	if (!only(c, g, where, keys) || !str(c, g, "probe", where, &probe) ||
	    !str(c, g, "rule", where, &rule) || !str(c, g, "from", where, &from) ||
	    !step_ref(c, g, where, &e->after))
		return false;
	if (!probe == !rule)
		return fail(c, g, "%s: give probe or rule, one of them", where);
	e->probe = probe ? probe_index(c->s, probe) : -1;
	if (probe && e->probe < 0)
		return fail(c, g, "%s: no probe '%s' (probes come before expect)", where, probe);
	if (rule)
		snprintf(e->rule, SC_NAME, "%s", rule);
	if (from && strcmp(from, "start") && strcmp(from, "end"))
		return fail(c, c->lc.member(g, "from"),
			    "%s: from '%s' must be \"start\" or \"end\"", where, from);
	e->from_end = from && from[0] == 'e';
	if (e->from_end && (e->after < 0 || c->s->steps[e->after].for_ms < 0))
		return fail(c, g, "%s: from = \"end\" needs after = a step with for_ms", where);
	return expect_bound(c, g, e, where);
}

static bool parse_stop(struct pctx *c, const config_setting_t *g, struct sc_stop *st, int i)
{
	static const char *const keys[] = {"probe", "failures", "after", "time_ms", NULL};
	char where[32];
	snprintf(where, sizeof(where), "stop_if #%d", i + 1);
	st->line = config_setting_source_line(g);
	const char *probe;
	int64_t failures;
	if (!config_setting_is_group(g) || !only(c, g, where, keys) ||
	    !str(c, g, "probe", where, &probe) || !num(c, g, "failures", where, 1, &failures) ||
	    !num(c, g, "time_ms", where, 1, &st->time_ms) || !step_ref(c, g, where, &st->after))
		return config_setting_is_group(g) ? false
						  : fail(c, g, "each stop_if must be a group");
	st->probe = probe ? probe_index(c->s, probe) : -1;
	if (probe && st->probe < 0)
		return fail(c, g, "%s: no probe '%s'", where, probe);
	if ((probe != NULL) != (failures >= 0) || (!probe && st->time_ms < 0))
		return fail(c, g, "%s: give probe with failures (in a row), or time_ms", where);
	st->failures = (int)failures;
	return true;
}

/* A list of groups, each parsed by one of the functions above. */
static bool parse_list(struct pctx *c, const config_setting_t *root, const char *key, void **arr,
		       int *n, size_t size,
		       bool (*each)(struct pctx *, const config_setting_t *, void *, int))
{
	const config_setting_t *l = c->lc.member(root, key);
	if (!l)
		return true;
	if (!config_setting_is_list(l) && !(config_setting_is_array(l) && !c->lc.length(l)))
		return fail(c, l, "%s must be a list ( { ... }, { ... } )", key);
	int count = c->lc.length(l);
	*arr = calloc((size_t)count + 1, size);
	if (!*arr)
		return fail(c, l, "out of memory");
	for (int i = 0; i < count; i++) {
		*n = i + 1;
		if (!each(c, c->lc.elem(l, (unsigned)i), (char *)*arr + (size_t)i * size, i))
			return false;
	}
	return true;
}

static bool each_step(struct pctx *c, const config_setting_t *g, void *p, int i)
{
	struct sc_step *st = p;
	if (!parse_step(c, g, st))
		return false;
	if (step_index(c->s, st->name) != i)
		return fail(c, g, "duplicate step name '%s'", st->name);
	return true;
}

static bool each_probe(struct pctx *c, const config_setting_t *g, void *p, int i)
{
	struct sc_probe *pr = p;
	if (!parse_probe(c, g, pr))
		return false;
	if (probe_index(c->s, pr->name) != i)
		return fail(c, g, "duplicate probe name '%s'", pr->name);
	return true;
}

static bool each_expect(struct pctx *c, const config_setting_t *g, void *p, int i)
{
	return parse_expect(c, g, p, i);
}

static bool each_stop(struct pctx *c, const config_setting_t *g, void *p, int i)
{
	return parse_stop(c, g, p, i);
}

/* The policy the processes start with: a file (relative to the scenario),
 * or the scenario's own rules and zones, written to a file of their own
 * next to the report. */
static bool policy_of(struct pctx *c, config_t *cfg, const config_setting_t *root)
{
	const char *file;
	if (!str(c, root, "policy", "top level", &file))
		return false;
	bool inline_rules = c->lc.member(root, "rules") || c->lc.member(root, "zones");
	if (!file == !inline_rules)
		return fail(c, NULL,
			    "give policy = \"FILE\" or inline rules (and zones), one of them");
	char err[1024];
	if (file) {
		const char *slash = strrchr(c->s->file, '/');
		if (file[0] != '/' && slash)
			snprintf(c->s->policy, sizeof(c->s->policy), "%.*s/%s",
				 (int)(slash - c->s->file), c->s->file, file);
		else
			snprintf(c->s->policy, sizeof(c->s->policy), "%s", file);
	} else {
		static const char *const drop[] = {
		    "policy",	    "group",	  "duration_ms", "late_ms_max",
		    "ready_ms_max", "steps",	  "probes",	 "expect",
		    "stop_if",	    "marks_file", NULL};
		for (const char *const *k = drop; *k; k++)
			c->lc.remove(config_root_setting(cfg), *k);
		snprintf(c->s->policy, sizeof(c->s->policy), "/tmp/faultctl-policy-%d.conf",
			 (int)getpid());
		c->s->policy_tmp = true;
		if (!c->lc.write_file(cfg, c->s->policy))
			return fail(c, NULL, "cannot write the inline policy to %s", c->s->policy);
	}
	c->policy = fn_config_load_file(c->s->policy, NULL, err, sizeof(err));
	if (!c->policy)
		return fail(c, NULL, "%s%s", file ? "policy: " : "inline policy: ", err);
	return true;
}

/* ---- names resolved against the policy ----------------------------------- */

/* The rule and zone names a scenario may name: its policy's, the rules its
 * add steps add and what its load steps load. */
struct names {
	const char **rules, **zones;
	size_t nrules, nzones;
};

static bool name_add(const char ***v, size_t *n, const char *name)
{
	const char **w = realloc(*v, (*n + 1) * sizeof(*w));
	if (!w)
		return false;
	*v = w;
	w[(*n)++] = name;
	return true;
}

static bool names_of(struct names *k, const struct fn_policy *p)
{
	for (size_t i = 0; i < p->nrules; i++)
		if (!name_add(&k->rules, &k->nrules, p->rules[i].name))
			return false;
	for (size_t i = 0; i < p->nzones; i++)
		if (!name_add(&k->zones, &k->nzones, p->zones[i].name))
			return false;
	return true;
}

static bool known(const char *const *v, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i], name) == 0)
			return true;
	return false;
}

/* "no rule 'x' in the policy FILE (did you mean 'y'?)"; inline rules are
 * "the scenario's rules", not the temporary file they were written to. */
static bool unknown(struct pctx *c, int line, const char *where, const char *what, const char *name,
		    const char *const *v, size_t n)
{
	const char *near = fn_closest(name, v, n);
	return fail_at(c, line, "%s: no %s '%s' in %s%s%s%s%s", where, what, name,
		       c->s->policy_tmp ? "the scenario's rules" : "the policy ",
		       c->s->policy_tmp ? "" : c->s->policy, near ? " (did you mean '" : "",
		       near ? near : "", near ? "'?)" : "");
}

/* A step to the scenario's own group names what its policy has. A step to
 * another group or to pids is checked when it runs: faultctl refuses a
 * group no process has joined. */
static bool resolve_step(struct pctx *c, struct names *k, const struct sc_step *st)
{
	char where[SC_NAME + 16];
	snprintf(where, sizeof(where), "step '%s'", st->name);
	if (st->npids || (st->group[0] && strcmp(st->group, c->s->group) != 0))
		return true;
	if ((st->verb == SV_ENABLE || st->verb == SV_DISABLE || st->verb == SV_RM) &&
	    !known(k->rules, k->nrules, st->arg))
		return unknown(c, st->line, where, "rule", st->arg, k->rules, k->nrules);
	if (st->verb == SV_ZONE && !known(k->zones, k->nzones, st->arg))
		return unknown(c, st->line, where, "zone", st->arg, k->zones, k->nzones);
	return true;
}

/* The loaded policies of load steps, freed by the caller. */
static bool load_steps(struct pctx *c, struct names *k, struct fn_policy **loaded)
{
	for (int i = 0; i < c->s->nsteps; i++) {
		const struct sc_step *st = &c->s->steps[i];
		char err[1024];
		if (st->verb == SV_ADD && !name_add(&k->rules, &k->nrules, st->rule))
			return fail_at(c, st->line, "out of memory");
		if (st->verb != SV_LOAD)
			continue;
		if (!(loaded[i] = fn_config_load_file(st->arg, NULL, err, sizeof(err))))
			return fail_at(c, st->line, "step '%s': load: %s", st->name, err);
		if (!names_of(k, loaded[i]))
			return fail_at(c, st->line, "out of memory");
		for (size_t j = 0; j < loaded[i]->nrules; j++)
			c->s->http |= fn_rule_http(&loaded[i]->rules[j]);
	}
	return true;
}

/* Whether a rule of this action has the counter: a request rule (respond,
 * slow, abort) counts requests and never attempts or bytes; any other rule
 * counts attempts (connects) and never requests (the stats' words). */
static bool has_counter(enum fn_action a, const char *counter)
{
	bool req = a == FN_ACT_RESPOND || a == FN_ACT_SLOW || a == FN_ACT_ABORT;
	if (strcmp(counter, "faults") == 0)
		return true;
	if (strcmp(counter, "attempts") == 0 || strcmp(counter, "bytes") == 0)
		return !req;
	return req;
}

/* An expectation on a counter its rule never has (attempts_min on a respond
 * rule) could never hold, or would hold with 0: refused, the right word
 * said. A rule an add step brings is not known here, nor checked. */
static bool counter_fits(struct pctx *c, struct fn_policy **loaded, const struct sc_expect *e,
			 const char *where)
{
	const struct fn_rule *seen = NULL;
	for (int i = -1; i < c->s->nsteps; i++) {
		const struct fn_policy *p = i < 0 ? c->policy : loaded[i];
		for (size_t j = 0; p && j < p->nrules; j++) {
			if (strcmp(p->rules[j].name, e->rule) != 0)
				continue;
			if (has_counter(p->rules[j].action, e->counter))
				return true;
			seen = &p->rules[j];
		}
	}
	if (!seen)
		return true;
	bool req = has_counter(seen->action, "requests");
	return fail_at(c, e->line,
		       "%s: rule '%s' (%s) counts %s, not %s: say %s_%s, or another of its "
		       "counters (%s)",
		       where, e->rule, fn_action_name(seen->action),
		       req ? "requests" : "attempts (connects)", e->counter,
		       req ? "requests" : "attempts", e->kind == EX_RULE_MIN ? "min" : "max",
		       req ? "faults, answered, slowed, aborted, untouched, to_server" : "faults");
}

static bool resolve(struct pctx *c)
{
	struct names k = {0};
	struct fn_policy **loaded = calloc((size_t)c->s->nsteps + 1, sizeof(*loaded));
	bool ok = loaded && names_of(&k, c->policy) && load_steps(c, &k, loaded);
	for (int i = 0; ok && i < c->s->nsteps; i++)
		ok = resolve_step(c, &k, &c->s->steps[i]);
	for (int i = 0; ok && i < c->s->nexpects; i++) {
		const struct sc_expect *e = &c->s->expects[i];
		char where[32];
		snprintf(where, sizeof(where), "expect #%d", i + 1);
		if (e->probe < 0 && !known(k.rules, k.nrules, e->rule))
			ok = unknown(c, e->line, where, "rule", e->rule, k.rules, k.nrules);
		else if (e->probe < 0)
			ok = counter_fits(c, loaded, e, where);
	}
	for (int i = 0; loaded && i < c->s->nsteps; i++)
		fn_policy_free(loaded[i]);
	free(loaded);
	free(k.rules);
	free(k.zones);
	return ok;
}

static bool parse_root(struct pctx *c, config_t *cfg)
{
	static const char *const keys[] = {
	    "policy",	    "rules", "zones",  "zone",	 "group",   "duration_ms", "late_ms_max",
	    "ready_ms_max", "steps", "probes", "expect", "stop_if", "marks_file",  NULL};
	const config_setting_t *root = config_root_setting(cfg);
	struct scenario *s = c->s;
	const char *group;
	if (!only(c, root, "top level", keys) || !str(c, root, "group", "top level", &group) ||
	    !num(c, root, "duration_ms", "top level", 1, &s->duration_ms))
		return false;
	if (s->duration_ms < 0)
		return fail(c, NULL, "duration_ms is required (how long the scenario runs)");
	if (!num(c, root, "late_ms_max", "top level", 0, &s->late_ms_max))
		return false;
	if (s->late_ms_max < 0)
		s->late_ms_max = SC_LATE_MS_MAX;
	if (!num(c, root, "ready_ms_max", "top level", 0, &s->ready_ms_max))
		return false;
	if (s->ready_ms_max < 0)
		s->ready_ms_max = SC_READY_MS_MAX;
	const char *marks;
	if (!str(c, root, "marks_file", "top level", &marks))
		return false;
	if (marks && (!marks[0] || strlen(marks) >= sizeof(s->marks_file)))
		return fail(c, c->lc.member(root, "marks_file"),
			    "top level: marks_file must be a path (where the command runs)");
	snprintf(s->marks_file, sizeof(s->marks_file), "%s", marks ? marks : "");
	if (group && !fn_name_valid(group))
		return fail(c, c->lc.member(root, "group"),
			    "group '%s' must be 1 to 63 letters, "
			    "digits or _.:-",
			    group);
	if (group)
		snprintf(s->group, SC_NAME, "%s", group);
	return parse_list(c, root, "steps", (void **)&s->steps, &s->nsteps, sizeof(*s->steps),
			  each_step) &&
	       parse_list(c, root, "probes", (void **)&s->probes, &s->nprobes, sizeof(*s->probes),
			  each_probe) &&
	       parse_list(c, root, "expect", (void **)&s->expects, &s->nexpects,
			  sizeof(*s->expects), each_expect) &&
	       parse_list(c, root, "stop_if", (void **)&s->stops, &s->nstops, sizeof(*s->stops),
			  each_stop) &&
	       policy_of(c, cfg, root) && resolve(c);
}

struct scenario *sc_load(const char *path, char *err, size_t errlen)
{
	struct pctx c = {.err = err, .errlen = errlen};
	if (!(c.s = calloc(1, sizeof(*c.s))))
		return NULL;
	c.s->cmd_status = -1;
	snprintf(c.s->file, sizeof(c.s->file), "%s", path);
	const char *why = fn_lcfg_open(&c.lc);
	if (why) {
		snprintf(err, errlen, "%s: %s", path, why);
		sc_free(c.s);
		return NULL;
	}
	config_t cfg;
	c.lc.init(&cfg);
	bool ok;
	if (!(ok = c.lc.read_file(&cfg, path) != 0)) {
		if (config_error_type(&cfg) == CONFIG_ERR_FILE_IO)
			snprintf(err, errlen, "%s: cannot read the file (%s)", path,
				 strerror(errno));
		else
			snprintf(err, errlen, "%s:%d: %s", path, config_error_line(&cfg),
				 config_error_text(&cfg));
	} else {
		ok = parse_root(&c, &cfg);
	}
	c.lc.destroy(&cfg);
	fn_policy_free(c.policy);
	fn_lcfg_close(&c.lc);
	if (!ok) {
		sc_free(c.s);
		return NULL;
	}
	return c.s;
}

void sc_free(struct scenario *s)
{
	if (!s)
		return;
	for (int i = 0; i < s->nsteps; i++)
		free(s->steps[i].arg);
	for (int i = 0; i < s->nprobes; i++) {
		free(s->probes[i].command);
		free(s->probes[i].url);
		free(s->probes[i].samples);
	}
	for (int i = 0; i < s->nrates; i++) {
		free(s->rates[i].attempts);
		free(s->rates[i].faults);
		free(s->rates[i].requests);
	}
	free(s->rates);
	free(s->marks);
	for (int k = 0; k < 3; k++)
		free(s->rq_per[k]);
	if (s->policy_tmp)
		unlink(s->policy);
	free(s->steps);
	free(s->probes);
	free(s->expects);
	free(s->stops);
	free(s);
}

bool sc_is_scenario(const char *path)
{
	FILE *f = fopen(path, "re");
	char line[4096];
	bool yes = false;
	while (f && !yes && fgets(line, sizeof(line), f)) {
		const char *p = line + strspn(line, " \t");
		yes = strncmp(p, "steps", 5) == 0 || strncmp(p, "probes", 6) == 0 ||
		      strncmp(p, "duration_ms", 11) == 0;
	}
	if (f)
		fclose(f);
	return yes;
}
