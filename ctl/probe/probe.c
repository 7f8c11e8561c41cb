/* probe.c - faultnet-probe URL STATUS TIMEOUT_MS: one HTTP GET for a
 * scenario's url probe; exits 0 when the answer's status is STATUS within
 * the timeout, 1 otherwise. A program of its own (not faultctl) so that it
 * can run under the shim and meet the faults the app meets. */
#include <netdb.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static long long ms_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

/* Waits for fd to be ready for events until deadline; false on timeout. */
static bool ready(int fd, short events, long long deadline)
{
	struct pollfd p = {fd, events, 0};
	long long left = deadline - ms_now();
	return left > 0 && poll(&p, 1, (int)left) == 1;
}

int main(int argc, char **argv)
{
	if (argc != 4 || strncmp(argv[1], "http://", 7) != 0) {
		fprintf(stderr,
			"usage: faultnet-probe http://HOST[:PORT][/PATH] STATUS TIMEOUT_MS\n");
		return 2;
	}
	long long deadline = ms_now() + atoll(argv[3]);
	char host[256], port[16] = "80";
	const char *h = argv[1] + 7, *path = strchr(h, '/');
	size_t hl = path ? (size_t)(path - h) : strlen(h);
	snprintf(host, sizeof(host), "%.*s", (int)hl, h);
	char *colon = strrchr(host, ':');
	if (colon && !strchr(colon, ']')) {
		snprintf(port, sizeof(port), "%s", colon + 1);
		*colon = '\0';
	}
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai;
	if (getaddrinfo(host, port, &hints, &ai) != 0)
		return 1;
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (fd < 0 ||
	    (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 && !ready(fd, POLLOUT, deadline)))
		return 1;
	char req[2048], buf[512];
	int n =
	    snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: %.*s\r\nConnection: close\r\n\r\n",
		     path ? path : "/", (int)hl, h);
	if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n)
		return 1;
	ssize_t got = 0, r;
	while (got < 12 && ready(fd, POLLIN, deadline) &&
	       (r = recv(fd, buf + got, sizeof(buf) - 1 - (size_t)got, 0)) > 0)
		got += r;
	buf[got > 0 ? got : 0] = '\0';
	return got >= 12 && strncmp(buf, "HTTP/1.", 7) == 0 && atoi(buf + 9) == atoi(argv[2]) ? 0
											      : 1;
}
