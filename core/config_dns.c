/* config_dns.c - the policy loader's part for dns rules: the action's own
 * keys, error (nxdomain, servfail, nodata, timeout, refused) and answer
 * (the addresses a name resolves to). */
#include <string.h>

#include "core/addr.h"
#include "core/config_keys.h"
#include "core/dns.h"

/* answer = [ "127.66.0.1", "::1" ]: addresses a dns rule resolves to. */
static bool parse_answer(struct ctx *c, const config_setting_t *s, struct fn_rule *r)
{
	bool one = config_setting_type(s) == CONFIG_TYPE_STRING;
	if (!one && !config_setting_is_array(s) && !config_setting_is_list(s))
		return cfg_fail(c, s, "rule '%s': answer must be a list of addresses", r->name);
	int n = one ? 1 : c->lc.length(s);
	if (n < 1 || n > FN_DNS_ANSWERS_MAX)
		return cfg_fail(c, s, "rule '%s': answer holds 1 to %d addresses", r->name,
				FN_DNS_ANSWERS_MAX);
	for (int i = 0; i < n; i++) {
		const config_setting_t *e = one ? s : c->lc.elem(s, (unsigned)i);
		const char *v;
		struct fn_cidr a;
		if (!cfg_get_string(c, e, "answer", &v))
			return false;
		if (strchr(v, '/') || fn_cidr_parse(&a, v) || a.prefix != (a.v4 ? 32 : 128))
			return cfg_fail(c, e,
					"rule '%s': answer '%s' is not an IPv4 or IPv6 address",
					r->name, v);
		struct fn_endpoint *ep = &r->dns->answer[r->dns->nanswer++];
		ep->v4 = a.v4;
		memcpy(ep->ip, a.ip, sizeof(ep->ip));
	}
	return true;
}

/* The dns action's own keys: error and answer; true in *done when key
 * was one of them. */
bool cfg_dns_key(struct ctx *c, const config_setting_t *s, struct fn_rule *r, const char *key,
		 bool *done)
{
	*done = r->action == FN_ACT_DNS && (!strcmp(key, "error") || !strcmp(key, "answer"));
	if (!*done)
		return true;
	if (key[0] == 'a')
		return parse_answer(c, s, r);
	const char *v;
	if (!cfg_get_string(c, s, "error", &v))
		return false;
	if (!(r->dns->error = fn_dns_error_parse(v)))
		return cfg_fail(
		    c, s,
		    "rule '%s': error '%s' must be \"nxdomain\", \"servfail\", \"nodata\", "
		    "\"timeout\" or \"refused\"",
		    r->name, v);
	return true;
}
