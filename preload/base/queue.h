/* queue.h - a growing byte queue: bytes added at the end and taken from the
 * front, for what the relay's HTTP engine and its HTTP/2 sessions hold until
 * a socket or a session takes it. */
#ifndef FAULTNET_QUEUE_H
#define FAULTNET_QUEUE_H

#include <stdbool.h>
#include <stddef.h>

/* The bytes [lo, len) of s wait; cap is s's size. All zero is empty. */
struct fn_queue {
	char *s;
	size_t lo, len, cap;
};

static inline size_t fn_queue_pending(const struct fn_queue *b)
{
	return b->len - b->lo;
}

/* Appends n bytes; false (nothing added) when memory runs out. */
bool fn_queue_add(struct fn_queue *b, const void *p, size_t n);

/* Moves up to n waiting bytes into dst; returns how many. */
size_t fn_queue_take(struct fn_queue *b, void *dst, size_t n);

void fn_queue_free(struct fn_queue *b);

#endif
