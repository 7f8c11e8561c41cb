/* names.c - the resolved-name memory (see names.h). A fixed table of
 * 1,024 addresses, allocated at the first lookup worth remembering; an
 * address found nowhere in its 8 slots replaces the oldest of them. */
#include "preload/dns/names.h"

#include <endian.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/dns.h"
#include "preload/base/signals.h"
#include "preload/stats/stats.h"

#define SLOTS 1024
#define PROBE 8
#define NAMES 4
#define NAME_WORDS 32 /* 256 bytes: a DNS name is at most 253 */

/* An address as three words (its 16 bytes, 0 after an IPv4 one's four as
 * fn_endpoint_from_sockaddr leaves them, then whether it is IPv4), so that
 * an entry's is compared in three loads. */
struct akey {
	uint64_t ip[2];
	uint64_t v4;
};

struct entry {
	uint64_t seq; /* odd while being written */
	uint64_t stamp;
	struct akey addr;
	uint64_t names[NAMES][NAME_WORDS];
};

static struct entry *table;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* The stamps' clock: entries' ages for replacement (the oldest of an
 * address's slots goes). Read by fn_names_kept_same too. */
uint64_t fn_names_clock;
/* Raised by every change of the table, before it (a seqlock over the
 * whole table): a caller that found its lookup's name the newest of every
 * address while it stood still may skip the same lookup's next record
 * while it still does (fn_names_record_kept). */
uint64_t fn_names_changes;
/* The entry being written under the lock, for a fork child to mend. */
static struct entry *writing;

static struct akey key_of(const struct fn_endpoint *ep)
{
	struct akey k;
	memcpy(k.ip, ep->ip, sizeof(k.ip));
	k.v4 = ep->v4;
	return k;
}

/* An address's first slot: its words mixed by two multiplies (a byte at a
 * time, FNV took 64 instructions for an IPv6 address, and a lookup under
 * dns rules places each address it returns). */
static inline __attribute__((always_inline)) size_t home(const struct akey *k)
{
	uint64_t h = (k->ip[0] * 0x9e3779b97f4a7c15ull ^ k->ip[1] ^ k->v4) * 0xff51afd7ed558ccdull;
	return (size_t)(h >> 32);
}

static inline __attribute__((always_inline)) bool same_addr(const struct akey *a,
							    const struct akey *b)
{
	return a->ip[0] == b->ip[0] && a->ip[1] == b->ip[1] && a->v4 == b->v4;
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
	__atomic_store_n(&e->stamp, __atomic_add_fetch(&fn_names_clock, 1, __ATOMIC_RELAXED),
			 __ATOMIC_RELAXED);
}

static uint64_t load(const uint64_t *w)
{
	/* Acquire loads: the second look at seq cannot move before them (a
	 * fence would do, but ThreadSanitizer does not take fences). */
	return __atomic_load_n(w, __ATOMIC_ACQUIRE);
}

/* The bytes of name's last word (words: len / 8 + 1) as put_name stores
 * them, 0 from its NUL on: from the eight bytes that end the name when it
 * has so many (a byte at a time cost seven instructions a byte). */
static inline __attribute__((always_inline)) uint64_t last_word(const char *name, size_t len,
								size_t words)
{
	size_t r = len - 8 * (words - 1); /* 0 to 7 */
	uint8_t b[8] = {0};
	if (len >= 8) {
		if (!r)
			return 0;
		uint64_t w;
		memcpy(&w, name + len - 8, 8);
		w = le64toh(w) >> (8 * (8 - r));
		w = htole64(w);
		memcpy(b, &w, 8);
	} else {
		for (size_t i = 0; i < r; i++)
			b[i] = (uint8_t)name[i];
	}
	uint64_t x;
	memcpy(&x, b, 8);
	return x;
}

/* Whether e's first name, read without the lock (the caller checks seq
 * after), is the len bytes of name: a word at a time, the last word's
 * bytes after the NUL being 0 as put_name writes them. words: len / 8 + 1. */
static inline __attribute__((always_inline)) bool first_is(const struct entry *e, const char *name,
							   size_t len, size_t words)
{
	for (size_t w = 0; w + 1 < words; w++) {
		uint64_t x;
		memcpy(&x, name + 8 * w, 8);
		if (load(&e->names[0][w]) != x)
			return false;
	}
	return load(&e->names[0][words - 1]) == last_word(name, len, words);
}

/* Whether name is already the newest name of a's entry, as a program's
 * one endpoint is at every lookup after its first: then nothing is to be
 * written but the entry's stamp, and no lock is taken nor signal blocked
 * (they were most of what a lookup under dns rules cost). Reads the
 * entry's address and first name as read_entry does, word by word. */
static inline __attribute__((always_inline)) bool newest(const char *name, size_t len,
							 const struct akey *a, size_t at)
{
	struct entry *t = __atomic_load_n(&table, __ATOMIC_ACQUIRE);
	size_t words = len / 8 + 1; /* with its NUL */
	if (!t || words > NAME_WORDS)
		return false;
	for (size_t i = 0; i < PROBE; i++) {
		struct entry *e = &t[(at + i) % SLOTS];
		uint64_t s1 = load(&e->seq);
		struct akey k = {{load(&e->addr.ip[0]), load(&e->addr.ip[1])}, load(&e->addr.v4)};
		bool same = same_addr(&k, a), named = same && first_is(e, name, len, words);
		if ((s1 & 1) || __atomic_load_n(&e->seq, __ATOMIC_RELAXED) != s1)
			return false;
		if (!stamp_of(e) || !same)
			continue;
		if (!named)
			return false;
		renew(e);
		return true;
	}
	return false;
}

/* The writer's side of record(): a new name or address, under the lock.
 * Out of line and cold, and the reader's side in line (the always_inline
 * helpers above): a lookup's loop over its addresses then sets up one
 * frame, not one an address (10 instructions a lookup). */
static __attribute__((noinline, cold)) void write_entry(const char *name, const struct akey *a,
							size_t at)
{
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
		struct entry *c = &table[(at + i) % SLOTS];
		if (stamp_of(c) && same_addr(&c->addr, a))
			e = c;
		else if (!oldest || stamp_of(c) < stamp_of(oldest))
			oldest = c;
	}
	if (!e) {
		e = oldest;
		memset(e->names, 0, sizeof(e->names));
	}
	writing = e;
	__atomic_add_fetch(&fn_names_changes, 1, __ATOMIC_SEQ_CST);
	__atomic_add_fetch(&e->seq, 1, __ATOMIC_ACQ_REL);
	e->addr = *a;
	renew(e);
	put_name(e, name);
	__atomic_add_fetch(&e->seq, 1, __ATOMIC_RELEASE);
	/* Raised again once written: the count is odd while an entry
	 * changes, and a list a reader kept while it was even and the same
	 * before and after its reads saw no change half made (record_list). */
	__atomic_add_fetch(&fn_names_changes, 1, __ATOMIC_SEQ_CST);
	writing = NULL;
	pthread_mutex_unlock(&lock);
	fn_signals_restore(&old);
}

/* fn_names_record for a name of len bytes. */
static inline __attribute__((always_inline)) void record(const char *name, size_t len,
							 const struct akey *a)
{
	size_t at = home(a);
	if (!newest(name, len, a, at))
		write_entry(name, a, at);
}

void fn_names_record(const char *name, const struct fn_endpoint *ep)
{
	struct akey a = key_of(ep);
	record(name, strlen(name), &a);
}

void fn_names_record_ai(const char *name, const struct addrinfo *ai)
{
	fn_names_record_ai_len(name, strlen(name), ai);
}

/* An address of getaddrinfo's list as a key: an IPv4 one in line (most
 * are; as fn_endpoint_from_sockaddr reads it, without its call, memset and
 * copy), any other through fn_endpoint_from_sockaddr. */
static inline __attribute__((always_inline)) bool
key_of_sa(struct akey *k, const struct sockaddr *sa, socklen_t len)
{
	if (sa && len >= sizeof(struct sockaddr_in) && sa->sa_family == AF_INET) {
		uint32_t ip;
		memcpy(&ip, &((const struct sockaddr_in *)sa)->sin_addr, 4);
		*k = (struct akey){{0, 0}, 1};
		memcpy(k->ip, &ip, 4);
		return true;
	}
	struct fn_endpoint ep;
	if (!fn_endpoint_from_sockaddr(&ep, sa, len))
		return false;
	*k = key_of(&ep);
	return true;
}

/* Whether ai's addresses are k's, in order: an IPv4 one compared in
 * line (most are), any other as a key. */
static bool kept_addrs_are(const struct fn_names_kept *k, const struct addrinfo *ai)
{
	int n = 0;
	for (; ai; ai = ai->ai_next) {
		const struct sockaddr *sa = ai->ai_addr;
		if (n == k->n)
			return false;
		const uint64_t *w = k->addr[n];
		if (sa && ai->ai_addrlen >= sizeof(struct sockaddr_in) &&
		    sa->sa_family == AF_INET) {
			uint32_t ip;
			memcpy(&ip, &((const struct sockaddr_in *)sa)->sin_addr, 4);
			if (w[2] != 1 || w[0] != ip || w[1])
				return false;
		} else {
			struct akey a;
			if (!key_of_sa(&a, sa, ai->ai_addrlen))
				return false; /* listed as none: looked at again */
			if (a.ip[0] != w[0] || a.ip[1] != w[1] || a.v4 != w[2])
				return false;
		}
		n++;
	}
	return n == k->n;
}

/* Records each address of ai; into k (when not NULL) when each already
 * had name as its newest and the table did not change meanwhile. */
static void record_list(const char *name, size_t len, const struct addrinfo *ai,
			struct fn_names_kept *k)
{
	uint64_t before = __atomic_load_n(&fn_names_changes, __ATOMIC_SEQ_CST);
	/* Odd: another thread is changing an entry, which these reads may
	 * have seen before its change: nothing is kept. */
	bool kept = k && !(before & 1) && __atomic_load_n(&table, __ATOMIC_ACQUIRE);
	int n = 0;
	for (; ai; ai = ai->ai_next) {
		struct akey a;
		if (!key_of_sa(&a, ai->ai_addr, ai->ai_addrlen)) {
			kept = false;
			continue;
		}
		size_t at = home(&a);
		if (!newest(name, len, &a, at)) {
			kept = false;
			write_entry(name, &a, at);
		} else if (kept && n < FN_NAMES_KEPT) {
			memcpy(k->addr[n++], &a, sizeof(a));
		} else {
			kept = false;
		}
	}
	if (!kept || __atomic_load_n(&fn_names_changes, __ATOMIC_SEQ_CST) != before)
		return;
	k->n = n;
	k->clock = __atomic_load_n(&fn_names_clock, __ATOMIC_RELAXED);
	k->changes = before + 1; /* never 0, which the count may be */
}

void fn_names_record_ai_len(const char *name, size_t len, const struct addrinfo *ai)
{
	record_list(name, len, ai, NULL);
}

void fn_names_record_kept(struct fn_names_kept *k, const char *name, size_t len,
			  const struct addrinfo *ai)
{
	if (k->changes == __atomic_load_n(&fn_names_changes, __ATOMIC_SEQ_CST) + 1 &&
	    __atomic_load_n(&fn_names_clock, __ATOMIC_RELAXED) - k->clock < FN_NAMES_FRESH &&
	    kept_addrs_are(k, ai))
		return;
	k->changes = 0;
	record_list(name, len, ai, k);
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
		for (size_t i = 0; i < sizeof(*e) / 8; i++)
			dst[i] = load(&src[i]);
		if (__atomic_load_n(&e->seq, __ATOMIC_RELAXED) == s1)
			return true;
	}
	return false;
}

bool fn_names_each(const struct fn_endpoint *ep, void (*fn)(const char *, void *), void *arg)
{
	const struct entry *t = __atomic_load_n(&table, __ATOMIC_ACQUIRE);
	struct akey a = key_of(ep);
	bool any = false;
	size_t at = home(&a);
	for (size_t i = 0; t && i < PROBE; i++) {
		struct entry copy = {0};
		if (!read_entry(&t[(at + i) % SLOTS], &copy) || !copy.stamp ||
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
		__atomic_add_fetch(&fn_names_changes, 1, __ATOMIC_SEQ_CST);
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
