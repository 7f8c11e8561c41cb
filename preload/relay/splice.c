/* splice.c - the relay thread's pipe (see splice.h). A message the relay
 * passes on untouched goes socket to pipe to socket: the pipe holds
 * references to the pages the sender's kernel filled, and the receiver's
 * read is the only copy, where a read and a send through a user buffer
 * copy it twice more. One pipe serves every connection because the pump
 * empties it before it leaves a connection: into the sending socket, or
 * into the direction's own buffer when that socket is full. */
#include "preload/relay/splice.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "preload/base/libc.h"
#include "preload/fd/fdtab.h"

#define PIPE_SIZE (256 * 1024)

static int ends[2] = {-1, -1}; /* read, write; -1 when there is none */
static size_t room;	       /* the pipe's size: at most one splice in */
static unsigned pipe_fails;    /* pipe2 failed: tried again 1 time in 64 */
static bool refused;	       /* splice itself is refused here (fn_splice_refused) */

static void close_end(int i)
{
	if (ends[i] >= 0) {
		fn_fd_set(ends[i], 0);
		LIBC(close)(ends[i]);
	}
	ends[i] = -1;
}

static void drop(void)
{
	close_end(0);
	close_end(1);
	room = 0;
}

/* A new pipe, its ends moved up among the shim's own fds as the relay's
 * sockets are, so that they never take a number the app expects free. */
static bool make(void)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
		return false;
	ends[0] = fn_fd_move_high(p[0], FN_RANGE_SINK);
	ends[1] = fn_fd_move_high(p[1], FN_RANGE_SINK);
	if (ends[0] < 0 || ends[1] < 0) { /* no number of the shim's free */
		drop();
		return false;
	}
	/* Larger than a message of 64 KiB, so that such a message does not
	 * fill it and look like a bulk transfer (see pipe_ok() in
	 * relay_pump.c); at most a 256th of the pages the kernel lets one
	 * user's pipes have before it makes new ones small. Refused: the
	 * pipe keeps its size. */
	LIBC(fcntl)(ends[1], F_SETPIPE_SZ, PIPE_SIZE);
	int size = LIBC(fcntl)(ends[1], F_GETPIPE_SZ);
	if (size <= 0) {
		drop();
		return false;
	}
	room = (size_t)size;
	return true;
}

size_t fn_splice_room(void)
{
	if (refused)
		return 0;
	if (ends[0] < 0 || ends[1] < 0) {
		drop();
		if ((pipe_fails && (++pipe_fails & 63)) || !make()) {
			pipe_fails += !pipe_fails; /* the fd limit, say */
			return 0;
		}
		pipe_fails = 0;
	}
	return room;
}

ssize_t fn_splice_in(int src, size_t n)
{
	return splice(src, NULL, ends[1], NULL, n, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
}

ssize_t fn_splice_out(int dst, size_t n)
{
	return splice(ends[0], NULL, dst, NULL, n, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
}

bool fn_splice_keep(char *buf, size_t n)
{
	while (n > 0) {
		ssize_t r = LIBC(read)(ends[0], buf, n);
		if (r <= 0 && errno != EINTR) {
			drop();
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
	refused |= no;
	return no;
}

void fn_splice_lost(int fd)
{
	if (fd >= 0 && (fd == ends[0] || fd == ends[1])) {
		ends[fd == ends[1]] = -1; /* no longer ours: never closed again */
		drop();
	}
}

void fn_splice_atfork_child(void)
{
	drop();
	pipe_fails = 0;
}
