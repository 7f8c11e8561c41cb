/* tcpbytes.c - how many bytes a TCP socket's peer has acknowledged, for the
 * stats of stalled connections. Alone in its file because it needs the
 * kernel's struct tcp_info (<linux/tcp.h>), which clashes with glibc's. */
#include <linux/tcp.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "preload/fd/tcpbytes.h"

uint64_t fn_tcp_bytes_acked(int fd)
{
	struct tcp_info ti = {0};
	socklen_t len = sizeof(ti);
	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0 ||
	    len < offsetof(struct tcp_info, tcpi_bytes_acked) + sizeof(ti.tcpi_bytes_acked))
		return 0;
	/* Linux counts the SYN of an active open in bytes_acked: one more
	 * than the payload. */
	return ti.tcpi_bytes_acked ? ti.tcpi_bytes_acked - 1 : 0;
}
