/* splice.c - a relay shard's pipe (see splice.h). A message the relay
 * passes on untouched goes socket to pipe to socket: the pipe holds
 * references to the pages the sender's kernel filled, and the receiver's
 * read is the only copy, where a read and a send through a user buffer
 * copy it twice more. One pipe serves every connection of a shard because
 * the pump empties it before it leaves a connection: into the sending
 * socket, or into the direction's own buffer when that socket is full. */
#include "preload/relay/splice.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "preload/base/libc.h"
#include "preload/fd/fdtab.h"

#define PIPE_SIZE (256 * 1024)

/* splice itself is refused here (fn_splice_refused): for every shard. */
static bool refused;

static void close_end(struct fn_pipe *p, int i)
{
	if (p->ends[i] >= 0) {
		fn_fd_set(p->ends[i], 0);
		LIBC(close)(p->ends[i]);
	}
	p->ends[i] = -1;
}

static void drop(struct fn_pipe *p)
{
	close_end(p, 0);
	close_end(p, 1);
	p->room = 0;
}

/* A new pipe, its ends moved up among the shim's own fds as the relay's
 * sockets are, so that they never take a number the app expects free. */
static bool make(struct fn_pipe *p)
{
	int fds[2];
	if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) < 0)
		return false;
	p->ends[0] = fn_fd_move_high(fds[0], FN_RANGE_SINK);
	p->ends[1] = fn_fd_move_high(fds[1], FN_RANGE_SINK);
	if (p->ends[0] < 0 || p->ends[1] < 0) { /* no number of the shim's free */
		drop(p);
		return false;
	}
	/* Larger than a message of 64 KiB, so that such a message does not
	 * fill it and look like a bulk transfer (see pipe_ok() in
	 * relay_pump.c); at most a 256th of the pages the kernel lets one
	 * user's pipes have before it makes new ones small. Refused: the
	 * pipe keeps its size. */
	LIBC(fcntl)(p->ends[1], F_SETPIPE_SZ, PIPE_SIZE);
	int size = LIBC(fcntl)(p->ends[1], F_GETPIPE_SZ);
	if (size <= 0) {
		drop(p);
		return false;
	}
	p->room = (size_t)size;
	return true;
}

size_t fn_splice_room(struct fn_pipe *p)
{
	if (__atomic_load_n(&refused, __ATOMIC_RELAXED))
		return 0;
	if (p->ends[0] < 0 || p->ends[1] < 0) {
		drop(p);
		if ((p->fails && (++p->fails & 63)) || !make(p)) {
			p->fails += !p->fails; /* the fd limit, say */
			return 0;
		}
		p->fails = 0;
	}
	return p->room;
}

ssize_t fn_splice_in(struct fn_pipe *p, int src, size_t n)
{
	return splice(src, NULL, p->ends[1], NULL, n, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
}

ssize_t fn_splice_out(struct fn_pipe *p, int dst, size_t n)
{
	return splice(p->ends[0], NULL, dst, NULL, n, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
}

bool fn_splice_keep(struct fn_pipe *p, char *buf, size_t n)
{
	while (n > 0) {
		ssize_t r = LIBC(read)(p->ends[0], buf, n);
		if (r <= 0 && errno != EINTR) {
			drop(p);
			return false;
		}
		if (r > 0) {
			buf += r;
			n -= (size_t)r;
		}
	}
	return true;
}

bool fn_splice_refused(int err)
{
	bool no =
	    err == EPERM || err == EACCES || err == ENOSYS || err == EINVAL || err == EOPNOTSUPP;
	if (no)
		__atomic_store_n(&refused, true, __ATOMIC_RELAXED);
	return no;
}

void fn_splice_lost(struct fn_pipe *p, int fd)
{
	if (fd >= 0 && (fd == p->ends[0] || fd == p->ends[1])) {
		p->ends[fd == p->ends[1]] = -1; /* no longer ours: never closed again */
		drop(p);
	}
}

void fn_splice_atfork_child(struct fn_pipe *p)
{
	drop(p);
	p->fails = 0;
}
