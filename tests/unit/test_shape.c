/* test_shape.c - the relay's shaping arithmetic (preload/relay/shape.c) driven
 * by a made-up clock: latency release marks and their order under jitter,
 * the bandwidth token bucket's rate and burst cap, the drip schedule, and
 * the after_bytes limit. One test beside each mechanism. */
#include <CUnit/CUnit.h>
#include <stdlib.h>
#include <string.h>

#include "preload/relay/shape.h"

#define MS 1000000ull
#define T0 (1000 * MS) /* an arbitrary start on the monotonic clock */

static struct fn_conn conn;
static struct fn_mark marks[FN_MARKS];

/* A faulted direction holding `waiting` bytes, all read at `now`. */
static struct fn_dir *fresh(enum fn_action a, uint64_t waiting)
{
	memset(&conn, 0, sizeof(conn));
	memset(marks, 0, sizeof(marks));
	conn.action = a;
	conn.par.after_bytes = -1;
	conn.par.after_ms = -1;
	conn.wake_ns = UINT64_MAX;
	conn.key = 42;
	struct fn_dir *dr = &conn.dir[0];
	dr->faulted = true;
	dr->marks = marks;
	dr->cap = 1 << 20;
	dr->hi = waiting;
	dr->in = waiting;
	return dr;
}

static void test_latency_marks(void)
{
	struct fn_dir *dr = fresh(FN_ACT_LATENCY, 0);
	conn.par.latency_ms = 50;
	dr->in = dr->hi = 100;
	fn_shape_mark(&conn, dr, T0);
	dr->in = dr->hi = 300;
	fn_shape_mark(&conn, dr, T0 + 10 * MS);
	CU_ASSERT_EQUAL(dr->mcount, 2);
	/* Nothing before 50 ms; the wake-up is set for the first mark. */
	CU_ASSERT_EQUAL(fn_shape_allowance(&conn, dr, T0 + 49 * MS), 0);
	CU_ASSERT_EQUAL(conn.wake_ns, T0 + 50 * MS);
	CU_ASSERT_EQUAL(fn_shape_allowance(&conn, dr, T0 + 50 * MS), 100);
	dr->out = dr->lo = 100;
	CU_ASSERT_EQUAL(fn_shape_allowance(&conn, dr, T0 + 59 * MS), 0);
	CU_ASSERT_EQUAL(fn_shape_allowance(&conn, dr, T0 + 60 * MS), 200);
	CU_ASSERT_EQUAL(dr->mcount, 0);
}

/* Jitter draws may go either way, yet a later read is never due before an
 * earlier one: bytes keep their order. The draws stay within +- jitter. */
static void test_jitter_keeps_order(void)
{
	struct fn_dir *dr = fresh(FN_ACT_LATENCY, 0);
	conn.par.latency_ms = 20;
	conn.par.jitter_ms = 15;
	uint64_t last = 0, lo = UINT64_MAX, hi = 0;
	for (int i = 0; i < 1000; i++) {
		uint64_t now = T0 + (uint64_t)i * MS / 10;
		dr->in += 10;
		fn_shape_mark(&conn, dr, now);
		struct fn_mark *m = &dr->marks[(dr->mhead + dr->mcount - 1) % FN_MARKS];
		CU_ASSERT(m->due >= last);
		last = m->due;
		uint64_t d = m->due - now;
		lo = d < lo ? d : lo;
		hi = d > hi ? d : hi;
	}
	CU_ASSERT_EQUAL(conn.draws, 1000);
	CU_ASSERT(lo >= 5 * MS);      /* 20 - 15 */
	CU_ASSERT(hi <= 35 * MS);     /* 20 + 15 */
	CU_ASSERT(hi - lo > 10 * MS); /* the draws really vary */
}

/* The same key gives the same draws: FAULTNET_SEED makes runs repeat. */
static void test_jitter_reproducible(void)
{
	uint64_t a[50];
	for (int round = 0; round < 2; round++) {
		struct fn_dir *dr = fresh(FN_ACT_LATENCY, 0);
		conn.par.latency_ms = 20;
		conn.par.jitter_ms = 10;
		for (int i = 0; i < 50; i++) {
			dr->in += 1;
			fn_shape_mark(&conn, dr, T0 + (uint64_t)i * 40 * MS);
			uint64_t due = dr->marks[(dr->mhead + dr->mcount - 1) % FN_MARKS].due;
			if (round == 0)
				a[i] = due;
			else
				CU_ASSERT_EQUAL(a[i], due);
		}
	}
}

/* 100,000 B/s for one simulated second lets about 100,000 bytes out;
 * idle time saves up no more than 50 ms' worth (a burst of 5,000). */
static void test_token_bucket(void)
{
	struct fn_dir *dr = fresh(FN_ACT_BANDWIDTH, 1 << 20);
	conn.par.rate = 100000;
	dr->tok_ns = T0;
	uint64_t sent = 0;
	for (uint64_t t = T0; t <= T0 + 1000 * MS; t += MS) {
		uint64_t n = fn_shape_allowance(&conn, dr, t);
		fn_shape_spent(&conn, dr, n);
		dr->lo += n;
		dr->out += n;
		sent += n;
	}
	CU_ASSERT(sent >= 99000 && sent <= 101000);
	/* After 10 s idle, one burst of at most 5,000 bytes. */
	uint64_t burst = fn_shape_allowance(&conn, dr, T0 + 11000 * MS);
	CU_ASSERT(burst >= 4900 && burst <= 5000);
}

/* Out of tokens, the bucket says when the next ones come. */
static void test_token_wake(void)
{
	struct fn_dir *dr = fresh(FN_ACT_BANDWIDTH, 1000);
	conn.par.rate = 1000; /* the burst floor is one segment, 1460 */
	dr->tok_ns = T0;
	CU_ASSERT_EQUAL(fn_shape_allowance(&conn, dr, T0), 0);
	CU_ASSERT(conn.wake_ns > T0 && conn.wake_ns <= T0 + 1001 * MS);
}

/* 10 bytes every 50 ms, never saved up. */
static void test_drip_schedule(void)
{
	struct fn_dir *dr = fresh(FN_ACT_DRIP, 1000);
	conn.par.bytes = 10;
	conn.par.every_ms = 50;
	CU_ASSERT_EQUAL(fn_shape_allowance(&conn, dr, T0), 10);
	fn_shape_spent(&conn, dr, 10);
	dr->lo += 10;
	dr->out += 10;
	CU_ASSERT_EQUAL(fn_shape_allowance(&conn, dr, T0 + 49 * MS), 0);
	CU_ASSERT_EQUAL(conn.wake_ns, T0 + 50 * MS);
	/* A long pause still gives 10, not 10 per missed tick. */
	CU_ASSERT_EQUAL(fn_shape_allowance(&conn, dr, T0 + 5000 * MS), 10);
}

/* Stall, reset and close let exactly after_bytes out, then nothing. */
static void test_after_bytes_limit(void)
{
	struct fn_dir *dr = fresh(FN_ACT_STALL, 5000);
	conn.par.after_bytes = 1000;
	CU_ASSERT(fn_shape_after_rule(&conn));
	CU_ASSERT_EQUAL(fn_shape_allowance(&conn, dr, T0), 1000);
	dr->lo = dr->out = 1000;
	CU_ASSERT_EQUAL(fn_shape_allowance(&conn, dr, T0), 0);
	conn.action = FN_ACT_LATENCY;
	CU_ASSERT(!fn_shape_after_rule(&conn));
}

/* A direction the rule does not cover passes everything at once. */
static void test_unfaulted_direction(void)
{
	struct fn_dir *dr = fresh(FN_ACT_LATENCY, 777);
	conn.par.latency_ms = 1000;
	dr->faulted = false;
	CU_ASSERT(!fn_shape_has_latency(&conn, dr));
	CU_ASSERT_EQUAL(fn_shape_allowance(&conn, dr, T0), 777);
}

void add_shape_tests(void)
{
	CU_pSuite s = CU_add_suite("relay shaping", NULL, NULL);
	CU_add_test(s, "latency: release marks let bytes out on time", test_latency_marks);
	CU_add_test(s, "latency: jitter draws within bounds, order kept", test_jitter_keeps_order);
	CU_add_test(s, "latency: the same key, the same jitter draws", test_jitter_reproducible);
	CU_add_test(s, "bandwidth: the token bucket's rate and burst cap", test_token_bucket);
	CU_add_test(s, "bandwidth: wake-up when out of tokens", test_token_wake);
	CU_add_test(s, "drip: bytes per tick, never saved up", test_drip_schedule);
	CU_add_test(s, "after_bytes: exactly N bytes, then none", test_after_bytes_limit);
	CU_add_test(s, "an unfaulted direction is not shaped", test_unfaulted_direction);
}
