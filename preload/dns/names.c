/* names.c - the resolved-name memory (see names.h). A fixed table of
 * 1,024 addresses, allocated at the first lookup worth remembering; an
 * address found nowhere in its 8 slots replaces the oldest of them. */
#include "preload/dns/names.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/dns.h"
#include "core/hash.h"
#include "preload/base/signals.h"
#include "preload/stats/stats.h"

#define SLOTS 1024
#define PROBE 8
#define NAMES 4
#define NAME_WORDS 32 /* 256 bytes: a DNS name is at most 253 */

struct entry {
	uint64_t seq; /* odd while being written */
	uint64_t stamp;
	struct fn_endpoint addr; /* port 0 */
	uint64_t names[NAMES][NAME_WORDS];
};

static struct entry *table;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t clock_;
/* The entry being written under the lock, for a fork child to mend. */
static struct entry *writing;

static size_t home(const struct fn_endpoint *ep)
{
	return (size_t)(fn_hash_bytes(FN_HASH_START, ep->ip, ep->v4 ? 4 : 16) ^ ep->v4);
}

static bool same_addr(const struct fn_endpoint *a, const struct fn_endpoint *b)
{
	return a->v4 == b->v4 && memcmp(a->ip, b->ip, 16) == 0;
}

/* Writer side, lock held. */
static void put_name(struct entry *e, const char *name)
{
	uint64_t word[NAME_WORDS] = {0};
	strncpy((char *)word, name, sizeof(word) - 1);
	int at = NAMES - 1;
	for (int i = 0; i < NAMES; i++)
		if (memcmp(e->names[i], word, sizeof(word)) == 0 || !e->names[i][0]) {
			at = i;
			break;
		}
	/* The newest first; an older name falls off the end. */
	memmove(e->names[1], e->names[0], sizeof(e->names[0]) * (size_t)at);
	memcpy(e->names[0], word, sizeof(word));
}

/* An entry's stamp is also renewed without the lock (newest() below):
 * read and written atomically. */
static uint64_t stamp_of(const struct entry *e)
{
	return __atomic_load_n(&e->stamp, __ATOMIC_RELAXED);
}

static void renew(struct entry *e)
{
	__atomic_store_n(&e->stamp, __atomic_add_fetch(&clock_, 1, __ATOMIC_RELAXED),
			 __ATOMIC_RELAXED);
}

/* Whether name is already the newest name of a's entry, as a program's
 * one endpoint is at every lookup after its first: then nothing is to be
 * written but the entry's stamp, and no lock is taken nor signal blocked
 * (they were most of what a lookup under dns rules cost). Reads the
 * entry's address and first name as read_entry does, word by word. */
static bool newest(const char *name, const struct fn_endpoint *a)
{
	struct entry *t = __atomic_load_n(&table, __ATOMIC_ACQUIRE);
	size_t words = strlen(name) / 8 + 1; /* with its NUL */
	if (!t || words > NAME_WORDS)
		return false;
	enum {
		ADDR = offsetof(struct entry, addr) / 8,
		NAMES0 = offsetof(struct entry, names) / 8
	};
	for (size_t i = 0; i < PROBE; i++) {
		struct entry *e = &t[(home(a) + i) % SLOTS];
		const uint64_t *src = (const uint64_t *)e;
		uint64_t s1 = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE), addr[NAMES0 - ADDR],
			 first[NAME_WORDS];
		for (size_t w = 0; w < NAMES0 - ADDR; w++)
			addr[w] = __atomic_load_n(&src[ADDR + w], __ATOMIC_ACQUIRE);
		for (size_t w = 0; w < words; w++)
			first[w] = __atomic_load_n(&src[NAMES0 + w], __ATOMIC_ACQUIRE);
		if ((s1 & 1) || __atomic_load_n(&e->seq, __ATOMIC_RELAXED) != s1)
			return false;
		struct fn_endpoint at;
		memcpy(&at, addr, sizeof(at));
		if (!stamp_of(e) || !same_addr(&at, a))
			continue;
		if (memcmp(first, name, strlen(name) + 1) != 0)
			return false;
		renew(e);
		return true;
	}
	return false;
}

void fn_names_record(const char *name, const struct fn_endpoint *ep)
{
	struct fn_endpoint a = *ep;
	a.port = 0;
	if (newest(name, &a))
		return;
	/* Signals blocked: a handler that resolves in this thread would wait
	 * for the lock its own thread holds. */
	sigset_t old;
	fn_signals_block(&old);
	pthread_mutex_lock(&lock);
	if (!table) {
		struct entry *t = calloc(SLOTS, sizeof(*t));
		if (!t) {
			pthread_mutex_unlock(&lock);
			fn_signals_restore(&old);
			return;
		}
		__atomic_store_n(&table, t, __ATOMIC_RELEASE);
	}
	struct entry *e = NULL, *oldest = NULL;
	for (size_t i = 0; i < PROBE && !e; i++) {
		struct entry *c = &table[(home(&a) + i) % SLOTS];
		if (stamp_of(c) && same_addr(&c->addr, &a))
			e = c;
		else if (!oldest || stamp_of(c) < stamp_of(oldest))
			oldest = c;
	}
	if (!e) {
		e = oldest;
		memset(e->names, 0, sizeof(e->names));
	}
	writing = e;
	__atomic_add_fetch(&e->seq, 1, __ATOMIC_ACQ_REL);
	e->addr = a;
	renew(e);
	put_name(e, name);
	__atomic_add_fetch(&e->seq, 1, __ATOMIC_RELEASE);
	writing = NULL;
	pthread_mutex_unlock(&lock);
	fn_signals_restore(&old);
}

void fn_names_record_ai(const char *name, const struct addrinfo *ai)
{
	for (; ai; ai = ai->ai_next) {
		struct fn_endpoint ep;
		if (fn_endpoint_from_sockaddr(&ep, ai->ai_addr, ai->ai_addrlen))
			fn_names_record(name, &ep);
	}
}

/* A consistent copy of entry e, without a lock; false if it keeps changing. */
static bool read_entry(const struct entry *e, struct entry *out)
{
	for (int tries = 0; tries < 4; tries++) {
		uint64_t s1 = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE);
		if (s1 & 1)
			continue;
		const uint64_t *src = (const uint64_t *)e;
		uint64_t *dst = (uint64_t *)out;
		/* Acquire loads: the second look at seq cannot move before them
		 * (a fence would do, but ThreadSanitizer does not take fences). */
		for (size_t i = 0; i < sizeof(*e) / 8; i++)
			dst[i] = __atomic_load_n(&src[i], __ATOMIC_ACQUIRE);
		if (__atomic_load_n(&e->seq, __ATOMIC_RELAXED) == s1)
			return true;
	}
	return false;
}

bool fn_names_each(const struct fn_endpoint *ep, void (*fn)(const char *, void *), void *arg)
{
	const struct entry *t = __atomic_load_n(&table, __ATOMIC_ACQUIRE);
	struct fn_endpoint a = *ep;
	a.port = 0;
	bool any = false;
	for (size_t i = 0; t && i < PROBE; i++) {
		struct entry copy = {0};
		if (!read_entry(&t[(home(&a) + i) % SLOTS], &copy) || !copy.stamp ||
		    !same_addr(&copy.addr, &a))
			continue;
		for (int k = 0; k < NAMES && copy.names[k][0]; k++) {
			((char *)copy.names[k])[NAME_WORDS * 8 - 1] = '\0';
			fn((const char *)copy.names[k], arg);
			any = true;
		}
	}
	return any;
}

struct match_arg {
	const char *pattern;
	bool hit;
};

static void match_one(const char *name, void *arg)
{
	struct match_arg *m = arg;
	m->hit = m->hit || fn_host_match(m->pattern, name);
}

bool fn_names_match(const struct fn_endpoint *ep, const char *pattern)
{
	struct match_arg m = {pattern, false};
	fn_names_each(ep, match_one, &m);
	return m.hit;
}

void fn_names_connect(const struct sockaddr *sa, socklen_t len)
{
	struct fn_endpoint ep;
	if (__atomic_load_n(&table, __ATOMIC_ACQUIRE) && fn_endpoint_from_sockaddr(&ep, sa, len))
		fn_names_each(&ep, fn_stats_name_connect, NULL);
}

void fn_names_atfork_child(void)
{
	/* Another thread of the parent may have held the lock at fork; an
	 * entry it was writing is half written, so forgotten (an even seq,
	 * no stamp) rather than left odd for ever. */
	pthread_mutex_init(&lock, NULL);
	if (writing) {
		__atomic_store_n(&writing->stamp, 0, __ATOMIC_RELAXED);
		memset(writing->names, 0, sizeof(writing->names));
		writing->seq += writing->seq & 1;
		writing = NULL;
	}
}

void fn_names_init(void)
{
	fn_host_resolved = fn_names_match;
}
