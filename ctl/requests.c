/* requests.c - faultctl requests FILE: the request log (FAULTNET_REQUESTS,
 * one JSON line per HTTP request, written by preload/stats/reqlog.c) read
 * back. Lines are listed (or passed on as they are with --json), filtered
 * by rule, host and status, followed as they are appended (--follow),
 * summed as sends per logical call (--per-call: requests grouped by the
 * value of a header the client marks its calls with) or written as a HAR
 * 1.2 file (--har OUT). A line that is not a request is an error naming
 * the file and line. */
#include "ctl/requests.h"

#include <errno.h>
#include <stddef.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define HDRS 32

struct pair {
	char name[64], value[512];
};

/* One line of the log, as far as faultctl reads it. */
struct req {
	int64_t pid, conn, n, status, rule_status, slowed_ms, req_bytes, resp_bytes;
	int64_t req_wall, req_mono, first_mono, end_mono; /* -1: null */
	bool reached, has_rule, is_req;
	char method[32], scheme[8], host[300], path[1100], query[1100], rule[100], fate[20];
	char unanswered[40]; /* why no answer came, "" when one did */
	struct pair reqh[HDRS], resph[HDRS];
	int nreqh, nresph;
};

struct filter {
	const char *rule, *host;
	int64_t status; /* -1: any */
};

/* ---- a JSON line of the log ---------------------------------------------- */

static const char *ws(const char *p)
{
	while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
		p++;
	return p;
}

/* A string at p (after its quote) into out; the end, or NULL. */
static const char *str(const char *p, char *out, size_t cap)
{
	size_t n = 0;
	while (*p && *p != '"') {
		char c = *p++;
		if (c == '\\') {
			c = *p++;
			if (c == 'u') {
				unsigned v = 0;
				if (sscanf(p, "%4x", &v) != 1)
					return NULL;
				p += 4;
				c = v < 0x80 ? (char)v : '?';
			} else if (c == 'n' || c == 'r' || c == 't' || c == 'b' || c == 'f') {
				c = c == 'n' ? '\n' : c == 'r' ? '\r' : c == 't' ? '\t' : ' ';
			} else if (!c) {
				return NULL;
			}
		}
		if (n + 1 < cap)
			out[n++] = c;
	}
	if (cap)
		out[n] = '\0';
	return *p == '"' ? p + 1 : NULL;
}

static const char *skip(const char *p);

/* Past an array or object at p (at its bracket). */
static const char *skip_nested(const char *p)
{
	char close = *p == '[' ? ']' : '}';
	p = ws(p + 1);
	while (p && *p && *p != close) {
		if (close == '}') {
			char k[2];
			if (*p != '"' || !(p = str(p + 1, k, 0)))
				return NULL;
			p = ws(p);
			if (*p != ':')
				return NULL;
			p = ws(p + 1);
		}
		if (!(p = skip(p)))
			return NULL;
		p = ws(p);
		if (*p == ',')
			p = ws(p + 1);
	}
	return p && *p == close ? p + 1 : NULL;
}

static const char *skip(const char *p)
{
	if (*p == '"')
		return str(p + 1, NULL, 0);
	if (*p == '[' || *p == '{')
		return skip_nested(p);
	size_t n = strspn(p, "-+.0123456789eEtruefalsn");
	return n ? p + n : NULL;
}

/* [["name","value"],...] into pairs. */
static const char *pairs(const char *p, struct pair *out, int *n)
{
	if (*p != '[')
		return NULL;
	p = ws(p + 1);
	while (p && *p == '[') {
		struct pair tmp, *x = *n < HDRS ? &out[*n] : &tmp;
		p = ws(p + 1);
		if (*p != '"' || !(p = str(p + 1, x->name, sizeof(x->name))))
			return NULL;
		p = ws(p);
		if (*p != ',')
			return NULL;
		p = ws(p + 1);
		if (*p != '"' || !(p = str(p + 1, x->value, sizeof(x->value))))
			return NULL;
		p = ws(p);
		if (*p != ']')
			return NULL;
		if (*n < HDRS)
			(*n)++;
		p = ws(p + 1);
		if (*p == ',')
			p = ws(p + 1);
	}
	return p && *p == ']' ? p + 1 : NULL;
}

static int64_t num(const char *p)
{
	return strncmp(p, "null", 4) == 0 ? -1 : strtoll(p, NULL, 10);
}

/* One key's value into r. */
static const char *member(const char *k, const char *p, struct req *r)
{
	static const struct {
		const char *key;
		size_t off;
	} nums[] = {
	    {"pid", offsetof(struct req, pid)},
	    {"conn", offsetof(struct req, conn)},
	    {"n", offsetof(struct req, n)},
	    {"status", offsetof(struct req, status)},
	    {"rule_status", offsetof(struct req, rule_status)},
	    {"slowed_ms", offsetof(struct req, slowed_ms)},
	    {"req_bytes", offsetof(struct req, req_bytes)},
	    {"resp_bytes", offsetof(struct req, resp_bytes)},
	    {"req_wall_us", offsetof(struct req, req_wall)},
	    {"req_mono_us", offsetof(struct req, req_mono)},
	    {"first_mono_us", offsetof(struct req, first_mono)},
	    {"end_mono_us", offsetof(struct req, end_mono)},
	};
	static const struct {
		const char *key;
		size_t off, cap;
	} strs[] = {
#define S(k, f) {k, offsetof(struct req, f), sizeof(((struct req *)0)->f)}
	    S("method", method), S("scheme", scheme), S("host", host), S("path", path),
	    S("query", query),	 S("rule", rule),     S("fate", fate), S("unanswered", unanswered),
#undef S
	};
	for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++)
		if (strcmp(k, nums[i].key) == 0)
			*(int64_t *)((char *)r + nums[i].off) = num(p);
	for (size_t i = 0; *p == '"' && i < sizeof(strs) / sizeof(strs[0]); i++)
		if (strcmp(k, strs[i].key) == 0)
			return str(p + 1, (char *)r + strs[i].off, strs[i].cap);
	if (strcmp(k, "rule") == 0)
		r->has_rule = *p == '"';
	if (strcmp(k, "reached_server") == 0)
		r->reached = strncmp(p, "true", 4) == 0;
	if (strcmp(k, "req_headers") == 0)
		return pairs(p, r->reqh, &r->nreqh);
	if (strcmp(k, "resp_headers") == 0)
		return pairs(p, r->resph, &r->nresph);
	return skip(p);
}

/* A line of the log into r; false when it is no JSON object. */
static bool parse(const char *line, struct req *r)
{
	memset(r, 0, sizeof(*r));
	r->req_wall = r->req_mono = r->first_mono = r->end_mono = -1;
	const char *p = ws(line);
	if (*p != '{')
		return false;
	p = ws(p + 1);
	while (*p && *p != '}') {
		char k[40];
		if (*p != '"' || !(p = str(p + 1, k, sizeof(k))))
			return false;
		p = ws(p);
		if (*p != ':')
			return false;
		p = ws(p + 1);
		if (strcmp(k, "method") == 0)
			r->is_req = true;
		if (strcmp(k, "rule") == 0 && *p == '"')
			r->has_rule = true;
		if (!(p = member(k, p, r)))
			return false;
		p = ws(p);
		if (*p == ',')
			p = ws(p + 1);
	}
	return *p == '}' && !*ws(p + 1);
}

/* ---- filters and listing -------------------------------------------------- */

static bool host_matches(const char *pat, const char *host)
{
	char bare[300];
	snprintf(bare, sizeof(bare), "%s", host);
	char *colon = strrchr(bare, ':');
	if (colon && !strchr(colon, ']'))
		*colon = '\0';
	return fnmatch(pat, host, FNM_CASEFOLD) == 0 || fnmatch(pat, bare, FNM_CASEFOLD) == 0;
}

static bool wanted(const struct filter *f, const struct req *r)
{
	if (f->rule && strcmp(f->rule, "-") == 0 ? r->has_rule
	    : f->rule				 ? !r->has_rule || strcmp(f->rule, r->rule) != 0
						 : false)
		return false;
	if (f->host && !host_matches(f->host, r->host))
		return false;
	return f->status < 0 || f->status == r->status;
}

static double ms(int64_t from_us, int64_t to_us)
{
	return from_us < 0 || to_us < from_us ? 0 : (double)(to_us - from_us) / 1000.0;
}

static void list(const struct req *r)
{
	char when[32] = "-";
	if (r->req_wall >= 0) {
		time_t s = (time_t)(r->req_wall / 1000000);
		struct tm tm;
		gmtime_r(&s, &tm);
		size_t k = strftime(when, sizeof(when), "%H:%M:%S", &tm);
		snprintf(when + k, sizeof(when) - k, ".%03d", (int)(r->req_wall / 1000 % 1000));
	}
	/* A request no answer came to says why where the answer's time
	 * would be: the app got nothing, which a 0 status alone leaves open. */
	char end[64];
	if (r->unanswered[0])
		snprintf(end, sizeof(end), "unanswered (%s)", r->unanswered);
	else
		snprintf(end, sizeof(end), "%.1fms", ms(r->req_mono, r->end_mono));
	printf("%s %" PRId64 " %" PRId64 "/%" PRId64 " %s %s://%s%s%s%s %s %s%s %" PRId64
	       " %" PRId64 "B %s\n",
	       when, r->pid, r->conn, r->n, r->method, r->scheme, r->host, r->path,
	       r->query[0] ? "?" : "", r->query, r->has_rule ? r->rule : "-", r->fate,
	       r->reached ? "+server" : "", r->status, r->resp_bytes, end);
}

/* ---- per call --------------------------------------------------------------- */

struct calls {
	char (*id)[512];
	int *sends, n, cap, unmarked;
};

static const char *header(const struct req *r, const char *name)
{
	for (int i = 0; i < r->nreqh; i++)
		if (strcasecmp(r->reqh[i].name, name) == 0)
			return r->reqh[i].value;
	return NULL;
}

static void count_call(struct calls *c, const struct req *r, const char *name)
{
	const char *id = header(r, name);
	if (!id) {
		c->unmarked++;
		return;
	}
	for (int i = c->n - 1; i >= 0; i--)
		if (strcmp(c->id[i], id) == 0) {
			c->sends[i]++;
			return;
		}
	if (c->n == c->cap) {
		int cap = c->cap ? c->cap * 2 : 64;
		void *a = realloc(c->id, (size_t)cap * sizeof(*c->id));
		if (a)
			c->id = a;
		void *b = realloc(c->sends, (size_t)cap * sizeof(int));
		if (b)
			c->sends = b;
		if (!a || !b)
			return;
		c->cap = cap;
	}
	snprintf(c->id[c->n], sizeof(c->id[0]), "%s", id);
	c->sends[c->n++] = 1;
}

/* "3 x17, 2, 1 x12": sends per call, in the calls' order, runs folded. */
static void print_calls(const struct calls *c, const char *name)
{
	for (int i = 0; i < c->n;) {
		int k = i;
		while (k < c->n && c->sends[k] == c->sends[i])
			k++;
		printf("%s%d", i ? ", " : "", c->sends[i]);
		if (k - i > 1)
			printf(" x%d", k - i);
		i = k;
	}
	printf("%s\n", c->n ? "" : "no calls");
	if (c->unmarked)
		fprintf(stderr, "faultctl requests: %d request%s without %s left out\n",
			c->unmarked, c->unmarked == 1 ? "" : "s", name);
}

/* ---- HAR 1.2 ---------------------------------------------------------------- */

static void jstr(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20 || c >= 0x7f)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static void har_pairs(FILE *f, const struct pair *p, int n)
{
	fputc('[', f);
	for (int i = 0; i < n; i++) {
		fputs(i ? ",{\"name\":" : "{\"name\":", f);
		jstr(f, p[i].name);
		fputs(",\"value\":", f);
		jstr(f, p[i].value);
		fputc('}', f);
	}
	fputc(']', f);
}

static void har_query(FILE *f, const char *q)
{
	fputc('[', f);
	for (int i = 0; *q; i++) {
		size_t len = strcspn(q, "&"), klen = strcspn(q, "=&");
		char k[512], v[1100];
		snprintf(k, sizeof(k), "%.*s", (int)(klen < 500 ? klen : 500), q);
		snprintf(v, sizeof(v), "%.*s", klen < len ? (int)(len - klen - 1) : 0,
			 klen < len ? q + klen + 1 : "");
		fputs(i ? ",{\"name\":" : "{\"name\":", f);
		jstr(f, k);
		fputs(",\"value\":", f);
		jstr(f, v);
		fputc('}', f);
		q += len;
		if (*q == '&')
			q++;
	}
	fputc(']', f);
}

static void har_entry(FILE *f, const struct req *r, bool first)
{
	char when[64] = "1970-01-01T00:00:00.000Z", url[2600];
	if (r->req_wall >= 0) {
		time_t s = (time_t)(r->req_wall / 1000000);
		struct tm tm;
		gmtime_r(&s, &tm);
		size_t k = strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
		snprintf(when + k, sizeof(when) - k, ".%03dZ", (int)(r->req_wall / 1000 % 1000));
	}
	snprintf(url, sizeof(url), "%s://%s%s%s%s", r->scheme, r->host, r->path,
		 r->query[0] ? "?" : "", r->query);
	/* HAR's time is the sum of its timings: wait to the answer's first
	 * byte, receive to its end. */
	double wait = ms(r->req_mono, r->first_mono), recv = ms(r->first_mono, r->end_mono);
	fprintf(f, "%s\n{\"startedDateTime\":\"%s\",\"time\":%.3f,\"request\":{\"method\":",
		first ? "" : ",", when, wait + recv);
	jstr(f, r->method);
	fputs(",\"url\":", f);
	jstr(f, url);
	fputs(",\"httpVersion\":\"HTTP/1.1\",\"cookies\":[],\"headers\":", f);
	har_pairs(f, r->reqh, r->nreqh);
	fputs(",\"queryString\":", f);
	har_query(f, r->query);
	fprintf(f,
		",\"headersSize\":-1,\"bodySize\":-1},\"response\":{\"status\":%" PRId64
		",\"statusText\":\"\",\"httpVersion\":\"HTTP/1.1\",\"cookies\":[],\"headers\":",
		r->status);
	har_pairs(f, r->resph, r->nresph);
	fprintf(f,
		",\"content\":{\"size\":%" PRId64
		",\"mimeType\":\"x-unknown\"},\"redirectURL\":\"\","
		"\"headersSize\":-1,\"bodySize\":-1},\"cache\":{},\"timings\":{\"send\":0,"
		"\"wait\":%.3f,\"receive\":%.3f},\"_pid\":%" PRId64 ",\"_conn\":%" PRId64
		",\"_n\":%" PRId64 ",\"_fate\":",
		r->resp_bytes, wait, recv, r->pid, r->conn, r->n);
	jstr(f, r->fate);
	fputs(",\"_rule\":", f);
	if (r->has_rule)
		jstr(f, r->rule);
	else
		fputs("null", f);
	fprintf(f, ",\"_reached_server\":%s}", r->reached ? "true" : "false");
}

/* ---- the verb --------------------------------------------------------------- */

struct job {
	struct filter f;
	bool json, follow;
	const char *per_call, *har, *file, *version;
	struct calls calls;
	FILE *harf;
	int entries;
};

static int usage(const char *what)
{
	fprintf(stderr,
		"faultctl requests: %s\nusage: faultctl requests [--rule NAME] [--host GLOB] "
		"[--status N] [--json] [--follow | --per-call[=HEADER] | --har OUT] FILE\n",
		what);
	return 2;
}

/* One line of the file; false on one that is not the log's. */
static bool take(struct job *j, const char *line, long lineno)
{
	static struct req r;
	if (!parse(line, &r)) {
		fprintf(stderr, "faultctl requests: %s:%ld: not a JSON object of the request log\n",
			j->file, lineno);
		return false;
	}
	if (!r.is_req)
		return true; /* the cap's note, said by the shim on stderr too */
	if (!wanted(&j->f, &r))
		return true;
	if (j->per_call)
		count_call(&j->calls, &r, j->per_call);
	else if (j->harf)
		har_entry(j->harf, &r, j->entries++ == 0);
	else if (j->json)
		fputs(line, stdout);
	else
		list(&r);
	return true;
}

/* Reads f's complete lines; with follow, waits for more for ever. */
static int read_all(struct job *j, FILE *f)
{
	char *line = NULL, *part = NULL;
	size_t cap = 0, plen = 0;
	long lineno = 0;
	int rc = 0;
	for (;;) {
		ssize_t n = getline(&line, &cap, f);
		if (n < 0) {
			if (!j->follow)
				break;
			clearerr(f);
			fflush(stdout);
			usleep(100000);
			continue;
		}
		if (line[n - 1] != '\n' && j->follow) {
			/* A line still being written: kept until its end. */
			char *p = realloc(part, plen + (size_t)n + 1);
			if (p) {
				part = p;
				memcpy(part + plen, line, (size_t)n + 1);
				plen += (size_t)n;
			}
			continue;
		}
		lineno++;
		const char *whole = line;
		if (plen) {
			char *p = realloc(part, plen + (size_t)n + 1);
			if (p) {
				part = p;
				memcpy(part + plen, line, (size_t)n + 1);
			}
			whole = part;
			plen = 0;
		}
		if (!take(j, whole, lineno)) {
			rc = 1;
			break;
		}
	}
	free(line);
	free(part);
	return rc;
}

static bool options(struct job *j, int argc, char **argv, int *bad)
{
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		bool more = i + 1 < argc;
		char *end;
		if (strcmp(a, "--rule") == 0 && more)
			j->f.rule = argv[++i];
		else if (strcmp(a, "--host") == 0 && more)
			j->f.host = argv[++i];
		else if (strcmp(a, "--status") == 0 && more) {
			j->f.status = strtoll(argv[++i], &end, 10);
			if (*end || j->f.status < 0) {
				*bad = usage("--status: a whole number (0: no answer)");
				return false;
			}
		} else if (strcmp(a, "--json") == 0)
			j->json = true;
		else if (strcmp(a, "--follow") == 0)
			j->follow = true;
		else if (strcmp(a, "--per-call") == 0)
			j->per_call = "amz-sdk-invocation-id";
		else if (strncmp(a, "--per-call=", 11) == 0 && a[11])
			j->per_call = a + 11;
		else if (strcmp(a, "--har") == 0 && more)
			j->har = argv[++i];
		else if (a[0] == '-' && a[1]) {
			char msg[300];
			snprintf(msg, sizeof(msg), "unknown option '%.200s'", a);
			*bad = usage(msg);
			return false;
		} else if (!j->file)
			j->file = a;
		else {
			*bad = usage("one FILE only");
			return false;
		}
	}
	return true;
}

int cmd_requests(int argc, char **argv, bool json, const char *version)
{
	struct job j = {.f = {.status = -1}, .json = json, .version = version};
	int bad = 0;
	if (!options(&j, argc, argv, &bad))
		return bad;
	if (!j.file)
		return usage("no FILE (the log FAULTNET_REQUESTS or run --requests wrote)");
	if ((j.per_call != NULL) + (j.har != NULL) + j.follow > 1)
		return usage("--follow, --per-call and --har: one at a time");
	FILE *f = strcmp(j.file, "-") == 0 ? stdin : fopen(j.file, "r");
	if (!f) {
		fprintf(stderr, "faultctl requests: %s: %s\n", j.file, strerror(errno));
		return 1;
	}
	if (j.har && !(j.harf = fopen(j.har, "w"))) {
		fprintf(stderr, "faultctl requests: --har %s: %s\n", j.har, strerror(errno));
		return 1;
	}
	if (j.harf) {
		fputs(
		    "{\"log\":{\"version\":\"1.2\",\"creator\":{\"name\":\"faultnet\",\"version\":",
		    j.harf);
		jstr(j.harf, j.version);
		fputs("},\"entries\":[", j.harf);
	}
	int rc = read_all(&j, f);
	if (f != stdin)
		fclose(f);
	if (j.harf) {
		fputs("\n]}}\n", j.harf);
		if (fclose(j.harf) != 0) {
			fprintf(stderr, "faultctl requests: --har %s: %s\n", j.har,
				strerror(errno));
			rc = 1;
		}
	}
	if (j.per_call && !rc)
		print_calls(&j.calls, j.per_call);
	free(j.calls.id);
	free(j.calls.sends);
	return rc;
}
