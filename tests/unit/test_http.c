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

/* The HTTP/2 and gRPC keys: each accepted value, each error. */
static void test_h2_keys(void)
{
	struct fn_policy *p =
	    load("rules = (\n"
		 " { name = \"g\"; action = \"respond\"; grpc_status = \"unavailable\";"
		 "   grpc_message = \"try \\\"later\\\"\"; grpc_pushback_ms = 250;"
		 "   match = { path = \"/helloworld.Greeter/*\"; }; },\n"
		 " { name = \"n\"; action = \"respond\"; status = 503; grpc_status = 8;"
		 "   grpc_after_headers = true; },\n"
		 " { name = \"r\"; action = \"abort\"; rst_stream = \"REFUSED_STREAM\"; },\n"
		 " { name = \"h\"; action = \"abort\"; rst_stream = \"cancel\";"
		 "   rst_after = \"headers\"; },\n"
		 " { name = \"b\"; action = \"abort\"; rst_stream = \"INTERNAL_ERROR\";"
		 "   after_bytes = 100; },\n"
		 " { name = \"w\"; action = \"abort\"; goaway = \"NO_ERROR\"; },\n"
		 " { name = \"m\"; action = \"abort\"; goaway = \"ENHANCE_YOUR_CALM\";"
		 "   mode = \"reset\"; }\n);");
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	const struct fn_http *g = p->rules[0].http, *n = p->rules[1].http;
	CU_ASSERT_EQUAL(g->grpc_status, 14);
	CU_ASSERT_EQUAL(g->status, 200); /* status left out: gRPC's 200 */
	CU_ASSERT_STRING_EQUAL(g->grpc_message, "try \"later\"");
	CU_ASSERT_EQUAL(g->grpc_pushback_ms, 250);
	CU_ASSERT(!g->grpc_after_headers);
	CU_ASSERT_EQUAL(n->grpc_status, 8);
	CU_ASSERT_EQUAL(n->status, 503);
	CU_ASSERT(n->grpc_after_headers);
	CU_ASSERT_PTR_NULL(n->grpc_message);
	CU_ASSERT_EQUAL(n->grpc_pushback_ms, -1);
	const struct fn_http *r = p->rules[2].http, *h = p->rules[3].http, *b = p->rules[4].http;
	CU_ASSERT_EQUAL(r->rst_stream, 7);
	CU_ASSERT_EQUAL(r->rst_after, FN_RST_REQUEST);
	CU_ASSERT_EQUAL(r->goaway, -1);
	CU_ASSERT_EQUAL(r->mode, FN_ABORT_RESET);
	CU_ASSERT_EQUAL(h->rst_stream, 8);
	CU_ASSERT_EQUAL(h->rst_after, FN_RST_HEADERS);
	CU_ASSERT_EQUAL(b->rst_stream, 2);
	CU_ASSERT_EQUAL(p->rules[4].par.after_bytes, 100);
	/* On HTTP/1.1 a goaway rule closes, unless its mode says otherwise. */
	CU_ASSERT_EQUAL(p->rules[5].http->goaway, 0);
	CU_ASSERT_EQUAL(p->rules[5].http->rst_stream, -1);
	CU_ASSERT_EQUAL(p->rules[5].http->mode, FN_ABORT_CLOSE);
	CU_ASSERT_EQUAL(p->rules[6].http->goaway, 11);
	CU_ASSERT_EQUAL(p->rules[6].http->mode, FN_ABORT_RESET);
	fn_policy_free(p);
}

static void test_h2_errors(void)
{
	EXPECT("action = \"respond\";\n grpc_status = 17;",
	       "/tmp/t.conf:3: rule 'h': grpc_status 17 is not from 0 to 16");
	EXPECT("action = \"respond\"; grpc_status = -1;",
	       "/tmp/t.conf:2: rule 'h': grpc_status -1 is not from 0 to 16");
	EXPECT("action = \"respond\"; grpc_status = \"BUSY\";",
	       "/tmp/t.conf:2: rule 'h': grpc_status 'BUSY' must be a gRPC status code from 0 to "
	       "16 or its name (OK, CANCELLED, UNKNOWN, INVALID_ARGUMENT, DEADLINE_EXCEEDED, "
	       "NOT_FOUND, ALREADY_EXISTS, PERMISSION_DENIED, RESOURCE_EXHAUSTED, "
	       "FAILED_PRECONDITION, ABORTED, OUT_OF_RANGE, UNIMPLEMENTED, INTERNAL, UNAVAILABLE, "
	       "DATA_LOSS, UNAUTHENTICATED)");
	EXPECT("action = \"respond\"; grpc_status = 1.5;",
	       "/tmp/t.conf:2: rule 'h': grpc_status must be a gRPC status code from 0 to 16 or "
	       "its name (OK, CANCELLED, UNKNOWN, INVALID_ARGUMENT, DEADLINE_EXCEEDED, NOT_FOUND, "
	       "ALREADY_EXISTS, PERMISSION_DENIED, RESOURCE_EXHAUSTED, FAILED_PRECONDITION, "
	       "ABORTED, OUT_OF_RANGE, UNIMPLEMENTED, INTERNAL, UNAVAILABLE, DATA_LOSS, "
	       "UNAUTHENTICATED)");
	EXPECT("action = \"respond\"; grpc_status = 14; grpc_message = \"a\\nb\";",
	       "/tmp/t.conf:2: rule 'h': grpc_message holds a line break");
	EXPECT("action = \"respond\"; grpc_status = 14; grpc_message = 5;",
	       "/tmp/t.conf:2: grpc_message must be a string");
	EXPECT("action = \"respond\"; grpc_status = 14; grpc_pushback_ms = 86400001;",
	       "/tmp/t.conf:2: rule 'h': grpc_pushback_ms 86400001 is not from 0 to 86400000");
	EXPECT("action = \"respond\"; grpc_status = 14; grpc_pushback_ms = \"1\";",
	       "/tmp/t.conf:2: rule 'h': grpc_pushback_ms must be a whole number");
	EXPECT("action = \"respond\"; grpc_status = 14; grpc_after_headers = 1;",
	       "/tmp/t.conf:2: rule 'h': grpc_after_headers must be true or false");
	EXPECT("action = \"respond\"; status = 503;\n grpc_after_headers = true;",
	       "/tmp/t.conf:3: rule 'h': grpc_after_headers needs grpc_status");
	EXPECT("action = \"respond\"; status = 503;\n grpc_message = \"x\";",
	       "/tmp/t.conf:3: rule 'h': grpc_message needs grpc_status");
	EXPECT("action = \"respond\";\n grpc_pushback_ms = 5;",
	       "/tmp/t.conf:3: rule 'h': grpc_pushback_ms needs grpc_status");
	EXPECT("action = \"respond\"; grpc_status = 14;\n body = \"x\";",
	       "/tmp/t.conf:3: rule 'h': grpc_status and body: a gRPC status is answered in "
	       "trailers, without body; give one");
	EXPECT("action = \"respond\"; grpc_status = 14;\n body_file = \"/etc/passwd\";",
	       "/tmp/t.conf:3: rule 'h': grpc_status and body_file: a gRPC status is answered in "
	       "trailers, without body_file; give one");
	EXPECT("action = \"respond\"; grpc_status = 14;\n retry_after = 3;",
	       "/tmp/t.conf:3: rule 'h': grpc_status and retry_after: a gRPC status is answered "
	       "in trailers, without retry_after; give one");
	EXPECT("action = \"respond\"; grpc_status = 14;\n close = false;",
	       "/tmp/t.conf:3: rule 'h': grpc_status and close: a gRPC status is answered in "
	       "trailers, without close; give one");
	EXPECT("action = \"abort\"; grpc_status = 14;",
	       "/tmp/t.conf:2: rule 'h': grpc_status does not apply to action abort (only to "
	       "respond)");
	EXPECT("action = \"respond\"; status = 500; rst_stream = \"CANCEL\";",
	       "/tmp/t.conf:2: rule 'h': rst_stream does not apply to action respond (only to "
	       "abort)");
	EXPECT("action = \"slow\"; delay_ms = 5; goaway = \"NO_ERROR\";",
	       "/tmp/t.conf:2: rule 'h': goaway does not apply to action slow (only to abort)");
	EXPECT("action = \"abort\"; rst_stream = \"REFUSED\";",
	       "/tmp/t.conf:2: rule 'h': rst_stream 'REFUSED' must be an HTTP/2 error code's name "
	       "(NO_ERROR, PROTOCOL_ERROR, INTERNAL_ERROR, FLOW_CONTROL_ERROR, SETTINGS_TIMEOUT, "
	       "STREAM_CLOSED, FRAME_SIZE_ERROR, REFUSED_STREAM, CANCEL, COMPRESSION_ERROR, "
	       "CONNECT_ERROR, ENHANCE_YOUR_CALM, INADEQUATE_SECURITY, HTTP_1_1_REQUIRED)");
	EXPECT("action = \"abort\"; goaway = 0;", "/tmp/t.conf:2: goaway must be a string");
	EXPECT("action = \"abort\"; rst_stream = \"CANCEL\"; rst_after = \"data\";",
	       "/tmp/t.conf:2: rule 'h': rst_after 'data' must be \"request\" or \"headers\"");
	EXPECT("action = \"abort\";\n rst_after = \"headers\";",
	       "/tmp/t.conf:3: rule 'h': rst_after needs rst_stream");
	EXPECT("action = \"abort\"; rst_stream = \"CANCEL\";\n goaway = \"NO_ERROR\";",
	       "/tmp/t.conf:3: rule 'h': rst_stream and goaway: give one");
	EXPECT("action = \"abort\"; goaway = \"NO_ERROR\";\n rst_after = \"headers\";",
	       "/tmp/t.conf:3: rule 'h': goaway and rst_after: a GOAWAY refuses the stream as it "
	       "arrives; give one");
	EXPECT("action = \"abort\"; after_bytes = 10;\n goaway = \"NO_ERROR\";",
	       "/tmp/t.conf:3: rule 'h': goaway and after_bytes: a GOAWAY refuses the stream as "
	       "it arrives; give one");
	EXPECT("action = \"abort\"; rst_stream = \"CANCEL\"; after_bytes = 10;\n"
	       " rst_after = \"headers\";",
	       "/tmp/t.conf:3: rule 'h': rst_after and after_bytes: give one (after_bytes resets "
	       "after that many bytes of the answer's DATA)");
	EXPECT("action = \"abort\"; ping = \"silent\";",
	       "/tmp/t.conf:2: rule 'h': ping 'silent' must be \"unanswered\"");
	EXPECT("action = \"abort\"; rst_stream = \"CANCEL\";\n ping = \"unanswered\";",
	       "/tmp/t.conf:3: rule 'h': ping and rst_stream: a ping rule leaves the stream as it "
	       "is; give one");
	EXPECT("action = \"respond\"; status = 503; ping = \"unanswered\";",
	       "/tmp/t.conf:2: rule 'h': ping does not apply to action respond (only to abort)");
	char msg[700], text[800];
	memset(msg, 'x', 513);
	msg[513] = '\0';
	snprintf(text, sizeof(text),
		 RULE("action = \"respond\"; grpc_status = 14; grpc_message = \"%s\";"), msg);
	CU_ASSERT_STRING_EQUAL(
	    error_of(text), "/tmp/t.conf:2: rule 'h': grpc_message is 513 bytes; the limit is 512");
	msg[512] = '\0';
	snprintf(text, sizeof(text),
		 RULE("action = \"respond\"; grpc_status = 14; grpc_message = \"%s\";"), msg);
	struct fn_policy *p = load(text);
	CU_ASSERT_PTR_NOT_NULL(p);
	fn_policy_free(p);
}

/* faultctl rules shows the HTTP/2 and gRPC keys. */
static void test_h2_describe(void)
{
	struct fn_policy *p =
	    load("rules = (\n"
		 " { name = \"g\"; action = \"respond\"; grpc_status = 14;"
		 "   grpc_message = \"go \\\"away\\\"\"; grpc_pushback_ms = 250;"
		 "   grpc_after_headers = true; },\n"
		 " { name = \"r\"; action = \"abort\"; rst_stream = \"REFUSED_STREAM\";"
		 "   rst_after = \"headers\"; },\n"
		 " { name = \"w\"; action = \"abort\"; goaway = \"NO_ERROR\"; },\n"
		 " { name = \"p\"; action = \"abort\"; ping = \"unanswered\"; }\n);");
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	char buf[512];
	fn_rule_describe(&p->rules[0], buf, sizeof(buf));
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "status=200 "));
	CU_ASSERT_PTR_NOT_NULL(strstr(buf,
				      " grpc_status=UNAVAILABLE grpc_message=\"go \\\"away\\\"\" "
				      "grpc_pushback_ms=250 grpc_after_headers=true"));
	fn_rule_describe(&p->rules[1], buf, sizeof(buf));
	CU_ASSERT_PTR_NOT_NULL(
	    strstr(buf, "mode=reset rst_stream=REFUSED_STREAM rst_after=headers"));
	fn_rule_describe(&p->rules[2], buf, sizeof(buf));
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "mode=close goaway=NO_ERROR"));
	CU_ASSERT_PTR_NULL(strstr(buf, "rst_stream"));
	fn_rule_describe(&p->rules[3], buf, sizeof(buf));
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "ping=unanswered"));
	CU_ASSERT_PTR_NULL(strstr(buf, "mode="));
	fn_policy_free(p);
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
	    /* gRPC statuses and resets after the server's own headers need it. */
	    {"{ name = \"a\"; action = \"respond\"; grpc_status = 14; match = { to = "
	     "\"127.0.0.1\"; }; }",
	     true},
	    {"{ name = \"a\"; action = \"respond\"; grpc_status = 14; grpc_after_headers = true; "
	     "match = { to = \"127.0.0.1\"; }; }",
	     false},
	    {"{ name = \"a\"; action = \"abort\"; rst_stream = \"CANCEL\"; match = { to = "
	     "\"127.0.0.1\"; }; }",
	     true},
	    {"{ name = \"a\"; action = \"abort\"; rst_stream = \"CANCEL\"; rst_after = "
	     "\"headers\"; match = { to = \"127.0.0.1\"; }; }",
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
	CU_add_test(s, "HTTP/2 and gRPC keys", test_h2_keys);
	CU_add_test(s, "HTTP/2 and gRPC keys: their errors", test_h2_errors);
	CU_add_test(s, "HTTP/2 and gRPC keys: described", test_h2_describe);
	CU_add_test(s, "body_file", test_body_file);
	CU_add_test(s, "method, path and host globs", test_match);
	CU_add_test(s, "per-request decision and conditions", test_decide);
	CU_add_test(s, "whether the rules answer every request", test_answers_all);
	CU_add_test(s, "tls rules and the SNI name", test_tls_sni);
	CU_add_test(s, "the answer's bytes", test_answer);
	CU_add_test(s, "counting prefix", test_prefix);
}
