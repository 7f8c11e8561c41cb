/* reqlog.c - the request log (FAULTNET_REQUESTS): one JSON line per HTTP
 * request the relay saw, with the rule that met it and the answer the app
 * got, written through the events file's writer (fn_jsonl). Which headers
 * are kept (FAULTNET_REQUESTS_HEADERS), which names are credentials
 * (FAULTNET_REQUESTS_REDACT, added to the built-in ones) and how large the
 * file may grow (FAULTNET_REQUESTS_MAX) are read once at start. A line is
 * built as its request goes, by hand rather than by printf (the relay pays
 * for it on every request): its head at the decision, the rest at the
 * end; requests still waiting when the process exits get theirs then. */
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

/* A quick no for names not kept, since every header of every request and
 * answer is asked about: bit len % 64 of the entry for the first
 * character's low 5 bits (the same for both cases of a letter) is set for
 * each plain name kept; a pattern sets them all. */
static uint64_t wanted_sig[32];

static void sign_wanted(void)
{
	for (int i = 0; i < nwanted; i++) {
		if (wanted_glob[i]) {
			memset(wanted_sig, 0xff, sizeof(wanted_sig));
			return;
		}
		wanted_sig[wanted[i][0] & 31] |= 1ull << (strlen(wanted[i]) & 63);
	}
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
	sign_wanted();
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
 * length and bytes for plain names, fnmatch only for patterns. */
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
	if (!len || !(wanted_sig[name[0] & 31] >> (len & 63) & 1))
		return false;
	return listed(wanted, wanted_glob, nwanted, name, len);
}

/* The bytes a JSON string holds as they are: printable ASCII but " and \
 * (the line stays ASCII, so valid UTF-8). */
static const bool plain[256] = {
    [0x20 ... 0x21] = true, ['#' ... '['] = true, [']' ... 0x7e] = true};

/* s (n bytes) as JSON string content at p, no further than end (an escape
 * is never cut in two); the new end. Byte by byte: the strings are short,
 * and a call to memcpy per run cost more. */
static char *esc(char *p, const char *end, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	const char *se = s + n;
	for (;;) {
		/* plain bytes up to the first other one or the room's end */
		const char *lim = se - s < end - p ? se : s + (end - p);
		while (s < lim && plain[(unsigned char)*s])
			*p++ = *s++;
		if (s >= se || p >= end)
			return p;
		unsigned char c = (unsigned char)*s++;
		if (c == '"' || c == '\\') {
			if (end - p < 2)
				return p;
			*p++ = '\\';
			*p++ = (char)c;
		} else {
			if (end - p < 6)
				return p;
			memcpy(p, "\\u00", 4);
			p[4] = hex[c >> 4];
			p[5] = hex[c & 15];
			p += 6;
		}
	}
}

/* A literal: its length known when compiled. */
#define LIT(p, s) (memcpy((p), (s), sizeof(s) - 1), (p) += sizeof(s) - 1)

static const char pairs[] = "0001020304050607080910111213141516171819"
			    "2021222324252627282930313233343536373839"
			    "4041424344454647484950515253545556575859"
			    "6061626364656667686970717273747576777879"
			    "8081828384858687888990919293949596979899";

/* n (under 10^8) as exactly 8 digits at p, by fixed point rather than
 * division: t / 2^48 is n / 10^6, whose integer part is the first two
 * digits; each * 100 of the fraction brings the next two. The rounding
 * up of 2^48 / 10^6 stays under 10^-6 for any such n, too little to
 * change a digit (checked for every n by tests/unit). */
static inline __attribute__((always_inline)) void eight(char *p, uint32_t n)
{
	const uint64_t frac = (1ull << 48) - 1;
	uint64_t t = (uint64_t)n * 281474977ull;
	memcpy(p, pairs + 2 * (t >> 48), 2);
	t = (t & frac) * 100;
	memcpy(p + 2, pairs + 2 * (t >> 48), 2);
	t = (t & frac) * 100;
	memcpy(p + 4, pairs + 2 * (t >> 48), 2);
	t = (t & frac) * 100;
	memcpy(p + 6, pairs + 2 * (t >> 48), 2);
}

/* n (under 10^8) in decimal at p, without leading zeros; 8 bytes are
 * written whatever its length. */
static inline __attribute__((always_inline)) char *upto8(char *p, uint32_t n)
{
	static const uint32_t pow10[9] = {1,	  10,	   100,	     1000,     10000,
					  100000, 1000000, 10000000, 100000000};
	char t[16];
	eight(t, n);
	/* its digits: log10 from its bit length, one compare to correct */
	int d = ((32 - __builtin_clz(n | 1)) * 1233 >> 12) + 1;
	d -= n < pow10[d - 1];
	d += !d;
	memcpy(p, t + 8 - d, 8);
	return p + d;
}

/* A whole number in decimal at p, in at most three pieces of 8 digits
 * (snprintf costs a request thousands of instructions more); up to 8
 * bytes past its end are written over. */
static char *num(char *p, uint64_t u)
{
	if (u < 10) { /* most of a line's numbers are small */
		*p = (char)('0' + u);
		return p + 1;
	}
	if (u < 100) {
		memcpy(p, pairs + 2 * u, 2);
		return p + 2;
	}
	if (u < 100000000ull)
		return upto8(p, (uint32_t)u);
	if (u < 10000000000000000ull) {
		uint64_t hi = u / 100000000ull;
		p = upto8(p, (uint32_t)hi);
		eight(p, (uint32_t)(u - hi * 100000000ull));
		return p + 8;
	}
	uint64_t top = u / 10000000000000000ull, rest = u - top * 10000000000000000ull;
	uint64_t mid = rest / 100000000ull;
	p = upto8(p, (uint32_t)top);
	eight(p, (uint32_t)mid);
	eight(p + 8, (uint32_t)(rest - mid * 100000000ull));
	return p + 16;
}

static char *snum(char *p, int64_t v)
{
	if (v < 0)
		*p++ = '-';
	return num(p, v < 0 ? -(uint64_t)v : (uint64_t)v);
}

void fn_reqlog_header(char *buf, size_t cap, size_t *len, const char *name, size_t nlen,
		      const char *value, size_t vlen, size_t total)
{
	char red[40], low[128];
	if (nlen >= sizeof(low))
		nlen = sizeof(low) - 1;
	for (size_t i = 0; i < nlen; i++)
		low[i] = (char)tolower((unsigned char)name[i]);
	if (listed(secret, secret_glob, nsecret, low, nlen)) {
		char *e = red;
		LIT(e, "(redacted:");
		e = num(e, total);
		*e++ = ')';
		value = red;
		vlen = (size_t)(e - red);
	}
	/* Whole or not at all: room for the pair's longest escaped form. */
	if (*len + 8 + 6 * (nlen + vlen) + 1 > cap)
		return;
	char *p = buf + *len, *end = buf + cap - 1;
	if (*len)
		*p++ = ',';
	LIT(p, "[\"");
	p = esc(p, end, low, nlen);
	LIT(p, "\",\"");
	p = esc(p, end, value, vlen);
	LIT(p, "\"]");
	*p = '\0';
	*len = (size_t)(p - buf);
}

/* The query string q, escaped, credential parameters' values replaced by
 * their length (never half a redacted pair). */
static char *query(char *p, const char *end, const char *q)
{
	for (bool first = true; *q; first = false) {
		size_t len = strcspn(q, "&"), klen = strcspn(q, "=&");
		if (!first && p < end)
			*p++ = '&';
		if (klen < len && listed(secret, secret_glob, nsecret, q, klen)) {
			char red[48], *e = red;
			LIT(e, "=(redacted:");
			e = num(e, len - klen - 1);
			*e++ = ')';
			if ((size_t)(end - p) < 6 * klen + (size_t)(e - red))
				return p;
			p = esc(p, end, q, klen);
			memcpy(p, red, (size_t)(e - red));
			p += e - red;
		} else {
			p = esc(p, end, q, len);
		}
		q += len;
		if (*q == '&')
			q++;
	}
	return p;
}

/* ,"key":"value" with value escaped and at most max bytes long. */
#define FIELD(p, key, val, max)                          \
	do {                                             \
		LIT(p, ",\"" key "\":\"");               \
		p = esc(p, p + (max), val, strlen(val)); \
		*p++ = '"';                              \
	} while (0)

/* A line's longest is LINE_MAX_ (under PIPE_BUF, so one atomic write):
 * the head holds at most HEAD_MAX of it, the numbers after it take at most
 * 500, and the answer's headers go in only if they fit. */
#define HEAD_MAX 3000

/* The requests begun and not yet written, for exit (fn_reqlog_exit); only
 * touched under the relay's lock. A fork child forgets its parent's. */
static struct fn_reqrec *pending;

/* Records whose head is at most SMALL_HEAD bytes are all that size: one
 * freed is kept for the next request. */
#define SMALL_HEAD 768
static struct fn_reqrec *spare;

/* The line's start after its pid, into b (HEAD_MAX + 64 bytes); its
 * length. */
static size_t head(char *b, const struct fn_reqhead *h, int64_t wall)
{
	char *p = b;
	LIT(p, ",\"conn\":");
	p = num(p, h->conn);
	LIT(p, ",\"n\":");
	p = num(p, h->n);
	LIT(p, ",\"req_wall_us\":");
	p = snum(p, wall);
	LIT(p, ",\"req_mono_us\":");
	p = num(p, h->req_ns / 1000);
	FIELD(p, "method", h->method, 40);
	if (h->https)
		LIT(p, ",\"scheme\":\"https\"");
	else
		LIT(p, ",\"scheme\":\"http\"");
	FIELD(p, "host", h->host, 300);
	FIELD(p, "path", h->path, 700);
	LIT(p, ",\"query\":\"");
	p = query(p, p + 700, h->query);
	*p++ = '"';
	if (h->rule)
		FIELD(p, "rule", h->rule, 100);
	else
		LIT(p, ",\"rule\":null");
	LIT(p, ",\"req_headers\":[");
	/* The header list was built whole pair by pair; one that does not
	 * fit is left out entirely rather than cut inside a pair. */
	if ((size_t)(p - b) + h->reqhlen + 1 < HEAD_MAX) {
		memcpy(p, h->reqh, h->reqhlen);
		p += h->reqhlen;
	}
	*p++ = ']';
	return (size_t)(p - b);
}

struct fn_reqrec *fn_reqlog_begin(const struct fn_reqhead *h)
{
	char b[HEAD_MAX + 64];
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	int64_t wall = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
	size_t n = head(b, h, wall);
	/* The record last freed, when its head fits (most do: SMALL_HEAD),
	 * saves a request a malloc and a free. */
	struct fn_reqrec *r =
	    n <= SMALL_HEAD ? __atomic_exchange_n(&spare, NULL, __ATOMIC_ACQUIRE) : NULL;
	if (!r && !(r = malloc(sizeof(*r) + (n <= SMALL_HEAD ? SMALL_HEAD : n))))
		return NULL;
	memset(r, 0, offsetof(struct fn_reqrec, head));
	r->req_ns = h->req_ns;
	r->wall_us = wall;
	r->headlen = n;
	memcpy(r->head, b, n);
	r->next = pending;
	if (pending)
		pending->prev = &r->next;
	r->prev = &pending;
	pending = r;
	return r;
}

void fn_reqlog_resp_header(struct fn_reqrec *r, const char *name, size_t nlen, const char *value,
			   size_t vlen, size_t total)
{
	if (!r->resph && !(r->resph = malloc(FN_REQLOG_HDRS)))
		return;
	fn_reqlog_header(r->resph, FN_REQLOG_HDRS, &r->resphlen, name, nlen, value, vlen, total);
}

/* The wall time (µs) of mono ns, or null. */
static char *twall(char *p, const struct fn_reqrec *r, uint64_t ns)
{
	if (!ns) {
		LIT(p, "null");
		return p;
	}
	return snum(p, r->wall_us + ((int64_t)ns - (int64_t)r->req_ns) / 1000);
}

/* The monotonic time (µs) of mono ns, or null. */
static char *tmono(char *p, uint64_t ns)
{
	if (!ns) {
		LIT(p, "null");
		return p;
	}
	return num(p, ns / 1000);
}

static void unlink_rec(struct fn_reqrec *r)
{
	if (!r->prev)
		return; /* a fork child's copy: not on its list */
	*r->prev = r->next;
	if (r->next)
		r->next->prev = r->prev;
	r->prev = NULL;
}

/* The answer's times; end's copied from first's when the answer came in
 * one piece. */
static char *times(char *p, const struct fn_reqrec *r)
{
	LIT(p, ",\"first_wall_us\":");
	char *fw = p;
	p = twall(p, r, r->first_ns);
	size_t fwl = (size_t)(p - fw);
	LIT(p, ",\"first_mono_us\":");
	char *fm = p;
	p = tmono(p, r->first_ns);
	size_t fml = (size_t)(p - fm);
	bool same = r->end_ns == r->first_ns;
	LIT(p, ",\"end_wall_us\":");
	if (same)
		memcpy(p, fw, fwl), p += fwl;
	else
		p = twall(p, r, r->end_ns);
	LIT(p, ",\"end_mono_us\":");
	if (same)
		memcpy(p, fm, fml), p += fml;
	else
		p = tmono(p, r->end_ns);
	return p;
}

/* The line: {"pid":P then the head, then the numbers. */
static size_t line(const struct fn_reqrec *r, const char *unanswered, char *b)
{
	char *p = b;
	/* The pid's digits, written again while it is the same (a fork
	 * child's is not). */
	static char pids[24];
	static int pid, pidlen;
	int now = getpid();
	if (now != pid) {
		char *e = pids;
		LIT(e, "{\"pid\":");
		pidlen = (int)(num(e, (uint64_t)now) - pids);
		pid = now;
	}
	memcpy(p, pids, 24);
	p += pidlen;
	memcpy(p, r->head, r->headlen);
	p += r->headlen;
	p = times(p, r);
	LIT(p, ",\"fate\":\"");
	size_t fl = strlen(r->fate);
	memcpy(p, r->fate, fl);
	p += fl;
	LIT(p, "\",\"rule_status\":");
	p = snum(p, r->rule_status);
	LIT(p, ",\"slowed_ms\":");
	p = snum(p, r->slowed_ms);
	if (r->reached)
		LIT(p, ",\"reached_server\":true");
	else
		LIT(p, ",\"reached_server\":false");
	LIT(p, ",\"status\":");
	p = snum(p, r->status);
	LIT(p, ",\"req_bytes\":");
	p = num(p, r->req_bytes);
	LIT(p, ",\"resp_bytes\":");
	p = num(p, r->resp_bytes);
	if (unanswered) {
		LIT(p, ",\"unanswered\":\"");
		size_t k = strlen(unanswered);
		memcpy(p, unanswered, k);
		p += k;
		*p++ = '"';
	} else {
		LIT(p, ",\"unanswered\":null");
	}
	LIT(p, ",\"resp_headers\":[");
	if (r->resph && (size_t)(p - b) + r->resphlen + 4 < LINE_MAX_) {
		memcpy(p, r->resph, r->resphlen);
		p += r->resphlen;
	}
	LIT(p, "]}\n");
	return (size_t)(p - b);
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

void fn_reqlog_drop(struct fn_reqrec *r)
{
	if (!r)
		return;
	unlink_rec(r);
	free(r->resph);
	if (r->headlen <= SMALL_HEAD)
		r = __atomic_exchange_n(&spare, r, __ATOMIC_RELEASE);
	free(r);
}

void fn_reqlog_end(struct fn_reqrec *r, const char *unanswered)
{
	if (!r)
		return;
	/* A fork child's copy of its parent's request: the parent's to log. */
	if (r->prev && fn_reqlog_on()) {
		char b[LINE_MAX_ + 8];
		size_t n = line(r, unanswered, b);
		if ((file.pipe || room_for(n)) && fn_jsonl_write(&file, b, n))
			written += n;
	}
	fn_reqlog_drop(r);
}

void fn_reqlog_exit(void)
{
	while (pending)
		fn_reqlog_end(pending, "process exit");
}

/* In a fork child: the requests begun are its parent's (see
 * fn_reqlog_end), whose records it may still free. */
void fn_reqlog_atfork_child(void)
{
	for (struct fn_reqrec *r = pending; r; r = r->next)
		r->prev = NULL;
	pending = NULL;
}
