/* lpm.c - builds the rule index of lpm.h. Rules are inserted in file
 * order, so each slot's list grows by appending; lists are interned (a
 * list is its parent list plus one rule), so the many slots that share a
 * list share one copy, and only the lists the finished trie refers to are
 * written out. */
#include "core/lpm.h"

#include <stdlib.h>
#include <string.h>

#include "core/rules.h"

#define CHILD FN_LPM_CHILD

/* The build's interned lists: list id -> (parent list, last rule, length);
 * id 0 is the empty list. */
struct builder {
	struct fn_lpm *t;
	uint32_t *parent, *last, *len;
	size_t nlists, cap;
	uint64_t *memo; /* open hash: (parent << 32 | rule) + 1 -> at memo_id */
	uint32_t *memo_id;
	size_t memo_mask, memo_used;
	size_t nodes_cap;
	/* The roots' blocks of 64 slots that a prefix touched (a bit each,
	 * root4 then root6): the passes after the inserts visit only these,
	 * not 131,072 slots for every policy a process loads. */
	uint64_t used[2][FN_LPM_ROOT / 64 / 64];
	size_t skips_cap;
	size_t pool_cap; /* the pool's room: it doubles (see finish_slots) */
	bool oom;
};

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return x;
}

static bool memo_grow(struct builder *b)
{
	size_t size = b->memo_mask ? (b->memo_mask + 1) * 2 : 1024;
	uint64_t *keys = calloc(size, sizeof(*keys));
	uint32_t *ids = calloc(size, sizeof(*ids));
	if (!keys || !ids) {
		free(keys);
		free(ids);
		return false;
	}
	for (size_t i = 0; b->memo_mask && i <= b->memo_mask; i++) {
		if (!b->memo[i])
			continue;
		size_t h = mix(b->memo[i]) & (size - 1);
		while (keys[h])
			h = (h + 1) & (size - 1);
		keys[h] = b->memo[i];
		ids[h] = b->memo_id[i];
	}
	free(b->memo);
	free(b->memo_id);
	b->memo = keys;
	b->memo_id = ids;
	b->memo_mask = size - 1;
	return true;
}

static uint32_t new_list(struct builder *b, uint32_t parent, uint32_t rule)
{
	if (b->nlists == b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 1024;
		uint32_t *p = realloc(b->parent, cap * 4), *l = realloc(b->last, cap * 4),
			 *n = realloc(b->len, cap * 4);
		if (p)
			b->parent = p;
		if (l)
			b->last = l;
		if (n)
			b->len = n;
		if (!p || !l || !n) {
			b->oom = true;
			return 0;
		}
		b->cap = cap;
	}
	uint32_t id = (uint32_t)b->nlists++;
	b->parent[id] = parent;
	b->last[id] = rule;
	b->len[id] = id ? b->len[parent] + 1 : 0;
	return id;
}

/* The list L followed by rule r (the same list if r already ends it). */
static uint32_t append(struct builder *b, uint32_t list, uint32_t rule)
{
	if (list && b->last[list] == rule)
		return list;
	if ((b->memo_used + 1) * 2 > b->memo_mask + 1 && !memo_grow(b)) {
		b->oom = true;
		return list;
	}
	uint64_t key = ((uint64_t)list << 32 | rule) + 1;
	size_t h = mix(key) & b->memo_mask;
	for (; b->memo[h]; h = (h + 1) & b->memo_mask)
		if (b->memo[h] == key)
			return b->memo_id[h];
	uint32_t id = new_list(b, list, rule);
	b->memo[h] = key;
	b->memo_id[h] = id;
	b->memo_used++;
	return id;
}

/* A new node whose 256 slots all hold value; its index with CHILD set. */
static uint32_t new_node(struct builder *b, uint32_t value)
{
	struct fn_lpm *t = b->t;
	if (t->nnodes == b->nodes_cap) {
		size_t cap = b->nodes_cap ? b->nodes_cap * 2 : 64;
		/* Offsets must stay below the skip mark (fn_lpm_step); checked
		 * before realloc, which may move the nodes. */
		uint32_t *n = cap * 256 < FN_LPM_SKIP
				  ? realloc(t->nodes, cap * 256 * sizeof(uint32_t))
				  : NULL;
		if (!n) {
			b->oom = true;
			return value;
		}
		t->nodes = n;
		b->nodes_cap = cap;
	}
	uint32_t *slots = &t->nodes[t->nnodes * 256];
	for (int i = 0; i < 256; i++)
		slots[i] = value;
	return (uint32_t)t->nnodes++ | CHILD;
}

static uint32_t *slot_of(struct builder *b, uint32_t *root, uint32_t node, unsigned i)
{
	if (node != CHILD - 1)
		return &b->t->nodes[(size_t)node * 256 + i];
	b->used[root != b->t->root4][i >> 12] |= 1ull << ((i >> 6) & 63);
	return &root[i];
}

/* Child slots name a node by index while building; the lookup wants the
 * offset of its first slot. */
static void child_offsets(uint32_t *slots, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (slots[i] & CHILD)
			slots[i] = CHILD | ((slots[i] & ~CHILD) * 256);
}

/* Adds rule to the slot and everything under it. */
static void add_to(struct builder *b, uint32_t *slot, uint32_t rule)
{
	if (!(*slot & CHILD)) {
		*slot = append(b, *slot, rule);
		return;
	}
	uint32_t node = *slot & ~CHILD;
	for (unsigned i = 0; i < 256; i++)
		add_to(b, &b->t->nodes[(size_t)node * 256 + i], rule);
}

/* The strides, the same for both families: the first 16 bits in one step
 * (a root of 65,536 slots), then 8 bits a step. Level k of a prefix ends at
 * bit end_of(), and key_of() is its slot at that level. */
static unsigned end_of(unsigned level)
{
	return 16 + level * 8;
}

static unsigned key_of(const struct fn_cidr *c, unsigned level)
{
	return level ? c->ip[level + 1] : (unsigned)c->ip[0] << 8 | c->ip[1];
}

/* The slot of key at a level: a root is indexed by its two bytes in
 * little-endian order (ip[0] | ip[1] << 8), which the lookup reads in one
 * load on the machines we run on; the others by the key. */
static unsigned slot_index(unsigned level, unsigned key)
{
	return level ? key : (key >> 8) | (key & 255) << 8;
}

/* Inserts rule for the prefix c: down to the level where it ends, then
 * into every slot it covers there. */
static void insert(struct builder *b, const struct fn_cidr *c, uint32_t rule)
{
	uint32_t *root = c->v4 ? b->t->root4 : b->t->root6;
	uint32_t node = CHILD - 1; /* the root */
	for (unsigned level = 0;; level++) {
		unsigned end = end_of(level), key = key_of(c, level);
		if (c->prefix <= end) {
			unsigned span = 1u << (end - c->prefix), first = key & ~(span - 1);
			for (unsigned s = first; s < first + span && !b->oom; s++)
				add_to(b, slot_of(b, root, node, slot_index(level, s)), rule);
			return;
		}
		unsigned at = slot_index(level, key);
		uint32_t *slot = slot_of(b, root, node, at);
		if (!(*slot & CHILD)) {
			uint32_t child = new_node(b, *slot);
			if (b->oom)
				return;
			slot = slot_of(b, root, node, at); /* nodes may have moved */
			*slot = child;
		}
		node = *slot & ~CHILD;
	}
}

/* Replaces list ids in slots by offsets into the pool, writing each list
 * once; the empty list is offset 0, written first. */
static bool finish_slots(struct builder *b, uint32_t *slots, size_t n, uint32_t *offset)
{
	struct fn_lpm *t = b->t;
	for (size_t i = 0; i < n; i++) {
		uint32_t v = slots[i];
		if ((v & CHILD) || !v)
			continue;
		if (!offset[v]) {
			size_t need = t->npool + b->len[v] + 1;
			/* Room doubles: grown by each list, the pool was a
			 * realloc per list (100,000 rules: a system call each
			 * in glibc, a copy each under ASan, 47 s). */
			if (need > b->pool_cap) {
				size_t cap = b->pool_cap * 2 > need ? b->pool_cap * 2 : need;
				uint32_t *pool = realloc(t->pool, cap * sizeof(uint32_t));
				if (!pool)
					return false;
				t->pool = pool;
				b->pool_cap = cap;
			}
			uint32_t *pool = t->pool;
			uint32_t at = (uint32_t)t->npool, k = b->len[v];
			pool[at + k] = t->end;
			for (uint32_t id = v; id; id = b->parent[id])
				pool[at + --k] = b->last[id];
			t->npool = need;
			offset[v] = at;
		}
		slots[i] = offset[v];
	}
	return true;
}

static bool add_rule(struct builder *b, const struct fn_policy *p, size_t i)
{
	const struct fn_rule *r = &p->rules[i];
	if (r->action == FN_ACT_DNS) /* matched by name, never by address */
		return true;
	const struct fn_cidr *cidrs = r->to;
	size_t n = r->nto;
	if (!n && r->to_zone >= 0) {
		cidrs = p->zones[r->to_zone].cidrs;
		n = p->zones[r->to_zone].ncidrs;
	}
	if (!n && r->to_zone < 0) {
		/* Every destination: in every slot of both families, so that a
		 * lookup has one list to read, already in file order. */
		static const struct fn_cidr all[2] = {{.v4 = true}, {.v4 = false}};
		cidrs = all;
		n = 2;
	} else {
		b->t->prefixes += n;
	}
	for (size_t k = 0; k < n && !b->oom; k++)
		insert(b, &cidrs[k], (uint32_t)i);
	return !b->oom;
}

/* The node under child slot v: its 256 slots. */
static uint32_t *node_slots(struct fn_lpm *t, uint32_t v)
{
	return &t->nodes[v & ~CHILD];
}

/* True if the node has exactly one child slot (at *at) and the same list
 * in every other slot (*rest). */
static bool one_way(const uint32_t *slots, unsigned *at, uint32_t *rest)
{
	int children = 0;
	for (unsigned i = 0; i < 256; i++)
		if (slots[i] & CHILD) {
			children++;
			*at = i;
		}
	if (children != 1)
		return false;
	*rest = slots[*at ? 0 : 1];
	for (unsigned i = 0; i < 256; i++)
		if (i != *at && slots[i] != *rest)
			return false;
	return true;
}

static bool add_skip(struct builder *b, const struct fn_lpm_skip *s, uint32_t *slot)
{
	struct fn_lpm *t = b->t;
	if (t->nskips == b->skips_cap) {
		size_t cap = b->skips_cap ? b->skips_cap * 2 : 16;
		struct fn_lpm_skip *more =
		    cap <= FN_LPM_SKIP ? realloc(t->skips, cap * sizeof(*more)) : NULL;
		if (!more)
			return false;
		t->skips = more;
		b->skips_cap = cap;
	}
	t->skips[t->nskips] = *s;
	*slot = CHILD | FN_LPM_SKIP | (uint32_t)t->nskips++;
	return true;
}

/* Compresses the IPv6 subtrie under *slot, whose node takes the address's
 * byte k: a run of two or more one-way nodes that share their other list
 * becomes a skip. The nodes stay in the array, unreachable. False when
 * memory is short. */
static bool compress(struct builder *b, uint32_t *slot, unsigned k)
{
	struct fn_lpm *t = b->t;
	if (!(*slot & CHILD))
		return true;
	struct fn_lpm_skip s = {.to = k};
	uint32_t v = *slot, rest = 0;
	unsigned at;
	while ((v & CHILD) && s.to < 16 && one_way(node_slots(t, v), &at, &rest) &&
	       (s.to == k || rest == s.miss)) {
		s.miss = rest;
		((uint8_t *)s.pattern)[s.to] = (uint8_t)at;
		((uint8_t *)s.mask)[s.to] = 0xff;
		v = node_slots(t, v)[at];
		s.to++;
	}
	if (s.to - k < 2) { /* nothing worth a skip here: each child in turn */
		uint32_t *slots = node_slots(t, *slot);
		for (unsigned i = 0; i < 256; i++)
			if (!compress(b, &slots[i], k + 1))
				return false;
		return true;
	}
	s.next = v;
	if (!compress(b, &s.next, s.to))
		return false;
	return add_skip(b, &s, slot);
}

/* Calls what(b, slots, 64) on each touched block of 64 slots of the root
 * of family f (0 IPv4, 1 IPv6); false as soon as a call is. */
static bool each_block(struct builder *b, int f, uint32_t *offset,
		       bool (*what)(struct builder *, uint32_t *, uint32_t *))
{
	uint32_t *root = f ? b->t->root6 : b->t->root4;
	for (unsigned blk = 0; blk < FN_LPM_ROOT / 64; blk++)
		if ((b->used[f][blk >> 6] & (1ull << (blk & 63))) &&
		    !what(b, &root[blk * 64], offset))
			return false;
	return true;
}

/* A root block's lists written out and its child offsets set. */
static bool finish_block(struct builder *b, uint32_t *slots, uint32_t *offset)
{
	if (!finish_slots(b, slots, 64, offset))
		return false;
	child_offsets(slots, 64);
	return true;
}

/* An IPv6 root block's runs compressed (the nodes under it finished). */
static bool compress_block(struct builder *b, uint32_t *slots, uint32_t *offset)
{
	(void)offset;
	for (unsigned i = 0; i < 64; i++)
		if (!compress(b, &slots[i], 2))
			return false;
	return true;
}

struct fn_lpm *fn_lpm_build(const struct fn_policy *p)
{
	struct builder b = {0};
	struct fn_lpm *t = calloc(1, sizeof(*t));
	/* calloc: the root's untouched pages stay unwritten, and 0 is the
	 * empty list. */
	if (!t || !(t->root4 = calloc(FN_LPM_ROOT, sizeof(uint32_t))) ||
	    !(t->root6 = calloc(FN_LPM_ROOT, sizeof(uint32_t))) ||
	    !(t->pool = malloc(sizeof(uint32_t)))) {
		if (t) {
			free(t->root4);
			free(t->root6);
		}
		free(t);
		return NULL;
	}
	t->end = (uint32_t)p->nrules;
	t->pool[0] = t->end; /* the empty list, at offset 0: what a slot starts as */
	t->npool = 1;
	b.pool_cap = 1;
	t->refs = 1;
	b.t = t;
	new_list(&b, 0, 0); /* id 0: the empty list */
	for (size_t i = 0; i < p->nrules && !b.oom; i++)
		add_rule(&b, p, i);
	uint32_t *offset = b.oom ? NULL : calloc(b.nlists + 1, sizeof(uint32_t));
	bool ok = offset && each_block(&b, 0, offset, finish_block) &&
		  each_block(&b, 1, offset, finish_block) &&
		  finish_slots(&b, t->nodes, t->nnodes * 256, offset);
	if (ok && t->npool < b.pool_cap) { /* the room left over given back */
		uint32_t *fit = realloc(t->pool, t->npool * sizeof(uint32_t));
		if (fit)
			t->pool = fit;
	}
	if (ok) {
		child_offsets(t->nodes, t->nnodes * 256);
		t->nodes_biased = (uintptr_t)t->nodes - ((uintptr_t)CHILD << 2);
		ok = each_block(&b, 1, NULL, compress_block);
	}
	free(offset);
	free(b.parent);
	free(b.last);
	free(b.len);
	free(b.memo);
	free(b.memo_id);
	if (!ok) {
		fn_lpm_put(t);
		return NULL;
	}
	return t;
}

void fn_lpm_put(struct fn_lpm *t)
{
	if (!t || __atomic_sub_fetch(&t->refs, 1, __ATOMIC_ACQ_REL) != 0)
		return;
	free(t->root4);
	free(t->root6);
	free(t->skips);
	free(t->nodes);
	free(t->pool);
	free(t);
}

size_t fn_lpm_bytes(const struct fn_lpm *t)
{
	return sizeof(*t) + (2 * FN_LPM_ROOT + t->nnodes * 256 + t->npool) * sizeof(uint32_t) +
	       t->nskips * sizeof(struct fn_lpm_skip);
}
