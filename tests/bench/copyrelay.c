/* copyrelay.c - a plain user-space TCP relay, the benchmark's baseline for
 * what any relay can do on this machine: accept on LISTEN_PORT, connect to
 * the server, and copy each direction in a thread of its own through a
 * 1 MiB buffer with blocking read and write.
 *
 *   copyrelay LISTEN_IP LISTEN_PORT SERVER_IP SERVER_PORT
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static struct sockaddr_in server;

struct pipe_ends {
	int from, to;
};

static struct sockaddr_in addr(const char *ip, const char *port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(port))};
	inet_pton(AF_INET, ip, &a.sin_addr);
	return a;
}

static void *copy(void *arg)
{
	struct pipe_ends *p = arg;
	char *buf = malloc(1 << 20);
	ssize_t n;
	while (buf && (n = read(p->from, buf, 1 << 20)) > 0)
		for (ssize_t off = 0; off < n;) {
			ssize_t w = write(p->to, buf + off, (size_t)(n - off));
			if (w <= 0)
				goto out;
			off += w;
		}
out:
	shutdown(p->to, SHUT_WR);
	free(buf);
	return NULL;
}

static void *serve(void *arg)
{
	int c = (int)(intptr_t)arg, one = 1;
	int s = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(s, (struct sockaddr *)&server, sizeof(server)) < 0) {
		close(c);
		close(s);
		return NULL;
	}
	setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	struct pipe_ends up = {c, s}, down = {s, c};
	pthread_t t;
	pthread_create(&t, NULL, copy, &up);
	copy(&down);
	pthread_join(t, NULL);
	close(c);
	close(s);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 5)
		return 2;
	struct sockaddr_in a = addr(argv[1], argv[2]);
	server = addr(argv[3], argv[4]);
	int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 64) < 0)
		return 1;
	printf("ready\n");
	fflush(stdout);
	for (;;) {
		int c = accept(l, NULL, NULL);
		pthread_t t;
		if (c >= 0 && pthread_create(&t, NULL, serve, (void *)(intptr_t)c) == 0)
			pthread_detach(t);
	}
}
