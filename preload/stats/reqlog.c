/* reqlog.c - the request log (FAULTNET_REQUESTS): one JSON line per HTTP
 * request the relay saw, with the rule that met it and the answer the app
 * got, written through the events file's writer (fn_jsonl). Which headers
 * are kept (FAULTNET_REQUESTS_HEADERS), which names are credentials
 * (FAULTNET_REQUESTS_REDACT, added to the built-in ones) and how large the
 * file may grow (FAULTNET_REQUESTS_MAX) are read once at start. */
#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "preload/base/say.h"
#include "preload/stats/stats.h"

#define NAMES_MAX 48
#define LINE_MAX_ 4000 /* under PIPE_BUF: one atomic write */

static struct fn_jsonl file = {-1, false};
static char wanted_buf[1024], secret_buf[1024];
static const char *wanted[NAMES_MAX], *secret[NAMES_MAX];
/* Whether an entry is a pattern (fnmatch) or a name (compared as bytes). */
static bool wanted_glob[NAMES_MAX], secret_glob[NAMES_MAX];
static int nwanted, nsecret;
static uint64_t cap_bytes = 64ull << 20;
static uint64_t written; /* the file's size as last known */
static int capped;

/* The headers retry logic is read from. */
static const char default_headers[] =
    "amz-sdk-request,amz-sdk-invocation-id,x-amz-error-code,x-amz-error-message,"
    "x-amzn-errortype,x-amz-request-id,retry-after,x-stainless-retry-count,grpc-status,"
    "user-agent";
/* Header and query parameter names whose values never reach the file. */
static const char default_secrets[] =
    "authorization,proxy-authorization,x-amz-security-token,x-api-key,api-key,"
    "x-goog-api-key,cookie,set-cookie,x-amz-signature,x-amz-credential,sig,access_token";

/* A header name's characters (RFC 9110 token), and * for a pattern. */
static bool token_char(int c)
{
	return isalnum(c) || (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* Splits a comma list into names (lower case); false on a bad entry,
 * described in why. */
static bool split(const char *var, const char *list, char *buf, size_t cap, const char **out,
		  int *n, char *why, size_t wlen)
{
	/* buf holds NUL-separated names: the next one goes after the last. */
	size_t at = *n ? (size_t)(out[*n - 1] - buf) + strlen(out[*n - 1]) + 1 : 0;
	for (const char *p = list; *p;) {
		size_t len = strcspn(p, ",");
		bool ok = len > 0 && *n < NAMES_MAX && at + len + 1 <= cap;
		for (size_t i = 0; ok && i < len; i++)
			ok = token_char((unsigned char)p[i]);
		if (!ok) {
			snprintf(why, wlen, "%s: '%.*s' at character %zu is not a header name%s",
				 var, (int)(len > 64 ? 64 : len), p, (size_t)(p - list) + 1,
				 *n >= NAMES_MAX ? " (too many names)" : "");
			return false;
		}
		for (size_t i = 0; i < len; i++)
			buf[at + i] = (char)tolower((unsigned char)p[i]);
		buf[at + len] = '\0';
		out[(*n)++] = buf + at;
		at += len + 1;
		p += len;
		if (*p == ',')
			p++;
	}
	return true;
}

static bool parse_size(const char *v, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long n = strtoull(v, &end, 10);
	if (errno || end == v || *v == '-')
		return false;
	int shift = *end == 'K' || *end == 'k' ? 10 : *end == 'M' ? 20 : *end == 'G' ? 30 : 0;
	if (shift)
		end++;
	if (*end || n == 0 || n > (UINT64_MAX >> shift))
		return false;
	*out = (uint64_t)n << shift;
	return true;
}

static const char *read_lists(void)
{
	static char why[200];
	const char *h = secure_getenv("FAULTNET_REQUESTS_HEADERS");
	const char *r = secure_getenv("FAULTNET_REQUESTS_REDACT");
	const char *m = secure_getenv("FAULTNET_REQUESTS_MAX");
	bool plus = h && *h == '+';
	if (!h || !*h || plus)
		split("", default_headers, wanted_buf, sizeof(wanted_buf), wanted, &nwanted, why,
		      sizeof(why));
	if (h && *h &&
	    !split("FAULTNET_REQUESTS_HEADERS", h + plus, wanted_buf, sizeof(wanted_buf), wanted,
		   &nwanted, why, sizeof(why)))
		return why;
	split("", default_secrets, secret_buf, sizeof(secret_buf), secret, &nsecret, why,
	      sizeof(why));
	if (r && *r &&
	    !split("FAULTNET_REQUESTS_REDACT", r, secret_buf, sizeof(secret_buf), secret, &nsecret,
		   why, sizeof(why)))
		return why;
	for (int i = 0; i < nwanted; i++)
		wanted_glob[i] = strpbrk(wanted[i], "*?[") != NULL;
	for (int i = 0; i < nsecret; i++)
		secret_glob[i] = strpbrk(secret[i], "*?[") != NULL;
	if (m && *m && !parse_size(m, &cap_bytes)) {
		snprintf(why, sizeof(why),
			 "FAULTNET_REQUESTS_MAX: '%.64s' is not a size in bytes (a whole number, "
			 "K, M or G after it)",
			 m);
		return why;
	}
	return NULL;
}

const char *fn_reqlog_open(bool *fatal)
{
	const char *path = secure_getenv("FAULTNET_REQUESTS");
	*fatal = false;
	if (!path || !*path)
		return NULL;
	const char *why = read_lists();
	if (why) {
		*fatal = true;
		return why;
	}
	static char msg[4200];
	why = fn_jsonl_open(&file, path, true);
	if (why) {
		snprintf(msg, sizeof(msg), "FAULTNET_REQUESTS=%s: %s", path, why);
		return msg;
	}
	struct stat sb;
	if (fstat(file.fd, &sb) == 0 && S_ISREG(sb.st_mode))
		written = (uint64_t)sb.st_size;
	return NULL;
}

bool fn_reqlog_on(void)
{
	return __atomic_load_n(&file.fd, __ATOMIC_RELAXED) >= 0 && !capped;
}

void fn_reqlog_fd_lost(int fd)
{
	fn_jsonl_lost(&file, fd);
}

/* Whether name (len bytes, any case) is one of names (lower case): by
 * length and bytes for plain names, fnmatch only for patterns, since every
 * header of every request is looked up. */
static bool listed(const char *const *names, const bool *glob, int n, const char *name, size_t len)
{
	char low[128];
	bool lowered = false;
	for (int i = 0; i < n; i++) {
		const char *p = names[i];
		if (!glob[i]) {
			if (strlen(p) == len && strncasecmp(p, name, len) == 0)
				return true;
			continue;
		}
		if (!lowered) {
			size_t k = len < sizeof(low) - 1 ? len : sizeof(low) - 1;
			for (size_t j = 0; j < k; j++)
				low[j] = (char)tolower((unsigned char)name[j]);
			low[k] = '\0';
			lowered = true;
		}
		if (fnmatch(p, low, 0) == 0)
			return true;
	}
	return false;
}

bool fn_reqlog_wants(const char *name, size_t len)
{
	return listed(wanted, wanted_glob, nwanted, name, len);
}

/* Appends s (n bytes) to buf as JSON string content, as far as cap allows
 * (an escape is never cut in two). */
static void esc(char *buf, size_t cap, size_t *at, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		size_t run = 0; /* plain characters, copied at once */
		while (i + run < n && (unsigned char)s[i + run] >= 0x20 &&
		       (unsigned char)s[i + run] < 0x7f && s[i + run] != '"' && s[i + run] != '\\')
			run++;
		if (run) {
			bool cut = *at + run + 1 > cap;
			if (cut)
				run = cap > *at + 1 ? cap - *at - 1 : 0;
			memcpy(buf + *at, s + i, run);
			*at += run;
			buf[*at] = '\0';
			if (cut)
				return;
			i += run - 1;
			continue;
		}
		unsigned char c = (unsigned char)s[i];
		char tmp[8];
		int k;
		if (c == '"' || c == '\\')
			k = snprintf(tmp, sizeof(tmp), "\\%c", c);
		else if (c < 0x20 || c >= 0x7f) /* the line stays ASCII, so valid UTF-8 */
			k = snprintf(tmp, sizeof(tmp), "\\u%04x", c);
		else
			tmp[0] = (char)c, k = 1;
		if (*at + (size_t)k + 1 > cap)
			return;
		memcpy(buf + *at, tmp, (size_t)k);
		*at += (size_t)k;
		buf[*at] = '\0';
	}
}

static void put(char *buf, size_t cap, size_t *at, const char *s)
{
	size_t n = strlen(s);
	if (*at + n + 1 > cap)
		return;
	memcpy(buf + *at, s, n + 1);
	*at += n;
}

void fn_reqlog_header(char *buf, size_t cap, size_t *len, const char *name, const char *value,
		      size_t vlen, size_t total)
{
	size_t nlen = strlen(name);
	char red[40];
	bool hide = listed(secret, secret_glob, nsecret, name, nlen);
	if (hide) {
		snprintf(red, sizeof(red), "(redacted:%zu)", total);
		value = red;
		vlen = strlen(red);
	}
	/* Whole or not at all: room for the pair's longest escaped form. */
	if (*len + 8 + 6 * (nlen + vlen) > cap)
		return;
	put(buf, cap, len, *len ? ",[\"" : "[\"");
	char low[128];
	size_t k = nlen < sizeof(low) ? nlen : sizeof(low) - 1;
	for (size_t i = 0; i < k; i++)
		low[i] = (char)tolower((unsigned char)name[i]);
	esc(buf, cap, len, low, k);
	put(buf, cap, len, "\",\"");
	esc(buf, cap, len, value, vlen);
	put(buf, cap, len, "\"]");
}

void fn_reqlog_query(char *dst, size_t cap, const char *q)
{
	size_t at = 0;
	dst[0] = '\0';
	for (const char *p = q; *p;) {
		size_t len = strcspn(p, "&"), klen = strcspn(p, "=&");
		if (at)
			put(dst, cap, &at, "&");
		if (klen < len && listed(secret, secret_glob, nsecret, p, klen)) {
			char red[40];
			snprintf(red, sizeof(red), "=(redacted:%zu)", len - klen - 1);
			size_t room = cap - at - 1;
			if (klen + strlen(red) > room)
				return; /* never half a redacted pair */
			memcpy(dst + at, p, klen);
			at += klen;
			dst[at] = '\0';
			put(dst, cap, &at, red);
		} else {
			size_t room = cap - at - 1, n = len < room ? len : room;
			memcpy(dst + at, p, n);
			at += n;
			dst[at] = '\0';
		}
		p += len;
		if (*p == '&')
			p++;
	}
}

/* A whole number, in decimal (snprintf costs a request thousands of
 * instructions more). */
static void put_num(char *b, size_t *at, int64_t v)
{
	static const char pairs[] = "0001020304050607080910111213141516171819"
				    "2021222324252627282930313233343536373839"
				    "4041424344454647484950515253545556575859"
				    "6061626364656667686970717273747576777879"
				    "8081828384858687888990919293949596979899";
	char t[24];
	int k = 0;
	uint64_t u = v < 0 ? -(uint64_t)v : (uint64_t)v;
	for (; u >= 100; u /= 100) { /* two digits a division */
		t[k++] = pairs[(u % 100) * 2 + 1];
		t[k++] = pairs[(u % 100) * 2];
	}
	t[k++] = (char)('0' + u % 10);
	if (u >= 10)
		t[k++] = (char)('0' + u / 10);
	if (v < 0)
		t[k++] = '-';
	if (*at + (size_t)k + 1 > LINE_MAX_)
		return;
	while (k)
		b[(*at)++] = t[--k];
	b[*at] = '\0';
}

/* ,"key":number */
static void num_field(char *b, size_t *at, const char *key, int64_t v)
{
	put(b, LINE_MAX_, at, ",\"");
	put(b, LINE_MAX_, at, key);
	put(b, LINE_MAX_, at, "\":");
	put_num(b, at, v);
}

static void field(char *b, size_t *at, const char *key, const char *val, size_t max)
{
	put(b, LINE_MAX_, at, ",\"");
	put(b, LINE_MAX_, at, key);
	put(b, LINE_MAX_, at, "\":\"");
	size_t end = *at + max < LINE_MAX_ ? *at + max : LINE_MAX_;
	esc(b, end, at, val, strlen(val));
	put(b, LINE_MAX_, at, "\"");
}

/* Mono ns as wall and monotonic microseconds, or nulls. */
static void stamp(char *b, size_t *at, const char *wall, const char *mono,
		  const struct fn_reqrec *r, uint64_t ns)
{
	if (!ns) {
		put(b, LINE_MAX_, at, ",\"");
		put(b, LINE_MAX_, at, wall);
		put(b, LINE_MAX_, at, "\":null,\"");
		put(b, LINE_MAX_, at, mono);
		put(b, LINE_MAX_, at, "\":null");
		return;
	}
	num_field(b, at, wall, r->wall_us + ((int64_t)ns - (int64_t)r->req_ns) / 1000);
	num_field(b, at, mono, (int64_t)(ns / 1000));
}

static size_t line(const struct fn_reqrec *r, char *b)
{
	size_t at = 0;
	put(b, LINE_MAX_, &at, "{\"pid\":");
	put_num(b, &at, getpid());
	num_field(b, &at, "conn", (int64_t)r->conn);
	num_field(b, &at, "n", (int64_t)r->n);
	stamp(b, &at, "req_wall_us", "req_mono_us", r, r->req_ns);
	stamp(b, &at, "first_wall_us", "first_mono_us", r, r->first_ns);
	stamp(b, &at, "end_wall_us", "end_mono_us", r, r->end_ns);
	field(b, &at, "method", r->method, 40);
	field(b, &at, "scheme", r->https ? "https" : "http", 8);
	field(b, &at, "host", r->host, 300);
	field(b, &at, "path", r->path, 700);
	field(b, &at, "query", r->query, 700);
	if (r->rule[0])
		field(b, &at, "rule", r->rule, 100);
	else
		put(b, LINE_MAX_, &at, ",\"rule\":null");
	field(b, &at, "fate", r->fate, 16);
	num_field(b, &at, "rule_status", r->rule_status);
	num_field(b, &at, "slowed_ms", r->slowed_ms);
	put(b, LINE_MAX_, &at,
	    r->reached ? ",\"reached_server\":true" : ",\"reached_server\":false");
	num_field(b, &at, "status", r->status);
	num_field(b, &at, "req_bytes", (int64_t)r->req_bytes);
	num_field(b, &at, "resp_bytes", (int64_t)r->resp_bytes);
	put(b, LINE_MAX_, &at, ",\"req_headers\":[");
	/* The header lists were built whole pair by pair; one that no longer
	 * fits is left out entirely rather than cut inside a pair. */
	if (at + r->reqhlen + r->resphlen + 40 < LINE_MAX_) {
		put(b, LINE_MAX_, &at, r->reqh);
		put(b, LINE_MAX_, &at, "],\"resp_headers\":[");
		put(b, LINE_MAX_, &at, r->resph);
	} else {
		put(b, LINE_MAX_, &at, "],\"resp_headers\":[");
	}
	put(b, LINE_MAX_, &at, "]}\n");
	return at;
}

/* The cap, for a regular file (a FIFO's reader keeps what it wants): the
 * file's size is known from this process's writes and looked at again
 * (fstat) once they say it is reached, since other processes append too.
 * Said once, in the file and on stderr. */
static bool room_for(size_t n)
{
	if (written + n <= cap_bytes)
		return true;
	struct stat sb;
	if (fstat(file.fd, &sb) == 0)
		written = (uint64_t)sb.st_size;
	if (written + n > cap_bytes) {
		if (__atomic_exchange_n(&capped, 1, __ATOMIC_RELAXED))
			return false;
		char t[160];
		int k = snprintf(
		    t, sizeof(t),
		    "{\"pid\":%d,\"requests_log\":\"cap reached\",\"max_bytes\":%" PRIu64 "}\n",
		    (int)getpid(), cap_bytes);
		fn_jsonl_write(&file, t, (size_t)k);
		fn_say("faultnet: FAULTNET_REQUESTS: %" PRIu64
		       " bytes (FAULTNET_REQUESTS_MAX) reached: no more requests logged",
		       cap_bytes);
		return false;
	}
	return true;
}

void fn_reqlog_write(const struct fn_reqrec *r)
{
	if (!fn_reqlog_on())
		return;
	char b[LINE_MAX_ + 8];
	size_t n = line(r, b);
	if (!file.pipe && !room_for(n))
		return;
	if (fn_jsonl_write(&file, b, n))
		written += n;
}
