/* relay_sched.c - a relay shard's ready list and timer heap (relay_sched.h). */
#include "preload/relay/relay_sched.h"

#include <stdlib.h>

#include "preload/relay/relay_conn.h"
#include "preload/relay/relay_shard.h"

/* The schedule of c's shard. */
static struct fn_sched *of(const struct fn_conn *c)
{
	return &c->shard->sched;
}

bool fn_sched_reserve(struct fn_sched *s)
{
	if (s->reserved == s->cap) {
		size_t more = s->cap ? s->cap * 2 : 64;
		struct fn_conn **h = realloc(s->heap, more * sizeof(*h));
		if (!h)
			return false;
		s->heap = h;
		s->cap = more;
	}
	s->reserved++;
	return true;
}

void fn_sched_release(struct fn_sched *s)
{
	s->reserved--;
}

void fn_sched_ready(struct fn_conn *c)
{
	if (c->ready)
		return;
	struct fn_sched *s = of(c);
	c->ready = true;
	c->ready_next = s->ready_head;
	s->ready_head = c;
}

static void put(struct fn_sched *s, size_t i, struct fn_conn *c)
{
	s->heap[i] = c;
	c->heap_at = i + 1;
}

static void up(struct fn_sched *s, size_t i)
{
	struct fn_conn **heap = s->heap, *c = heap[i];
	while (i > 0 && heap[(i - 1) / 2]->wake_ns > c->wake_ns) {
		put(s, i, heap[(i - 1) / 2]);
		i = (i - 1) / 2;
	}
	put(s, i, c);
}

static void down(struct fn_sched *s, size_t i)
{
	struct fn_conn **heap = s->heap, *c = heap[i];
	for (;;) {
		size_t k = 2 * i + 1;
		if (k >= s->count)
			break;
		if (k + 1 < s->count && heap[k + 1]->wake_ns < heap[k]->wake_ns)
			k++;
		if (heap[k]->wake_ns >= c->wake_ns)
			break;
		put(s, i, heap[k]);
		i = k;
	}
	put(s, i, c);
}

static void forget(struct fn_sched *s, struct fn_conn *c)
{
	if (!c->heap_at)
		return;
	size_t i = c->heap_at - 1;
	c->heap_at = 0;
	struct fn_conn *last = s->heap[--s->count];
	if (i == s->count)
		return;
	put(s, i, last);
	up(s, i);
	down(s, last->heap_at - 1);
}

void fn_sched_forget(struct fn_conn *c)
{
	forget(of(c), c);
}

void fn_sched_timer(struct fn_conn *c)
{
	struct fn_sched *s = of(c);
	if (c->wake_ns == UINT64_MAX) {
		forget(s, c);
		return;
	}
	if (!c->heap_at) {
		put(s, s->count++, c); /* reserved: count < cap */
		up(s, s->count - 1);
		return;
	}
	up(s, c->heap_at - 1);
	down(s, c->heap_at - 1);
}

struct fn_conn *fn_sched_take(struct fn_sched *s, uint64_t now)
{
	struct fn_conn *list = s->ready_head;
	s->ready_head = NULL;
	while (s->count && s->heap[0]->wake_ns <= now) {
		struct fn_conn *c = s->heap[0];
		forget(s, c);
		if (!c->ready) {
			c->ready = true;
			c->ready_next = list;
			list = c;
		}
	}
	return list;
}

uint64_t fn_sched_next(const struct fn_sched *s)
{
	return s->count ? s->heap[0]->wake_ns : UINT64_MAX;
}

void fn_sched_atfork_child(struct fn_sched *s)
{
	s->ready_head = NULL;
	s->count = s->reserved = 0;
}
