/* test_compiled.c - a policy's compiled copy (core/compiled.c): rebuilt, it
 * is the parsed policy field by field, for every policy file of the tree
 * and one with every kind of field; a copy cut short at every length, or
 * with bytes changed, never crashes and is refused or gives the original;
 * another text, zone or build is refused. Run under ASan by the asan
 * section. */
#include <CUnit/CUnit.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/compiled.h"
#include "core/config.h"
#include "core/dns.h"
#include "core/http.h"
#include "rnd.h"

#define SAME(f) CU_ASSERT_EQUAL(a->f, b->f)

static void same_str(const char *a, const char *b)
{
	CU_ASSERT_EQUAL(!a, !b);
	if (a && b)
		CU_ASSERT_STRING_EQUAL(a, b);
}

static void same_cidrs(const struct fn_cidr *a, const struct fn_cidr *b, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		CU_ASSERT_EQUAL(a[i].v4, b[i].v4);
		CU_ASSERT_EQUAL(a[i].prefix, b[i].prefix);
		CU_ASSERT(memcmp(a[i].ip, b[i].ip, 16) == 0);
	}
}

static void same_http(const struct fn_http *a, const struct fn_http *b)
{
	CU_ASSERT_PTR_NOT_EQUAL(a, b); /* fresh, not shared with the parse's */
	CU_ASSERT_EQUAL(b->refs, 1);
	same_str(a->method, b->method);
	same_str(a->path, b->path);
	same_str(a->headers, b->headers);
	same_str(a->body_file, b->body_file);
	same_str(a->grpc_message, b->grpc_message);
	SAME(status);
	SAME(nheaders);
	SAME(bodylen);
	CU_ASSERT_EQUAL(!a->body, !b->body);
	if (a->body && b->body)
		CU_ASSERT(memcmp(a->body, b->body, a->bodylen + 1) == 0);
	SAME(retry_after);
	SAME(close);
	SAME(mode);
	SAME(tls_fault);
	SAME(tls_alert);
	SAME(grpc_status);
	SAME(grpc_pushback_ms);
	SAME(grpc_after_headers);
	SAME(rst_stream);
	SAME(rst_after);
	SAME(goaway);
	SAME(ping_unanswered);
}

static void same_dns(const struct fn_dns *a, const struct fn_dns *b)
{
	CU_ASSERT_PTR_NOT_EQUAL(a, b);
	CU_ASSERT_EQUAL(b->refs, 1);
	SAME(error);
	CU_ASSERT_EQUAL_FATAL(a->nanswer, b->nanswer);
	for (int i = 0; i < a->nanswer; i++) {
		CU_ASSERT_EQUAL(a->answer[i].v4, b->answer[i].v4);
		CU_ASSERT(memcmp(a->answer[i].ip, b->answer[i].ip, 16) == 0);
	}
}

static void same_rule(const struct fn_rule *a, const struct fn_rule *b)
{
	CU_ASSERT_STRING_EQUAL(a->name, b->name);
	SAME(action);
	SAME(enabled);
	SAME(protos);
	SAME(from_zone);
	SAME(to_zone);
	SAME(line);
	SAME(has_cond);
	SAME(established);
	CU_ASSERT_EQUAL_FATAL(a->nto, b->nto);
	CU_ASSERT_EQUAL(!a->to, !b->to);
	same_cidrs(a->to, b->to, a->nto);
	CU_ASSERT_EQUAL_FATAL(a->nports, b->nports);
	CU_ASSERT_EQUAL(!a->ports, !b->ports);
	for (size_t i = 0; i < a->nports; i++) {
		CU_ASSERT_EQUAL(a->ports[i].lo, b->ports[i].lo);
		CU_ASSERT_EQUAL(a->ports[i].hi, b->ports[i].hi);
	}
	SAME(par.delay_ms);
	SAME(par.latency_ms);
	SAME(par.jitter_ms);
	SAME(par.every_ms);
	SAME(par.rate);
	SAME(par.bytes);
	SAME(par.after_bytes);
	SAME(par.after_ms);
	SAME(par.direction);
	SAME(par.net_unreachable);
	CU_ASSERT(a->cond.probability == b->cond.probability);
	SAME(cond.first);
	SAME(cond.every);
	SAME(cond.after);
	SAME(cond.start_ms);
	SAME(cond.for_ms);
	/* Counters are the process's: fresh, never the parse's. */
	CU_ASSERT_PTR_NOT_NULL(b->stat);
	CU_ASSERT_PTR_NOT_EQUAL(a->stat, b->stat);
	same_str(a->host, b->host);
	CU_ASSERT_EQUAL_FATAL(!a->http, !b->http);
	if (a->http)
		same_http(a->http, b->http);
	CU_ASSERT_EQUAL_FATAL(!a->dns, !b->dns);
	if (a->dns)
		same_dns(a->dns, b->dns);
}

/* The deep comparison: every field the parser set, and what
 * fn_policy_finish derived from them. */
static void same_policy(const struct fn_policy *a, const struct fn_policy *b)
{
	CU_ASSERT_EQUAL_FATAL(a->nzones, b->nzones);
	CU_ASSERT_EQUAL(!a->zones, !b->zones);
	for (size_t i = 0; i < a->nzones; i++) {
		CU_ASSERT_STRING_EQUAL(a->zones[i].name, b->zones[i].name);
		CU_ASSERT_EQUAL_FATAL(a->zones[i].ncidrs, b->zones[i].ncidrs);
		same_cidrs(a->zones[i].cidrs, b->zones[i].cidrs, a->zones[i].ncidrs);
	}
	SAME(self_zone);
	SAME(rules_room);
	CU_ASSERT_EQUAL_FATAL(a->nrules, b->nrules);
	CU_ASSERT_EQUAL(!a->rules, !b->rules);
	for (size_t i = 0; i < a->nrules; i++)
		same_rule(&a->rules[i], &b->rules[i]);
	SAME(active_protos);
	SAME(watch_protos);
	SAME(dns_rules);
	SAME(host_rules);
	SAME(established_rules);
	SAME(lpm_stale);
	CU_ASSERT_EQUAL(!a->lpm, !b->lpm);
	CU_ASSERT_EQUAL(!a->hosts, !b->hosts);
	CU_ASSERT_EQUAL_FATAL(!a->quick, !b->quick);
	if (a->quick)
		CU_ASSERT(memcmp(a->quick, b->quick, a->nrules + 2) == 0);
}

static const uint8_t test_id[64] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};

static struct fn_compiled_key key_of(const char *text, const char *zone)
{
	struct fn_compiled_key k = {
	    .text = text, .textlen = strlen(text), .zone = zone ? zone : ""};
	k.id = fn_compiled_build_id(&k.idlen);
	return k;
}

/* p (parsed from text with zone) written and read back: the same. */
static void round_trip(const struct fn_policy *p, const char *text, const char *zone,
		       const char *origin)
{
	struct fn_compiled_key k = key_of(text, zone);
	size_t len;
	void *blob = fn_compiled_write(p, &k, &len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(blob);
	struct fn_policy *q = fn_compiled_read(blob, len, &k);
	CU_ASSERT_PTR_NOT_NULL(q);
	if (q)
		same_policy(p, q);
	else
		fprintf(stderr, "%s (zone '%s'): its compiled copy was refused\n", origin,
			zone ? zone : "");
	fn_policy_free(q);
	free(blob);
}

/* Every policy file of the tree that parses, and each with each of its
 * zones as the override. */
static void test_tree_policies(void)
{
	glob_t g;
	memset(&g, 0, sizeof(g));
	glob("policies/*.conf", 0, NULL, &g);
	glob("tests/*/*.conf", GLOB_APPEND, NULL, &g);
	glob("tests/*/*/*.conf", GLOB_APPEND, NULL, &g);
	int compared = 0;
	for (size_t i = 0; i < g.gl_pathc; i++) {
		char err[1024];
		size_t n;
		char *text = fn_config_read(g.gl_pathv[i], &n, err, sizeof(err));
		struct fn_policy *p =
		    text ? fn_config_load_file(g.gl_pathv[i], NULL, err, sizeof(err)) : NULL;
		if (p) {
			round_trip(p, text, NULL, g.gl_pathv[i]);
			compared++;
			for (size_t z = 0; z < p->nzones; z++) {
				struct fn_policy *pz = fn_config_load_file(
				    g.gl_pathv[i], p->zones[z].name, err, sizeof(err));
				CU_ASSERT_PTR_NOT_NULL_FATAL(pz);
				CU_ASSERT_EQUAL(pz->self_zone, (int)z);
				round_trip(pz, text, p->zones[z].name, g.gl_pathv[i]);
				fn_policy_free(pz);
			}
		}
		fn_policy_free(p);
		free(text);
	}
	globfree(&g);
	/* The tree has 30 and more: a glob that found none must fail. */
	CU_ASSERT(compared >= 25);
}

/* Every kind of field at once: zones and the process's zone, CIDR lists
 * of both families, ports, conditions, established, match.host on three
 * kinds of rules, HTTP answers with headers, gRPC, HTTP/2 aborts, tls,
 * dns errors and answers, a rule switched off. */
static const char rich[] =
    "zone = \"b\";\n"
    "zones = ( { name = \"a\"; cidrs = [ \"127.10.0.0/16\", \"fd00::/8\" ]; },\n"
    "          { name = \"b\"; cidrs = \"127.11.0.0/16\"; } );\n"
    "rules = (\n"
    "  { name = \"lat\"; action = \"latency\"; latency_ms = 40; jitter_ms = 5; direction = "
    "\"down\";\n"
    "    probability = 0.25; first = 3; every = 2; after = 1; start_ms = 10; for_ms = 900;\n"
    "    established = true; match = { to = [ \"127.12.0.0/24\", \"::1/128\" ]; port = "
    "\"80,8000-8999\";\n"
    "    proto = \"tcp\"; from_zone = \"b\"; }; },\n"
    "  { name = \"unr\"; action = \"unreachable\"; error = \"net\"; match = { to_zone = \"a\"; "
    "}; enabled = false; },\n"
    "  { name = \"bw\"; action = \"bandwidth\"; rate = 1000L; match = { host "
    "= \"*.example.test\"; }; },\n"
    "  { name = \"drip\"; action = \"drip\"; bytes = 3; every_ms = 50; },\n"
    "  { name = \"r503\"; action = \"respond\"; status = 503; retry_after = 7; close = true;\n"
    "    headers = [ \"X-A: 1\", \"X-B: two\" ]; body = \"busy\\n\";\n"
    "    match = { method = \"GET\"; path = \"/api/*\"; host = \"api.example.test\"; port = 80; "
    "}; },\n"
    "  { name = \"grpc\"; action = \"respond\"; grpc_status = \"UNAVAILABLE\"; grpc_message = "
    "\"down\";\n"
    "    grpc_pushback_ms = 250; grpc_after_headers = true; },\n"
    "  { name = \"rst\"; action = \"abort\"; rst_stream = \"REFUSED_STREAM\"; rst_after = "
    "\"headers\"; },\n"
    "  { name = \"goaway\"; action = \"abort\"; goaway = \"ENHANCE_YOUR_CALM\"; },\n"
    "  { name = \"ping\"; action = \"abort\"; ping = \"unanswered\"; mode = \"close\"; },\n"
    "  { name = \"slow\"; action = \"slow\"; delay_ms = 100; },\n"
    "  { name = \"cut\"; action = \"reset\"; after_bytes = 10; },\n"
    "  { name = \"tls\"; action = \"tls\"; fault = \"alert\"; alert = \"internal_error\"; match "
    "= { host = \"x.test\"; }; },\n"
    "  { name = \"nx\"; action = \"dns\"; error = \"nxdomain\"; match = { host = \"gone.test\"; "
    "}; },\n"
    "  { name = \"ans\"; action = \"dns\"; answer = [ \"127.66.0.1\", \"::1\" ]; match = { host "
    "= \"*.moved.test\"; }; },\n"
    "  { name = \"udp\"; action = \"drop\"; match = { proto = \"udp\"; port = 53; }; }\n"
    ");\n";

static struct fn_policy *load_rich(const char *zone)
{
	char err[1024] = "";
	struct fn_policy *p = fn_config_load_string(rich, "rich.conf", zone, err, sizeof(err));
	if (!p)
		fprintf(stderr, "rich.conf: %s\n", err);
	return p;
}

static void test_every_field(void)
{
	struct fn_policy *p = load_rich(NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	CU_ASSERT_EQUAL(p->nrules, 15);
	round_trip(p, rich, NULL, "rich");
	fn_policy_free(p);
	p = load_rich("a");
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	round_trip(p, rich, "a", "rich");
	fn_policy_free(p);
}

/* A body from a file, NUL bytes and all (never kept compiled at a start,
 * since the file is no part of the key, but written whole when asked). */
static void test_body_with_nuls(void)
{
	char dir[] = "/tmp/fn-compiled-XXXXXX", body[64], conf[64], text[256], err[1024];
	CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
	snprintf(body, sizeof(body), "%s/body.bin", dir);
	snprintf(conf, sizeof(conf), "%s/p.conf", dir);
	FILE *f = fopen(body, "w");
	fwrite("a\0b\0\0c", 1, 6, f);
	fclose(f);
	snprintf(text, sizeof(text),
		 "rules = ( { name = \"b\"; action = \"respond\"; status = 200; body_file = "
		 "\"body.bin\"; } );\n");
	f = fopen(conf, "w");
	fputs(text, f);
	fclose(f);
	struct fn_policy *p = fn_config_load_file(conf, NULL, err, sizeof(err));
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	CU_ASSERT_EQUAL(p->rules[0].http->bodylen, 6);
	round_trip(p, text, NULL, conf);
	CU_ASSERT_FALSE(fn_compiled_cacheable(text));
	fn_policy_free(p);
	unlink(body);
	unlink(conf);
	rmdir(dir);
}

/* A policy file loaded twice (faultctl's check, a start with no copy
 * found by its identity): the second load is built from the copy the first
 * wrote, not parsed again, which would write the copy anew (a new file
 * renamed into place). */
static void test_load_file_reads_its_copy(void)
{
	char dir[] = "/tmp/fn-compiled-XXXXXX", conf[64], run[64], err[1024];
	CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
	snprintf(conf, sizeof(conf), "%s/p.conf", dir);
	snprintf(run, sizeof(run), "%s/run", dir);
	CU_ASSERT_EQUAL_FATAL(mkdir(run, 0700), 0);
	FILE *f = fopen(conf, "w");
	fputs(rich, f);
	fclose(f);
	char *was = getenv("FAULTNET_RUNDIR") ? strdup(getenv("FAULTNET_RUNDIR")) : NULL;
	setenv("FAULTNET_RUNDIR", run, 1);
	struct fn_policy *p = fn_config_load_file(conf, "a", err, sizeof(err));
	struct fn_policy *first = fn_compiled_load_file(conf, "a", err, sizeof(err));
	CU_ASSERT_PTR_NOT_NULL_FATAL(first);
	glob_t g;
	char pattern[96];
	snprintf(pattern, sizeof(pattern), "%s/policy-*.compiled", run);
	CU_ASSERT_EQUAL_FATAL(glob(pattern, 0, NULL, &g), 0);
	CU_ASSERT_EQUAL(g.gl_pathc, 1);
	struct stat a, b;
	CU_ASSERT_EQUAL(stat(g.gl_pathv[0], &a), 0);
	struct fn_policy *second = fn_compiled_load_file(conf, "a", err, sizeof(err));
	CU_ASSERT_PTR_NOT_NULL_FATAL(second);
	CU_ASSERT_EQUAL(stat(g.gl_pathv[0], &b), 0);
	CU_ASSERT_EQUAL(a.st_ino, b.st_ino); /* read, not written again */
	CU_ASSERT_EQUAL(second->nrules, p->nrules);
	for (size_t i = 0; i < p->nrules && i < second->nrules; i++)
		CU_ASSERT_STRING_EQUAL(second->rules[i].name, p->rules[i].name);
	unlink(g.gl_pathv[0]);
	globfree(&g);
	if (was)
		setenv("FAULTNET_RUNDIR", was, 1);
	else
		unsetenv("FAULTNET_RUNDIR");
	free(was);
	fn_policy_free(p);
	fn_policy_free(first);
	fn_policy_free(second);
	unlink(conf);
	rmdir(run);
	rmdir(dir);
}

/* What decides whether a text may be kept at all. */
static void test_cacheable(void)
{
	CU_ASSERT_TRUE(fn_compiled_cacheable(rich));
	CU_ASSERT_FALSE(fn_compiled_cacheable("@include \"more.conf\"\nrules = ();\n"));
	CU_ASSERT_FALSE(fn_compiled_cacheable("  @INCLUDE \"more.conf\"\n"));
	CU_ASSERT_FALSE(fn_compiled_cacheable("rules = ( { body_file = \"x\"; } );"));
}

/* Another text (a byte), zone or build is never read as this one. */
static void test_key_compared(void)
{
	struct fn_policy *p = load_rich(NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	struct fn_compiled_key k = key_of(rich, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(k.id); /* gcc links a build-id by default */
	size_t len;
	void *blob = fn_compiled_write(p, &k, &len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(blob);
	char *other = strdup(rich);
	*strstr(other, "40") = '5'; /* latency_ms = 50: the same length */
	struct fn_compiled_key o = k;
	o.text = other;
	CU_ASSERT_PTR_NULL(fn_compiled_read(blob, len, &o));
	o = k;
	o.zone = "a";
	CU_ASSERT_PTR_NULL(fn_compiled_read(blob, len, &o));
	o = k;
	o.id = test_id;
	o.idlen = sizeof(test_id);
	CU_ASSERT_PTR_NULL(fn_compiled_read(blob, len, &o));
	o.idlen = k.idlen; /* the same length, other bytes */
	CU_ASSERT(k.idlen <= sizeof(test_id));
	CU_ASSERT_PTR_NULL(fn_compiled_read(blob, len, &o));
	o = k;
	o.id = NULL; /* a build without an id keeps nothing */
	CU_ASSERT_PTR_NULL(fn_compiled_read(blob, len, &o));
	char a[4200], b[4200];
	CU_ASSERT_TRUE(fn_compiled_path(a, sizeof(a), "/run", &k));
	o = k;
	o.text = other;
	CU_ASSERT_TRUE(fn_compiled_path(b, sizeof(b), "/run", &o));
	CU_ASSERT_STRING_NOT_EQUAL(a, b);
	CU_ASSERT_EQUAL(strncmp(a, "/run/policy-", 12), 0);
	free(other);
	free(blob);
	fn_policy_free(p);
}

/* accepted(cut, n, sealed, arg) on every proper prefix of blob, in a
 * buffer of its own size (ASan sees any overread), as cut and then sealed
 * again (fn_compiled_seal: key and checksum made to agree); the sum of
 * what it returned. */
static int each_cut(const uint8_t *blob, size_t len,
		    int (*accepted)(uint8_t *, size_t, bool, void *), void *arg)
{
	int sum = 0;
	for (size_t n = 0; n < len; n++) {
		uint8_t *cut = malloc(n ? n : 1);
		memcpy(cut, blob, n);
		sum += accepted(cut, n, false, arg);
		fn_compiled_seal(cut, n);
		sum += accepted(cut, n, true, arg);
		free(cut);
	}
	return sum;
}

/* 1 when the cut is built into a policy for key k. */
static int read_cut(uint8_t *cut, size_t n, bool sealed, void *k)
{
	(void)sealed;
	struct fn_policy *q = fn_compiled_read(cut, n, k);
	fn_policy_free(q);
	return q != NULL;
}

/* 1 when the cut is whole for k's zone and build (checked with no text, as
 * a start that found the copy by the file's identity does), and, sealed,
 * also built. */
static int whole_cut(uint8_t *cut, size_t n, bool sealed, void *arg)
{
	const struct fn_compiled_key *k = arg;
	struct fn_compiled_key o = {.zone = "a", .id = k->id, .idlen = k->idlen};
	if (!fn_compiled_whole(cut, n, &o))
		return 0;
	if (!sealed)
		return 1;
	struct fn_policy *q = fn_compiled_read(cut, n, &o);
	fn_policy_free(q);
	return q != NULL;
}

/* A copy found by the file's identity is read with no text of the
 * caller's: fn_compiled_whole takes the copy's own text, and still checks
 * the zone, the build and the checksum; cut short at any length, it is not
 * whole, and one sealed again is refused when built (and nothing is read
 * past its end: ASan). */
static void test_whole_without_text(void)
{
	struct fn_policy *p = load_rich("a");
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	struct fn_compiled_key k = key_of(rich, "a");
	size_t len;
	uint8_t *blob = fn_compiled_write(p, &k, &len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(blob);
	struct fn_compiled_key o = {.zone = "a", .id = k.id, .idlen = k.idlen};
	CU_ASSERT_TRUE_FATAL(fn_compiled_whole(blob, len, &o));
	CU_ASSERT_EQUAL(o.textlen, strlen(rich));
	CU_ASSERT_EQUAL(memcmp(o.text, rich, o.textlen), 0);
	struct fn_policy *q = fn_compiled_read(blob, len, &o);
	CU_ASSERT_PTR_NOT_NULL(q);
	fn_policy_free(q);
	o = (struct fn_compiled_key){.zone = "", .id = k.id, .idlen = k.idlen};
	CU_ASSERT_FALSE(fn_compiled_whole(blob, len, &o)); /* another zone */
	o = (struct fn_compiled_key){.zone = "a", .id = NULL};
	CU_ASSERT_FALSE(fn_compiled_whole(blob, len, &o)); /* no build-id */
	blob[len - 40] ^= 0x5a;
	o = (struct fn_compiled_key){.zone = "a", .id = k.id, .idlen = k.idlen};
	CU_ASSERT_FALSE(fn_compiled_whole(blob, len, &o)); /* a byte changed */
	blob[len - 40] ^= 0x5a;
	/* Cut, a copy is not whole; sealed again (key and checksum made to
	 * agree), its fields are what refuses it when it is built. */
	CU_ASSERT_EQUAL(each_cut(blob, len, whole_cut, &k), 0);
	free(blob);
	fn_policy_free(p);
}

/* Cut short at every length: refused, also when the cut copy's length and
 * checksum are made to agree (then every read inside it is what refuses). */
static void test_truncated(void)
{
	struct fn_policy *p = load_rich("a");
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	struct fn_compiled_key k = key_of(rich, "a");
	size_t len;
	uint8_t *blob = fn_compiled_write(p, &k, &len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(blob);
	CU_ASSERT_EQUAL(each_cut(blob, len, read_cut, &k), 0);
	free(blob);
	fn_policy_free(p);
}

/* Bytes changed at random: refused or the original (the checksum); with
 * the checksum made to agree, the checks of each field must keep the
 * reader whole, and a policy that passes them must be usable. */
static void test_flipped(void)
{
	struct fn_policy *p = load_rich(NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	struct fn_compiled_key k = key_of(rich, NULL);
	size_t len;
	uint8_t *blob = fn_compiled_write(p, &k, &len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(blob);
	uint64_t state = 0x9e3779b97f4a7c15ull;
	int refused = 0, original = 0, resealed_loaded = 0;
	uint8_t *copy = malloc(len);
	for (int t = 0; t < 3000; t++) {
		memcpy(copy, blob, len);
		int flips = 1 + (int)test_rnd(&state, 3);
		for (int f = 0; f < flips; f++)
			copy[test_rnd(&state, (uint32_t)len)] ^=
			    (uint8_t)(1 + test_rnd(&state, 255));
		struct fn_policy *q = fn_compiled_read(copy, len, &k);
		if (!q) {
			refused++;
		} else {
			original++;
			same_policy(p, q); /* the flips undid themselves */
		}
		fn_policy_free(q);
		/* One in ten: a rule index of this policy takes 20 ms to build. */
		if (t % 10)
			continue;
		fn_compiled_seal(copy, len);
		q = fn_compiled_read(copy, len, &k);
		if (q) {
			struct fn_endpoint ep = {.v4 = true, .ip = {127, 12, 0, 1}, .port = 80};
			const struct fn_rule *seen;
			fn_policy_match(q, &ep, FN_PROTO_TCP, &seen);
			fn_dns_decide(q, "a.moved.test", &seen);
			for (size_t i = 0; i < q->nrules; i++) {
				char buf[2048];
				fn_rule_describe(&q->rules[i], buf, sizeof(buf));
			}
			resealed_loaded++;
		}
		fn_policy_free(q);
	}
	CU_ASSERT(refused > 2900);
	CU_ASSERT(refused + original == 3000);
	printf("\n    flips: %d refused, %d gave the original; resealed: %d read\n", refused,
	       original, resealed_loaded);
	free(copy);
	free(blob);
	fn_policy_free(p);
}

/* A CIDR as the parser never leaves one: a prefix longer than its family,
 * or bits set past it (a copy whose checksum was made to agree). The rule
 * index relies on both: one such CIDR cost its build 100 times as long. */
static void test_cidr_checked(void)
{
	static const char text[] =
	    "rules = ( { name = \"a\"; action = \"refuse\"; match = { to = \"127.12.0.0/24\"; }; "
	    "} );\n";
	char err[512];
	struct fn_policy *p = fn_config_load_string(text, "c.conf", NULL, err, sizeof(err));
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	struct fn_compiled_key k = key_of(text, NULL);
	size_t len;
	uint8_t *blob = fn_compiled_write(p, &k, &len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(blob);
	const uint8_t want[] = {1, 24, 127, 12, 0, 0};
	uint8_t *at = memmem(blob, len, want, sizeof(want));
	CU_ASSERT_PTR_NOT_NULL_FATAL(at);
	const uint8_t prefixes[] = {24, 33, 8, 13, 0, 14};
	const bool good[] = {true, false, false, false, false, true};
	for (size_t i = 0; i < sizeof(prefixes); i++) {
		at[1] = prefixes[i];
		fn_compiled_seal(blob, len);
		struct fn_policy *q = fn_compiled_read(blob, len, &k);
		CU_ASSERT_EQUAL(q != NULL, good[i]);
		fn_policy_free(q);
	}
	at[1] = 24;
	at[13] = 1; /* 127.12.0.0/24 with a bit in the address's unused bytes */
	fn_compiled_seal(blob, len);
	CU_ASSERT_PTR_NULL(fn_compiled_read(blob, len, &k));
	free(blob);
	fn_policy_free(p);
}

void add_compiled_tests(void)
{
	CU_pSuite s = CU_add_suite("compiled policies", NULL, NULL);
	CU_add_test(s, "every policy of the tree rebuilt field by field", test_tree_policies);
	CU_add_test(s, "every kind of field rebuilt", test_every_field);
	CU_add_test(s, "a body_file's NUL bytes rebuilt", test_body_with_nuls);
	CU_add_test(s, "@include and body_file are never kept", test_cacheable);
	CU_add_test(s, "a file loaded twice: the second from the first's copy",
		    test_load_file_reads_its_copy);
	CU_add_test(s, "another text, zone or build is refused", test_key_compared);
	CU_add_test(s, "cut short at every length: refused", test_truncated);
	CU_add_test(s, "a copy read with its own text: still checked whole",
		    test_whole_without_text);
	CU_add_test(s, "bytes changed: refused or the original, never a crash", test_flipped);
	CU_add_test(s, "a CIDR the parser would refuse is refused", test_cidr_checked);
}
