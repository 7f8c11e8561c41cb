/* test_segment.c - a member's published state (core/segment.c): rule name
 * slots, the records faultctl makes of a state, and a state file written by
 * someone hostile (strings not ended, bools that are not 0 or 1, places,
 * actions and counts out of range) read without harm. */
#include <CUnit/CUnit.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/segment.h"

static struct fn_seg *new_state(void)
{
	struct fn_seg *s = calloc(1, sizeof(*s));
	s->h.pid = 4242;
	strcpy(s->h.group, "g");
	strcpy(s->h.cmd, "app --flag");
	return s;
}

static void test_slots(void)
{
	struct fn_seg *s = new_state();
	CU_ASSERT_PTR_NULL(fn_seg_rule_slot(s, "a", false));
	struct fn_seg_rule *a = fn_seg_rule_slot(s, "a", true);
	CU_ASSERT_PTR_NOT_NULL_FATAL(a);
	CU_ASSERT(fn_seg_rule_slot(s, "a", false) == a && fn_seg_rule_slot(s, "a", true) == a);
	CU_ASSERT_EQUAL(a->order, -1);
	/* A full table: a bounded search, then no slot. */
	int got = 0;
	char name[16];
	for (int i = 0; i < 2 * FN_SEG_RULES; i++) {
		snprintf(name, sizeof(name), "r%d", i);
		got += fn_seg_rule_slot(s, name, true) != NULL;
	}
	CU_ASSERT(got < FN_SEG_RULES && got > FN_SEG_RULES / 2);
	free(s);
}

/* Slots are claimed side by side, in order: a policy of ten rules writes
 * its slots on one or two pages (a start writes each page it touches),
 * where slots placed by a name's hash put each on a page of its own. */
static void test_slots_in_order(void)
{
	struct fn_seg *s = new_state();
	char name[16];
	for (int i = 0; i < 10; i++) {
		snprintf(name, sizeof(name), "rule-%d", i);
		CU_ASSERT(fn_seg_rule_slot(s, name, true) == &s->rules[i]);
	}
	CU_ASSERT_EQUAL(s->h.rule_slots, 10);
	size_t first = offsetof(struct fn_seg, rules) / 4096,
	       last = (offsetof(struct fn_seg, rules) + 10 * sizeof(s->rules[0]) - 1) / 4096;
	CU_ASSERT(last - first <= 1);
	for (int i = 9; i >= 0; i--) {
		snprintf(name, sizeof(name), "rule-%d", i);
		CU_ASSERT(fn_seg_rule_slot(s, name, false) == &s->rules[i]);
	}
	free(s);
}

/* A state file's index written by someone hostile: entries past the table
 * or at slots that are not ready, or that name another rule, find
 * nothing, and a claim then takes a new slot. */
static void test_slots_hostile_index(void)
{
	struct fn_seg *s = new_state();
	for (unsigned i = 0; i < FN_SEG_RULES; i++)
		s->rule_at[i] = (uint16_t)(i % 3 == 0 ? 0xffff : i % 3 == 1 ? 7 : 1);
	strcpy(s->rules[0].name, "other");
	s->rules[0].state = FN_SLOT_READY;
	CU_ASSERT_PTR_NULL(fn_seg_rule_slot(s, "a", false));
	CU_ASSERT_PTR_NULL(fn_seg_rule_slot(s, "a", true)); /* no empty entry in reach */
	memset(s->rule_at, 0, sizeof(s->rule_at));
	s->h.rule_slots = FN_SEG_RULES; /* every slot claimed: no new one */
	CU_ASSERT_PTR_NULL(fn_seg_rule_slot(s, "a", true));
	free(s);
}

static void test_records(void)
{
	struct fn_seg *s = new_state();
	struct fn_seg_rule *b = fn_seg_rule_slot(s, "b", true), *a = fn_seg_rule_slot(s, "a", true),
			   *gone = fn_seg_rule_slot(s, "gone", true);
	a->order = 0, b->order = 1;
	a->action = FN_ACT_BLACKHOLE, b->action = FN_ACT_REFUSE, gone->action = FN_ACT_DROP;
	a->enabled = 1;
	a->n.attempts = 5, a->n.faults = 3, gone->n.attempts = 7;
	strcpy(b->params, "after=2");
	s->h.nrules = 2;
	s->h.enabled = 1;
	s->dests[3].state = FN_SLOT_READY;
	s->dests[3].ep = (struct fn_endpoint){.v4 = true, .ip = {127, 66, 0, 1}, .port = 443};
	s->dests[3].attempts = 5;
	s->ring[0] = (struct fn_seg_event){.seq = 1, .fd = 7, .action = FN_ACT_BLACKHOLE};
	strcpy(s->ring[0].rule, "a");
	strcpy(s->ring[0].outcome, "ETIMEDOUT");
	s->h.ring_head = 1;
	struct fn_buf r = {0};
	fn_seg_rules(s, &r);
	CU_ASSERT_STRING_EQUAL(r.s, "rule pid=4242 name=a action=blackhole enabled=yes faults=3 "
				    "attempts=5 params=\"\"\nrule pid=4242 name=b action=refuse "
				    "enabled=no faults=0 attempts=0 params=\"after=2\"\nend\n");
	fn_buf_free(&r);
	fn_seg_stats(s, &r);
	CU_ASSERT_PTR_NOT_NULL(strstr(r.s, "rule pid=4242 name=a action=blackhole attempts=5 "
					   "faults=3 bytes=0\nrule pid=4242 name=b"));
	CU_ASSERT_PTR_NOT_NULL(strstr(r.s, "name=gone action=drop attempts=7")); /* kept */
	CU_ASSERT_PTR_NOT_NULL(
	    strstr(r.s, "dest pid=4242 dest=127.66.0.1:443 proto=tcp attempts=5"));
	fn_buf_free(&r);
	uint64_t since = 0;
	fn_seg_events(s, &r, &since);
	CU_ASSERT_PTR_NOT_NULL(strstr(r.s, "fd=7 proto=tcp rule=a action=blackhole"));
	CU_ASSERT_EQUAL(since, 1);
	fn_buf_free(&r);
	fn_seg_info(s, &r);
	CU_ASSERT_PTR_NOT_NULL(strstr(r.s, "process pid=4242 group=g zone=- rules=2 enabled=1"));
	fn_buf_free(&r);
	free(s);
}

/* One formatter for both backends (the shim's stats room and the kernel-side
 * backend's events): the record and the JSON line of an event say the same,
 * and an action that is none, or out of range, is "none" in both. */
static void test_event_formats(void)
{
	struct fn_seg_event e = {.wall_us = 1700000000000001,
				 .mono_us = 42,
				 .fd = -1,
				 .proto = FN_PROTO_UDP,
				 .action = FN_ACT_DROP,
				 .ep = {.v4 = true, .ip = {127, 66, 0, 1}, .port = 53}};
	strcpy(e.rule, "lossy");
	strcpy(e.outcome, "dropped");
	struct fn_buf b = {0};
	fn_seg_event_record(&b, &e, 77, 9);
	CU_ASSERT_STRING_EQUAL(b.s, "event seq=9 wall_us=1700000000000001 mono_us=42 pid=77 fd=-1 "
				    "proto=udp rule=lossy action=drop dest=127.66.0.1:53 "
				    "outcome=dropped\n");
	fn_buf_free(&b);
	char line[512];
	size_t n = fn_seg_event_json(&e, 77, line, sizeof(line));
	CU_ASSERT_STRING_EQUAL(line,
			       "{\"wall_us\":1700000000000001,\"mono_us\":42,\"pid\":77,"
			       "\"fd\":-1,\"proto\":\"udp\",\"rule\":\"lossy\",\"action\":"
			       "\"drop\",\"dest\":\"127.66.0.1:53\",\"outcome\":\"dropped\"}\n");
	CU_ASSERT_EQUAL(n, strlen(line));
	CU_ASSERT_EQUAL(fn_seg_event_json(&e, 77, line, 40), 0); /* does not fit: nothing */
	for (int bad = 0; bad < 2; bad++) {
		e.action = bad ? (int8_t)FN_ACT_COUNT : -1;
		fn_seg_event_record(&b, &e, 77, 9);
		CU_ASSERT_PTR_NOT_NULL(strstr(b.s, " action=none "));
		fn_buf_free(&b);
		fn_seg_event_json(&e, 77, line, sizeof(line));
		CU_ASSERT_PTR_NOT_NULL(strstr(line, "\"action\":\"none\""));
	}
}

/* A slot is claimed by one thread; the others see it taken. */
static void test_slot_claim(void)
{
	int state = FN_SLOT_FREE;
	CU_ASSERT_TRUE(fn_slot_claim(&state));
	CU_ASSERT_EQUAL(state, FN_SLOT_CLAIMING);
	fn_slot_ready(&state);
	CU_ASSERT_EQUAL(state, FN_SLOT_READY);
	CU_ASSERT_FALSE(fn_slot_claim(&state));
	CU_ASSERT_EQUAL(state, FN_SLOT_READY);
}

static void test_hostile(void)
{
	struct fn_seg *s = malloc(sizeof(*s));
	memset(s, 'l', sizeof(*s)); /* 108: no NUL anywhere, no valid bool */
	s->h.ring_head = ~0ull;
	fn_seg_terminate(s, true);
	unsigned char v4;
	memcpy(&v4, &s->dests[FN_SEG_DESTS].ep.v4, 1);
	CU_ASSERT(v4 <= 1); /* a bool that is not 0 or 1 is undefined to load */
	struct fn_buf b = {0};
	uint64_t since = 0;
	fn_seg_info(s, &b);
	fn_seg_rules(s, &b);
	fn_seg_stats(s, &b);
	fn_seg_events(s, &b, &since);
	CU_ASSERT_PTR_NOT_NULL(b.s);
	CU_ASSERT(strlen(b.s) == b.len); /* no byte of the file beyond its strings */
	fn_buf_free(&b);
	free(s);
}

void add_segment_tests(void)
{
	CU_pSuite s = CU_add_suite("segment", NULL, NULL);
	CU_add_test(s, "rule name slots: found, claimed, a full table", test_slots);
	CU_add_test(s, "rule name slots: claimed side by side, in order", test_slots_in_order);
	CU_add_test(s, "rule name slots: a hostile index finds nothing", test_slots_hostile_index);
	CU_add_test(s, "records: rules in order, kept counts, dests, events", test_records);
	CU_add_test(s, "an event's record and JSON line, for both backends", test_event_formats);
	CU_add_test(s, "a slot is claimed once", test_slot_claim);
	CU_add_test(s, "a hostile state file is read without harm", test_hostile);
}
