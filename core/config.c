/* config.c - validates and compiles a policy file. Every problem is reported
 * with the file, the line and the field; nothing unknown is ignored. */
#include "core/config.h"
#include "core/config_keys.h"
#include "core/suggest.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <errno.h>
#include <unistd.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/actions.h"
#include "core/bigalloc.h"
#include "core/dns.h"
#include "core/hash.h"
#include "core/hparse.h"
#include "core/http.h"
#include "core/lcfg.h"
#include "core/rawsys.h"
#include "core/rundir.h"
#include "core/slices.h"
#include "core/wideint.h"
#include "core/wire.h"

bool cfg_fail(struct ctx *c, const config_setting_t *s, const char *fmt, ...)
{
	int n = 0;
	int line = s ? config_setting_source_line(s) + c->line0 : 0;
	/* A setting from an @include'd file is reported against that file. */
	const char *file =
	    s && config_setting_source_file(s) ? config_setting_source_file(s) : c->file;
	if (line > 0)
		n = snprintf(c->err, c->errlen, "%s:%d: ", file, line);
	else
		n = snprintf(c->err, c->errlen, "%s: ", c->file);
	if (n < 0 || (size_t)n >= c->errlen)
		return false;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
	va_end(ap);
	return false;
}

/* A member of group s by name. libconfig's lookup cost about 250
 * instructions a call, a tenth of the time a policy of 100,000 rules took
 * to load; a group here has a handful of members, and a loop over
 * libconfig's public list of them that compares first letters first is
 * several times cheaper. */
config_setting_t *cfg_member(struct ctx *c, const config_setting_t *s, const char *key)
{
	if (!config_setting_is_group(s))
		return c->lc.member(s, key);
	const config_list_t *l = s->value.list;
	for (unsigned i = 0; l && i < l->length; i++) {
		const char *name = config_setting_name(l->elements[i]);
		if (name && name[0] == key[0] && strcmp(name, key) == 0)
			return l->elements[i];
	}
	return NULL;
}

/* Every member of group s must be one of the NULL-terminated names. */
bool cfg_only_keys(struct ctx *c, const config_setting_t *s, const char *where,
		   const char *const *names)
{
	int n = c->lc.length(s);
	for (int i = 0; i < n; i++) {
		const config_setting_t *m = c->lc.elem(s, (unsigned)i);
		const char *key = config_setting_name(m);
		bool known = false;
		for (const char *const *k = names; *k && !known; k++)
			known = strcmp(*k, key) == 0;
		size_t count = 0;
		while (!known && names[count])
			count++;
		const char *near = known ? NULL : fn_closest(key, names, count);
		if (!known)
			return cfg_fail(c, m, "%s: unknown key '%s'%s%s%s", where, key,
					near ? ", did you mean '" : "", near ? near : "",
					near ? "'?" : "");
	}
	return true;
}

bool cfg_get_string(struct ctx *c, const config_setting_t *s, const char *where, const char **out)
{
	*out = "";
	if (config_setting_type(s) != CONFIG_TYPE_STRING)
		return cfg_fail(c, s, "%s must be a string", where);
	*out = c->lc.get_string(s);
	return true;
}

static bool get_name(struct ctx *c, const config_setting_t *s, const char *where,
		     char out[FN_NAME_MAX])
{
	const char *v;
	if (!cfg_get_string(c, s, where, &v))
		return false;
	if (!fn_name_valid(v))
		return cfg_fail(c, s, "%s '%s' must be 1 to %d letters, digits or _.:-", where, v,
				FN_NAME_MAX - 1);
	strcpy(out, v);
	return true;
}

/* A CIDR list: one string or an array or list of strings. */
static bool get_cidrs(struct ctx *c, const config_setting_t *s, const char *where,
		      struct fn_cidr **out, size_t *n)
{
	bool one = config_setting_type(s) == CONFIG_TYPE_STRING;
	if (!one && !config_setting_is_array(s) && !config_setting_is_list(s))
		return cfg_fail(c, s, "%s must be a string or a list of strings", where);
	size_t count = one ? 1 : (size_t)c->lc.length(s);
	if (count == 0)
		return cfg_fail(c, s, "%s is empty", where);
	struct fn_cidr *v = calloc(count, sizeof(*v));
	if (!v)
		return cfg_fail(c, s, "out of memory");
	for (size_t i = 0; i < count; i++) {
		const config_setting_t *e = one ? s : c->lc.elem(s, (unsigned)i);
		const char *text, *why;
		if (!cfg_get_string(c, e, where, &text)) {
			free(v);
			return false;
		}
		if ((why = fn_cidr_parse(&v[i], text))) {
			free(v);
			return cfg_fail(c, e, "%s: bad CIDR '%s': %s", where, text, why);
		}
	}
	*out = v;
	*n = count;
	return true;
}

static bool parse_ports(struct ctx *c, const config_setting_t *s, struct fn_rule *r)
{
	if (config_setting_type(s) == CONFIG_TYPE_INT ||
	    config_setting_type(s) == CONFIG_TYPE_INT64) {
		long long v = c->lc.get_int64(s);
		if (v < 1 || v > 65535)
			return cfg_fail(c, s, "rule '%s': match.port %lld is not from 1 to 65535",
					r->name, v);
		r->ports = calloc(1, sizeof(*r->ports));
		if (!r->ports)
			return cfg_fail(c, s, "out of memory");
		r->ports[0].lo = r->ports[0].hi = (uint16_t)v;
		r->nports = 1;
		return true;
	}
	const char *text, *why;
	if (config_setting_type(s) != CONFIG_TYPE_STRING)
		return cfg_fail(
		    c, s,
		    "rule '%s': match.port must be a number or a string such as \"443,8000-8999\"",
		    r->name);
	text = c->lc.get_string(s);
	if ((why = fn_ports_parse(text, &r->ports, &r->nports)))
		return cfg_fail(c, s, "rule '%s': bad match.port '%s': %s", r->name, text, why);
	return true;
}

static bool parse_zone_ref(struct ctx *c, const config_setting_t *s, const char *where, int *out)
{
	const char *name;
	if (!cfg_get_string(c, s, where, &name))
		return false;
	*out = fn_policy_zone_index(c->p, name);
	if (*out < 0)
		return cfg_fail(c, s, "%s: zone '%s' is not defined in zones", where, name);
	return true;
}

static bool parse_proto(struct ctx *c, const config_setting_t *s, struct fn_rule *r)
{
	const char *v;
	if (!cfg_get_string(c, s, "match.proto", &v))
		return false;
	if (strcmp(v, "tcp") == 0)
		r->protos = FN_PROTO_TCP;
	else if (strcmp(v, "udp") == 0)
		r->protos = FN_PROTO_UDP;
	else
		return cfg_fail(c, s, "rule '%s': match.proto '%s' must be \"tcp\" or \"udp\"",
				r->name, v);
	return true;
}

#define WHERE_MAX (FN_NAME_MAX + 32)

/* "rule 'NAME': match.KEY" (or "...: match" for no key), written into
 * where (WHERE_MAX bytes): every rule asks, so stpcpy, at a tenth of what
 * snprintf costs. */
static const char *match_where(char *where, const struct fn_rule *r, const char *key)
{
	char *e = stpcpy(stpcpy(stpcpy(where, "rule '"), r->name), "': match");
	if (key)
		stpcpy(stpcpy(e, "."), key);
	return where;
}

static bool parse_match(struct ctx *c, const config_setting_t *m, struct fn_rule *r)
{
	static const char *const keys[] = {"to",     "port", "proto", "from_zone", "to_zone",
					   "method", "path", "host",  NULL};
	char where[WHERE_MAX];
	match_where(where, r, NULL);
	if (!config_setting_is_group(m))
		return cfg_fail(c, m, "%s must be a group { ... }", where);
	if (!cfg_only_keys(c, m, where, keys))
		return false;
	/* A "where" is written only when its key is there: 100,000 rules would
	 * otherwise pay for 300,000 snprintf calls. */
	const config_setting_t *s;
	if ((s = cfg_member(c, m, "to")) &&
	    !get_cidrs(c, s, match_where(where, r, "to"), &r->to, &r->nto))
		return false;
	if ((s = cfg_member(c, m, "port")) && !parse_ports(c, s, r))
		return false;
	if ((s = cfg_member(c, m, "proto")) && !parse_proto(c, s, r))
		return false;
	if ((s = cfg_member(c, m, "from_zone")) &&
	    !parse_zone_ref(c, s, match_where(where, r, "from_zone"), &r->from_zone))
		return false;
	if ((s = cfg_member(c, m, "to_zone")) &&
	    !parse_zone_ref(c, s, match_where(where, r, "to_zone"), &r->to_zone))
		return false;
	return cfg_http_match(c, m, r);
}

static bool parse_action(struct ctx *c, const config_setting_t *s, struct fn_rule *r)
{
	const char *v;
	if (!cfg_get_string(c, s, "action", &v))
		return false;
	for (int a = 0; a < FN_ACT_COUNT; a++)
		if (strcmp(v, fn_action_name((enum fn_action)a)) == 0) {
			r->action = (enum fn_action)a;
			return true;
		}
	const char *names[FN_ACT_COUNT];
	for (int a = 0; a < FN_ACT_COUNT; a++)
		names[a] = fn_action_name((enum fn_action)a);
	const char *near = fn_closest(v, names, FN_ACT_COUNT);
	return cfg_fail(
	    c, s,
	    "rule '%s': unknown action '%s'%s%s%s (expected blackhole, stall, drop, refuse, "
	    "reset, unreachable, delay, latency, bandwidth, drip, close, respond, slow, "
	    "abort, dns or tls)",
	    r->name, v, near ? ", did you mean '" : "", near ? near : "", near ? "'?" : "");
}

static bool get_number(struct ctx *c, const config_setting_t *s, const struct fn_rule *r,
		       const struct fn_key *k, uint64_t *out)
{
	int t = config_setting_type(s);
	if (t != CONFIG_TYPE_INT && t != CONFIG_TYPE_INT64)
		return cfg_fail(c, s, "rule '%s': %s must be a whole number", r->name, k->name);
	long long v = c->lc.get_int64(s);
	if (v < 0 || (uint64_t)v > k->max)
		return cfg_fail(c, s, "rule '%s': %s %lld is not from 0 to %llu", r->name, k->name,
				v, (unsigned long long)k->max);
	*out = (uint64_t)v;
	return true;
}

static bool get_probability(struct ctx *c, const config_setting_t *s, struct fn_rule *r)
{
	int t = config_setting_type(s);
	double v;
	if (t == CONFIG_TYPE_FLOAT)
		v = c->lc.get_float(s);
	else if (t == CONFIG_TYPE_INT || t == CONFIG_TYPE_INT64)
		v = (double)c->lc.get_int64(s);
	else
		return cfg_fail(c, s, "rule '%s': probability must be a number from 0 to 1",
				r->name);
	if (!(v >= 0 && v <= 1))
		return cfg_fail(c, s, "rule '%s': probability %g is not from 0 to 1", r->name, v);
	fn_key_set_probability(r, v);
	return true;
}

/* One of the action's numbers or a condition. */
static bool parse_key(struct ctx *c, const config_setting_t *s, struct fn_rule *r,
		      const struct fn_key *k)
{
	if (k->actions && !(k->actions & (1u << r->action)))
		return cfg_fail(c, s, "rule '%s': %s does not apply to action %s", r->name, k->name,
				fn_action_name(r->action));
	if (k->kind == FN_KEY_PROB)
		return get_probability(c, s, r);
	if (k->kind == FN_KEY_DIRECTION || k->kind == FN_KEY_UNREACH) {
		const char *v, *why;
		if (!cfg_get_string(c, s, k->name, &v))
			return false;
		if ((why = fn_key_set_word(r, k, v)))
			return cfg_fail(c, s, "rule '%s': %s '%s' must be %s", r->name, k->name, v,
					why);
		return true;
	}
	uint64_t v = 0;
	if (!get_number(c, s, r, k, &v))
		return false;
	if (v == 0 && (strcmp(k->name, "first") == 0 || strcmp(k->name, "every") == 0))
		return cfg_fail(
		    c, s,
		    "rule '%s': %s = 0 would never fault; the least is 1 (to switch a rule "
		    "off, enabled = false)",
		    r->name, k->name);
	fn_key_set_number(r, k, v);
	return true;
}

/* "unknown key 'latency', did you mean 'latency_ms'?": the closest of
 * every key a rule may have. */
static bool unknown_rule_key(struct ctx *c, const config_setting_t *m, const struct fn_rule *r,
			     const char *key)
{
	static const char *const more[] = {"name",	  "action", "match", "enabled",
					   "established", "error",  "answer"};
	const char *names[128];
	size_t n = fn_key_names(names, 96);
	for (size_t i = 0; i < sizeof(more) / sizeof(more[0]); i++)
		names[n++] = more[i];
	for (const char *const *h = cfg_http_keys; *h && n < 128; h++)
		names[n++] = *h;
	const char *near = fn_closest(key, names, n);
	return cfg_fail(c, m, "rule '%s': unknown key '%s'%s%s%s", r->name, key,
			near ? ", did you mean '" : "", near ? near : "", near ? "'?" : "");
}

/* Every member besides name, action, match and enabled must be a key the
 * action takes or a condition. */
static bool parse_params(struct ctx *c, const config_setting_t *s, struct fn_rule *r)
{
	static const char *const base[] = {"name", "action", "match", "enabled", "established"};
	int n = c->lc.length(s);
	for (int i = 0; i < n; i++) {
		const config_setting_t *m = c->lc.elem(s, (unsigned)i);
		const char *key = config_setting_name(m);
		bool plain = false;
		for (size_t b = 0; b < 5 && !plain; b++)
			plain = strcmp(base[b], key) == 0;
		if (plain)
			continue;
		bool http = false, dns = false;
		if (!cfg_dns_key(c, m, r, key, &dns) || !cfg_http_key(c, m, r, key, &http))
			return false;
		if (http || dns)
			continue;
		const struct fn_key *k = fn_key_find(key);
		if (!k)
			return unknown_rule_key(c, m, r, key);
		if (!parse_key(c, m, r, k))
			return false;
	}
	return true;
}

static bool check_params(struct ctx *c, const config_setting_t *s, struct fn_rule *r,
			 bool proto_given)
{
	char why[160];
	if (fn_rule_params_check(r, proto_given, why, sizeof(why)))
		return cfg_fail(c, s, "rule '%s': %s", r->name, why);
	return true;
}

static bool parse_rule(struct ctx *c, const config_setting_t *s, struct fn_rule *r)
{
	r->enabled = true;
	fn_rule_params_init(r);
	r->protos = FN_PROTO_ANY;
	if (!(r->stat = fn_rulestat_new()))
		return cfg_fail(c, s, "out of memory");
	r->from_zone = r->to_zone = -1;
	r->line = config_setting_source_line(s) + c->line0;
	if (!config_setting_is_group(s))
		return cfg_fail(
		    c, s, "each entry of rules must be a group { name = ...; action = ...; }");
	const config_setting_t *name = cfg_member(c, s, "name");
	if (!name)
		return cfg_fail(c, s, "rule without a name");
	if (!get_name(c, name, "rule name", r->name))
		return false;
	const config_setting_t *a = cfg_member(c, s, "action"), *m, *e;
	if (!a)
		return cfg_fail(c, s, "rule '%s' has no action", r->name);
	if (!parse_action(c, a, r))
		return false;
	if (fn_rule_http(r) && !(r->http = fn_http_new()))
		return cfg_fail(c, s, "out of memory");
	if (r->action == FN_ACT_DNS && !(r->dns = fn_dns_new()))
		return cfg_fail(c, s, "out of memory");
	if (!parse_params(c, s, r) || (r->http && !cfg_http_check(c, s, r)))
		return false;
	if ((m = cfg_member(c, s, "match")) && !parse_match(c, m, r))
		return false;
	if ((e = cfg_member(c, s, "enabled"))) {
		if (config_setting_type(e) != CONFIG_TYPE_BOOL)
			return cfg_fail(c, e, "rule '%s': enabled must be true or false", r->name);
		r->enabled = c->lc.get_bool(e) != 0;
	}
	if ((e = cfg_member(c, s, "established"))) {
		if (config_setting_type(e) != CONFIG_TYPE_BOOL)
			return cfg_fail(c, e, "rule '%s': established must be true or false",
					r->name);
		r->established = c->lc.get_bool(e) != 0;
	}
	return check_params(c, a, r, m && cfg_member(c, m, "proto"));
}

/* Index of an earlier rule with r's name, or -1; adds r otherwise. An open
 * hash, so that a policy of 100,000 rules loads in a blink, not in the
 * quarter of a minute that comparing every pair would take. */
static long seen_name(uint32_t *slots, size_t mask, const struct fn_rule *rules, size_t i)
{
	uint64_t h = fn_hash_str(rules[i].name);
	for (size_t k = (size_t)h & mask;; k = (k + 1) & mask) {
		if (!slots[k]) {
			slots[k] = (uint32_t)i + 1;
			return -1;
		}
		if (strcmp(rules[slots[k] - 1].name, rules[i].name) == 0)
			return (long)slots[k] - 1;
	}
}

/* The rules array and the name hash for n rules; false with the error. */
static bool rules_alloc(struct ctx *c, const config_setting_t *s, size_t n, uint32_t **slots,
			size_t *size)
{
	if (!config_setting_is_list(s) && !(config_setting_is_array(s) && c->lc.length(s) == 0))
		return cfg_fail(c, s, "rules must be a list ( { ... }, { ... } )");
	for (*size = 16; *size < 2 * n;)
		*size *= 2;
	c->p->rules = fn_big_calloc(n ? n : 1, sizeof(struct fn_rule));
	*slots = calloc(*size, sizeof(**slots));
	if (!c->p->rules || !*slots) {
		free(*slots);
		return cfg_fail(c, s, "out of memory");
	}
	return true;
}

static bool one_rule(struct ctx *c, const config_setting_t *e, size_t i, uint32_t *slots,
		     size_t size)
{
	c->p->nrules = i + 1;
	if (!parse_rule(c, e, &c->p->rules[i]))
		return false;
	long j = seen_name(slots, size - 1, c->p->rules, i);
	return j < 0 || cfg_fail(c, e, "duplicate rule name '%s' (first defined at line %d)",
				 c->p->rules[i].name, c->p->rules[j].line);
}

/* A rule's error kept among the file's (all, used of its size): whole
 * messages only, one a line, as many as fit and at most FN_ERRORS_MAX. */
#define FN_ERRORS_MAX 20
static void keep_error(const struct ctx *c, char *all, size_t size, size_t *used, int bad)
{
	size_t len = strlen(c->err);
	if (bad > FN_ERRORS_MAX || *used + len + 2 > size)
		return;
	if (*used)
		all[(*used)++] = '\n';
	memcpy(all + *used, c->err, len + 1);
	*used += len;
}

/* Every rule is read even after one is wrong, so that a file's errors are
 * said at once (up to FN_ERRORS_MAX, each FILE:LINE: on a line of its
 * own), not one per try. */
static bool parse_rules(struct ctx *c, const config_setting_t *s)
{
	uint32_t *slots;
	size_t n = (size_t)c->lc.length(s), size, used = 0;
	if (!rules_alloc(c, s, n, &slots, &size))
		return false;
	char *all = malloc(c->errlen);
	int bad = 0, kept = 0;
	if (all)
		all[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		if (one_rule(c, c->lc.elem(s, (unsigned)i), i, slots, size))
			continue;
		size_t before = used;
		bad++;
		/* Room kept for the "(and N more errors)" line. */
		if (all)
			keep_error(c, all, c->errlen > 80 ? c->errlen - 40 : c->errlen, &used, bad);
		kept += used != before;
		if (!all || strstr(c->err, "out of memory"))
			break;
	}
	free(slots);
	/* None kept (the first was longer than the room): c->err says it. */
	if (bad && all && used) {
		int more = bad - kept;
		snprintf(c->err, c->errlen, "%s", all);
		if (more > 0)
			snprintf(c->err + used, c->errlen - used, "\n(and %d more error%s)", more,
				 more == 1 ? "" : "s");
	}
	free(all);
	return bad == 0;
}

/* Rules per slice (see parse_cut); lists under twice as many are parsed
 * whole. Tests set it lower, and read fn_config_slices: the slices of the
 * loads that kept their cut. */
static size_t slice_rules = 1000;
_Thread_local size_t fn_config_slices;
_Thread_local size_t fn_config_scans;

void fn_config_slice_rules(size_t n)
{
	slice_rules = n ? n : 1;
}

/* Rules [first, last) as a file of their own, "rules=(" and their text,
 * whose lines libconfig counts from the slice's first (c->line0 adds the
 * file's lines above it). False on any error (parse_text then parses the
 * whole file). */
static bool parse_slice(struct ctx *c, size_t first, size_t last, uint32_t *slots, size_t size)
{
	const struct fn_slices *sl = c->sl;
	size_t len = sl->at[last] - 1 - sl->at[first];
	char *t = malloc(7 + len + 2);
	if (!t)
		return cfg_fail(c, NULL, "out of memory");
	memcpy(t, "rules=(", 7);
	memcpy(t + 7, c->text + sl->at[first], len);
	memcpy(t + 7 + len, ")", 2);
	c->line0 = sl->line[first] - 1;
	config_t cfg;
	c->lc.init(&cfg);
	const config_setting_t *list =
	    c->lc.read_string(&cfg, t) ? cfg_member(c, config_root_setting(&cfg), "rules") : NULL;
	bool ok = list && c->lc.length(config_root_setting(&cfg)) == 1 &&
		  (size_t)c->lc.length(list) == last - first;
	for (size_t i = first; ok && i < last; i++)
		ok = one_rule(c, c->lc.elem(list, (unsigned)(i - first)), i, slots, size);
	c->line0 = 0;
	c->lc.destroy(&cfg);
	free(t);
	c->slices++;
	return ok;
}

static bool parse_rules_cut(struct ctx *c, const config_setting_t *s)
{
	uint32_t *slots;
	size_t n = c->sl->n, size;
	if (!rules_alloc(c, s, n, &slots, &size))
		return false;
	bool ok = true;
	for (size_t i = 0; ok && i < n; i += slice_rules)
		ok = parse_slice(c, i, n - i < slice_rules ? n : i + slice_rules, slots, size);
	free(slots);
	return ok;
}

static bool parse_zone(struct ctx *c, const config_setting_t *s, struct fn_zone *z)
{
	static const char *const keys[] = {"name", "cidrs", NULL};
	if (!config_setting_is_group(s))
		return cfg_fail(
		    c, s, "each entry of zones must be a group { name = ...; cidrs = [...]; }");
	const config_setting_t *name = cfg_member(c, s, "name"), *cidrs;
	if (!name)
		return cfg_fail(c, s, "zone without a name");
	if (!get_name(c, name, "zone name", z->name))
		return false;
	char where[FN_NAME_MAX + 16];
	snprintf(where, sizeof(where), "zone '%s'", z->name);
	if (!cfg_only_keys(c, s, where, keys))
		return false;
	if (!(cidrs = cfg_member(c, s, "cidrs")))
		return cfg_fail(c, s, "zone '%s' has no cidrs", z->name);
	snprintf(where, sizeof(where), "zone '%s': cidrs", z->name);
	return get_cidrs(c, cidrs, where, &z->cidrs, &z->ncidrs);
}

static bool parse_zones(struct ctx *c, const config_setting_t *s)
{
	if (!config_setting_is_list(s) && !(config_setting_is_array(s) && c->lc.length(s) == 0))
		return cfg_fail(c, s, "zones must be a list ( { ... }, { ... } )");
	size_t n = (size_t)c->lc.length(s);
	c->p->zones = calloc(n ? n : 1, sizeof(struct fn_zone));
	if (!c->p->zones)
		return cfg_fail(c, s, "out of memory");
	for (size_t i = 0; i < n; i++) {
		const config_setting_t *e = c->lc.elem(s, (unsigned)i);
		c->p->nzones = i + 1;
		if (!parse_zone(c, e, &c->p->zones[i]))
			return false;
		if (fn_policy_zone_index(c->p, c->p->zones[i].name) != (int)i)
			return cfg_fail(c, e, "duplicate zone name '%s'", c->p->zones[i].name);
	}
	return true;
}

/* A live change that defines no zones keeps the process's own. */
static bool inherit_zones(struct ctx *c)
{
	const struct fn_policy *b = c->base;
	c->p->zones = calloc(b->nzones + 1, sizeof(struct fn_zone));
	if (!c->p->zones)
		return cfg_fail(c, NULL, "out of memory");
	for (size_t i = 0; i < b->nzones; i++, c->p->nzones++) {
		c->p->zones[i] = b->zones[i];
		c->p->zones[i].cidrs = malloc(b->zones[i].ncidrs * sizeof(struct fn_cidr) + 1);
		if (!c->p->zones[i].cidrs)
			return cfg_fail(c, NULL, "out of memory");
		if (b->zones[i].ncidrs) /* a zone of none may have no array */
			memcpy(c->p->zones[i].cidrs, b->zones[i].cidrs,
			       b->zones[i].ncidrs * sizeof(struct fn_cidr));
	}
	return true;
}

static bool set_self_zone(struct ctx *c, const config_setting_t *root, const char *override)
{
	const config_setting_t *z = cfg_member(c, root, "zone");
	if (!z && !(override && *override) && c->base && c->base->self_zone >= 0)
		override = c->base->zones[c->base->self_zone].name;
	if (override && *override) {
		c->p->self_zone = fn_policy_zone_index(c->p, override);
		if (c->p->self_zone < 0)
			return cfg_fail(c, NULL, "FAULTNET_ZONE: zone '%s' is not defined in zones",
					override);
		return true;
	}
	return !z || parse_zone_ref(c, z, "zone", &c->p->self_zone);
}

static bool parse_root(struct ctx *c, const config_setting_t *root, const char *zone_override)
{
	static const char *const keys[] = {"zone", "zones", "rules", NULL};
	if (!cfg_only_keys(c, root, "top level", keys))
		return false;
	const config_setting_t *s;
	/* zones first: rules refer to them by name. */
	if ((s = cfg_member(c, root, "zones")) ? !parse_zones(c, s) : c->base && !inherit_zones(c))
		return false;
	if (!set_self_zone(c, root, zone_override))
		return false;
	if ((s = cfg_member(c, root, "rules")) &&
	    !(c->sl ? parse_rules_cut(c, s) : parse_rules(c, s)))
		return false;
	if (!c->rules_only) /* an index-less policy: any fn_policy_finish builds it */
		fn_policy_finish(c->p);
	return cfg_http_ready(c);
}

/* The whole file, NUL-terminated, or NULL (errno set). Read here rather than
 * by libconfig so that the text can be checked for numbers libconfig would
 * truncate. */

/* The whole file, NUL-terminated; NULL with *why set. The file is opened
 * without blocking and must be a regular file: a FIFO would block the
 * process before main, a device could be endless. */
static char *slurp_n(const char *path, char *why, size_t whylen, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	struct stat sb;
	/* Read by raw calls (fn_read_raw: core never calls the shim's read
	 * and close hooks by name): open, fstat, read, close, where stdio
	 * added an fcntl, an fstat and a read. */
	if (fd < 0 || fstat(fd, &sb) < 0) {
		snprintf(why, whylen, "cannot read the file (%s)", strerror(errno));
		if (fd >= 0)
			fn_close_raw(fd);
		return NULL;
	}
	char *buf = NULL;
	if (!S_ISREG(sb.st_mode))
		snprintf(why, whylen, "not a regular file");
	else if ((size_t)sb.st_size > FN_CONFIG_FILE_MAX)
		snprintf(why, whylen, "too large (%lld bytes; the limit is %u)",
			 (long long)sb.st_size, FN_CONFIG_FILE_MAX);
	else if (!(buf = malloc((size_t)sb.st_size + 1)))
		snprintf(why, whylen, "out of memory");
	ssize_t n = buf ? fn_read_raw(fd, buf, (size_t)sb.st_size) : 0;
	if (n < 0) {
		snprintf(why, whylen, "cannot read the file (%s)", strerror(errno));
		free(buf);
		buf = NULL;
	}
	fn_close_raw(fd);
	if (buf)
		buf[n] = '\0';
	*len = buf ? (size_t)n : 0;
	return buf;
}

char *cfg_slurp(const char *path, char *why, size_t whylen)
{
	size_t n;
	return slurp_n(path, why, whylen, &n);
}

/* Line n of text (from 1), without its comment and surrounding blanks, in
 * out; false past the end. */
static bool line_at(const char *text, int n, char *out, size_t len)
{
	for (int i = 1; i < n && text; i++)
		text = (text = strchr(text, '\n')) ? text + 1 : NULL;
	if (!text)
		return false;
	text += strspn(text, " \t");
	size_t k = strcspn(text, "#\n");
	while (k && (text[k - 1] == ' ' || text[k - 1] == '\t' || text[k - 1] == '\r'))
		k--;
	snprintf(out, len, "%.*s", (int)(k < len ? k : len - 1), text);
	return true;
}

/* libconfig says "syntax error" and nothing more: the two slips most met,
 * a ',' after a list's last entry and one missing between two entries,
 * are named from the lines around the error. */
static const char *syntax_hint(const char *text, int line)
{
	char at[256], before[256] = "";
	if (!line_at(text, line, at, sizeof(at)))
		return "";
	for (int k = line - 1; k > 0 && !before[0]; k--)
		line_at(text, k, before, sizeof(before));
	size_t b = strlen(before);
	if ((at[0] == ')' || at[0] == ']') && b && before[b - 1] == ',')
		return ": a ',' after the last entry of a list (remove it)";
	if (strchr(at, ']') && strstr(at, ", ]"))
		return ": a ',' after the last entry of a list (remove it)";
	if (at[0] == '{' && b && before[b - 1] == '}')
		return ": a ',' missing between two entries of a list (after the '}' above)";
	const char *eq = strchr(at, '=');
	if (eq) {
		eq += 1 + strspn(eq + 1, " \t");
		size_t w = strspn(
		    eq, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:-/");
		bool number = w && strspn(eq, "0123456789") == w;
		if (w && !number && strncmp(eq, "true", w) && strncmp(eq, "false", w))
			return ": a text value goes in double quotes (\"...\")";
	}
	return ": expected KEY = VALUE; and lists as ( { ... }, { ... } ), ',' between entries";
}

/* libconfig stops at a NUL byte as if the file ended there: say where. */
static bool has_nul(const char *path, const char *text, size_t n, char *err, size_t errlen)
{
	const char *z = memchr(text, '\0', n);
	if (!z)
		return false;
	int line = 1;
	for (const char *p = text; p < z; p++)
		line += *p == '\n';
	snprintf(err, errlen, "%s:%d: a NUL byte: a policy file is text", path, line);
	return true;
}

static struct fn_policy *parse_text(const char *path, const char *text, const char *zone_override,
				    const struct fn_policy *base, bool rules_only, char *err,
				    size_t errlen);

char *fn_config_read(const char *path, size_t *len, char *err, size_t errlen)
{
	char why[128];
	char *text = slurp_n(path, why, sizeof(why), len);
	if (!text) {
		snprintf(err, errlen, "%s: %s", path, why);
		return NULL;
	}
	/* The bytes read (not the size a second stat would give: one system
	 * call less at every start, and the same text the parser reads). */
	if (has_nul(path, text, *len, err, errlen)) {
		free(text);
		return NULL;
	}
	return text;
}

static struct fn_policy *load(const char *path, const char *text, const char *zone_override,
			      const struct fn_policy *base, bool rules_only, char *err,
			      size_t errlen)
{
	char *own = NULL;
	size_t n = 0;
	if (!text && !(text = own = fn_config_read(path, &n, err, errlen)))
		return NULL;
	int line;
	char num[32];
	struct fn_policy *p = NULL;
	if (fn_wide_int(text, &line, num, sizeof(num)))
		snprintf(err, errlen,
			 "%s:%d: %s does not fit in 32 bits: libconfig would truncate it; write "
			 "%sL",
			 path, line, num, num);
	else
		p = parse_text(path, text, zone_override, base, rules_only, err, errlen);
	free(own);
	return p;
}

/* Parses text (all of it, or with c->sl the head: the file with its rules
 * list emptied) and converts it. */
static struct fn_policy *parse_with(struct ctx *c, const char *path, const char *text,
				    const char *zone_override)
{
	const char *why = fn_lcfg_open(&c->lc);
	if (why) {
		snprintf(c->err, c->errlen, "%s: %s", path, why);
		return NULL;
	}
	config_t cfg;
	c->lc.init(&cfg);
	/* @include "x.conf" is found beside the file that includes it. */
	char dir[4096];
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash) {
		*slash = '\0';
		c->lc.set_include_dir(&cfg, dir[0] ? dir : "/");
	}
	int ok = c->lc.read_string(&cfg, text);
	if (!ok) {
		if (config_error_type(&cfg) == CONFIG_ERR_FILE_IO)
			snprintf(c->err, c->errlen, "%s: cannot read the file", path);
		else /* an error in an @include'd file names that file */
			snprintf(c->err, c->errlen, "%s:%d: %s%s",
				 config_error_file(&cfg) ? config_error_file(&cfg) : path,
				 config_error_line(&cfg), config_error_text(&cfg),
				 config_error_file(&cfg)
				     ? ""
				     : syntax_hint(text, config_error_line(&cfg)));
	} else if ((c->p = calloc(1, sizeof(*c->p)))) {
		c->p->self_zone = -1;
		if (!parse_root(c, config_root_setting(&cfg), zone_override)) {
			fn_policy_free(c->p);
			c->p = NULL;
		}
	} else {
		snprintf(c->err, c->errlen, "%s: out of memory", path);
	}
	c->lc.destroy(&cfg);
	fn_lcfg_close(&c->lc);
	return c->p;
}

/* A large rules list goes to libconfig a slice of rules at a time, each
 * freed before the next: libconfig keeps about 900 bytes per rule while it
 * holds a whole file (90 MB for 100,000 rules, every page of it new to the
 * process), and a slice's are used again by the next. NULL on any error:
 * the whole file is then parsed as it is, so that what an error says, and
 * which error of several is said, never depend on the cut. */
static struct fn_policy *parse_cut(struct ctx *c, const char *path, const char *text,
				   const char *zone_override, const struct fn_slices *sl)
{
	/* The head: the file with only the newlines of its rules list left,
	 * so that what follows the list keeps its lines. */
	size_t n = strlen(text), k = sl->open + 1;
	char *head = malloc(n + 1);
	if (!head)
		return NULL;
	memcpy(head, text, k);
	for (size_t i = k; i < sl->close; i++)
		if (text[i] == '\n')
			head[k++] = '\n';
	memcpy(head + k, text + sl->close, n - sl->close + 1);
	c->text = text;
	c->sl = sl;
	struct fn_policy *p = parse_with(c, path, head, zone_override);
	free(head);
	return p;
}

static struct fn_policy *parse_text(const char *path, const char *text, const char *zone_override,
				    const struct fn_policy *base, bool rules_only, char *err,
				    size_t errlen)
{
	struct fn_slices sl;
	const struct ctx fresh = {
	    .file = path, .err = err, .errlen = errlen, .base = base, .rules_only = rules_only};
	struct ctx c = fresh;
	/* A rule takes three bytes at the least ("{},"): a text shorter than
	 * twice a slice of them is never cut, and is not scanned for one. */
	if (strlen(text) >= 2 * slice_rules * 3 && (++fn_config_scans, fn_slices_find(text, &sl))) {
		struct fn_policy *p =
		    sl.n >= 2 * slice_rules ? parse_cut(&c, path, text, zone_override, &sl) : NULL;
		fn_slices_free(&sl);
		if (p) {
			fn_config_slices += c.slices;
			return p;
		}
		c = fresh;
	}
	return parse_with(&c, path, text, zone_override);
}

struct fn_policy *fn_config_load_file(const char *path, const char *zone_override, char *err,
				      size_t errlen)
{
	return load(path, NULL, zone_override, NULL, false, err, errlen);
}

struct fn_policy *fn_config_load_string(const char *text, const char *origin,
					const char *zone_override, char *err, size_t errlen)
{
	return load(origin, text, zone_override, NULL, false, err, errlen);
}

struct fn_policy *fn_config_load_change(const char *text, const char *origin,
					const struct fn_policy *base, char *err, size_t errlen)
{
	return load(origin, text, NULL, base, false, err, errlen);
}

struct fn_policy *fn_config_load_rules(const char *text, const char *origin,
				       const struct fn_policy *base, char *err, size_t errlen)
{
	return load(origin, text, NULL, base, true, err, errlen);
}
