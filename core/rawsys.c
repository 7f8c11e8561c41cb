/* rawsys.c - reads and closes through syscall() (core/rawsys.h). */
#include "core/rawsys.h"

#include <errno.h>

#include "core/startdata.h"

FN_START_TEXT ssize_t fn_read_raw(int fd, void *buf, size_t n)
{
	size_t got = 0;
	while (got < n) {
		long r = syscall(SYS_pread64, fd, (char *)buf + got, n - got, (off_t)got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r == 0)
			break;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

void fn_close_raw(int fd)
{
	syscall(SYS_close, fd);
}
