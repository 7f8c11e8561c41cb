/* dns_race.c - resolver calls racing each other, for dns_test.py.
 * usage: dns_race reuse SECONDS ANSWERED GLIBC
 *        dns_race fork COUNT NAME
 * reuse: 4 threads, each round 8 GAI_NOWAIT requests (the odd ones
 * ANSWERED, the even ones GLIBC), polled with gai_error until done, then
 * freed and their memory scribbled over, as an app may once a request is
 * done. Prints "rounds N bad K".
 * fork: 4 threads resolve NAME without a pause while the main thread forks
 * COUNT children that each resolve NAME once and exit; a child that has
 * not ended within 5 s is stuck. Prints "forks N stuck K". */
#define _GNU_SOURCE
#include <netdb.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <pthread.h>

#define THREADS 4
#define REQS 8

static const char *answered, *glibc_name;
static double until;
static int rounds, bad;
static volatile int stop;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void one_round(void)
{
	struct gaicb *list[REQS];
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM};
	for (int i = 0; i < REQS; i++) {
		list[i] = calloc(1, sizeof(struct gaicb));
		list[i]->ar_name = i % 2 ? answered : glibc_name;
		list[i]->ar_request = &hints;
	}
	if (getaddrinfo_a(GAI_NOWAIT, list, REQS, NULL) != 0) {
		__atomic_add_fetch(&bad, 1, __ATOMIC_RELAXED);
		return;
	}
	for (int i = 0; i < REQS; i++) {
		while (gai_error(list[i]) == EAI_INPROGRESS)
			usleep(100);
		if (gai_error(list[i]) != 0)
			__atomic_add_fetch(&bad, 1, __ATOMIC_RELAXED);
		freeaddrinfo(list[i]->ar_result);
		/* Done: the request is the app's again. */
		memset(list[i], 0xa5, sizeof(struct gaicb));
		free(list[i]);
	}
	/* The freed memory is used for something else at once. */
	void *junk[REQS];
	for (int i = 0; i < REQS; i++) {
		junk[i] = malloc(sizeof(struct gaicb));
		memset(junk[i], 0x5a, sizeof(struct gaicb));
	}
	for (int i = 0; i < REQS; i++)
		free(junk[i]);
	__atomic_add_fetch(&rounds, 1, __ATOMIC_RELAXED);
}

static void *reuser(void *arg)
{
	(void)arg;
	while (now() < until)
		one_round();
	return NULL;
}

static void resolve(void)
{
	struct addrinfo *res = NULL;
	if (getaddrinfo(answered, "80", NULL, &res) == 0)
		freeaddrinfo(res);
}

static int warmed; /* resolver threads past their first lookup */

static void *resolver(void *arg)
{
	(void)arg;
	resolve();
	__atomic_add_fetch(&warmed, 1, __ATOMIC_RELEASE);
	while (!stop)
		resolve();
	return NULL;
}

/* Waits up to 5 s for child; true when it ended. */
static bool reaped(pid_t child)
{
	for (int i = 0; i < 5000; i++) {
		if (waitpid(child, NULL, WNOHANG) == child)
			return true;
		usleep(1000);
	}
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	return false;
}

static int forks(int count)
{
	pthread_t t[THREADS];
	/* The main thread resolves first (the process joins its group there,
	 * at its first covered call, as it did at its start before) and the
	 * forks start once every thread is resolving. A sanitizer's
	 * allocator has no fork handlers: a child whose first allocations
	 * must refill the forking thread's empty cache met a size class's
	 * lock another thread held at the fork, for ever (glibc's malloc
	 * resets its locks in a child). */
	resolve();
	for (int i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, resolver, NULL);
	while (__atomic_load_n(&warmed, __ATOMIC_ACQUIRE) < THREADS)
		usleep(1000);
	int stuck = 0, n = 0;
	for (; n < count && stuck == 0; n++) {
		pid_t c = fork();
		if (c == 0) {
			resolve();
			_exit(0);
		}
		stuck += c > 0 && !reaped(c);
	}
	stop = 1;
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	printf("forks %d stuck %d\n", n, stuck);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "fork") == 0) {
		answered = argv[3];
		return forks(atoi(argv[2]));
	}
	if (argc != 5 || strcmp(argv[1], "reuse") != 0)
		return 2;
	answered = argv[3];
	glibc_name = argv[4];
	until = now() + atof(argv[2]);
	pthread_t t[THREADS];
	for (int i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, reuser, NULL);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	printf("rounds %d bad %d\n", rounds, bad);
	return 0;
}
