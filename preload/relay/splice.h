/* splice.h - the relay thread's pipe, through which a relayed message goes
 * from one socket to the other without a copy to user space (splice(2)),
 * and what keeps it safe to share: it is empty between two steps of any
 * connection. Every call but fn_splice_lost and fn_splice_atfork_child is
 * the relay thread's, with the relay's lock held. */
#ifndef FAULTNET_SPLICE_H
#define FAULTNET_SPLICE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* How many bytes one fn_splice_in may take: 0 when the relay has no pipe
 * (pipes refused, out of fds), and then nothing goes through it. */
size_t fn_splice_room(void);

/* Moves up to n bytes from the socket src into the empty pipe: the count,
 * 0 at end of stream, -1 with errno (EAGAIN when src has none). */
ssize_t fn_splice_in(int src, size_t n);

/* Moves up to n of the pipe's bytes to the socket dst; as send(). A reset
 * dst leaves a SIGPIPE pending on the relay thread, which blocks every
 * signal: nothing is delivered, to it or to the app. */
ssize_t fn_splice_out(int dst, size_t n);

/* Takes the n bytes the pipe still holds into buf, emptying it. False if
 * it could not: the pipe is dropped (a new one is made when next needed)
 * and those bytes are lost to the caller, never to another connection. */
bool fn_splice_keep(char *buf, size_t n);

/* Whether err from a splice says splice is not to be had here (a seccomp
 * filter's EPERM, a kernel without it): then no splice is tried again in
 * this process, and the caller goes on with recv and send. */
bool fn_splice_refused(int err);

/* The app closed fd, which may be an end of the pipe. Relay's lock held. */
void fn_splice_lost(int fd);

/* After fork, in the child: the pipe is the parent's relay's. */
void fn_splice_atfork_child(void);

#endif
