/* relay_shard.h - one relay thread's state. The relay runs as up to
 * FN_SHARDS threads (shards), each with the same loop (relay.c) over its own
 * connections: its mutex, epoll fd, eventfd, list of connections, ready
 * list and timer heap, and splice pipe. On 2 CPUs a single relay thread was
 * the bottleneck at 1,000 connections (its kernel TCP and splice work; issue
 * 42): a second shard gets connections once the first holds FN_SHARD_AFTER
 * and the process may run on two CPUs. A connection stays on the shard that
 * took it (c->shard) for its whole life; everything it does uses that
 * shard's lock, epoll fd, schedule and pipe.
 *
 * Lock order: a shard's mutex is never held with another shard's; app
 * threads that must look at every shard (a closed fd, exit, fork) take the
 * mutexes one after the other, in index order. */
#ifndef FAULTNET_RELAY_SHARD_H
#define FAULTNET_RELAY_SHARD_H

#include <pthread.h>
#include <stdbool.h>

#include "preload/relay/relay_sched.h"
#include "preload/relay/splice.h"

#define FN_SHARDS 2
/* Live connections on shard 0 before a second shard takes any: below it
 * one thread carries them at no loss (at 10 connections the relay was 0.97
 * of haproxy's two threads), and a second thread costs a thread and fds.
 * Measured with tests/bench/conc: two shards against one, 1.08x at 20
 * connections (16 and 4), 1.20x at 32, about 1.3x at 100 and 1,000. */
#define FN_SHARD_AFTER 16

struct fn_conn;
struct fn_dgram;

struct fn_shard {
	pthread_mutex_t lock;
	struct fn_conn *conns; /* every connection it carries */
	unsigned live;	       /* how many: read without the lock to choose a shard */
	int epfd, wakefd;      /* wakefd: -1 once the app has closed it */
	bool running;	       /* its thread started */
	/* The app closed the shard's epoll fd or eventfd (a sweep of unknown
	 * fds): the thread builds new ones. */
	bool rebuild_wanted;
	struct fn_sched sched;
	struct fn_pipe pipe;
	int index;
};

#endif
