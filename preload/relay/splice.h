/* splice.h - a relay shard's pipe, through which a relayed message goes
 * from one socket to the other without a copy to user space (splice(2)),
 * and what keeps it safe to share among the shard's connections: it is
 * empty between two steps of any connection. Each shard (relay_shard.h)
 * has its own. Every call but fn_splice_lost and fn_splice_atfork_child is
 * the shard's thread's, with the shard's lock held. */
#ifndef FAULTNET_SPLICE_H
#define FAULTNET_SPLICE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* A pipe: ends read, write (-1 when there is none; {-1, -1} to start), its
 * size (at most one splice in), and pipe2 failures in a row (then tried
 * again 1 time in 64). */
struct fn_pipe {
	int ends[2];
	size_t room;
	unsigned fails;
};

/* How many bytes one fn_splice_in may take: 0 when the relay has no pipe
 * (pipes refused, out of fds), and then nothing goes through it. */
size_t fn_splice_room(struct fn_pipe *p);

/* Moves up to n bytes from the socket src into the empty pipe: the count,
 * 0 at end of stream, -1 with errno (EAGAIN when src has none). */
ssize_t fn_splice_in(struct fn_pipe *p, int src, size_t n);

/* Moves up to n of the pipe's bytes to the socket dst; as send(). A reset
 * dst leaves a SIGPIPE pending on the relay thread, which blocks every
 * signal: nothing is delivered, to it or to the app. */
ssize_t fn_splice_out(struct fn_pipe *p, int dst, size_t n);

/* Takes the n bytes the pipe still holds into buf, emptying it. False if
 * it could not: the pipe is dropped (a new one is made when next needed)
 * and those bytes are lost to the caller, never to another connection. */
bool fn_splice_keep(struct fn_pipe *p, char *buf, size_t n);

/* Whether err from a splice says splice is not to be had here (a seccomp
 * filter's EPERM, a kernel without it): then no splice is tried again in
 * this process (no shard), and the caller goes on with recv and send. */
bool fn_splice_refused(int err);

/* The app closed fd, which may be an end of the pipe. Shard's lock held. */
void fn_splice_lost(struct fn_pipe *p, int fd);

/* After fork, in the child: the pipe is the parent's relay's. */
void fn_splice_atfork_child(struct fn_pipe *p);

#endif
