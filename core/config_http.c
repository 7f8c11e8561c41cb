/* config_http.c - the policy loader's part for HTTP rules (respond, slow,
 * abort): their match keys (method, path, host) and their own keys (status,
 * headers, body, body_file, retry_after, close, mode; for HTTP/2 and gRPC
 * grpc_status, grpc_message, grpc_pushback_ms, grpc_after_headers,
 * rst_stream, rst_after, goaway), each problem reported with file, line and
 * field like the rest of config.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "core/actions.h"
#include "core/config_keys.h"
#include "core/dns.h"
#include "core/hparse.h"
#include "core/http.h"
#include "core/wire.h"

/* A pattern for match.method, match.path or match.host: printable ASCII
 * without spaces, at most 1 KiB. */
static bool get_pattern(struct ctx *c, const config_setting_t *s, struct fn_rule *r,
			const char *key, char **out)
{
	const char *v;
	char where[FN_NAME_MAX + 32];
	snprintf(where, sizeof(where), "rule '%s': match.%s", r->name, key);
	if (!cfg_get_string(c, s, where, &v))
		return false;
	if (!r->http || (r->action == FN_ACT_TLS && strcmp(key, "host") != 0))
		return cfg_fail(c, s, "%s applies to the HTTP actions respond, slow and abort only",
				where);
	size_t n = strlen(v);
	bool ok = n > 0 && n <= 1024;
	for (const char *p = v; ok && *p; p++)
		ok = *p > ' ' && *p < 0x7f;
	if (!ok)
		return cfg_fail(c, s,
				"%s '%s' must be 1 to 1024 printable characters without spaces",
				where, v);
	if (!(*out = strdup(v)))
		return cfg_fail(c, s, "out of memory");
	return true;
}

/* match.host: a glob on the Host header for HTTP rules; for the others an
 * exact name or "*." and a suffix (dns.h). */
static bool parse_host(struct ctx *c, const config_setting_t *s, struct fn_rule *r)
{
	if (r->http)
		return get_pattern(c, s, r, "host", &r->host);
	const char *v, *why;
	char where[FN_NAME_MAX + 32];
	snprintf(where, sizeof(where), "rule '%s': match.host", r->name);
	if (!cfg_get_string(c, s, where, &v))
		return false;
	if (!(r->host = fn_host_pattern(v, &why)))
		return cfg_fail(c, s, "%s '%s' %s", where, v, why);
	return true;
}

bool cfg_http_match(struct ctx *c, const config_setting_t *m, struct fn_rule *r)
{
	const config_setting_t *s;
	static char *none; /* method and path of a rule that is not HTTP: refused */
	if ((s = cfg_member(c, m, "method")) &&
	    !get_pattern(c, s, r, "method", r->http ? &r->http->method : &none))
		return false;
	if ((s = cfg_member(c, m, "path")) &&
	    !get_pattern(c, s, r, "path", r->http ? &r->http->path : &none))
		return false;
	if ((s = cfg_member(c, m, "host")) && !parse_host(c, s, r))
		return false;
	return true;
}

/* "Name: value": a token, a colon, a value without CR, LF or NUL. The
 * framing headers are faultnet's to write. */
static const char *bad_header(const char *h)
{
	static const char *const framing[] = {"content-length", "transfer-encoding", NULL};
	const char *colon = strchr(h, ':');
	if (!colon || colon == h)
		return "must be \"Name: value\"";
	for (const char *p = h; p < colon; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || strchr("!#$%&'*+-.^_`|~", *p)))
			return "has a name that is not an HTTP token";
	if (strpbrk(colon, "\r\n"))
		return "holds a line break";
	for (const char *const *f = framing; *f; f++)
		if ((size_t)(colon - h) == strlen(*f) && strncasecmp(h, *f, strlen(*f)) == 0)
			return "is written by faultnet from the body (Content-Length); leave it "
			       "out";
	return NULL;
}

static bool parse_headers(struct ctx *c, const config_setting_t *s, struct fn_rule *r)
{
	struct fn_http *h = r->http;
	bool one = config_setting_type(s) == CONFIG_TYPE_STRING;
	if (!one && !config_setting_is_array(s) && !config_setting_is_list(s))
		return cfg_fail(
		    c, s, "rule '%s': headers must be a list of \"Name: value\" strings", r->name);
	int n = one ? 1 : c->lc.length(s);
	if (n > FN_HTTP_HEADERS_MAX)
		return cfg_fail(c, s, "rule '%s': headers has %d entries; the limit is %d", r->name,
				n, FN_HTTP_HEADERS_MAX);
	struct fn_buf b = {0};
	for (int i = 0; i < n; i++) {
		const config_setting_t *e = one ? s : c->lc.elem(s, (unsigned)i);
		const char *v, *why = NULL;
		if (!cfg_get_string(c, e, "headers", &v) || (why = bad_header(v))) {
			fn_buf_free(&b);
			return why ? cfg_fail(c, e, "rule '%s': header '%s' %s", r->name, v, why)
				   : false;
		}
		fn_buf_printf(&b, "%s\r\n", v);
	}
	h->headers = b.oom ? NULL : b.s;
	h->nheaders = n;
	return b.oom ? cfg_fail(c, s, "out of memory") : true;
}

/* body_file: read when the rule is loaded, relative to the policy file. */
static bool read_body_file(struct ctx *c, const config_setting_t *s, struct fn_rule *r)
{
	const char *v;
	char path[4096], why[128];
	if (!cfg_get_string(c, s, "body_file", &v))
		return false;
	const char *slash = strrchr(c->file, '/');
	if (v[0] != '/' && slash)
		snprintf(path, sizeof(path), "%.*s/%s", (int)(slash - c->file), c->file, v);
	else
		snprintf(path, sizeof(path), "%s", v);
	struct stat sb;
	if (stat(path, &sb) == 0 && sb.st_size > FN_HTTP_BODY_MAX)
		return cfg_fail(c, s, "rule '%s': body_file %s is %lld bytes; the limit is %u",
				r->name, path, (long long)sb.st_size, FN_HTTP_BODY_MAX);
	char *text = cfg_slurp(path, why, sizeof(why));
	if (!text)
		return cfg_fail(c, s, "rule '%s': body_file %s: %s", r->name, path, why);
	r->http->body = text;
	r->http->bodylen = stat(path, &sb) == 0 ? (size_t)sb.st_size : strlen(text);
	r->http->body_file = strdup(path);
	return true;
}

static bool get_http_number(struct ctx *c, const config_setting_t *s, struct fn_rule *r,
			    const char *key, long long lo, long long hi, long long *out)
{
	int t = config_setting_type(s);
	if (t != CONFIG_TYPE_INT && t != CONFIG_TYPE_INT64)
		return cfg_fail(c, s, "rule '%s': %s must be a whole number", r->name, key);
	*out = c->lc.get_int64(s);
	if (*out < lo || *out > hi)
		return cfg_fail(c, s, "rule '%s': %s %lld is not from %lld to %lld", r->name, key,
				*out, lo, hi);
	return true;
}

const char *const cfg_http_keys[] = {"status",
				     "headers",
				     "body",
				     "body_file",
				     "retry_after",
				     "close",
				     "mode",
				     "fault",
				     "alert",
				     "grpc_status",
				     "grpc_message",
				     "grpc_pushback_ms",
				     "grpc_after_headers",
				     "rst_stream",
				     "rst_after",
				     "goaway",
				     "ping",
				     NULL};

/* Where the HTTP/2 and gRPC keys start in cfg_http_keys. */
enum { H2_KEYS = 9 };

/* A tls rule's fault, or its alert: a word of the lists in core/http.c. */
static bool tls_word(struct ctx *c, const config_setting_t *s, struct fn_rule *r, bool alert)
{
	const char *text;
	if (!cfg_get_string(c, s, alert ? "alert" : "fault", &text))
		return false;
	int v = alert ? fn_tls_alert_of(text) : fn_tls_fault_of(text);
	if (!v && alert)
		return cfg_fail(c, s,
				"rule '%s': alert '%s' must be \"handshake_failure\", "
				"\"internal_error\" or \"protocol_version\"",
				r->name, text);
	if (!v)
		return cfg_fail(c, s,
				"rule '%s': fault '%s' must be \"stall\", \"reset\", \"alert\", "
				"\"expired\", \"not_yet_valid\", \"wrong_host\", "
				"\"unknown_issuer\", \"self_signed\" or \"incomplete_chain\"",
				r->name, text);
	*(alert ? &r->http->tls_alert : &r->http->tls_fault) = v;
	return true;
}

/* grpc_status: a code from 0 to 16, or its name in any case. */
static bool grpc_status(struct ctx *c, const config_setting_t *s, struct fn_rule *r)
{
	int t = config_setting_type(s), v = -1;
	const char *text = NULL;
	if (t == CONFIG_TYPE_INT || t == CONFIG_TYPE_INT64) {
		long long n = c->lc.get_int64(s);
		if (n < 0 || n > 16)
			return cfg_fail(c, s, "rule '%s': grpc_status %lld is not from 0 to 16",
					r->name, n);
		v = (int)n;
	} else if (t == CONFIG_TYPE_STRING) {
		text = c->lc.get_string(s);
		v = fn_grpc_status_of(text);
	}
	if (v < 0) {
		char names[400] = "";
		for (int i = 0; fn_grpc_status_name(i); i++)
			snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s",
				 i ? ", " : "", fn_grpc_status_name(i));
		return cfg_fail(c, s,
				"rule '%s': grpc_status%s%s%s must be a gRPC status code from 0 "
				"to 16 or its name (%s)",
				r->name, text ? " '" : "", text ? text : "", text ? "'" : "",
				names);
	}
	r->http->grpc_status = v;
	return true;
}

/* rst_stream or goaway: an HTTP/2 error code's name (RFC 9113 7). */
static bool h2_error(struct ctx *c, const config_setting_t *s, struct fn_rule *r, const char *key,
		     int *out)
{
	const char *text;
	if (!cfg_get_string(c, s, key, &text))
		return false;
	if ((*out = fn_h2_error_of(text)) >= 0)
		return true;
	char names[400] = "";
	for (int i = 0; fn_h2_error_name(i); i++)
		snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s",
			 i ? ", " : "", fn_h2_error_name(i));
	return cfg_fail(c, s, "rule '%s': %s '%s' must be an HTTP/2 error code's name (%s)",
			r->name, key, text, names);
}

/* The HTTP/2 and gRPC keys, k counted from grpc_status. */
static bool h2_key(struct ctx *c, const config_setting_t *s, struct fn_rule *r, int k)
{
	struct fn_http *h = r->http;
	const char *text;
	long long v;
	switch (k) {
	case 0:
		return grpc_status(c, s, r);
	case 1:
		if (!cfg_get_string(c, s, "grpc_message", &text))
			return false;
		if (strpbrk(text, "\r\n"))
			return cfg_fail(c, s, "rule '%s': grpc_message holds a line break",
					r->name);
		if (strlen(text) > 512)
			return cfg_fail(c, s,
					"rule '%s': grpc_message is %zu bytes; the limit is 512",
					r->name, strlen(text));
		return (h->grpc_message = strdup(text)) ? true : cfg_fail(c, s, "out of memory");
	case 2:
		if (!get_http_number(c, s, r, "grpc_pushback_ms", 0, 86400000, &v))
			return false;
		h->grpc_pushback_ms = v;
		return true;
	case 3:
		if (config_setting_type(s) != CONFIG_TYPE_BOOL)
			return cfg_fail(c, s, "rule '%s': grpc_after_headers must be true or false",
					r->name);
		h->grpc_after_headers = c->lc.get_bool(s) != 0;
		return true;
	case 4:
		return h2_error(c, s, r, "rst_stream", &h->rst_stream);
	case 5:
		if (!cfg_get_string(c, s, "rst_after", &text))
			return false;
		if (strcmp(text, "request") && strcmp(text, "headers"))
			return cfg_fail(
			    c, s, "rule '%s': rst_after '%s' must be \"request\" or \"headers\"",
			    r->name, text);
		h->rst_after = text[0] == 'h' ? FN_RST_HEADERS : FN_RST_REQUEST;
		return true;
	case 6:
		return h2_error(c, s, r, "goaway", &h->goaway);
	default:
		if (!cfg_get_string(c, s, "ping", &text))
			return false;
		if (strcmp(text, "unanswered"))
			return cfg_fail(c, s, "rule '%s': ping '%s' must be \"unanswered\"",
					r->name, text);
		h->ping_unanswered = true;
		return true;
	}
}

/* The HTTP rule keys that are not plain numbers; true in *done when key
 * was one of them. */
bool cfg_http_key(struct ctx *c, const config_setting_t *s, struct fn_rule *r, const char *key,
		  bool *done)
{
	const char *const *keys = cfg_http_keys;
	static const enum fn_action owner[] = {
	    FN_ACT_RESPOND, FN_ACT_RESPOND, FN_ACT_RESPOND, FN_ACT_RESPOND, FN_ACT_RESPOND,
	    FN_ACT_RESPOND, FN_ACT_ABORT,   FN_ACT_TLS,	    FN_ACT_TLS,	    FN_ACT_RESPOND,
	    FN_ACT_RESPOND, FN_ACT_RESPOND, FN_ACT_RESPOND, FN_ACT_ABORT,   FN_ACT_ABORT,
	    FN_ACT_ABORT,   FN_ACT_ABORT};
	_Static_assert(sizeof(owner) / sizeof(owner[0]) + 1 ==
			   sizeof(cfg_http_keys) / sizeof(cfg_http_keys[0]),
		       "a key without its owner");
	int k = 0;
	while (keys[k] && strcmp(keys[k], key) != 0)
		k++;
	if (!(*done = keys[k] != NULL))
		return true;
	if (r->action != owner[k])
		return cfg_fail(c, s, "rule '%s': %s does not apply to action %s (only to %s)",
				r->name, key, fn_action_name(r->action), fn_action_name(owner[k]));
	struct fn_http *h = r->http;
	long long v;
	const char *text;
	switch (k) {
	case 0:
		if (!get_http_number(c, s, r, key, 100, 599, &v))
			return false;
		h->status = (int)v;
		return true;
	case 1:
		return parse_headers(c, s, r);
	case 2:
		if (h->body_file)
			return cfg_fail(c, s, "rule '%s': body and body_file: give one", r->name);
		if (!cfg_get_string(c, s, "body", &text))
			return false;
		h->bodylen = strlen(text);
		return (h->body = strdup(text)) ? true : cfg_fail(c, s, "out of memory");
	case 3:
		if (h->body)
			return cfg_fail(c, s, "rule '%s': body and body_file: give one", r->name);
		return read_body_file(c, s, r);
	case 4:
		if (!get_http_number(c, s, r, key, 0, 86400 * 365, &v))
			return false;
		h->retry_after = v;
		return true;
	case 5:
		if (config_setting_type(s) != CONFIG_TYPE_BOOL)
			return cfg_fail(c, s, "rule '%s': close must be true or false", r->name);
		h->close = c->lc.get_bool(s) != 0;
		return true;
	case 7:
	case 8:
		return tls_word(c, s, r, k == 8);
	case 6:
		if (!cfg_get_string(c, s, "mode", &text))
			return false;
		if (strcmp(text, "reset") && strcmp(text, "close"))
			return cfg_fail(c, s, "rule '%s': mode '%s' must be \"reset\" or \"close\"",
					r->name, text);
		h->mode = text[0] == 'c' ? FN_ABORT_CLOSE : FN_ABORT_RESET;
		return true;
	default:
		return h2_key(c, s, r, k - H2_KEYS);
	}
}

/* A respond rule's gRPC keys together: a gRPC status is the whole answer
 * (in trailers), so it takes no body, Retry-After or close; status may be
 * left out (200, as gRPC answers). */
static bool grpc_check(struct ctx *c, const config_setting_t *s, struct fn_rule *r)
{
	static const char *const needs[] = {"grpc_message", "grpc_pushback_ms",
					    "grpc_after_headers"};
	static const char *const clash[] = {"body", "body_file", "retry_after", "close"};
	const config_setting_t *m;
	struct fn_http *h = r->http;
	for (size_t i = 0; i < 3 && h->grpc_status < 0; i++)
		if ((m = cfg_member(c, s, needs[i])))
			return cfg_fail(c, m, "rule '%s': %s needs grpc_status", r->name, needs[i]);
	for (size_t i = 0; i < 4 && h->grpc_status >= 0; i++)
		if ((m = cfg_member(c, s, clash[i])))
			return cfg_fail(c, m,
					"rule '%s': grpc_status and %s: a gRPC status is answered "
					"in trailers, without %s; give one",
					r->name, clash[i], clash[i]);
	if (h->grpc_status >= 0 && !h->status)
		h->status = 200;
	return true;
}

/* An abort rule's HTTP/2 keys together: one RST_STREAM or one GOAWAY; a
 * GOAWAY refuses the stream as it arrives, so it takes no point in the
 * answer; rst_after and after_bytes each say that point. On an HTTP/1.1
 * connection the rule does what mode says: a GOAWAY's nearest kin there
 * is a close (the default mode for goaway), an RST_STREAM's a reset. */
static bool rst_check(struct ctx *c, const config_setting_t *s, struct fn_rule *r)
{
	struct fn_http *h = r->http;
	const config_setting_t *after = cfg_member(c, s, "rst_after"),
			       *goaway = cfg_member(c, s, "goaway");
	if (h->rst_stream >= 0 && goaway)
		return cfg_fail(c, goaway, "rule '%s': rst_stream and goaway: give one", r->name);
	if (goaway && after)
		return cfg_fail(c, after,
				"rule '%s': goaway and rst_after: a GOAWAY refuses the stream as "
				"it arrives; give one",
				r->name);
	if (goaway && r->par.after_bytes >= 0)
		return cfg_fail(c, goaway,
				"rule '%s': goaway and after_bytes: a GOAWAY refuses the stream as "
				"it arrives; give one",
				r->name);
	if (after && h->rst_stream < 0)
		return cfg_fail(c, after, "rule '%s': rst_after needs rst_stream", r->name);
	if (after && r->par.after_bytes >= 0)
		return cfg_fail(c, after,
				"rule '%s': rst_after and after_bytes: give one (after_bytes "
				"resets after that many bytes of the answer's DATA)",
				r->name);
	const config_setting_t *ping = cfg_member(c, s, "ping");
	if (ping && (h->rst_stream >= 0 || goaway || r->par.after_bytes >= 0))
		return cfg_fail(c, ping,
				"rule '%s': ping and %s: a ping rule leaves the stream as it is; "
				"give one",
				r->name,
				h->rst_stream >= 0 ? "rst_stream"
				: goaway	   ? "goaway"
						   : "after_bytes");
	if (goaway && !cfg_member(c, s, "mode"))
		h->mode = FN_ABORT_CLOSE;
	return true;
}

bool cfg_http_check(struct ctx *c, const config_setting_t *s, struct fn_rule *r)
{
	if (r->action == FN_ACT_RESPOND)
		return grpc_check(c, s, r);
	if (r->action == FN_ACT_ABORT)
		return rst_check(c, s, r);
	return true;
}

/* A policy with HTTP rules needs the parser: said when it is loaded, not
 * at the first request. */
bool cfg_http_ready(struct ctx *c)
{
	const char *why;
	for (size_t i = 0; i < c->p->nrules; i++)
		if (fn_rule_http(&c->p->rules[i]) && !fn_hparse_get(&why))
			return cfg_fail(c, NULL, "rule '%s' (action %s): %s", c->p->rules[i].name,
					fn_action_name(c->p->rules[i].action), why);
	return true;
}
