/* test_policy.c - the reclamation of replaced policies (preload/base/
 * policy.c): a policy a section holds is never freed, however many
 * replacements pass meanwhile; one nobody holds is freed at the next
 * replacement; nested sections, a fork child and a full slot table keep
 * that true. The policies here are freed through a recorder, which
 * poisons them first, so that a reader of a freed one sees it. */
#include <CUnit/CUnit.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "preload/base/policy.h"

#define MAGIC 12345

static struct fn_policy *freed[4096];
static size_t nfreed;

static void record_free(struct fn_policy *p)
{
	if (nfreed < sizeof(freed) / sizeof(freed[0]))
		freed[nfreed] = p;
	nfreed++;
	__atomic_store_n(&p->self_zone, -1, __ATOMIC_RELAXED);
	free(p);
}

static bool was_freed(const struct fn_policy *p)
{
	for (size_t i = 0; i < nfreed && i < sizeof(freed) / sizeof(freed[0]); i++)
		if (freed[i] == p)
			return true;
	return false;
}

static struct fn_policy *made(void)
{
	struct fn_policy *p = calloc(1, sizeof(*p));
	p->self_zone = MAGIC;
	p->active_protos = FN_PROTO_TCP;
	return p;
}

static void start(void)
{
	fn_policy_reclaim_with(record_free);
	fn_policy_replace(NULL);
	fn_policy_replace(NULL); /* whatever an earlier test left is gone */
	nfreed = 0;
}

static void finish(void)
{
	fn_policy_replace(NULL);
	fn_policy_replace(NULL);
	fn_policy_reclaim_with(NULL);
}

/* Item 19 of issue 38: a reader paused inside a lookup longer than the
 * old 60 s grace read freed memory. Time plays no part now: 1,000
 * replacements pass while the section is open. */
static void test_held_across_replacements(void)
{
	start();
	struct fn_policy *first = made();
	fn_policy_replace(first);
	struct fn_policy_hold h;
	CU_ASSERT_PTR_EQUAL(fn_policy_enter(&h), first);
	for (int i = 0; i < 1000; i++)
		fn_policy_replace(made());
	CU_ASSERT_FALSE(was_freed(first));
	CU_ASSERT_EQUAL(h.p->self_zone, MAGIC);
	CU_ASSERT_EQUAL(nfreed, 999); /* every other replaced one */
	fn_policy_exit(&h);
	fn_policy_replace(made());
	CU_ASSERT_TRUE(was_freed(first));
	CU_ASSERT_EQUAL(fn_policy_summary(), FN_PS_ANY | FN_PS_TCP);
	finish();
}

/* A signal handler's section inside its thread's section: each holds its
 * own policy, and the outer one stays held after the inner one ends. */
static void test_nested_sections(void)
{
	start();
	struct fn_policy *p1 = made(), *p2 = made();
	fn_policy_replace(p1);
	struct fn_policy_hold outer, inner;
	fn_policy_enter(&outer);
	fn_policy_replace(p2);
	CU_ASSERT_PTR_EQUAL(fn_policy_enter(&inner), p2);
	CU_ASSERT_NOT_EQUAL(inner.serial, outer.serial);
	fn_policy_replace(made());
	CU_ASSERT_EQUAL(nfreed, 0);
	fn_policy_exit(&inner);
	fn_policy_replace(made());
	CU_ASSERT_TRUE(was_freed(p2));
	CU_ASSERT_FALSE(was_freed(p1));
	CU_ASSERT_EQUAL(outer.p->self_zone, MAGIC);
	fn_policy_exit(&outer);
	fn_policy_replace(made());
	CU_ASSERT_TRUE(was_freed(p1));
	CU_ASSERT_EQUAL(fn_policy_mine.depth, 0);
	finish();
}

struct holder {
	int go[2], done[2];
	struct fn_policy_hold h;
};

static void *hold_until_told(void *arg)
{
	struct holder *t = arg;
	char c;
	fn_policy_enter(&t->h);
	if (write(t->done[1], "h", 1) != 1 || read(t->go[0], &c, 1) != 1)
		c = 0;
	fn_policy_exit(&t->h);
	return NULL;
}

/* In a fork child only the forking thread exists: what the parent's other
 * threads held is freed there, what the forking thread holds is not. */
static void test_fork_child(void)
{
	start();
	struct fn_policy *mine = made(), *theirs = made();
	fn_policy_replace(mine);
	struct fn_policy_hold h;
	fn_policy_enter(&h);
	fn_policy_replace(theirs);
	struct holder t;
	CU_ASSERT_EQUAL(pipe(t.go) + pipe(t.done), 0);
	pthread_t th;
	pthread_create(&th, NULL, hold_until_told, &t);
	char c;
	CU_ASSERT_EQUAL(read(t.done[0], &c, 1), 1);
	CU_ASSERT_PTR_EQUAL(t.h.p, theirs);
	pid_t pid = fork();
	if (pid == 0) {
		fn_policy_atfork_child();
		fn_policy_replace(made());
		int bad = (was_freed(theirs) ? 0 : 1) | (was_freed(mine) ? 2 : 0);
		fn_policy_exit(&h);
		fn_policy_replace(made());
		bad |= was_freed(mine) ? 0 : 4;
		_exit(bad);
	}
	int st = -1;
	waitpid(pid, &st, 0);
	CU_ASSERT_TRUE(WIFEXITED(st));
	CU_ASSERT_EQUAL(WEXITSTATUS(st), 0);
	/* In the parent the other thread still holds theirs. */
	fn_policy_replace(made());
	CU_ASSERT_FALSE(was_freed(theirs));
	CU_ASSERT_EQUAL(write(t.go[1], "g", 1), 1);
	pthread_join(th, NULL);
	fn_policy_exit(&h);
	fn_policy_replace(made());
	CU_ASSERT_TRUE(was_freed(theirs) && was_freed(mine));
	for (int i = 0; i < 2; i++) {
		close(t.go[i]);
		close(t.done[i]);
	}
	finish();
}

/* Every slot held (here by nested sections): the next replacement keeps
 * the policy it replaces for good instead of freeing anything held. */
static void test_every_slot_held(void)
{
	start();
	static struct fn_policy_hold h[FN_POLICY_SLOTS + 2];
	static struct fn_policy *p[FN_POLICY_SLOTS + 2];
	uint64_t kept = fn_policy_kept;
	for (int i = 0; i < FN_POLICY_SLOTS + 2; i++) {
		fn_policy_replace(p[i] = made());
		fn_policy_enter(&h[i]);
	}
	CU_ASSERT_EQUAL(nfreed, 0);
	CU_ASSERT_EQUAL(fn_policy_kept - kept, 2);
	for (int i = 0; i < FN_POLICY_SLOTS + 2; i++)
		CU_ASSERT_EQUAL(h[i].p->self_zone, MAGIC);
	for (int i = FN_POLICY_SLOTS + 1; i >= 0; i--)
		fn_policy_exit(&h[i]);
	fn_policy_replace(made());
	/* All but the two kept (those the last slot held before). */
	CU_ASSERT_EQUAL(nfreed, FN_POLICY_SLOTS);
	CU_ASSERT_FALSE(was_freed(p[FN_POLICY_SLOTS - 1]) || was_freed(p[FN_POLICY_SLOTS]));
	free(p[FN_POLICY_SLOTS - 1]);
	free(p[FN_POLICY_SLOTS]);
	finish();
}

/* The table as a process starts with it: zero-filled (it lives in .bss),
 * so slot 0, in force with no policy, is not marked used. The first
 * replacement must still take another slot: a reader may be between
 * reading slot 0's serial and its policy, which must stay a pair. */
static void test_first_replacement(void)
{
	start();
	finish(); /* every policy freed: the slots hold none */
	memset(fn_policy_slots, 0, sizeof(fn_policy_slots));
	fn_policy_cur = 0;
	struct fn_policy_hold h;
	CU_ASSERT_PTR_NULL(fn_policy_enter(&h));
	uint64_t serial = h.serial;
	fn_policy_reclaim_with(record_free);
	struct fn_policy *p = made();
	fn_policy_replace(p);
	CU_ASSERT_NOT_EQUAL(fn_policy_cur, 0);
	CU_ASSERT_PTR_NULL(fn_policy_slots[0].p);
	CU_ASSERT_EQUAL(fn_policy_slots[0].serial, serial);
	fn_policy_exit(&h);
	CU_ASSERT_PTR_EQUAL(fn_policy_enter(&h), p);
	fn_policy_exit(&h);
	finish();
}

static volatile bool stop;
static uint64_t bad_reads;

static void *reader(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		struct fn_policy_hold h;
		const struct fn_policy *p = fn_policy_enter(&h);
		for (int i = 0; p && i < 50; i++)
			if (__atomic_load_n(&p->self_zone, __ATOMIC_RELAXED) != MAGIC)
				__atomic_add_fetch(&bad_reads, 1, __ATOMIC_RELAXED);
		fn_policy_exit(&h);
	}
	return NULL;
}

/* Readers on four threads against 20,000 replacements: none ever reads a
 * freed policy (poisoned first; ASan sees the free itself). */
static void test_readers_against_replacements(void)
{
	start();
	fn_policy_replace(made());
	pthread_t th[4];
	stop = false;
	for (int i = 0; i < 4; i++)
		pthread_create(&th[i], NULL, reader, NULL);
	for (int i = 0; i < 20000; i++)
		fn_policy_replace(made());
	__atomic_store_n(&stop, true, __ATOMIC_RELAXED);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	CU_ASSERT_EQUAL(bad_reads, 0);
	CU_ASSERT_TRUE(nfreed >= 19000);
	finish();
}

void add_reclaim_tests(void)
{
	CU_pSuite s = CU_add_suite("reclaim", NULL, NULL);
	CU_add_test(s, "i38.19: a held policy outlives 1,000 replacements, then is freed",
		    test_held_across_replacements);
	CU_add_test(s, "i38.19: nested sections (a signal handler's) hold their own policies",
		    test_nested_sections);
	CU_add_test(s, "i38.19: a fork child frees what only other threads held", test_fork_child);
	CU_add_test(s, "i38.19: every slot held: the replaced policy is kept, nothing freed",
		    test_every_slot_held);
	CU_add_test(s, "i42.data: a fresh table's first replacement takes a slot not in force",
		    test_first_replacement);
	CU_add_test(s, "i38.19: 4 reader threads against 20,000 replacements",
		    test_readers_against_replacements);
}
