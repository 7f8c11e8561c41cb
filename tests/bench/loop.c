/* loop.c - the hot-path benchmark: a single-threaded loopback TCP loop of
 * send + poll + recv, N iterations. Run under callgrind with and without
 * the shim; the difference in instructions between two values of N, divided
 * by the difference in N, is the cost per iteration without start-up.
 * `loop N udp` sends each byte as an addressed UDP datagram (sendto) and
 * receives it: the path every datagram to an uncovered address takes.
 * `loop N udpsock` opens a UDP socket, sends one datagram from it and
 * closes it, N times: what a socket no rule can cover costs in all. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

static int udp(long n)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	int s = socket(AF_INET, SOCK_DGRAM, 0), c = socket(AF_INET, SOCK_DGRAM, 0);
	if (s < 0 || c < 0 || bind(s, (struct sockaddr *)&a, len) < 0 ||
	    getsockname(s, (struct sockaddr *)&a, &len) < 0)
		return 1;
	char b = 'x';
	for (long i = 0; i < n; i++)
		if (sendto(c, &b, 1, 0, (struct sockaddr *)&a, len) != 1 || recv(s, &b, 1, 0) != 1)
			return 1;
	printf("%ld datagrams\n", n);
	return 0;
}

/* socket + sendto + close, n times, to a bound socket that never reads
 * (the kernel drops what its buffer cannot hold). */
static int udp_sockets(long n)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	if (s < 0 || bind(s, (struct sockaddr *)&a, len) < 0 ||
	    getsockname(s, (struct sockaddr *)&a, &len) < 0)
		return 1;
	char b = 'x';
	for (long i = 0; i < n; i++) {
		int c = socket(AF_INET, SOCK_DGRAM, 0);
		if (c < 0 || sendto(c, &b, 1, 0, (struct sockaddr *)&a, len) != 1 || close(c) < 0)
			return 1;
	}
	printf("%ld sockets\n", n);
	return 0;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 100000;
	if (argc > 2)
		return argv[2][3] == 's' ? udp_sockets(n) : udp(n);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	int l = socket(AF_INET, SOCK_STREAM, 0);
	if (l < 0 || bind(l, (struct sockaddr *)&a, len) < 0 || listen(l, 1) < 0 ||
	    getsockname(l, (struct sockaddr *)&a, &len) < 0)
		return 1;
	int c = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(c, (struct sockaddr *)&a, len) < 0)
		return 1;
	int s = accept(l, NULL, NULL);
	char b = 'x';
	struct pollfd p = {.fd = s, .events = POLLIN};
	for (long i = 0; i < n; i++) {
		if (send(c, &b, 1, 0) != 1 || poll(&p, 1, -1) != 1 || recv(s, &b, 1, 0) != 1)
			return 1;
	}
	printf("%ld iterations\n", n);
	return 0;
}
