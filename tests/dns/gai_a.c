/* gai_a.c - getaddrinfo_a as an app uses it, for dns_test.py.
 * usage: gai_a wait|nowait NAME...
 * wait: one GAI_WAIT call; nowait: GAI_NOWAIT with a SIGEV_THREAD
 * notification, gai_suspend until every request is done. Prints one JSON
 * line: the call's result, each request's gai_error and first address,
 * the notifications and when the last came (ms after the call). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netdb.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int notices;
static double t0, notice_ms = -1;

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void noticed(union sigval v)
{
	(void)v;
	notice_ms = now_ms() - t0;
	__atomic_add_fetch(&notices, 1, __ATOMIC_SEQ_CST);
}

static int pending(struct gaicb **list, int n)
{
	int k = 0;
	for (int i = 0; i < n; i++)
		k += gai_error(list[i]) == EAI_INPROGRESS;
	return k;
}

int main(int argc, char **argv)
{
	int n = argc - 2;
	if (n < 1)
		return 2;
	struct gaicb *list[n];
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM};
	for (int i = 0; i < n; i++) {
		list[i] = calloc(1, sizeof(struct gaicb));
		list[i]->ar_name = argv[i + 2];
		list[i]->ar_request = &hints;
	}
	struct sigevent ev = {.sigev_notify = SIGEV_THREAD, .sigev_notify_function = noticed};
	bool wait = strcmp(argv[1], "wait") == 0;
	t0 = now_ms();
	int rc = getaddrinfo_a(wait ? GAI_WAIT : GAI_NOWAIT, list, n, wait ? NULL : &ev);
	while (!wait && pending(list, n))
		gai_suspend((const struct gaicb *const *)list, n, NULL);
	double done_ms = now_ms() - t0;
	for (int i = 0; !wait && i < 500 && !__atomic_load_n(&notices, __ATOMIC_SEQ_CST); i++)
		usleep(10000);
	printf(
	    "{\"rc\": %d, \"done_ms\": %.0f, \"notices\": %d, \"notice_ms\": %.0f, \"results\": [",
	    rc, done_ms, notices, notice_ms);
	for (int i = 0; i < n; i++) {
		char addr[64] = "";
		struct addrinfo *ai = list[i]->ar_result;
		if (ai && ai->ai_family == AF_INET)
			inet_ntop(AF_INET, &((struct sockaddr_in *)ai->ai_addr)->sin_addr, addr,
				  sizeof(addr));
		printf("%s[%d, \"%s\"]", i ? ", " : "", gai_error(list[i]), addr);
	}
	printf("]}\n");
	return 0;
}
