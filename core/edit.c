/* edit.c - add, rm, load and zone as changes to a copy of a policy (see
 * edit.h). The reply texts are the control protocol's. */
#include "core/edit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/config.h"
#include "core/rules.h"
#include "core/wire.h"

struct fn_policy *fn_edit_empty(void)
{
	struct fn_policy *p = calloc(1, sizeof(*p));
	if (p)
		p->self_zone = -1;
	return p;
}

static struct fn_policy *copy(const struct fn_policy *cur)
{
	return cur ? fn_policy_clone(cur) : fn_edit_empty();
}

static bool same_zones(const struct fn_policy *a, const struct fn_policy *b)
{
	if (a->nzones != b->nzones)
		return false;
	for (size_t i = 0; i < a->nzones; i++)
		if (strcmp(a->zones[i].name, b->zones[i].name) != 0)
			return false;
	return true;
}

/* "[first] RULE" into p: exactly one rule, whose zones must be the
 * policy's (zones of its own would not match the zone indexes of the
 * policy it joins). */
static bool add_in(struct fn_policy *p, const char *text, char *reply, size_t len)
{
	bool first = strncmp(text, "first ", 6) == 0;
	if (first)
		text += 6;
	struct fn_buf src = {0};
	fn_buf_printf(&src, "rules = ( %s );", text);
	char err[1024] = "out of memory";
	struct fn_policy *tmp =
	    src.s ? fn_config_load_rules(src.s, "add", p, err, sizeof(err)) : NULL;
	fn_buf_free(&src);
	bool ok = false;
	if (!tmp || tmp->nrules != 1 || !same_zones(tmp, p))
		snprintf(reply, len, "error %s",
			 tmp ? "add takes exactly one rule and nothing else" : err);
	else if (fn_policy_rule_index(p, tmp->rules[0].name) >= 0)
		snprintf(reply, len, "error a rule named '%s' exists already", tmp->rules[0].name);
	else if (!fn_policy_insert(p, &tmp->rules[0], first))
		snprintf(reply, len, "error out of memory");
	else {
		tmp->nrules = 0;
		snprintf(reply, len, "ok added %s", p->rules[first ? 0 : p->nrules - 1].name);
		ok = true;
	}
	fn_policy_free(tmp);
	return ok;
}

static bool rm_in(struct fn_policy *p, const char *name, char *reply, size_t len)
{
	int i = fn_policy_rule_index(p, name);
	if (i < 0) {
		snprintf(reply, len, "error no rule named '%s'", name);
		return false;
	}
	fn_policy_remove(p, (size_t)i);
	snprintf(reply, len, "ok removed %s", name);
	return true;
}

static bool zone_in(struct fn_policy *p, const char *name, char *reply, size_t len)
{
	int z = fn_policy_zone_index(p, name);
	if (z < 0) {
		snprintf(reply, len, "error zone '%s' is not defined in this process's zones",
			 name);
		return false;
	}
	p->self_zone = z;
	snprintf(reply, len, "ok zone %s", name);
	return true;
}

/* An edit in place applied to a copy of cur, finished (its index built)
 * when it succeeds. */
static struct fn_policy *on_copy(const struct fn_policy *cur,
				 bool (*in)(struct fn_policy *, const char *, char *, size_t),
				 const char *arg, char *reply, size_t len)
{
	struct fn_policy *p = copy(cur);
	if (p && in(p, arg, reply, len)) {
		fn_policy_finish(p);
		return p;
	}
	if (!p)
		snprintf(reply, len, "error out of memory");
	fn_policy_free(p);
	return NULL;
}

struct fn_policy *fn_edit_add(const struct fn_policy *cur, const char *text, char *reply,
			      size_t len)
{
	return on_copy(cur, add_in, text, reply, len);
}

struct fn_policy *fn_edit_rm(const struct fn_policy *cur, const char *name, char *reply, size_t len)
{
	return on_copy(cur, rm_in, name, reply, len);
}

struct fn_policy *fn_edit_load(const struct fn_policy *cur, const char *text, char *reply,
			       size_t len)
{
	char err[1024];
	struct fn_policy *base = cur ? NULL : fn_edit_empty();
	struct fn_policy *p =
	    fn_config_load_change(text, "load", cur ? cur : base, err, sizeof(err));
	fn_policy_free(base);
	if (p)
		snprintf(reply, len, "ok loaded %zu rules", p->nrules);
	else
		snprintf(reply, len, "error %s", err);
	return p;
}

struct fn_policy *fn_edit_zone(const struct fn_policy *cur, const char *name, char *reply,
			       size_t len)
{
	return on_copy(cur, zone_in, name, reply, len);
}

/* "NAME since=WALL_MS": faultctl says when it switched the rule on, so
 * that a process replaying the group's journal later times the rule's
 * window (start_ms, for_ms) from then, as the members that were running
 * do, not from its own start. Splits arg; 0 when there is no time. */
uint64_t fn_edit_enabled_at(char *arg)
{
	char *sp = strchr(arg, ' ');
	if (!sp)
		return 0;
	*sp = '\0';
	if (strncmp(sp + 1, "since=", 6) != 0)
		return 0;
	uint64_t wall_ms = strtoull(sp + 7, NULL, 10);
	struct timespec rt, mono;
	clock_gettime(CLOCK_REALTIME, &rt);
	clock_gettime(CLOCK_MONOTONIC, &mono);
	uint64_t now_wall = (uint64_t)rt.tv_sec * 1000 + (uint64_t)rt.tv_nsec / 1000000;
	uint64_t now_mono = (uint64_t)mono.tv_sec * 1000000000u + (uint64_t)mono.tv_nsec;
	uint64_t ago_ns = wall_ms < now_wall ? (now_wall - wall_ms) * 1000000u : 0;
	return ago_ns < now_mono ? now_mono - ago_ns : 1;
}

static bool toggle_in(struct fn_policy *p, bool on, const char *name, int *rule, char *reply,
		      size_t len)
{
	*rule = fn_policy_rule_index(p, name);
	if (*rule < 0) {
		snprintf(reply, len, "error no rule named '%s'", name);
		return false;
	}
	p->rules[*rule].enabled = on;
	snprintf(reply, len, "ok %s %s", name, on ? "enabled" : "disabled");
	return true;
}

static struct fn_policy *toggle(const struct fn_policy *cur, bool on, char *name, int *rule,
				uint64_t *at, char *reply, size_t len)
{
	*at = on ? fn_edit_enabled_at(name) : 0;
	struct fn_policy *p = copy(cur);
	if (p && toggle_in(p, on, name, rule, reply, len))
		return p;
	if (!p)
		snprintf(reply, len, "error out of memory");
	fn_policy_free(p);
	return NULL;
}

/* In fn_edit_kind's order, each with the space before its argument. */
static const char *const in_place_verbs[] = {"enable ", "disable ", "add ", "rm ", "zone "};

enum fn_edit_kind fn_edit_kind(const char *line, size_t *arg)
{
	int k = 0;
	while (k < FN_EDIT_OTHER &&
	       strncmp(line, in_place_verbs[k], strlen(in_place_verbs[k])) != 0)
		k++;
	if (arg && k < FN_EDIT_OTHER)
		*arg = strlen(in_place_verbs[k]);
	return (enum fn_edit_kind)k;
}

int fn_edit_in_place(struct fn_policy *p, char *line, char *reply, size_t len)
{
	size_t at;
	enum fn_edit_kind k = fn_edit_kind(line, &at);
	if (k == FN_EDIT_OTHER)
		return -1;
	char *arg = line + at;
	int rule;
	switch (k) {
	case FN_EDIT_ADD:
		return add_in(p, arg, reply, len);
	case FN_EDIT_RM:
		return rm_in(p, arg, reply, len);
	case FN_EDIT_ZONE:
		return zone_in(p, arg, reply, len);
	case FN_EDIT_ENABLE:
		fn_edit_enabled_at(arg); /* cuts " since=..." off */
		return toggle_in(p, true, arg, &rule, reply, len);
	case FN_EDIT_DISABLE:
	default:
		return toggle_in(p, false, arg, &rule, reply, len);
	}
}

struct fn_policy *fn_edit_line(const struct fn_policy *cur, char *line, int *rule, uint64_t *at,
			       char *reply, size_t len)
{
	static const struct {
		const char *verb;
		struct fn_policy *(*edit)(const struct fn_policy *, const char *, char *, size_t);
	} edits[] = {{"enable", NULL},	 {"disable", NULL},	 {"add", fn_edit_add},
		     {"rm", fn_edit_rm}, {"load", fn_edit_load}, {"zone", fn_edit_zone}};
	char *arg = strchr(line, ' ');
	if (arg)
		*arg++ = '\0';
	*rule = -1;
	*at = 0;
	for (size_t k = 0; k < sizeof(edits) / sizeof(edits[0]); k++) {
		if (strcmp(line, edits[k].verb) != 0)
			continue;
		if (!arg || !*arg) {
			snprintf(reply, len, "error %s needs an argument", line);
			return NULL;
		}
		if (!edits[k].edit)
			return toggle(cur, line[0] == 'e', arg, rule, at, reply, len);
		return edits[k].edit(cur, arg, reply, len);
	}
	snprintf(reply, len, "error unknown verb '%.40s'", line);
	return NULL;
}

bool fn_edit_is_reset(const char *line)
{
	return strncmp(line, "reset", 5) == 0 && (!line[5] || line[5] == ' ');
}

char *fn_edit_target(char *text, struct fn_member_id *id)
{
	*id = (struct fn_member_id){0};
	if (strncmp(text, "pid=", 4) != 0)
		return text;
	char *end;
	long p = strtol(text + 4, &end, 10);
	if (end == text + 4 || *end != '.' || p <= 0)
		return NULL;
	char *s = end + 1;
	uint64_t start = strtoull(s, &end, 10), ns = 0;
	if (end != s && *end == '.') {
		s = end + 1;
		ns = strtoull(s, &end, 10);
	}
	if (end == s || *end != ' ')
		return NULL;
	*id = (struct fn_member_id){.pid = (pid_t)p, .ns = ns, .start = start};
	return end + 1;
}
