/* hostidx.c - the dns rules' name index (see hostidx.h): an open-addressed
 * table of keys, each with its list of rule indices, built from a policy
 * once and read without a lock. */
#include "core/hostidx.h"

#include <stdlib.h>
#include <string.h>

#include "core/dns.h"
#include "core/hash.h"
#include "core/rules.h"

/* A name's bytes are hashed folded (any case alike, as fn_host_match
 * compares), from the last to the first. */
static inline uint64_t fold(uint64_t h, char c)
{
	return fn_hash_byte(h, (uint8_t)(c | 0x20));
}

/* A pattern's key: "*.b.c" hashes ".b.c" (met at the dot of a name a.b.c),
 * an exact name its bytes and a 0 (met at the name's start). */
static uint64_t pattern_key(const char *host)
{
	bool suffix = host[0] == '*' && host[1] == '.';
	const char *s = suffix ? host + 1 : host;
	uint64_t h = FN_HASH_START;
	for (size_t k = strlen(s); k-- > 0;)
		h = fold(h, s[k]);
	return suffix ? h : fn_hash_byte(h, 0);
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
	size_t i = (size_t)key & x->mask;
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
	while (size < keys * 2)
		size *= 2;
	x->mask = size - 1;
	x->slots = malloc(size * sizeof(*x->slots));
	x->lists = malloc((np + keys + nany + 1) * sizeof(*x->lists));
	if (!x->slots || !x->lists)
		return false;
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
	free(x);
}

/* Adds key's list to c when some rule has key; false when c is full. */
static inline bool probe(const struct fn_hostidx *x, uint64_t key, struct fn_hostidx_cur *c)
{
	for (size_t i = (size_t)key & x->mask; x->slots[i].list != FN_HOSTIDX_END;
	     i = (i + 1) & x->mask) {
		if (x->slots[i].key != key)
			continue;
		if (c->n == FN_HOSTIDX_LISTS)
			return false;
		c->at[c->n++] = &x->lists[x->slots[i].list];
		return true;
	}
	return true;
}

bool fn_hostidx_start(const struct fn_hostidx *x, const char *name, size_t n,
		      struct fn_hostidx_cur *c)
{
	c->n = 0;
	uint64_t h = FN_HASH_START;
	for (size_t k = n; k-- > 0;) {
		h = fold(h, name[k]);
		/* The suffix after this dot, when something is before it. */
		if (name[k] == '.' && k > 0 && !probe(x, h, c))
			return false;
	}
	if (!probe(x, fn_hash_byte(h, 0), c))
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
