/* test_h2sent.c - the "h2" record (preload/stats/h2sent.c, core/segment.c):
 * fn_stats_h2 driven as the HTTP/2 engine calls it, beside fn_stats_request
 * for the streams, into a member's state; the record it makes, its sum
 * across processes, and the line faultctl stats and faultctl run --stats
 * print from a state file. The shim's own fn_seg, page touching and event
 * ring are stood in for here: the counting code is the shim's. */
#include <CUnit/CUnit.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/config.h"
#include "core/http.h"
#include "preload/stats/stats.h"

/* Stand-ins for preload/stats/stats.c: the state in memory, and the
 * events kept as "rule outcome" lines. */
struct fn_seg *fn_seg;
static char events[1024];

void fn_seg_touch(const void *p, size_t len)
{
	(void)p, (void)len;
}

void fn_stats_event(const struct fn_rule *r, const struct fn_rule *seen,
		    const struct fn_endpoint *ep, const char *outcome)
{
	(void)seen, (void)ep;
	size_t at = strlen(events);
	snprintf(events + at, sizeof(events) - at, "%s %s\n", r ? r->name : "-", outcome);
}

static const char *const policy_text =
    "rules = (\n"
    " { name = \"g\"; action = \"respond\"; grpc_status = \"UNAVAILABLE\"; },\n"
    " { name = \"r\"; action = \"abort\"; rst_stream = \"REFUSED_STREAM\"; },\n"
    " { name = \"w\"; action = \"abort\"; goaway = \"NO_ERROR\"; }\n);";

#define RECORD                                                                             \
	"h2 pid=4242 connections=3 tls=1 grpc=UNAVAILABLE:2 rst=REFUSED_STREAM:1,other:1 " \
	"goaway=NO_ERROR:1,FLOW_CONTROL_ERROR:1\n"

/* What an engine does on three connections: two gRPC calls answered
 * UNAVAILABLE, a stream refused, a GOAWAY, and frames of its own. */
static struct fn_seg *drive(struct fn_policy *p)
{
	struct fn_seg *s = calloc(1, sizeof(*s));
	s->h.magic = FN_SEG_MAGIC;
	s->h.size = sizeof(*s);
	s->h.pid = 4242;
	fn_seg = s;
	events[0] = '\0';
	struct fn_endpoint ep;
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(50051)};
	sin.sin_addr.s_addr = htonl(0x7f000001);
	fn_endpoint_from_sockaddr(&ep, (struct sockaddr *)&sin, sizeof(sin));
	const struct fn_rule *g = &p->rules[0], *r = &p->rules[1], *w = &p->rules[2];
	fn_stats_h2(NULL, &ep, FN_H2S_CONN, 0);
	fn_stats_h2(NULL, &ep, FN_H2S_CONN, 1);
	fn_stats_h2(NULL, &ep, FN_H2S_CONN, 0);
	for (int i = 0; i < 2; i++) {
		fn_stats_request(g, g, &ep, "POST", "h", "/helloworld.Greeter/SayHello",
				 FN_REQ_ANSWERED);
		fn_stats_h2(g, &ep, FN_H2S_GRPC, 14);
	}
	fn_stats_request(r, r, &ep, "GET", "h", "/a", FN_REQ_ABORTED);
	fn_stats_h2(r, &ep, FN_H2S_RST, 7);
	fn_stats_request(w, w, &ep, "GET", "h", "/b", FN_REQ_ABORTED);
	fn_stats_h2(w, &ep, FN_H2S_GOAWAY, 0);
	/* The engine's own: a code past the named ones, a long name. */
	fn_stats_h2(NULL, &ep, FN_H2S_RST, 99);
	fn_stats_h2(NULL, &ep, FN_H2S_GOAWAY, 3);
	return s;
}

static struct fn_policy *policy(void)
{
	char err[512];
	struct fn_policy *p =
	    fn_config_load_string(policy_text, "/tmp/t.conf", NULL, err, sizeof(err));
	CU_ASSERT_PTR_NOT_NULL(p);
	return p;
}

static void test_counts(void)
{
	struct fn_policy *p = policy();
	if (!p)
		return;
	struct fn_seg *s = drive(p);
	struct fn_buf b = {0};
	fn_seg_stats(s, &b);
	const char *h2 = b.s ? strstr(b.s, "h2 pid=") : NULL;
	CU_ASSERT_PTR_NOT_NULL_FATAL(h2);
	CU_ASSERT_NSTRING_EQUAL(h2, RECORD, strlen(RECORD));
	/* Per rule: each stream once, a fault as answered or aborted; the
	 * frame adds no second fault. */
	const struct fn_rulecounts *g = p->rules[0].stat->n, *r = p->rules[1].stat->n,
				   *w = p->rules[2].stat->n;
	CU_ASSERT_EQUAL(g->requests, 2);
	CU_ASSERT_EQUAL(g->faults, 2);
	CU_ASSERT_EQUAL(g->answered, 2);
	CU_ASSERT_EQUAL(r->faults, 1);
	CU_ASSERT_EQUAL(r->aborted, 1);
	CU_ASSERT_EQUAL(w->faults, 1);
	CU_ASSERT_EQUAL(w->aborted, 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(events, "g grpc-UNAVAILABLE\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(events, "r rst-REFUSED_STREAM\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(events, "w goaway-NO_ERROR\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(events, "- rst-99\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(events, "- goaway-3\n")); /* the name does not fit */
	/* Summed across two processes, as faultctl run --stats does. */
	struct fn_seg_h2 sum = {0};
	char line[512];
	snprintf(line, sizeof(line), "%.*s", (int)strcspn(h2, "\n"), h2);
	fn_seg_h2_add(&sum, line);
	fn_seg_h2_add(&sum, line);
	struct fn_buf t = {0};
	fn_seg_h2_fields(&sum, &t);
	CU_ASSERT_STRING_EQUAL(
	    t.s, " connections=6 tls=2 grpc=UNAVAILABLE:4 "
		 "rst=REFUSED_STREAM:2,other:2 goaway=NO_ERROR:2,FLOW_CONTROL_ERROR:2");
	fn_buf_free(&t);
	fn_buf_free(&b);
	/* Nothing sent: no record. */
	memset(&s->h.h2, 0, sizeof(s->h.h2));
	fn_seg_stats(s, &b);
	CU_ASSERT(!b.s || !strstr(b.s, "h2 pid="));
	fn_buf_free(&b);
	free(s);
	fn_policy_free(p);
}

/* What a child of faultctl run needs in LD_PRELOAD before the shim: under
 * AddressSanitizer the runtime this program has mapped, which must come
 * first; "" otherwise. */
static const char *preload_first(void)
{
	static char lib[PATH_MAX + 16] = "";
#if defined(__SANITIZE_ADDRESS__)
	FILE *f = fopen("/proc/self/maps", "r");
	char line[PATH_MAX + 128];
	while (f && !lib[0] && fgets(line, sizeof(line), f)) {
		char *path = strchr(line, '/');
		if (path && strstr(path, "/libasan.so")) {
			path[strcspn(path, "\n")] = '\0';
			snprintf(lib, sizeof(lib), "LD_PRELOAD=%s ", path);
		}
	}
	if (f)
		fclose(f);
#endif
	return lib;
}

/* Runs cmd (a shell line); its output, malloc'd. */
static char *output_of(const char *cmd)
{
	FILE *f = popen(cmd, "r");
	static char buf[16384];
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
	buf[n] = '\0';
	if (f)
		pclose(f);
	return strdup(buf);
}

static void test_faultctl(void)
{
	char exe[PATH_MAX], ctl[PATH_MAX + 16], dir[] = "/tmp/fn-h2sent-XXXXXX";
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	CU_ASSERT_FATAL(n > 0);
	exe[n] = '\0';
	/* build/tests/unit: faultctl is build/faultctl. */
	snprintf(ctl, sizeof(ctl), "%s/faultctl", dirname(dirname(exe)));
	if (access(ctl, X_OK) != 0) {
		printf("\n    skipped: %s is not built (make)\n", ctl);
		return;
	}
	struct fn_policy *p = policy();
	CU_ASSERT_FATAL(p && mkdtemp(dir));
	struct fn_seg *s = drive(p);
	char path[PATH_MAX + 64], cmd[4 * PATH_MAX];
	snprintf(path, sizeof(path), "%s/run", dir);
	CU_ASSERT_FATAL(mkdir(path, 0700) == 0);
	/* A member of group g that has gone: faultctl stats counts its file. */
	snprintf(path, sizeof(path), "%s/run/g.4242.1.1.done", dir);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT(write(fd, s, sizeof(*s)) == (ssize_t)sizeof(*s));
	close(fd);
	snprintf(cmd, sizeof(cmd), "FAULTNET_RUNDIR=%s/run %s stats -g g 2>&1", dir, ctl);
	char *out = output_of(cmd);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "connections  tls  grpc           rst"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out,
				      "4242  3            1    UNAVAILABLE:2  "
				      "REFUSED_STREAM:1,other:1  NO_ERROR:1,FLOW_CONTROL_ERROR:1"));
	if (!strstr(out, "UNAVAILABLE:2"))
		printf("\n    faultctl stats said: %s\n", out);
	free(out);
	snprintf(cmd, sizeof(cmd), "FAULTNET_RUNDIR=%s/run %s stats -g g --json 2>/dev/null", dir,
		 ctl);
	out = output_of(cmd);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "{\"type\":\"h2\",\"pid\":4242,\"connections\":3,"
					   "\"tls\":1,\"grpc\":\"UNAVAILABLE:2\","));
	free(out);
	/* faultctl run --stats: the file a process of the run left. */
	snprintf(cmd, sizeof(cmd),
		 "FAULTNET_RUNDIR=%s/run %s%s run --stats -- /bin/sh -c 'cp %s "
		 "\"$FAULTNET_STATS_DIR/x.4242.1.1.mem\"' 2>&1",
		 dir, preload_first(), ctl, path);
	out = output_of(cmd);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "\n  h2 connections=3 tls=1 grpc=UNAVAILABLE:2 "
					   "rst=REFUSED_STREAM:1,other:1 "
					   "goaway=NO_ERROR:1,FLOW_CONTROL_ERROR:1\n"));
	if (!strstr(out, "  h2 "))
		printf("\n    faultctl run --stats said: %s\n", out);
	free(out);
	if (getenv("FN_KEEP"))
		printf("kept %s\n", dir);
	else {
		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		CU_ASSERT(system(cmd) == 0);
	}
	free(s);
	fn_policy_free(p);
}

void add_h2sent_tests(void)
{
	CU_pSuite s = CU_add_suite("h2 counts", NULL, NULL);
	CU_add_test(s, "what the HTTP/2 engine sent, counted", test_counts);
	CU_add_test(s, "the h2 line of faultctl stats and run --stats", test_faultctl);
}
