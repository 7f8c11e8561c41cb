/* test_pace.c - the pacing arithmetic both relays share (core/pace.c), and
 * the shim's relay marks on top of it (preload/relay/shape.c), driven by
 * made-up clocks: latency release times and their order under jitter, the
 * bandwidth token bucket's rate, burst cap and empty start, the drip
 * schedule, and the after_bytes and after_ms thresholds. */
#include <CUnit/CUnit.h>
#include <stdlib.h>
#include <string.h>

#include "core/chance.h"
#include "core/clock.h"
#include "core/pace.h"
#include "preload/relay/shape.h"

#define T0 (1000 * MS) /* an arbitrary start on the monotonic clock */

static struct fn_params params(void)
{
	return (struct fn_params){.after_bytes = -1, .after_ms = -1};
}

/* Latency plus draw times jitter; a later read whose draw would put it
 * first still goes after the one before. */
static void test_due(void)
{
	struct fn_pace p = {0};
	struct fn_params par = params();
	par.latency_ms = 100;
	par.jitter_ms = 50;
	CU_ASSERT_EQUAL(fn_pace_due(&p, &par, 0, 0), 100 * MS);
	CU_ASSERT_EQUAL(fn_pace_due(&p, &par, -1, 10 * MS), 100 * MS);
	CU_ASSERT_EQUAL(fn_pace_due(&p, &par, 1, 20 * MS), 170 * MS);
	struct fn_params none = params();
	struct fn_pace q = {0};
	CU_ASSERT_EQUAL(fn_pace_due(&q, &none, 0, 5 * MS), 5 * MS);
}

/* Jitter draws may go either way, yet a later read is never due before an
 * earlier one; the draws stay within +- jitter, and the same key gives the
 * same draws (FAULTNET_SEED makes runs repeat). */
static void test_jitter(void)
{
	struct fn_params par = params();
	par.latency_ms = 20;
	par.jitter_ms = 15;
	uint64_t first[1000];
	for (int round = 0; round < 2; round++) {
		struct fn_pace p = {0};
		uint64_t last = 0, lo = UINT64_MAX, hi = 0;
		for (int i = 0; i < 1000; i++) {
			uint64_t now = T0 + (uint64_t)i * MS / 10;
			double draw = fn_random(42, (uint64_t)i) * 2 - 1;
			uint64_t due = fn_pace_due(&p, &par, draw, now);
			CU_ASSERT(due >= last);
			last = due;
			lo = due - now < lo ? due - now : lo;
			hi = due - now > hi ? due - now : hi;
			if (round == 0)
				first[i] = due;
			else
				CU_ASSERT_EQUAL(first[i], due);
		}
		CU_ASSERT(lo >= 5 * MS);      /* 20 - 15 */
		CU_ASSERT(hi <= 35 * MS);     /* 20 + 15 */
		CU_ASSERT(hi - lo > 10 * MS); /* the draws really vary */
	}
}

/* 100,000 B/s: a bucket started at T0 holds its burst, 50 ms' worth
 * (5,000 bytes), one simulated second lets about 100,000 more out, and idle
 * time saves up no more than the burst again. */
static void test_rate(void)
{
	struct fn_pace p;
	struct fn_params par = params();
	par.rate = 100000;
	fn_pace_start(&p, &par, T0);
	uint64_t wake = UINT64_MAX, sent = 0;
	for (uint64_t t = T0; t <= T0 + 1000 * MS; t += MS) {
		uint64_t n = fn_pace_allow(&p, &par, FN_ACT_BANDWIDTH, t, sent, 1 << 20, &wake);
		fn_pace_spent(&p, &par, FN_ACT_BANDWIDTH, n);
		sent += n;
	}
	CU_ASSERT(sent >= 104000 && sent <= 106000);
	uint64_t burst =
	    fn_pace_allow(&p, &par, FN_ACT_BANDWIDTH, T0 + 11000 * MS, 0, 1 << 20, &wake);
	CU_ASSERT(burst >= 4900 && burst <= 5000);
	fn_pace_spent(&p, &par, FN_ACT_BANDWIDTH, burst);
	/* Out of tokens, the bucket says when the next ones come. */
	wake = UINT64_MAX;
	CU_ASSERT_EQUAL(fn_pace_allow(&p, &par, FN_ACT_BANDWIDTH, T0 + 11000 * MS, 0, 20000, &wake),
			0);
	CU_ASSERT(wake > T0 + 11000 * MS && wake <= T0 + 11051 * MS);
	CU_ASSERT_EQUAL(fn_pace_allow(&p, &par, FN_ACT_BANDWIDTH, T0 + 11010 * MS, 0, 20000, &wake),
			1000);
}

/* A new connection's first small message goes whole, at once: the shim's
 * copy started with an empty bucket, and a request written right after the
 * connect went out in pieces of what had accrued since (a server reading
 * one recv then saw half a request). A slow rate still saves up one
 * segment (1,460 bytes), and wakes when what is wanted has come. */
static void test_rate_start(void)
{
	struct fn_pace p;
	struct fn_params par = params();
	par.rate = 1000;
	fn_pace_start(&p, &par, T0);
	uint64_t wake = UINT64_MAX;
	CU_ASSERT_EQUAL(fn_pace_allow(&p, &par, FN_ACT_BANDWIDTH, T0, 0, 100, &wake), 100);
	fn_pace_spent(&p, &par, FN_ACT_BANDWIDTH, 1460);
	CU_ASSERT_EQUAL(fn_pace_allow(&p, &par, FN_ACT_BANDWIDTH, T0, 0, 1000, &wake), 0);
	CU_ASSERT(wake > T0 && wake <= T0 + 1001 * MS);
	CU_ASSERT_EQUAL(fn_pace_allow(&p, &par, FN_ACT_BANDWIDTH, T0 + 60000 * MS, 0, 5000, &wake),
			1460);
}

/* 10 bytes every 50 ms, never saved up. */
static void test_drip(void)
{
	struct fn_pace p;
	struct fn_params par = params();
	par.bytes = 10;
	par.every_ms = 50;
	fn_pace_start(&p, &par, T0);
	uint64_t wake = UINT64_MAX;
	CU_ASSERT_EQUAL(fn_pace_allow(&p, &par, FN_ACT_DRIP, T0, 0, 500, &wake), 10);
	fn_pace_spent(&p, &par, FN_ACT_DRIP, 10);
	CU_ASSERT_EQUAL(fn_pace_allow(&p, &par, FN_ACT_DRIP, T0 + 49 * MS, 10, 500, &wake), 0);
	CU_ASSERT_EQUAL(wake, T0 + 50 * MS);
	/* A long pause still gives 10, not 10 per missed tick. */
	CU_ASSERT_EQUAL(fn_pace_allow(&p, &par, FN_ACT_DRIP, T0 + 5000 * MS, 10, 500, &wake), 10);
}

/* Stall, reset, close and blackhole let exactly after_bytes out, then
 * nothing, and have tripped; latency has no threshold. */
static void test_after_bytes(void)
{
	static const enum fn_action acts[] = {FN_ACT_STALL, FN_ACT_RESET, FN_ACT_CLOSE,
					      FN_ACT_BLACKHOLE};
	struct fn_params par = params();
	par.after_bytes = 100;
	uint64_t wake = UINT64_MAX;
	for (size_t i = 0; i < sizeof(acts) / sizeof(acts[0]); i++) {
		struct fn_pace p = {0};
		enum fn_action a = acts[i];
		CU_ASSERT(fn_pace_after_action(a));
		CU_ASSERT_EQUAL(fn_pace_allow(&p, &par, a, 0, 0, 1000, &wake), 100);
		CU_ASSERT_FALSE(fn_pace_tripped(&par, a, 0, 0, 0, &wake));
		CU_ASSERT_EQUAL(fn_pace_allow(&p, &par, a, 0, 100, 1000, &wake), 0);
		CU_ASSERT_TRUE(fn_pace_tripped(&par, a, 100, 0, 0, &wake));
	}
	CU_ASSERT_FALSE(fn_pace_after_action(FN_ACT_LATENCY));
	CU_ASSERT_FALSE(fn_pace_tripped(&par, FN_ACT_LATENCY, 100, 0, 0, &wake));
}

/* More bytes out than after_bytes (a lower limit than what already went)
 * lets nothing more out: the shim's copy let everything out, its
 * after_bytes - out wrapping around. */
static void test_after_bytes_passed(void)
{
	struct fn_pace p = {0};
	struct fn_params par = params();
	par.after_bytes = 1000;
	uint64_t wake = UINT64_MAX;
	CU_ASSERT_EQUAL(fn_pace_allow(&p, &par, FN_ACT_STALL, 0, 2000, 5000, &wake), 0);
}

/* after_ms counts from t0 and says when it will be reached. */
static void test_after_ms(void)
{
	struct fn_params par = params();
	par.after_ms = 300;
	uint64_t wake = UINT64_MAX;
	CU_ASSERT_FALSE(fn_pace_tripped(&par, FN_ACT_RESET, 0, T0, T0 + 200 * MS, &wake));
	CU_ASSERT_EQUAL(wake, T0 + 300 * MS);
	CU_ASSERT_TRUE(fn_pace_tripped(&par, FN_ACT_RESET, 0, T0, T0 + 300 * MS, &wake));
	struct fn_params none = params();
	CU_ASSERT_FALSE(fn_pace_tripped(&none, FN_ACT_RESET, 0, T0, T0 + 300 * MS, &wake));
}

/* The shim's relay: a faulted direction holding `waiting` bytes. */
static struct fn_conn conn;
static struct fn_mark marks[FN_MARKS];

static struct fn_dir *fresh(enum fn_action a, uint64_t waiting)
{
	memset(&conn, 0, sizeof(conn));
	memset(marks, 0, sizeof(marks));
	conn.action = a;
	conn.par = params();
	conn.wake_ns = UINT64_MAX;
	conn.key = 42;
	struct fn_dir *dr = &conn.dir[0];
	fn_pace_start(&dr->pace, &conn.par, T0);
	dr->faulted = true;
	dr->marks = marks;
	dr->cap = 1 << 20;
	dr->hi = waiting;
	dr->in = waiting;
	return dr;
}

/* Release marks let each read's bytes out at its time, in order. */
static void test_shim_marks(void)
{
	struct fn_dir *dr = fresh(FN_ACT_LATENCY, 0);
	conn.par.latency_ms = 50;
	dr->in = dr->hi = 100;
	fn_shape_mark(&conn, dr, T0);
	dr->in = dr->hi = 300;
	fn_shape_mark(&conn, dr, T0 + 10 * MS);
	CU_ASSERT_EQUAL(dr->mcount, 2);
	CU_ASSERT_EQUAL(conn.draws, 0); /* no jitter, no draw */
	CU_ASSERT_EQUAL(fn_shape_allowance(&conn, dr, T0 + 49 * MS), 0);
	CU_ASSERT_EQUAL(conn.wake_ns, T0 + 50 * MS);
	CU_ASSERT_EQUAL(fn_shape_allowance(&conn, dr, T0 + 50 * MS), 100);
	dr->out = dr->lo = 100;
	CU_ASSERT_EQUAL(fn_shape_allowance(&conn, dr, T0 + 59 * MS), 0);
	CU_ASSERT_EQUAL(fn_shape_allowance(&conn, dr, T0 + 60 * MS), 200);
	CU_ASSERT_EQUAL(dr->mcount, 0);
}

/* The shim's relay through the shared arithmetic: after_bytes counts what
 * its direction sent, also when that is past the limit. */
static void test_shim_after_bytes(void)
{
	struct fn_dir *dr = fresh(FN_ACT_STALL, 5000);
	conn.par.after_bytes = 1000;
	CU_ASSERT_EQUAL(fn_shape_allowance(&conn, dr, T0), 1000);
	dr->lo = dr->out = 1000;
	CU_ASSERT_EQUAL(fn_shape_allowance(&conn, dr, T0), 0);
	dr->lo = 0;
	dr->out = 2000;
	CU_ASSERT_EQUAL(fn_shape_allowance(&conn, dr, T0), 0);
}

/* The shim's relay, as the pump starts a connection: its first request of
 * 18 bytes goes whole under a rate of 200,000 B/s. */
static void test_shim_first_write(void)
{
	struct fn_dir *dr = fresh(FN_ACT_BANDWIDTH, 18);
	conn.par.rate = 200000;
	fn_pace_start(&dr->pace, &conn.par, T0);
	CU_ASSERT_EQUAL(fn_shape_allowance(&conn, dr, T0 + 10000), 18);
}

/* A direction the rule does not cover passes everything at once. */
static void test_shim_unfaulted(void)
{
	struct fn_dir *dr = fresh(FN_ACT_LATENCY, 777);
	conn.par.latency_ms = 1000;
	dr->faulted = false;
	CU_ASSERT(!fn_shape_has_latency(&conn, dr));
	CU_ASSERT_EQUAL(fn_shape_allowance(&conn, dr, T0), 777);
}

void add_pace_tests(void)
{
	CU_pSuite s = CU_add_suite("pace", NULL, NULL);
	CU_add_test(s, "latency: release times in order", test_due);
	CU_add_test(s, "latency: jitter within bounds, order kept, draws repeat", test_jitter);
	CU_add_test(s, "rate: the burst, the rate, 50 ms saved up at most", test_rate);
	CU_add_test(s, "rate: a first small message whole; one segment when slow", test_rate_start);
	CU_add_test(s, "drip: bytes every every_ms, never saved up", test_drip);
	CU_add_test(s, "after_bytes: exactly N bytes, then none, tripped", test_after_bytes);
	CU_add_test(s, "after_bytes already passed: none", test_after_bytes_passed);
	CU_add_test(s, "after_ms: from t0, with its wake-up", test_after_ms);
	CU_add_test(s, "shim: release marks let bytes out on time", test_shim_marks);
	CU_add_test(s, "shim: after_bytes on what went out", test_shim_after_bytes);
	CU_add_test(s, "shim: a first request whole under a rate", test_shim_first_write);
	CU_add_test(s, "shim: an unfaulted direction is not shaped", test_shim_unfaulted);
}
