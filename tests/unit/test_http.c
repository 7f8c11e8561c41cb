/* test_http.c - HTTP rules: their keys and errors in a policy file, the
 * per-request match (method, path, Host globs), the per-request decision
 * with conditions, the answer's bytes and the counting prefix. */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include "core/actions.h"
#include "core/config.h"
#include "core/dns.h"
#include "core/http.h"

static char err[512];

static struct fn_policy *load(const char *text)
{
	err[0] = '\0';
	return fn_config_load_string(text, "/tmp/t.conf", NULL, err, sizeof(err));
}

static const char *error_of(const char *text)
{
	fn_policy_free(load(text));
	return err;
}

#define RULE(body) "rules = (\n { name = \"h\"; " body " }\n);"
#define EXPECT(body, message) CU_ASSERT_STRING_EQUAL(error_of(RULE(body)), message)

static void test_errors(void)
{
	EXPECT("action = \"respond\";",
	       "/tmp/t.conf:2: rule 'h': action respond needs status (100 to 599)");
	EXPECT("action = \"respond\"; status = 99;",
	       "/tmp/t.conf:2: rule 'h': status 99 is not from 100 to 599");
	EXPECT("action = \"slow\";",
	       "/tmp/t.conf:2: rule 'h': action slow needs delay_ms (more than 0)");
	EXPECT("action = \"respond\"; status = 503; headers = [\"Bad Header\"];",
	       "/tmp/t.conf:2: rule 'h': header 'Bad Header' must be \"Name: value\"");
	EXPECT(
	    "action = \"respond\"; status = 503; headers = [\"Content-Length: 5\"];",
	    "/tmp/t.conf:2: rule 'h': header 'Content-Length: 5' is written by faultnet from the "
	    "body (Content-Length); leave it out");
	EXPECT("action = \"respond\"; status = 503; body = \"x\"; body_file = \"y\";",
	       "/tmp/t.conf:2: rule 'h': body and body_file: give one");
	EXPECT(
	    "action = \"respond\"; status = 503; body_file = \"no-such-file\";",
	    "/tmp/t.conf:2: rule 'h': body_file /tmp/no-such-file: cannot read the file (No such "
	    "file or directory)");
	EXPECT("action = \"abort\"; mode = \"explode\";",
	       "/tmp/t.conf:2: rule 'h': mode 'explode' must be \"reset\" or \"close\"");
	EXPECT("action = \"abort\"; status = 500;",
	       "/tmp/t.conf:2: rule 'h': status does not apply to action abort (only to respond)");
	EXPECT("action = \"drop\"; match = { path = \"/x\"; };",
	       "/tmp/t.conf:2: rule 'h': match.path applies to the HTTP actions respond, slow and "
	       "abort only");
	EXPECT("action = \"slow\"; delay_ms = 5; match = { method = \"G T\"; };",
	       "/tmp/t.conf:2: rule 'h': match.method 'G T' must be 1 to 1024 printable characters "
	       "without spaces");
	EXPECT("action = \"respond\"; status = 503; proto = \"udp\";",
	       "/tmp/t.conf:2: rule 'h': unknown key 'proto'");
	EXPECT("action = \"respond\"; status = 503; retry_after = -1;",
	       "/tmp/t.conf:2: rule 'h': retry_after -1 is not from 0 to 31536000");
}

static void test_body_file(void)
{
	char path[] = "/tmp/fn-body-XXXXXX";
	int fd = mkstemp(path);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT(write(fd, "a\0b", 3) == 3);
	close(fd);
	char text[256];
	snprintf(text, sizeof(text),
		 RULE("action = \"respond\"; status = 500; body_file = \"%s\";"), path);
	struct fn_policy *p = load(text);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	CU_ASSERT_EQUAL(p->rules[0].http->bodylen, 3);
	CU_ASSERT(memcmp(p->rules[0].http->body, "a\0b", 3) == 0);
	fn_policy_free(p);
	unlink(path);
}

static void test_match(void)
{
	struct fn_policy *p =
	    load(RULE("action = \"respond\"; status = 503; match = { method = "
		      "\"GET\"; path = \"/bucket/*\"; host = \"*.example.com\"; };"));
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	const struct fn_rule *r = &p->rules[0];
	struct fn_http_req get = {"GET", "/bucket/key", "s3.Example.com"};
	struct fn_http_req put = {"PUT", "/bucket/key", "s3.example.com"};
	struct fn_http_req other = {"GET", "/other/key", "s3.example.com"};
	struct fn_http_req nohost = {"GET", "/bucket/key", ""};
	CU_ASSERT(fn_http_match(r, &get));
	CU_ASSERT(!fn_http_match(r, &put));
	CU_ASSERT(!fn_http_match(r, &other));
	CU_ASSERT(!fn_http_match(r, &nohost));
	fn_policy_free(p);
}

static void test_decide(void)
{
	struct fn_policy *p = load("rules = (\n"
				   " { name = \"a\"; action = \"respond\"; status = 500; every = 3;"
				   "   match = { to = \"127.0.0.1\"; path = \"/x*\"; }; },\n"
				   " { name = \"b\"; action = \"slow\"; delay_ms = 10;"
				   "   match = { to = \"127.0.0.1\"; method = \"POST\"; }; }\n);");
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	struct fn_endpoint ep;
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(80)};
	sin.sin_addr.s_addr = htonl(0x7f000001);
	CU_ASSERT_FATAL(fn_endpoint_from_sockaddr(&ep, (struct sockaddr *)&sin, sizeof(sin)));
	struct fn_http_req get = {"GET", "/x1", "h"}, post = {"POST", "/x1", "h"};
	const struct fn_rule *seen;
	int answered = 0, slowed = 0;
	for (int i = 0; i < 200; i++) {
		const struct fn_rule *r = fn_http_decide(p, &ep, &get, &seen);
		CU_ASSERT_PTR_EQUAL(seen, &p->rules[0]);
		answered += r == &p->rules[0];
	}
	CU_ASSERT_EQUAL(answered, 66);
	/* A request the first rule declines goes on to the next one. */
	for (int i = 0; i < 3; i++)
		slowed += fn_http_decide(p, &ep, &post, &seen) == &p->rules[1];
	CU_ASSERT_EQUAL(slowed, 2);
	CU_ASSERT_PTR_EQUAL(fn_http_covers(p, &ep), &p->rules[0]);
	fn_policy_free(p);
}

/* tls rules: decided per handshake on the SNI name, never per request;
 * a connection whose SNI name no HTTP rule's host takes is not theirs. */
static void test_tls_sni(void)
{
	struct fn_policy *p =
	    load("rules = (\n"
		 " { name = \"t\"; action = \"tls\"; fault = \"alert\"; alert = \"internal_error\";"
		 "   first = 1; match = { to = \"127.0.0.1\"; host = \"*.s3.example.test\"; }; },\n"
		 " { name = \"r\"; action = \"respond\"; status = 503;"
		 "   match = { to = \"127.0.0.1\"; host = \"API.test\"; }; }\n);");
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	struct fn_endpoint ep;
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(443)};
	sin.sin_addr.s_addr = htonl(0x7f000001);
	CU_ASSERT_FATAL(fn_endpoint_from_sockaddr(&ep, (struct sockaddr *)&sin, sizeof(sin)));
	const struct fn_rule *seen;
	CU_ASSERT_PTR_NULL(fn_tls_decide(p, &ep, "api.test", &seen));
	CU_ASSERT_PTR_NULL(seen);
	CU_ASSERT_PTR_EQUAL(fn_tls_decide(p, &ep, "b.S3.example.test", &seen), &p->rules[0]);
	CU_ASSERT_EQUAL(p->rules[0].http->tls_fault, FN_TLSF_ALERT);
	CU_ASSERT_EQUAL(p->rules[0].http->tls_alert, 80);
	/* first = 1: the second handshake is declined, still counted seen. */
	CU_ASSERT_PTR_NULL(fn_tls_decide(p, &ep, "b.s3.example.test", &seen));
	CU_ASSERT_PTR_EQUAL(seen, &p->rules[0]);
	CU_ASSERT(fn_http_sni_covered(p, &ep, "api.test"));
	CU_ASSERT(fn_http_sni_covered(p, &ep, "b.s3.example.test"));
	CU_ASSERT(fn_http_sni_covered(p, &ep, "")); /* no SNI: every rule's */
	CU_ASSERT(!fn_http_sni_covered(p, &ep, "other.test"));
	/* A request is never a tls rule's. */
	struct fn_http_req get = {"GET", "/", "b.s3.example.test"};
	CU_ASSERT_PTR_NULL(fn_http_decide(p, &ep, &get, &seen));
	char d[256];
	fn_rule_describe(&p->rules[0], d, sizeof(d));
	CU_ASSERT_PTR_NOT_NULL(strstr(d, "fault=alert alert=internal_error"));
	fn_policy_free(p);
}

/* A stand-in for the names the process resolved: 127.0.0.1 came from a
 * name of *.example.com. */
static bool resolved(const struct fn_endpoint *ep, const char *pattern)
{
	(void)ep;
	return strcmp(pattern, "*.example.com") == 0;
}

/* Whether a connect needs a server: not where the first rule that takes
 * every request answers it (a host pattern counts where the peer's name
 * matches it); a path, a condition, or a slow rule before leaves some
 * request to the server. */
static void test_answers_all(void)
{
	struct fn_endpoint ep;
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(80)};
	sin.sin_addr.s_addr = htonl(0x7f000001);
	CU_ASSERT_FATAL(fn_endpoint_from_sockaddr(&ep, (struct sockaddr *)&sin, sizeof(sin)));
	static const struct {
		const char *rules;
		bool all;
	} cases[] = {
	    {"{ name = \"a\"; action = \"respond\"; status = 503; match = { to = \"127.0.0.1\"; }; "
	     "}",
	     true},
	    {"{ name = \"a\"; action = \"respond\"; status = 503; match = { to = \"127.0.0.1\"; "
	     "path = \"/x*\"; }; }",
	     true},
	    {"{ name = \"a\"; action = \"respond\"; status = 503; every = 2; match = { to = "
	     "\"127.0.0.1\"; }; }",
	     true},
	    {"{ name = \"a\"; action = \"slow\"; delay_ms = 5; match = { to = \"127.0.0.1\"; }; }",
	     false},
	    {"{ name = \"a\"; action = \"respond\"; status = 503; match = { to = \"127.0.0.1\"; "
	     "host = \"*.example.com\"; }; }",
	     true},
	    {"{ name = \"a\"; action = \"respond\"; status = 503; match = { to = \"127.0.0.1\"; "
	     "host = \"*.other.org\"; }; }",
	     false},
	};
	bool (*was)(const struct fn_endpoint *, const char *) = fn_host_resolved;
	fn_host_resolved = resolved;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char text[512];
		snprintf(text, sizeof(text), "rules = (\n %s\n);", cases[i].rules);
		struct fn_policy *p = load(text);
		CU_ASSERT_PTR_NOT_NULL_FATAL(p);
		if (fn_http_answers_all(p, &ep) != cases[i].all)
			printf("\n  answers_all wrong for: %s", cases[i].rules);
		CU_ASSERT_EQUAL(fn_http_answers_all(p, &ep), cases[i].all);
		fn_policy_free(p);
	}
	fn_host_resolved = was;
}

static void test_answer(void)
{
	struct fn_policy *p = load(RULE("action = \"respond\"; status = 503; retry_after = 30;"
					"headers = [\"x-amz-request-id: 1\"]; body = \"<Error/>\"; "
					"close = true;"));
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	size_t n;
	char *a = fn_http_answer(&p->rules[0], false, &n);
	const char *want =
	    "HTTP/1.1 503 Service Unavailable\r\nx-amz-request-id: 1\r\nRetry-After: "
	    "30\r\nContent-Length: 8\r\nConnection: close\r\n\r\n<Error/>";
	CU_ASSERT_EQUAL(n, strlen(want));
	CU_ASSERT(memcmp(a, want, n) == 0);
	free(a);
	a = fn_http_answer(&p->rules[0], true, &n); /* HEAD: the length, no body */
	CU_ASSERT_EQUAL(n, strlen(want) - 8);
	free(a);
	char d[256];
	fn_rule_describe(&p->rules[0], d, sizeof(d));
	CU_ASSERT_STRING_EQUAL(d, "status=503 retry_after=30 headers=1 body_bytes=8 close=true");
	fn_policy_free(p);
}

static void test_prefix(void)
{
	char b[64];
	fn_http_prefix("/bucket/key/deep", b, sizeof(b));
	CU_ASSERT_STRING_EQUAL(b, "/bucket/*");
	fn_http_prefix("/bucket", b, sizeof(b));
	CU_ASSERT_STRING_EQUAL(b, "/bucket");
	fn_http_prefix("/bucket/", b, sizeof(b));
	CU_ASSERT_STRING_EQUAL(b, "/bucket");
	fn_http_prefix("/", b, sizeof(b));
	CU_ASSERT_STRING_EQUAL(b, "/");
}

void add_http_tests(void)
{
	CU_pSuite s = CU_add_suite("http rules", NULL, NULL);
	CU_add_test(s, "keys and their errors", test_errors);
	CU_add_test(s, "body_file", test_body_file);
	CU_add_test(s, "method, path and host globs", test_match);
	CU_add_test(s, "per-request decision and conditions", test_decide);
	CU_add_test(s, "whether the rules answer every request", test_answers_all);
	CU_add_test(s, "tls rules and the SNI name", test_tls_sni);
	CU_add_test(s, "the answer's bytes", test_answer);
	CU_add_test(s, "counting prefix", test_prefix);
}
