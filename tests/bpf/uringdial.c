/* uringdial.c - an io_uring client for the kernel-side backend's tests: one
 * TCP connect submitted through io_uring (IORING_OP_CONNECT, linked to a
 * timeout), which no libc connect() wrapper sees. Prints "ok", or the
 * kernel's error for the connect (strerror of -cqe->res), and the time.
 * usage: uringdial IPV4 PORT TIMEOUT_MS */
#include <arpa/inet.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int main(int argc, char **argv)
{
	if (argc != 4)
		return 2;
	struct io_uring ring;
	if (io_uring_queue_init(4, &ring, 0) < 0)
		return 3;
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2]))};
	inet_pton(AF_INET, argv[1], &sa.sin_addr);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	long ms = atol(argv[3]);
	struct __kernel_timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
	struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
	io_uring_prep_connect(sqe, fd, (struct sockaddr *)&sa, sizeof(sa));
	sqe->flags |= IOSQE_IO_LINK;
	sqe->user_data = 1;
	sqe = io_uring_get_sqe(&ring);
	io_uring_prep_link_timeout(sqe, &ts, 0);
	sqe->user_data = 2;
	long t0 = now_ms();
	io_uring_submit(&ring);
	int res = 0;
	for (int seen = 0; seen < 2; seen++) {
		struct io_uring_cqe *cqe;
		if (io_uring_wait_cqe(&ring, &cqe) < 0)
			return 4;
		if (cqe->user_data == 1)
			res = cqe->res;
		io_uring_cqe_seen(&ring, cqe);
	}
	printf("%s (%ld ms)\n", res == 0 ? "ok" : strerror(-res), now_ms() - t0);
	close(fd);
	io_uring_queue_exit(&ring);
	return 0;
}
