/* dns.c - dns rules and host patterns (see dns.h). */
#include "core/dns.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/chance.h"
#include "core/hostidx.h"
#include "core/startdata.h"

bool (*fn_host_resolved)(const struct fn_endpoint *ep, const char *pattern) FN_START_DATA;

struct fn_dns *fn_dns_new(void)
{
	struct fn_dns *d = calloc(1, sizeof(*d));
	if (d)
		d->refs = 1;
	return d;
}

void fn_dns_get(struct fn_dns *d)
{
	if (d)
		__atomic_add_fetch(&d->refs, 1, __ATOMIC_RELAXED);
}

void fn_dns_put(struct fn_dns *d)
{
	if (d && __atomic_sub_fetch(&d->refs, 1, __ATOMIC_ACQ_REL) == 0)
		free(d);
}

static const char *const errors[] = {"none",   "nxdomain", "servfail",
				     "nodata", "timeout",  "refused"};

enum fn_dns_error fn_dns_error_parse(const char *word)
{
	for (int e = FN_DNS_NXDOMAIN; e <= FN_DNS_REFUSED; e++)
		if (strcmp(word, errors[e]) == 0)
			return (enum fn_dns_error)e;
	return FN_DNS_NONE;
}

const char *fn_dns_error_name(enum fn_dns_error e)
{
	return errors[e];
}

char *fn_host_pattern(const char *text, const char **why)
{
	size_t n = strlen(text);
	if (n && text[n - 1] == '.')
		n--;
	const char *name = text;
	if (n >= 2 && text[0] == '*' && text[1] == '.')
		name += 2;
	bool ok = n > 0 && n <= 253 && name < text + n;
	for (const char *p = name; ok && p < text + n; p++)
		ok = isalnum((unsigned char)*p) || *p == '-' || *p == '.' || *p == '_';
	if (!ok) {
		*why = "must be a host name (letters, digits, - _ .) or *. and a suffix";
		return NULL;
	}
	char *out = malloc(n + 1);
	for (size_t i = 0; out && i < n; i++)
		out[i] = (char)tolower((unsigned char)text[i]);
	if (out)
		out[n] = '\0';
	return out;
}

/* The k bytes at a and b alike but for ASCII case (strncasecmp's, in
 * line: a lookup compares one candidate or two, mostly short, and mostly
 * in the pattern's own case). Eight bytes at a time while they are equal
 * as they are, then a byte at a time. */
static bool same_name(const char *a, const char *b, size_t k)
{
	size_t i = 0;
	for (uint64_t x, y; i + 8 <= k; i += 8) {
		memcpy(&x, a + i, 8);
		memcpy(&y, b + i, 8);
		if (x != y)
			break;
	}
	for (; i < k; i++) {
		unsigned char x = (unsigned char)a[i], y = (unsigned char)b[i];
		if (x != y &&
		    ((x | 0x20) != (y | 0x20) || (unsigned)((x | 0x20) - 'a') > 'z' - 'a'))
			return false;
	}
	return true;
}

/* Whether pattern, of pl bytes, matches the n bytes of name (its trailing
 * dot cut off). */
static bool host_match_len(const char *pattern, size_t pl, const char *name, size_t n)
{
	if (pattern[0] == '*' && pattern[1] == '.') /* a strict suffix: a.b matches *.b */
		return n > pl - 1 && same_name(name + n - (pl - 1), pattern + 1, pl - 1);
	return n == pl && same_name(name, pattern, n);
}

/* fn_host_match for the n bytes of name, its trailing dot cut off. */
static bool host_match_n(const char *pattern, const char *name, size_t n)
{
	return host_match_len(pattern, strlen(pattern), name, n);
}

/* The length of a name of n bytes without its trailing dot. */
static size_t without_dot(const char *name, size_t n)
{
	return n && name[n - 1] == '.' ? n - 1 : n;
}

/* name's length without its trailing dot. */
static size_t name_len(const char *name)
{
	return without_dot(name, strlen(name));
}

bool fn_host_match(const char *pattern, const char *name)
{
	return host_match_n(pattern, name, name_len(name));
}

/* fn_dns_rule_covers for the n bytes of name. */
static bool covers_n(const struct fn_policy *p, const struct fn_rule *r, const char *name, size_t n)
{
	return r->action == FN_ACT_DNS && r->enabled &&
	       (!r->host || host_match_n(r->host, name, n)) &&
	       (r->from_zone < 0 || r->from_zone == p->self_zone);
}

bool fn_dns_rule_covers(const struct fn_policy *p, const struct fn_rule *r, const char *name)
{
	return covers_n(p, r, name, name_len(name));
}

/* The scan in file order: without an index (memory was short when the
 * policy was built), or for a name whose candidates the cursor cannot
 * hold. draw: conditions are drawn, else the first covering rule. */
const struct fn_rule *fn_dns_scan(const struct fn_policy *p, const char *name,
				  const struct fn_rule **seen, bool draw)
{
	for (size_t i = 0; i < p->nrules; i++) {
		const struct fn_rule *r = &p->rules[i];
		if (!fn_dns_rule_covers(p, r, name))
			continue;
		if (!*seen)
			*seen = r;
		if (!draw || fn_cond_pass(r))
			return r;
	}
	return NULL;
}

/* The same from the name index (core/hostidx.h): only the rules whose
 * pattern may match name are judged, still in file order. */
static const struct fn_rule *first(const struct fn_policy *p, const char *name, size_t len,
				   const struct fn_rule **seen, bool draw)
{
	*seen = NULL;
	if (!p || !name)
		return NULL;
	size_t n = without_dot(name, len);
	struct fn_hostidx_cur c;
	if (!p->hosts || !fn_hostidx_start(p->hosts, name, n, &c))
		return fn_dns_scan(p, name, seen, draw);
	for (uint32_t i; (i = fn_hostidx_next(&c)) != FN_HOSTIDX_END;) {
		/* covers_n, the pattern's length from the index: every rule
		 * listed is a dns rule. */
		const struct fn_rule *r = &p->rules[i];
		if (!r->enabled || (r->from_zone >= 0 && r->from_zone != p->self_zone) ||
		    (r->host && !host_match_len(r->host, p->hosts->hostlen[i], name, n)))
			continue;
		if (!*seen)
			*seen = r;
		if (!draw || fn_cond_pass(r))
			return r;
	}
	return NULL;
}

int fn_dns_candidates(const struct fn_policy *p, const char *name, size_t len, uint32_t *out,
		      int max)
{
	size_t n = without_dot(name, len);
	struct fn_hostidx_cur c;
	if (!p->hosts || !fn_hostidx_start(p->hosts, name, n, &c))
		return -1;
	int k = 0;
	for (uint32_t i; (i = fn_hostidx_next(&c)) != FN_HOSTIDX_END;) {
		const struct fn_rule *r = &p->rules[i];
		if (r->host && !host_match_len(r->host, p->hosts->hostlen[i], name, n))
			continue;
		if (k == max)
			return -1;
		out[k++] = i;
	}
	return k;
}

const struct fn_rule *fn_dns_decide(const struct fn_policy *p, const char *name,
				    const struct fn_rule **seen)
{
	return fn_dns_decide_len(p, name, name ? strlen(name) : 0, seen);
}

const struct fn_rule *fn_dns_decide_len(const struct fn_policy *p, const char *name, size_t len,
					const struct fn_rule **seen)
{
	return first(p, name, len, seen, true);
}

bool fn_dns_taken(const struct fn_policy *p, const char *name)
{
	const struct fn_rule *seen;
	return name && first(p, name, strlen(name), &seen, false) != NULL;
}

const struct fn_rule *fn_dns_nameserver(const struct fn_policy *p, const struct fn_endpoint *ep)
{
	for (size_t i = 0; i < p->nrules; i++) {
		const struct fn_rule *r = &p->rules[i];
		if (r->action != FN_ACT_DNS || (r->from_zone >= 0 && r->from_zone != p->self_zone))
			continue;
		bool to = !r->nto;
		for (size_t k = 0; k < r->nto && !to; k++)
			to = fn_cidr_contains(&r->to[k], ep);
		if (to &&
		    (r->nports ? fn_ports_contain(r->ports, r->nports, ep->port) : ep->port == 53))
			return r;
	}
	return NULL;
}

/* res_send's wait for one nameserver: its base timeout shifted by the
 * server's index, shared among the servers after the first. */
static unsigned per_server(unsigned timeout, unsigned ns, unsigned count)
{
	unsigned s = timeout << ns;
	if (ns > 0)
		s /= count;
	return s ? s : 1;
}

unsigned fn_resolver_timeout_ms(const char *resolv_conf)
{
	unsigned timeout = 5, attempts = 2, servers = 0;
	FILE *f = fopen(resolv_conf, "re");
	char line[512];
	while (f && fgets(line, sizeof(line), f)) {
		if (strncmp(line, "nameserver", 10) == 0 && isspace((unsigned char)line[10]))
			servers++;
		if (strncmp(line, "options", 7) != 0)
			continue;
		const char *t = strstr(line, "timeout:"), *a = strstr(line, "attempts:");
		if (t)
			timeout = (unsigned)atoi(t + 8);
		if (a)
			attempts = (unsigned)atoi(a + 9);
	}
	if (f)
		fclose(f);
	/* RES_OPTIONS overrides the file's options, as glibc's res_init does. */
	const char *env = getenv("RES_OPTIONS");
	const char *t = env ? strstr(env, "timeout:") : NULL,
		   *a = env ? strstr(env, "attempts:") : NULL;
	if (t)
		timeout = (unsigned)atoi(t + 8);
	if (a)
		attempts = (unsigned)atoi(a + 9);
	/* glibc's bounds (resolv.h: RES_MAXRETRANS 30, RES_MAXRETRY 5, MAXNS 3). */
	timeout = timeout < 1 ? 1 : timeout > 30 ? 30 : timeout;
	attempts = attempts < 1 ? 1 : attempts > 5 ? 5 : attempts;
	servers = servers < 1 ? 1 : servers > 3 ? 3 : servers;
	unsigned total = 0;
	for (unsigned ns = 0; ns < servers; ns++)
		total += per_server(timeout, ns, servers);
	return total * attempts * 1000;
}
