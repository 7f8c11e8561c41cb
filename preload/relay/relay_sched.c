/* relay_sched.c - the relay's ready list and timer heap (relay_sched.h). */
#include "preload/relay/relay_sched.h"

#include <stdlib.h>

#include "preload/relay/relay_conn.h"

static struct fn_conn *ready_head;
/* heap[0] has the earliest wake_ns; c->heap_at is c's index + 1 (0: not
 * in it). cap is reserved ahead, one slot per live connection. */
static struct fn_conn **heap;
static size_t count, cap, reserved;

bool fn_sched_reserve(void)
{
	if (reserved == cap) {
		size_t more = cap ? cap * 2 : 64;
		struct fn_conn **h = realloc(heap, more * sizeof(*h));
		if (!h)
			return false;
		heap = h;
		cap = more;
	}
	reserved++;
	return true;
}

void fn_sched_release(void)
{
	reserved--;
}

void fn_sched_ready(struct fn_conn *c)
{
	if (c->ready)
		return;
	c->ready = true;
	c->ready_next = ready_head;
	ready_head = c;
}

static void put(size_t i, struct fn_conn *c)
{
	heap[i] = c;
	c->heap_at = i + 1;
}

static void up(size_t i)
{
	struct fn_conn *c = heap[i];
	while (i > 0 && heap[(i - 1) / 2]->wake_ns > c->wake_ns) {
		put(i, heap[(i - 1) / 2]);
		i = (i - 1) / 2;
	}
	put(i, c);
}

static void down(size_t i)
{
	struct fn_conn *c = heap[i];
	for (;;) {
		size_t k = 2 * i + 1;
		if (k >= count)
			break;
		if (k + 1 < count && heap[k + 1]->wake_ns < heap[k]->wake_ns)
			k++;
		if (heap[k]->wake_ns >= c->wake_ns)
			break;
		put(i, heap[k]);
		i = k;
	}
	put(i, c);
}

void fn_sched_forget(struct fn_conn *c)
{
	if (!c->heap_at)
		return;
	size_t i = c->heap_at - 1;
	c->heap_at = 0;
	struct fn_conn *last = heap[--count];
	if (i == count)
		return;
	put(i, last);
	up(i);
	down(last->heap_at - 1);
}

void fn_sched_timer(struct fn_conn *c)
{
	if (c->wake_ns == UINT64_MAX) {
		fn_sched_forget(c);
		return;
	}
	if (!c->heap_at) {
		put(count++, c); /* reserved: count < cap */
		up(count - 1);
		return;
	}
	up(c->heap_at - 1);
	down(c->heap_at - 1);
}

struct fn_conn *fn_sched_take(uint64_t now)
{
	struct fn_conn *list = ready_head;
	ready_head = NULL;
	while (count && heap[0]->wake_ns <= now) {
		struct fn_conn *c = heap[0];
		fn_sched_forget(c);
		if (!c->ready) {
			c->ready = true;
			c->ready_next = list;
			list = c;
		}
	}
	return list;
}

uint64_t fn_sched_next(void)
{
	return count ? heap[0]->wake_ns : UINT64_MAX;
}

void fn_sched_atfork_child(void)
{
	ready_head = NULL;
	count = reserved = 0;
}
