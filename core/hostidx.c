/* hostidx.c - the dns rules' name index (see hostidx.h): an open-addressed
 * table of keys, each with its list of rule indices, built from a policy
 * once and read without a lock. */
#include "core/hostidx.h"

#include <endian.h>
#include <stdlib.h>
#include <string.h>

#include "core/dns.h"
#include "core/hash.h" /* FN_HASH_START */
#include "core/rules.h"

/* Keys are made eight bytes at a time (a byte at a time, the walk over a
 * name cost nine instructions a byte): a string is cut into words from its
 * end, its first bytes a shorter word (zero-extended, little-endian order
 * on any machine), and each word is mixed in folded (any case alike, as
 * fn_host_match compares; the 0x20 bit of every byte set). Since the cut
 * runs from the end, a name's suffix from one of its dots meets the
 * name's own words but for its first, which is the name's word there
 * shifted: the walk finds every suffix's key from the words it has read. */
#define FOLD 0x2020202020202020ull
#define ONES 0x0101010101010101ull
#define HIGHS 0x8080808080808080ull
#define DOTS 0x2e2e2e2e2e2e2e2eull

/* A multiply by an odd constant dense in bits and a rotation: the
 * multiply carries each bit upwards only, the rotation brings the top bits
 * down for the next word's multiply. */
static inline uint64_t mix(uint64_t h, uint64_t w)
{
	uint64_t m = (h ^ w) * 0x9e3779b97f4a7c15ull;
	return m << 31 | m >> 33;
}

/* A key's first slot: the top bits of one more multiply, which depend on
 * every bit of the key (the key's own low bits do not: patterns that
 * differ in their first bytes only, r1.example.test, r2.example.test,
 * ..., took long runs of slots). */
static inline size_t home(const struct fn_hostidx *x, uint64_t key)
{
	return (size_t)((key * 0xff51afd7ed558ccdull) >> x->shift);
}

static inline uint64_t load8(const char *p)
{
	uint64_t w;
	memcpy(&w, p, 8);
	return le64toh(w);
}

/* The r (< 8) bytes at p as a word, without reading past them. */
static inline uint64_t short_word(const char *p, size_t r)
{
	uint64_t w = 0;
	for (size_t i = 0; i < r; i++)
		w |= (uint64_t)(uint8_t)p[i] << (8 * i);
	return w;
}

/* The key of the l bytes at s: its words from the end. */
static uint64_t string_key(const char *s, size_t l)
{
	uint64_t h = FN_HASH_START;
	for (; l >= 8; l -= 8)
		h = mix(h, load8(s + l - 8) | FOLD);
	return l ? mix(h, short_word(s, l) | FOLD) : h;
}

/* A pattern's key: "*.b.c" the key of ".b.c" (met at the dot of a name
 * a.b.c), an exact name its key mixed with a 0 (met at the name's start). */
static uint64_t pattern_key(const char *host)
{
	bool suffix = host[0] == '*' && host[1] == '.';
	const char *s = suffix ? host + 1 : host;
	uint64_t h = string_key(s, strlen(s));
	return suffix ? h : mix(h, 0);
}

struct pair {
	uint64_t key;
	uint32_t rule;
};

static int by_key(const void *a, const void *b)
{
	const struct pair *x = a, *y = b;
	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return x->rule < y->rule ? -1 : x->rule > y->rule;
}

/* Puts key's list (at offset list) in the table. */
static void place(struct fn_hostidx *x, uint64_t key, uint32_t list)
{
	size_t i = home(x, key);
	while (x->slots[i].list != FN_HOSTIDX_END)
		i = (i + 1) & x->mask;
	x->slots[i].key = key;
	x->slots[i].list = list;
}

/* The table and lists from the sorted pairs and the host-less rules. */
static bool fill(struct fn_hostidx *x, const struct pair *pr, size_t np, const struct fn_policy *p)
{
	size_t keys = 0, nany = 0;
	for (size_t i = 0; i < np; i++)
		keys += i == 0 || pr[i].key != pr[i - 1].key;
	for (size_t i = 0; i < p->nrules; i++)
		nany += p->rules[i].action == FN_ACT_DNS && !p->rules[i].host;
	size_t size = 2;
	x->shift = 63;
	while (size < keys * 2) {
		size *= 2;
		x->shift--;
	}
	x->mask = size - 1;
	x->slots = malloc(size * sizeof(*x->slots));
	x->lists = malloc((np + keys + nany + 1) * sizeof(*x->lists));
	x->hostlen = calloc(p->nrules ? p->nrules : 1, 1);
	if (!x->slots || !x->lists || !x->hostlen)
		return false;
	for (size_t i = 0; i < np; i++) {
		/* fn_host_pattern keeps patterns to 253 bytes; a longer one
		 * would be scanned for (no index). */
		size_t len = strlen(p->rules[pr[i].rule].host);
		if (len > UINT8_MAX)
			return false;
		x->hostlen[pr[i].rule] = (uint8_t)len;
	}
	for (size_t i = 0; i < size; i++)
		x->slots[i].list = FN_HOSTIDX_END;
	uint32_t at = 0;
	for (size_t i = 0; i < np; i++) {
		if (i == 0 || pr[i].key != pr[i - 1].key) {
			if (i)
				x->lists[at++] = FN_HOSTIDX_END;
			place(x, pr[i].key, at);
		}
		x->lists[at++] = pr[i].rule;
	}
	if (np)
		x->lists[at++] = FN_HOSTIDX_END;
	x->any = at;
	for (size_t i = 0; i < p->nrules; i++)
		if (p->rules[i].action == FN_ACT_DNS && !p->rules[i].host)
			x->lists[at++] = (uint32_t)i;
	x->lists[at] = FN_HOSTIDX_END;
	return true;
}

struct fn_hostidx *fn_hostidx_build(const struct fn_policy *p)
{
	struct fn_hostidx *x = calloc(1, sizeof(*x));
	size_t np = 0;
	for (size_t i = 0; i < p->nrules; i++)
		np += p->rules[i].action == FN_ACT_DNS && p->rules[i].host;
	struct pair *pr = malloc((np ? np : 1) * sizeof(*pr));
	if (!x || !pr) {
		free(x);
		free(pr);
		return NULL;
	}
	x->refs = 1;
	for (size_t i = 0, k = 0; i < p->nrules; i++)
		if (p->rules[i].action == FN_ACT_DNS && p->rules[i].host)
			pr[k++] = (struct pair){pattern_key(p->rules[i].host), (uint32_t)i};
	qsort(pr, np, sizeof(*pr), by_key);
	bool ok = fill(x, pr, np, p);
	free(pr);
	if (!ok) {
		fn_hostidx_put(x);
		return NULL;
	}
	return x;
}

void fn_hostidx_put(struct fn_hostidx *x)
{
	if (!x || __atomic_sub_fetch(&x->refs, 1, __ATOMIC_ACQ_REL) != 0)
		return;
	free(x->slots);
	free(x->lists);
	free(x->hostlen);
	free(x);
}

/* Adds key's list to c when some rule has key; false when c is full. */
static inline bool probe(const struct fn_hostidx *x, uint64_t key, struct fn_hostidx_cur *c)
{
	for (size_t i = home(x, key); x->slots[i].list != FN_HOSTIDX_END; i = (i + 1) & x->mask) {
		if (x->slots[i].key != key)
			continue;
		if (c->n == FN_HOSTIDX_LISTS)
			return false;
		c->at[c->n++] = &x->lists[x->slots[i].list];
		return true;
	}
	return true;
}

/* Probes the suffixes from the dots of word w, whose first byte is at
 * offset at of the name; h: the key of the name's bytes after w. A word
 * without a dot costs the test of its bytes at once. */
static inline bool dots(const struct fn_hostidx *x, uint64_t h, uint64_t w, size_t at,
			struct fn_hostidx_cur *c)
{
	uint64_t t = w ^ DOTS;
	/* The lowest byte flagged is a dot; those above it may not be. */
	for (uint64_t m = (t - ONES) & ~t & HIGHS; m; m &= m - 1) {
		unsigned q = (unsigned)__builtin_ctzll(m) / 8;
		/* A suffix when something is before its dot. */
		if ((uint8_t)(w >> (8 * q)) == '.' && at + q > 0 &&
		    !probe(x, mix(h, (w >> (8 * q)) | FOLD), c))
			return false;
	}
	return true;
}

bool fn_hostidx_start(const struct fn_hostidx *x, const char *name, size_t n,
		      struct fn_hostidx_cur *c)
{
	c->n = 0;
	uint64_t h = FN_HASH_START;
	size_t end = n;
	for (; end >= 8; end -= 8) {
		uint64_t w = load8(name + end - 8);
		if (!dots(x, h, w, end - 8, c))
			return false;
		h = mix(h, w | FOLD);
	}
	if (end) {
		/* The first bytes: from a word read at the name's start when
		 * the name is that long, else a byte at a time. */
		uint64_t w =
		    n >= 8 ? load8(name) & ((1ull << (8 * end)) - 1) : short_word(name, end);
		if (!dots(x, h, w, 0, c))
			return false;
		h = mix(h, w | FOLD);
	}
	if (!probe(x, mix(h, 0), c))
		return false;
	if (x->lists[x->any] != FN_HOSTIDX_END) {
		if (c->n == FN_HOSTIDX_LISTS)
			return false;
		c->at[c->n++] = &x->lists[x->any];
	}
	return true;
}

uint32_t fn_hostidx_next(struct fn_hostidx_cur *c)
{
	if (c->n == 1) {
		/* Most names meet one key (their own, or one suffix's):
		 * that list in order, without the merge. */
		uint32_t r = *c->at[0];
		c->at[0] += r != FN_HOSTIDX_END;
		return r;
	}
	uint32_t best = FN_HOSTIDX_END;
	int from = -1;
	for (int i = 0; i < c->n; i++)
		if (*c->at[i] < best) {
			best = *c->at[i];
			from = i;
		}
	if (from >= 0)
		c->at[from]++;
	return best;
}
