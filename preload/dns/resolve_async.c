/* resolve_async.c - getaddrinfo_a and its companions. glibc's worker
 * threads resolve inside libc, out of the getaddrinfo hook's reach, so
 * requests whose name a dns rule matches are taken here when they are
 * submitted and resolved by fn_getaddrinfo (the rule's error, addresses or
 * delay, counted as any lookup): in the caller for GAI_WAIT, in a thread of
 * the shim's ("faultnet-gai", one per call, ended with it) for GAI_NOWAIT.
 * The others go to glibc as they came. The notification (signal or thread)
 * comes once, when every request of the call is done; gai_suspend and
 * gai_cancel know the shim's requests (gai_error reads the request). */
#include "preload/dns/resolve.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "core/dns.h"
#include "preload/base/libc.h"
#include "preload/base/policy.h"
#include "preload/base/signals.h"

#define OURS_MAX 256

/* The shim's requests still in progress, for gai_suspend and gai_cancel. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done = PTHREAD_COND_INITIALIZER;
static struct gaicb *ours[OURS_MAX];

struct call {
	struct gaicb **mine, **theirs;
	int nmine, ntheirs;
	struct sigevent ev;
	bool notify;
	/* GAI_NOWAIT: the shares still running (the shim's, glibc's); the last
	 * one to end notifies the app once and frees the call. */
	int shares, notified;
};

/* Whether an enabled dns rule's pattern matches name: such a request is
 * the shim's. Counts nothing (fn_getaddrinfo counts it when it runs). */
static bool taken(const struct fn_policy *p, const char *name)
{
	return fn_dns_taken(p, name);
}

static bool is_ours(const struct gaicb *g)
{
	for (int i = 0; i < OURS_MAX; i++)
		if (ours[i] == g)
			return true;
	return false;
}

/* Claims a slot for each of the call's requests; false when full. */
static bool claim(struct gaicb **list, int n)
{
	int free_slots = 0;
	pthread_mutex_lock(&lock);
	for (int i = 0; i < OURS_MAX; i++)
		free_slots += ours[i] == NULL;
	bool ok = free_slots >= n;
	for (int i = 0, k = 0; ok && k < n; i++)
		if (!ours[i]) {
			list[k]->__return = EAI_INPROGRESS;
			ours[i] = list[k++];
		}
	pthread_mutex_unlock(&lock);
	return ok;
}

static void resolve_one(struct gaicb *g)
{
	struct addrinfo *res = NULL;
	int rc = fn_getaddrinfo(g->ar_name, g->ar_service, g->ar_request, &res);
	pthread_mutex_lock(&lock);
	g->ar_result = rc == 0 ? res : NULL;
	__atomic_store_n(&g->__return, rc, __ATOMIC_RELEASE);
	for (int i = 0; i < OURS_MAX; i++)
		if (ours[i] == g)
			ours[i] = NULL;
	pthread_cond_broadcast(&done);
	pthread_mutex_unlock(&lock);
}

/* Waits until glibc has finished every request of list. */
static void wait_theirs(struct gaicb **list, int n)
{
	for (int i = 0; i < n; i++)
		while (gai_error(list[i]) == EAI_INPROGRESS)
			LIBC(gai_suspend)((const struct gaicb *const *)&list[i], 1, NULL);
}

struct notice {
	void (*fn)(union sigval);
	union sigval value;
};

static void *notice_thread(void *arg)
{
	struct notice n = *(struct notice *)arg;
	free(arg);
	n.fn(n.value);
	return NULL;
}

static void notify(const struct sigevent *ev)
{
	if (ev->sigev_notify == SIGEV_SIGNAL) {
		sigqueue(getpid(), ev->sigev_signo, ev->sigev_value);
	} else if (ev->sigev_notify == SIGEV_THREAD) {
		pthread_attr_t def, *at = ev->sigev_notify_attributes;
		pthread_t t;
		if (!at) {
			pthread_attr_init(&def);
			pthread_attr_setdetachstate(&def, PTHREAD_CREATE_DETACHED);
			at = &def;
		}
		struct notice *n = malloc(sizeof(*n));
		if (n) {
			*n = (struct notice){ev->sigev_notify_function, ev->sigev_value};
			if (pthread_create(&t, at, notice_thread, n) != 0)
				free(n);
		}
		if (at == &def)
			pthread_attr_destroy(&def);
	}
}

static void notify_once(struct call *c)
{
	if (c->notify && !__atomic_exchange_n(&c->notified, 1, __ATOMIC_ACQ_REL))
		notify(&c->ev);
}

/* One share of a GAI_NOWAIT call has ended. */
static void share_done(struct call *c)
{
	if (__atomic_sub_fetch(&c->shares, 1, __ATOMIC_ACQ_REL) > 0)
		return;
	notify_once(c);
	free(c->mine);
	free(c);
}

/* glibc's notification that its share has ended. The shim never looks at
 * glibc's requests itself: once done they are the app's again, which may
 * reuse or free them before the shim's own share ends. */
static void theirs_done(union sigval v)
{
	share_done(v.sival_ptr);
}

static void resolve_mine(struct call *c)
{
	for (int i = 0; i < c->nmine; i++)
		resolve_one(c->mine[i]);
	if (c->ntheirs == 0)
		notify_once(c); /* glibc refused its share: the app waits for none */
	share_done(c);
}

static void *run_call(void *arg)
{
	prctl(PR_SET_NAME, "faultnet-gai");
	resolve_mine(arg);
	return NULL;
}

/* Splits list into the shim's requests and glibc's. */
static struct call *split(const struct fn_policy *p, struct gaicb *list[], int n)
{
	struct call *c = calloc(1, sizeof(*c));
	struct gaicb **both = calloc((size_t)n * 2, sizeof(*both));
	if (!c || !both) {
		free(c);
		free(both);
		return NULL;
	}
	c->mine = both;
	c->theirs = both + n;
	for (int i = 0; i < n; i++)
		if (list[i] && taken(p, list[i]->ar_name))
			c->mine[c->nmine++] = list[i];
		else if (list[i])
			c->theirs[c->ntheirs++] = list[i];
	return c;
}

/* GAI_WAIT: glibc's share runs meanwhile and is waited for here, in the
 * app's own call, before its requests are the app's again. */
static int run_wait(struct call *c)
{
	int rc = c->ntheirs ? LIBC(getaddrinfo_a)(GAI_NOWAIT, c->theirs, c->ntheirs, NULL) : 0;
	if (rc != 0)
		c->ntheirs = 0; /* glibc said why; the shim's share still runs */
	for (int i = 0; i < c->nmine; i++)
		resolve_one(c->mine[i]);
	wait_theirs(c->theirs, c->ntheirs);
	free(c->mine);
	free(c);
	return rc;
}

/* GAI_NOWAIT: glibc tells of its share's end through a notification of the
 * shim's, the shim's share runs in a thread of its own (or here if none
 * can start). When glibc refuses the call (rc != 0) it may still notify
 * for what it queued, so the call is then freed by that notification, or
 * kept: a few bytes, only when glibc itself failed. */
static int run_nowait(struct call *c, const struct sigevent *sevp)
{
	c->notify = sevp && sevp->sigev_notify != SIGEV_NONE;
	if (c->notify)
		c->ev = *sevp;
	c->shares = c->ntheirs ? 2 : 1;
	int rc = 0;
	if (c->ntheirs) {
		struct sigevent ev = {.sigev_notify = SIGEV_THREAD,
				      .sigev_notify_function = theirs_done,
				      .sigev_value.sival_ptr = c};
		rc = LIBC(getaddrinfo_a)(GAI_NOWAIT, c->theirs, c->ntheirs, &ev);
		if (rc != 0)
			c->ntheirs = 0; /* glibc said why; the shim's share still runs */
	}
	if (fn_thread_start(run_call, c) != 0)
		resolve_mine(c);
	return rc;
}

int fn_getaddrinfo_a(int mode, struct gaicb *list[], int n, struct sigevent *sevp)
{
	struct call *c = NULL;
	if ((fn_policy_summary_fresh() & FN_PS_DNS) && list && n > 0 &&
	    (mode == GAI_WAIT || mode == GAI_NOWAIT)) {
		struct fn_policy_hold h;
		const struct fn_policy *p = fn_policy_enter(&h);
		c = p ? split(p, list, n) : NULL;
		fn_policy_exit(&h);
	}
	if (!c || !c->nmine || !claim(c->mine, c->nmine)) {
		if (c)
			free(c->mine);
		free(c);
		return LIBC(getaddrinfo_a)(mode, list, n, sevp);
	}
	if (mode == GAI_WAIT)
		return run_wait(c);
	return run_nowait(c, sevp);
}

/* True when some request of list is done (gai_suspend's condition). */
static bool any_done(const struct gaicb *const list[], int n)
{
	for (int i = 0; i < n; i++)
		if (list[i] &&
		    __atomic_load_n(&list[i]->__return, __ATOMIC_ACQUIRE) != EAI_INPROGRESS)
			return true;
	return false;
}

int fn_gai_suspend(const struct gaicb *const list[], int n, const struct timespec *timeout)
{
	bool mine = false;
	pthread_mutex_lock(&lock);
	for (int i = 0; list && i < n && !mine; i++)
		mine = list[i] && is_ours(list[i]);
	pthread_mutex_unlock(&lock);
	if (!mine)
		return LIBC(gai_suspend)(list, n, timeout);
	/* The shim's requests signal a condition; glibc's are looked at every
	 * 10 ms meanwhile. */
	uint64_t left = timeout
			    ? (uint64_t)timeout->tv_sec * 1000000000ull + (uint64_t)timeout->tv_nsec
			    : UINT64_MAX;
	while (!any_done(list, n)) {
		if (left == 0)
			return EAI_AGAIN;
		uint64_t step = left < 10000000ull ? left : 10000000ull;
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += (long)step;
		until.tv_sec += until.tv_nsec / 1000000000L;
		until.tv_nsec %= 1000000000L;
		pthread_mutex_lock(&lock);
		if (!any_done(list, n))
			pthread_cond_timedwait(&done, &lock, &until);
		pthread_mutex_unlock(&lock);
		if (left != UINT64_MAX)
			left -= step;
	}
	return 0;
}

int fn_gai_cancel(struct gaicb *g)
{
	pthread_mutex_lock(&lock);
	bool mine = is_ours(g);
	pthread_mutex_unlock(&lock);
	if (mine)
		return EAI_NOTCANCELED; /* being resolved now */
	return LIBC(gai_cancel)(g);
}

void fn_resolve_async_atfork_child(void)
{
	pthread_mutex_init(&lock, NULL);
	pthread_cond_init(&done, NULL);
	memset(ours, 0, sizeof(ours)); /* their threads are not in the child */
}
