/* queue.c - the byte queue of queue.h. It compacts before it grows, so a queue
 * that is drained as fast as it fills keeps its first allocation. */
#include "preload/base/queue.h"

#include <stdlib.h>
#include <string.h>

bool fn_queue_add(struct fn_queue *b, const void *p, size_t n)
{
	if (b->lo == b->len)
		b->lo = b->len = 0;
	if (b->len + n > b->cap) {
		if (b->lo) {
			memmove(b->s, b->s + b->lo, b->len - b->lo);
			b->len -= b->lo;
			b->lo = 0;
		}
		size_t cap = b->cap ? b->cap : 16384;
		while (cap < b->len + n)
			cap *= 2;
		char *s = cap == b->cap ? b->s : realloc(b->s, cap);
		if (!s)
			return false;
		b->s = s;
		b->cap = cap;
	}
	if (n)
		memcpy(b->s + b->len, p, n);
	b->len += n;
	return true;
}

size_t fn_queue_take(struct fn_queue *b, void *dst, size_t n)
{
	if (n > fn_queue_pending(b))
		n = fn_queue_pending(b);
	if (n)
		memcpy(dst, b->s + b->lo, n);
	b->lo += n;
	return n;
}

void fn_queue_free(struct fn_queue *b)
{
	free(b->s);
	*b = (struct fn_queue){0};
}
