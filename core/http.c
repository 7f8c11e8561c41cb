/* http.c - HTTP rules: matching a request, deciding per request, and
 * writing the answer a respond rule gives (see http.h). */
#include "core/http.h"

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/chance.h"
#include "core/dns.h"

struct fn_http *fn_http_new(void)
{
	struct fn_http *h = calloc(1, sizeof(*h));
	if (h) {
		h->refs = 1;
		h->retry_after = -1;
		h->mode = FN_ABORT_RESET;
		h->grpc_status = -1;
		h->grpc_pushback_ms = -1;
		h->rst_stream = -1;
		h->goaway = -1;
	}
	return h;
}

void fn_http_get(struct fn_http *h)
{
	if (h)
		__atomic_add_fetch(&h->refs, 1, __ATOMIC_RELAXED);
}

void fn_http_put(struct fn_http *h)
{
	if (!h || __atomic_sub_fetch(&h->refs, 1, __ATOMIC_ACQ_REL) != 0)
		return;
	free(h->method);
	free(h->path);
	free(h->headers);
	free(h->body);
	free(h->body_file);
	free(h->grpc_message);
	free(h);
}

static const char *const h2_errors[] = {"NO_ERROR",
					"PROTOCOL_ERROR",
					"INTERNAL_ERROR",
					"FLOW_CONTROL_ERROR",
					"SETTINGS_TIMEOUT",
					"STREAM_CLOSED",
					"FRAME_SIZE_ERROR",
					"REFUSED_STREAM",
					"CANCEL",
					"COMPRESSION_ERROR",
					"CONNECT_ERROR",
					"ENHANCE_YOUR_CALM",
					"INADEQUATE_SECURITY",
					"HTTP_1_1_REQUIRED"};

static const char *const grpc_codes[] = {
    "OK",	 "CANCELLED",	   "UNKNOWN",		"INVALID_ARGUMENT",   "DEADLINE_EXCEEDED",
    "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
    "ABORTED",	 "OUT_OF_RANGE",   "UNIMPLEMENTED",	"INTERNAL",	      "UNAVAILABLE",
    "DATA_LOSS", "UNAUTHENTICATED"};

#define NWORDS(a) ((int)(sizeof(a) / sizeof((a)[0])))

static int word_of(const char *const *words, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (strcasecmp(words[i], name) == 0)
			return i;
	return -1;
}

const char *fn_h2_error_name(int code)
{
	return code >= 0 && code < NWORDS(h2_errors) ? h2_errors[code] : NULL;
}

int fn_h2_error_of(const char *name)
{
	return word_of(h2_errors, NWORDS(h2_errors), name);
}

const char *fn_grpc_status_name(int code)
{
	return code >= 0 && code < NWORDS(grpc_codes) ? grpc_codes[code] : NULL;
}

int fn_grpc_status_of(const char *name)
{
	return word_of(grpc_codes, NWORDS(grpc_codes), name);
}

static bool glob_ok(const char *pattern, const char *s, int flags)
{
	return !pattern || fnmatch(pattern, s, flags) == 0;
}

bool fn_http_match(const struct fn_rule *r, const struct fn_http_req *req)
{
	const struct fn_http *h = r->http;
	if (!h)
		return false;
	/* Methods are case-sensitive (RFC 9110); host names are not. */
	return glob_ok(h->method, req->method, 0) && glob_ok(h->path, req->path, 0) &&
	       glob_ok(r->host, req->host, FNM_CASEFOLD);
}

const struct fn_rule *fn_http_decide(const struct fn_policy *p, const struct fn_endpoint *ep,
				     const struct fn_http_req *req, const struct fn_rule **seen)
{
	*seen = NULL;
	size_t from = 0;
	const struct fn_rule *r;
	while ((r = fn_policy_match_from(p, ep, FN_PROTO_TCP, from, NULL))) {
		from = (size_t)(r - p->rules) + 1;
		if (!fn_rule_http(r) || r->action == FN_ACT_TLS || !fn_http_match(r, req))
			continue;
		if (!*seen)
			*seen = r;
		if (fn_cond_pass(r))
			return r;
	}
	return NULL;
}

bool fn_http_answers_all(const struct fn_policy *p, const struct fn_endpoint *ep)
{
	/* A respond or abort rule stands for the server on this peer, as
	 * before the app's connect met refusals: a request it declines (its
	 * path, method or condition) then meets a reset (docs/http.md). Rules
	 * that only slow or cut answers leave every request to the server. */
	size_t from = 0;
	const struct fn_rule *r;
	while ((r = fn_policy_match_from(p, ep, FN_PROTO_TCP, from, NULL))) {
		from = (size_t)(r - p->rules) + 1;
		if (!fn_rule_http(r))
			continue;
		/* A tls rule stands for the server too: its handshake fails. */
		/* Not one that acts on the server's answer: a gRPC status
		 * after its headers, a reset after them. */
		const struct fn_http *h = r->http;
		bool answers =
		    (r->action == FN_ACT_RESPOND && !h->grpc_after_headers) ||
		    r->action == FN_ACT_TLS ||
		    (r->action == FN_ACT_ABORT && r->par.after_bytes < 0 && !h->ping_unanswered &&
		     !(h->rst_stream >= 0 && h->rst_after == FN_RST_HEADERS));
		if (answers && (!r->host || (fn_host_resolved && fn_host_resolved(ep, r->host))))
			return true;
	}
	return false;
}

const struct fn_rule *fn_tls_decide(const struct fn_policy *p, const struct fn_endpoint *ep,
				    const char *sni, const struct fn_rule **seen)
{
	*seen = NULL;
	size_t from = 0;
	const struct fn_rule *r;
	while ((r = fn_policy_match_from(p, ep, FN_PROTO_TCP, from, NULL))) {
		from = (size_t)(r - p->rules) + 1;
		if (r->action != FN_ACT_TLS || (r->host && !glob_ok(r->host, sni, FNM_CASEFOLD)))
			continue;
		if (!*seen)
			*seen = r;
		if (fn_cond_pass(r))
			return r;
	}
	return NULL;
}

bool fn_http_sni_covered(const struct fn_policy *p, const struct fn_endpoint *ep, const char *sni)
{
	for (size_t i = 0; p && i < p->nrules; i++) {
		const struct fn_rule *r = &p->rules[i];
		if (fn_rule_http(r) &&
		    (!r->host || !sni[0] || glob_ok(r->host, sni, FNM_CASEFOLD)) &&
		    fn_rule_covers(p, r, ep, FN_PROTO_TCP))
			return true;
	}
	return false;
}

static const char *const tls_faults[FN_TLSF_COUNT] = {
    "",		  "stall",	    "reset",	   "alert",	      "expired", "not_yet_valid",
    "wrong_host", "unknown_issuer", "self_signed", "incomplete_chain"};

const char *fn_tls_fault_name(int f)
{
	return f > 0 && f < FN_TLSF_COUNT ? tls_faults[f] : "?";
}

int fn_tls_fault_of(const char *name)
{
	for (int f = 1; f < FN_TLSF_COUNT; f++)
		if (strcmp(tls_faults[f], name) == 0)
			return f;
	return FN_TLSF_NONE;
}

static const struct {
	int code;
	const char *name;
} alerts[] = {{40, "handshake_failure"}, {70, "protocol_version"}, {80, "internal_error"}};

const char *fn_tls_alert_name(int code)
{
	for (size_t i = 0; i < sizeof(alerts) / sizeof(alerts[0]); i++)
		if (alerts[i].code == code)
			return alerts[i].name;
	return "?";
}

int fn_tls_alert_of(const char *name)
{
	for (size_t i = 0; i < sizeof(alerts) / sizeof(alerts[0]); i++)
		if (strcmp(alerts[i].name, name) == 0)
			return alerts[i].code;
	return 0;
}

const struct fn_rule *fn_http_covers(const struct fn_policy *p, const struct fn_endpoint *ep)
{
	for (size_t i = 0; p && i < p->nrules; i++)
		if (fn_rule_http(&p->rules[i]) && fn_rule_covers(p, &p->rules[i], ep, FN_PROTO_TCP))
			return &p->rules[i];
	return NULL;
}

const char *fn_http_reason(int status)
{
	static const struct {
		int code;
		const char *text;
	} reasons[] = {
	    {200, "OK"},
	    {201, "Created"},
	    {202, "Accepted"},
	    {204, "No Content"},
	    {301, "Moved Permanently"},
	    {302, "Found"},
	    {304, "Not Modified"},
	    {400, "Bad Request"},
	    {401, "Unauthorized"},
	    {403, "Forbidden"},
	    {404, "Not Found"},
	    {408, "Request Timeout"},
	    {409, "Conflict"},
	    {413, "Content Too Large"},
	    {429, "Too Many Requests"},
	    {500, "Internal Server Error"},
	    {501, "Not Implemented"},
	    {502, "Bad Gateway"},
	    {503, "Service Unavailable"},
	    {504, "Gateway Timeout"},
	};
	for (size_t i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++)
		if (reasons[i].code == status)
			return reasons[i].text;
	return "Unknown";
}

char *fn_http_answer(const struct fn_rule *r, bool head_request, size_t *len)
{
	const struct fn_http *h = r->http;
	char top[256], retry[64] = "";
	if (h->retry_after >= 0)
		snprintf(retry, sizeof(retry), "Retry-After: %lld\r\n", (long long)h->retry_after);
	/* No body, and no Content-Length, for the statuses that cannot have
	 * one (1xx, 204, 304). */
	bool bodyless = h->status < 200 || h->status == 204 || h->status == 304;
	int n =
	    snprintf(top, sizeof(top), "HTTP/1.1 %d %s\r\n", h->status, fn_http_reason(h->status));
	char tail[128];
	int m = bodyless ? snprintf(tail, sizeof(tail), "%s\r\n",
				    h->close ? "Connection: close\r\n" : "")
			 : snprintf(tail, sizeof(tail), "Content-Length: %zu\r\n%s\r\n", h->bodylen,
				    h->close ? "Connection: close\r\n" : "");
	size_t hl = h->headers ? strlen(h->headers) : 0, rl = strlen(retry);
	size_t body = bodyless || head_request ? 0 : h->bodylen;
	char *out = malloc((size_t)n + hl + rl + (size_t)m + body + 1);
	if (!out)
		return NULL;
	char *at = out;
	memcpy(at, top, (size_t)n), at += n;
	if (hl)
		memcpy(at, h->headers, hl), at += hl;
	memcpy(at, retry, rl), at += rl;
	memcpy(at, tail, (size_t)m), at += m;
	if (body)
		memcpy(at, h->body, body), at += body;
	*len = (size_t)(at - out);
	return out;
}

void fn_http_prefix(const char *path, char *buf, size_t len)
{
	const char *seg = path[0] == '/' ? path + 1 : path;
	const char *slash = strchr(seg, '/');
	if (!*seg)
		snprintf(buf, len, "/");
	else if (!slash || !slash[1])
		snprintf(buf, len, "/%.*s", (int)(slash ? slash - seg : (long)strlen(seg)), seg);
	else
		snprintf(buf, len, "/%.*s/*", (int)(slash - seg), seg);
}

static void put(char *buf, size_t len, size_t *at, const char *key, const char *value)
{
	if (*at >= len)
		return;
	int n = snprintf(buf + *at, len - *at, "%s%s=%s", *at ? " " : "", key, value);
	if (n > 0)
		*at += (size_t)n;
}

/* A respond rule's gRPC answer; the message quoted, as it may hold spaces
 * (a quote or backslash in it escaped). */
static void describe_grpc(const struct fn_http *h, char *buf, size_t len, size_t *at)
{
	char num[32], msg[2 * 512 + 3];
	put(buf, len, at, "grpc_status", fn_grpc_status_name(h->grpc_status));
	if (h->grpc_message) {
		size_t n = 0;
		msg[n++] = '"';
		for (const char *p = h->grpc_message; *p && n < sizeof(msg) - 3; p++) {
			if (*p == '"' || *p == '\\')
				msg[n++] = '\\';
			msg[n++] = *p;
		}
		msg[n++] = '"';
		msg[n] = '\0';
		put(buf, len, at, "grpc_message", msg);
	}
	if (h->grpc_pushback_ms >= 0) {
		snprintf(num, sizeof(num), "%lld", (long long)h->grpc_pushback_ms);
		put(buf, len, at, "grpc_pushback_ms", num);
	}
	if (h->grpc_after_headers)
		put(buf, len, at, "grpc_after_headers", "true");
}

void fn_http_describe(const struct fn_rule *r, char *buf, size_t len, size_t *at)
{
	const struct fn_http *h = r->http;
	char num[32];
	if (h->method)
		put(buf, len, at, "method", h->method);
	if (h->path)
		put(buf, len, at, "path", h->path);

	if (r->action == FN_ACT_RESPOND) {
		snprintf(num, sizeof(num), "%d", h->status);
		put(buf, len, at, "status", num);
		if (h->retry_after >= 0) {
			snprintf(num, sizeof(num), "%lld", (long long)h->retry_after);
			put(buf, len, at, "retry_after", num);
		}
		if (h->nheaders) {
			snprintf(num, sizeof(num), "%d", h->nheaders);
			put(buf, len, at, "headers", num);
		}
		snprintf(num, sizeof(num), "%zu", h->bodylen);
		put(buf, len, at, h->body_file ? "body_file_bytes" : "body_bytes", num);
		if (h->close)
			put(buf, len, at, "close", "true");
	}
	if (r->action == FN_ACT_RESPOND && h->grpc_status >= 0)
		describe_grpc(h, buf, len, at);
	if (r->action == FN_ACT_ABORT && !h->ping_unanswered)
		put(buf, len, at, "mode", h->mode == FN_ABORT_CLOSE ? "close" : "reset");
	if (r->action == FN_ACT_ABORT && h->ping_unanswered)
		put(buf, len, at, "ping", "unanswered");
	if (r->action == FN_ACT_ABORT && h->rst_stream >= 0) {
		put(buf, len, at, "rst_stream", fn_h2_error_name(h->rst_stream));
		put(buf, len, at, "rst_after",
		    h->rst_after == FN_RST_HEADERS ? "headers" : "request");
	}
	if (r->action == FN_ACT_ABORT && h->goaway >= 0)
		put(buf, len, at, "goaway", fn_h2_error_name(h->goaway));
	if (r->action == FN_ACT_TLS)
		put(buf, len, at, "fault", fn_tls_fault_name(h->tls_fault));
	if (r->action == FN_ACT_TLS && h->tls_fault == FN_TLSF_ALERT)
		put(buf, len, at, "alert", fn_tls_alert_name(h->tls_alert));
}
