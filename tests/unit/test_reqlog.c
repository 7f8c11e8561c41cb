/* test_reqlog.c - the request log's line writer (preload/stats/reqlog.c,
 * included here so its static helpers are in reach): numbers written by
 * fixed point against snprintf (every 8-digit piece), JSON escaping, a
 * whole line from a record begun and ended as the relay does, credentials
 * redacted, and the lines written for requests still waiting at exit (or
 * not, in a fork child). The events file's writer is stood in for: the
 * lines written are kept here. */
#include <CUnit/CUnit.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "preload/stats/reqlog.c"

/* Stand-ins for preload/stats/stats.c's writer and base/say.c. */
static char out[16384];
static size_t outlen;
static int writes;

const char *fn_jsonl_open(struct fn_jsonl *j, const char *path, bool nofollow)
{
	(void)path, (void)nofollow;
	j->fd = 100;
	return NULL;
}

bool fn_jsonl_write(struct fn_jsonl *j, const char *line, size_t n)
{
	(void)j;
	if (outlen + n >= sizeof(out))
		return false;
	memcpy(out + outlen, line, n);
	outlen += n;
	out[outlen] = '\0';
	writes++;
	return true;
}

void fn_jsonl_lost(struct fn_jsonl *j, int fd)
{
	(void)j, (void)fd;
}

void fn_say(const char *fmt, ...)
{
	(void)fmt;
}

static void reset_out(void)
{
	outlen = 0;
	out[0] = '\0';
	writes = 0;
}

/* eight() for every n under 10^8, against a decimal counter. */
static void test_eight(void)
{
	char want[8] = "00000000", got[16];
	uint32_t bad = 0;
	for (uint32_t n = 0; n < 100000000u; n++) {
		eight(got, n);
		if (memcmp(got, want, 8) != 0 && !bad++)
			CU_FAIL("eight() wrote a wrong digit");
		for (int i = 7; i >= 0 && ++want[i] > '9'; i--)
			want[i] = '0';
	}
	CU_ASSERT_EQUAL(bad, 0);
}

/* num() and snum() against snprintf at every length's edges, and a spread. */
static void test_num(void)
{
	uint64_t v[200];
	int n = 0;
	v[n++] = 0;
	v[n++] = UINT64_MAX;
	for (uint64_t p = 1; p <= 1000000000000000000ull; p *= 10) {
		v[n++] = p - 1;
		v[n++] = p;
		v[n++] = p + 1;
		v[n++] = p * 9 + (p - 1);
	}
	uint64_t x = 88172645463325252ull; /* xorshift */
	while (n < 200) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		v[n++] = x >> (x % 64);
	}
	for (int i = 0; i < n; i++) {
		char got[48], want[48];
		char *e = num(got, v[i]);
		*e = '\0';
		snprintf(want, sizeof(want), "%" PRIu64, v[i]);
		CU_ASSERT_STRING_EQUAL(got, want);
		int64_t s = (int64_t)v[i];
		e = snum(got, s);
		*e = '\0';
		snprintf(want, sizeof(want), "%" PRId64, s);
		CU_ASSERT_STRING_EQUAL(got, want);
	}
}

static void test_esc(void)
{
	char b[64];
	const char s[] = "a\"b\\c\td\xe9";
	char *e = esc(b, b + sizeof(b), s, sizeof(s) - 1);
	*e = '\0';
	CU_ASSERT_STRING_EQUAL(b, "a\\\"b\\\\c\\u0009d\\u00e9");
	/* No room for a whole escape: none of it. */
	e = esc(b, b + 3, "ab\"", 3);
	*e = '\0';
	CU_ASSERT_STRING_EQUAL(b, "ab");
}

static struct fn_reqrec *begin(const char *path, const char *query, const char *reqh)
{
	struct fn_reqhead h = {7,    3,	    5000000000ull, false, "GET",       "example.test:8080",
			       path, query, "r1",	   reqh,  strlen(reqh)};
	return fn_reqlog_begin(&h);
}

static bool setup_done;

static void setup(void)
{
	if (!setup_done) {
		bool fatal;
		setenv("FAULTNET_REQUESTS", "/nonexistent/stand-in", 1);
		CU_ASSERT_PTR_NULL(fn_reqlog_open(&fatal));
		unsetenv("FAULTNET_REQUESTS"); /* for no program the tests start */
		setup_done = true;
	}
	reset_out();
}

/* A whole line: its fields, as JSON the way faultctl reads it back. */
static void test_line(void)
{
	setup();
	char reqh[FN_REQLOG_HDRS];
	size_t reqhlen = 0;
	CU_ASSERT(fn_reqlog_wants("User-Agent", 10));
	CU_ASSERT(!fn_reqlog_wants("Host", 4));
	CU_ASSERT(!fn_reqlog_wants("authorization", 13)); /* not kept, unless asked */
	fn_reqlog_header(reqh, sizeof(reqh), &reqhlen, "User-Agent", 10, "t/1", 3, 3);
	fn_reqlog_header(reqh, sizeof(reqh), &reqhlen, "Authorization", 13, "Bearer SECRET", 13,
			 13);
	struct fn_reqrec *r = begin("/a b", "sig=SECRETSIG&x=1", reqh);
	CU_ASSERT_PTR_NOT_NULL_FATAL(r);
	r->fate = fn_req_fate_names[FN_REQ_UNTOUCHED];
	r->first_ns = 5002000000ull;
	r->end_ns = 5003500000ull;
	r->status = 200;
	r->reached = true;
	r->req_bytes = 40;
	r->resp_bytes = 1234567;
	fn_reqlog_resp_header(r, "Set-Cookie", 10, "id=SECRETCOOKIE", 15, 15);
	fn_reqlog_resp_header(r, "Retry-After", 11, "3", 1, 1);
	int64_t wall = r->wall_us;
	fn_reqlog_end(r, NULL);
	CU_ASSERT_EQUAL(writes, 1);
	char want[2048];
	snprintf(want, sizeof(want),
		 "{\"pid\":%d,\"conn\":7,\"n\":3,\"req_wall_us\":%" PRId64
		 ",\"req_mono_us\":5000000,\"method\":\"GET\",\"scheme\":\"http\","
		 "\"host\":\"example.test:8080\",\"path\":\"/a b\","
		 "\"query\":\"sig=(redacted:9)&x=1\",\"rule\":\"r1\","
		 "\"req_headers\":[[\"user-agent\",\"t/1\"],[\"authorization\",\"(redacted:13)\"]],"
		 "\"first_wall_us\":%" PRId64 ",\"first_mono_us\":5002000,\"end_wall_us\":%" PRId64
		 ",\"end_mono_us\":5003500,\"fate\":\"untouched\",\"rule_status\":0,"
		 "\"slowed_ms\":0,\"reached_server\":true,\"status\":200,\"req_bytes\":40,"
		 "\"resp_bytes\":1234567,\"unanswered\":null,\"resp_headers\":[[\"set-cookie\","
		 "\"(redacted:15)\"],[\"retry-after\",\"3\"]]}\n",
		 (int)getpid(), wall, wall + 2000, wall + 3500);
	CU_ASSERT_STRING_EQUAL(out, want);
	CU_ASSERT_PTR_NULL(strstr(out, "SECRET"));
}

/* Requests still waiting at exit get their line, said so, once; a fork
 * child's copies of its parent's get none. */
static void test_exit(void)
{
	setup();
	struct fn_reqrec *a = begin("/a", "", ""), *b = begin("/b", "", "");
	CU_ASSERT_PTR_NOT_NULL_FATAL(a);
	CU_ASSERT_PTR_NOT_NULL_FATAL(b);
	a->fate = b->fate = "untouched";
	fn_reqlog_end(a, NULL); /* answered: off the waiting list */
	reset_out();
	fn_reqlog_exit();
	CU_ASSERT_EQUAL(writes, 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"path\":\"/b\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"unanswered\":\"process exit\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"first_mono_us\":null,\"end_wall_us\":null"));
	reset_out();
	fn_reqlog_exit();
	CU_ASSERT_EQUAL(writes, 0);

	struct fn_reqrec *c = begin("/c", "", "");
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	c->fate = "untouched";
	fn_reqlog_atfork_child();
	fn_reqlog_exit();
	fn_reqlog_end(c, "connection closed");
	CU_ASSERT_EQUAL(writes, 0);
}

/* Every field at its longest, each byte one to escape: one line, under
 * PIPE_BUF, ending as a line does. */
static void test_longest(void)
{
	setup();
	static char host[256], path[1024], query[1024], big[600], reqh[FN_REQLOG_HDRS];
	memset(host, '"', sizeof(host) - 1);
	memset(path, 1, sizeof(path) - 1);
	for (size_t i = 0; i < sizeof(query) - 1; i++)
		query[i] = i % 7 == 6 ? '&' : i % 7 == 3 ? '=' : '\\';
	memcpy(query, "sig=", 4);
	memset(big, '\\', sizeof(big) - 1);
	size_t reqhlen = 0;
	static char plainv[101];
	memset(plainv, 'a', 100);
	for (int i = 0; i < 20; i++) /* as many as the room for each one's worst case */
		fn_reqlog_header(reqh, sizeof(reqh), &reqhlen, "user-agent", 10, plainv, 100, 100);
	CU_ASSERT(reqhlen > 800);
	struct fn_reqhead h = {UINT64_MAX, UINT64_MAX,	UINT64_MAX,
			       true,	   "PROPPATCH", host,
			       path,	   query,	"a-rule-name-that-is-long-enough",
			       reqh,	   reqhlen};
	struct fn_reqrec *r = fn_reqlog_begin(&h);
	CU_ASSERT_PTR_NOT_NULL_FATAL(r);
	r->fate = "untouched";
	r->first_ns = UINT64_MAX - 1;
	r->end_ns = UINT64_MAX;
	r->status = -1;
	r->slowed_ms = INT64_MIN;
	r->req_bytes = r->resp_bytes = UINT64_MAX;
	for (int i = 0; i < 20; i++)
		fn_reqlog_resp_header(r, "retry-after", 11, big, 200, 200);
	fn_reqlog_end(r, "connection closed");
	CU_ASSERT_EQUAL(writes, 1);
	CU_ASSERT(outlen < LINE_MAX_);
	CU_ASSERT(outlen > 2000);
	CU_ASSERT(outlen >= 3 && memcmp(out + outlen - 3, "]}\n", 3) == 0);
	CU_ASSERT_PTR_NULL(memchr(out, '\n', outlen - 1));
}

void add_reqlog_tests(void)
{
	CU_pSuite s = CU_add_suite("request log", NULL, NULL);
	CU_add_test(s, "8 digits by fixed point, every one", test_eight);
	CU_add_test(s, "numbers against snprintf", test_num);
	CU_add_test(s, "JSON escapes, never cut in two", test_esc);
	CU_add_test(s, "a whole line, credentials redacted", test_line);
	CU_add_test(s, "requests waiting at exit, and a fork child's", test_exit);
	CU_add_test(s, "every field at its longest: one line under PIPE_BUF", test_longest);
}
