/* config_keys.h - what the policy loader's parts share (config.c, and the
 * HTTP and dns rules' keys beside it in config_http.c and config_dns.c):
 * the parse context and the helpers that report a problem with file, line
 * and field. Private to the loader: nothing outside core/config*.c includes
 * it. */
#ifndef FN_CONFIG_KEYS_H
#define FN_CONFIG_KEYS_H

#include <stdbool.h>
#include <stddef.h>

#include "core/lcfg.h"
#include "core/rules.h"
#include "core/slices.h"

struct ctx {
	struct fn_lcfg lc;
	const struct fn_policy *base; /* live changes: zones come from here */
	const char *file;
	char *err;
	size_t errlen;
	struct fn_policy *p;
	/* A rules list parsed a slice at a time (parse_cut): the file's text
	 * and where its rules are. */
	const char *text;
	const struct fn_slices *sl;
	int line0;	 /* lines of the file above the slice being parsed */
	size_t slices;	 /* parsed so far */
	bool rules_only; /* fn_config_load_rules: not finished */
};

/* Writes "FILE:LINE: " and the message into c->err; always false. */
bool cfg_fail(struct ctx *c, const config_setting_t *s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
config_setting_t *cfg_member(struct ctx *c, const config_setting_t *s, const char *key);
bool cfg_only_keys(struct ctx *c, const config_setting_t *s, const char *where,
		   const char *const *names);
bool cfg_get_string(struct ctx *c, const config_setting_t *s, const char *where, const char **out);
/* A file's whole text, NUL-terminated; NULL with the reason in why. */
char *cfg_slurp(const char *path, char *why, size_t whylen);

/* config_http.c: match.method, match.path, match.host; the HTTP actions'
 * own keys (true in *done when key was one); a policy with HTTP rules
 * needs the parser. */
bool cfg_http_match(struct ctx *c, const config_setting_t *m, struct fn_rule *r);
/* The HTTP rule keys cfg_http_key takes, NULL at the end. */
extern const char *const cfg_http_keys[];
bool cfg_http_key(struct ctx *c, const config_setting_t *s, struct fn_rule *r, const char *key,
		  bool *done);
/* The keys of HTTP rule r (its group s) that depend on each other (gRPC
 * and HTTP/2), once all are read. */
bool cfg_http_check(struct ctx *c, const config_setting_t *s, struct fn_rule *r);
bool cfg_http_ready(struct ctx *c);
/* config_dns.c: the dns action's own keys, error and answer. */
bool cfg_dns_key(struct ctx *c, const config_setting_t *s, struct fn_rule *r, const char *key,
		 bool *done);

#endif
