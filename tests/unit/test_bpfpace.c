/* test_bpfpace.c - the kernel-side backend's relay arithmetic (bpf/pace.c)
 * with made-up clocks: latency and jitter release times in order, the
 * rate's bucket, the drip's schedule and the thresholds of stall, reset
 * and close. */
#include <CUnit/CUnit.h>

#include "bpf/pace.h"

#define MS 1000000ull

static struct fn_params params(void)
{
	return (struct fn_params){.after_bytes = -1, .after_ms = -1};
}

static void test_latency(void)
{
	struct fnb_pace p = {0};
	struct fn_params par = params();
	par.latency_ms = 100;
	par.jitter_ms = 50;
	CU_ASSERT_EQUAL(fnb_pace_due(&p, &par, 0, 0), 100 * MS);
	/* A later read whose draw would put it first still goes after. */
	CU_ASSERT_EQUAL(fnb_pace_due(&p, &par, -1, 10 * MS), 100 * MS);
	CU_ASSERT_EQUAL(fnb_pace_due(&p, &par, 1, 20 * MS), 170 * MS);
	struct fn_params none = params();
	struct fnb_pace q = {0};
	CU_ASSERT_EQUAL(fnb_pace_due(&q, &none, 0, 5 * MS), 5 * MS);
}

static void test_rate(void)
{
	struct fnb_pace p = {0};
	struct fn_params par = params();
	par.rate = 100000; /* 5,000 bytes in 50 ms: the most saved up */
	uint64_t wake = UINT64_MAX, now = 1000 * MS;
	size_t n = fnb_pace_allow(&p, &par, FN_ACT_BANDWIDTH, now, 20000, &wake);
	CU_ASSERT_EQUAL(n, 5000);
	fnb_pace_spent(&p, &par, FN_ACT_BANDWIDTH, n);
	CU_ASSERT_EQUAL(fnb_pace_allow(&p, &par, FN_ACT_BANDWIDTH, now, 20000, &wake), 0);
	CU_ASSERT(wake > now && wake <= now + 51 * MS); /* when 5,000 more are there */
	CU_ASSERT_EQUAL(fnb_pace_allow(&p, &par, FN_ACT_BANDWIDTH, now + 10 * MS, 20000, &wake),
			1000);
}

static void test_drip(void)
{
	struct fnb_pace p = {0};
	struct fn_params par = params();
	par.bytes = 10;
	par.every_ms = 100;
	uint64_t wake = UINT64_MAX;
	CU_ASSERT_EQUAL(fnb_pace_allow(&p, &par, FN_ACT_DRIP, 0, 500, &wake), 10);
	fnb_pace_spent(&p, &par, FN_ACT_DRIP, 10);
	CU_ASSERT_EQUAL(fnb_pace_allow(&p, &par, FN_ACT_DRIP, 50 * MS, 500, &wake), 0);
	CU_ASSERT_EQUAL(wake, 100 * MS);
	CU_ASSERT_EQUAL(fnb_pace_allow(&p, &par, FN_ACT_DRIP, 100 * MS, 500, &wake), 10);
}

static void test_thresholds(void)
{
	struct fnb_pace p = {0};
	struct fn_params par = params();
	par.after_bytes = 100;
	uint64_t wake = UINT64_MAX;
	CU_ASSERT_EQUAL(fnb_pace_allow(&p, &par, FN_ACT_STALL, 0, 1000, &wake), 100);
	CU_ASSERT_FALSE(fnb_pace_tripped(&p, &par, FN_ACT_STALL, 0, 0, &wake));
	fnb_pace_spent(&p, &par, FN_ACT_STALL, 100);
	CU_ASSERT_EQUAL(fnb_pace_allow(&p, &par, FN_ACT_STALL, 0, 1000, &wake), 0);
	CU_ASSERT_TRUE(fnb_pace_tripped(&p, &par, FN_ACT_STALL, 0, 0, &wake));
	CU_ASSERT_FALSE(fnb_pace_tripped(&p, &par, FN_ACT_LATENCY, 0, 0, &wake));
	struct fn_params t = params();
	t.after_ms = 300;
	struct fnb_pace q = {0};
	CU_ASSERT_FALSE(fnb_pace_tripped(&q, &t, FN_ACT_RESET, 0, 200 * MS, &wake));
	CU_ASSERT_EQUAL(wake, 300 * MS);
	CU_ASSERT_TRUE(fnb_pace_tripped(&q, &t, FN_ACT_RESET, 0, 300 * MS, &wake));
}

void add_bpfpace_tests(void)
{
	CU_pSuite s = CU_add_suite("bpfpace", NULL, NULL);
	CU_add_test(s, "latency and jitter: release times in order", test_latency);
	CU_add_test(s, "rate: 50 ms saved up at most, then as the bucket fills", test_rate);
	CU_add_test(s, "drip: bytes every every_ms, never saved up", test_drip);
	CU_add_test(s, "after_bytes and after_ms: where stall, reset and close start",
		    test_thresholds);
}
