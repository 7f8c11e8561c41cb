/* lpm.c - builds the rule index of lpm.h. Rules are inserted in file
 * order, so each slot's list grows by appending; lists are interned (a
 * list is its parent list plus one rule), so the many slots that share a
 * list share one copy, and only the lists the finished trie refers to are
 * written out. */
#include "core/lpm.h"
#include "core/bigalloc.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core/rules.h"

#define CHILD FN_LPM_CHILD

/* The fewest one-way nodes a skip replaces. A lookup that meets a skip
 * leaves the fast path (past_skip() in rules.c: about 70 instructions
 * more), where a step costs about 6: callgrind put /48s at 16 sites at 115
 * per lookup through a skip of 3 bytes and 60 through the 3 steps, and
 * lone /128s at 111 through a skip of 12 bytes and 122 through the steps. */
#define SKIP_MIN 12

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
	 * root4 then the homes' roots): the passes after the inserts visit
	 * only these, not 65,536 slots a root for every policy a process
	 * loads. */
	uint64_t used[1 + FN_LPM_HOMES][FN_LPM_ROOT / 64 / 64];
	unsigned at_now; /* the home's bytes, for compress_block */
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

/* From this many rules the index and its build take mappings of their
 * own (fn_lpm.mapped): a small policy's start keeps its few arrays on the
 * heap, which costs no system call. */
#define MAPPED_RULES 512

static void *arr_realloc(bool mapped, void *p, size_t size)
{
	return mapped ? fn_map_realloc(p, size) : fn_big_realloc(p, size);
}

static void arr_free(bool mapped, void *p)
{
	if (mapped)
		fn_map_free(p);
	else
		free(p);
}

static void *arr_calloc(bool mapped, size_t n, size_t size)
{
	return mapped ? fn_map_realloc(NULL, n * size) : fn_big_calloc(n, size);
}

/* The memo and the lists start small and double: a 10-rule policy's
 * build wrote into 24 KiB of them at every start (a page fault each page),
 * and doubling costs a 1,000,000-rule build a few more copies. */
static bool memo_grow(struct builder *b)
{
	size_t size = b->memo_mask ? (b->memo_mask + 1) * 2 : 64;
	bool mapped = b->t->mapped;
	uint64_t *keys = arr_calloc(mapped, size, sizeof(*keys));
	uint32_t *ids = arr_calloc(mapped, size, sizeof(*ids));
	if (!keys || !ids) {
		arr_free(mapped, keys);
		arr_free(mapped, ids);
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
	arr_free(mapped, b->memo);
	arr_free(mapped, b->memo_id);
	b->memo = keys;
	b->memo_id = ids;
	b->memo_mask = size - 1;
	return true;
}

static uint32_t new_list(struct builder *b, uint32_t parent, uint32_t rule)
{
	if (b->nlists == b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 64;
		bool mapped = b->t->mapped;
		uint32_t *p = arr_realloc(mapped, b->parent, cap * 4),
			 *l = arr_realloc(mapped, b->last, cap * 4),
			 *n = arr_realloc(mapped, b->len, cap * 4);
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
				  ? arr_realloc(t->mapped, t->nodes, cap * 256 * sizeof(uint32_t))
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

/* Root f: IPv4's (0), or home f - 1's. */
static uint32_t *root_of(const struct fn_lpm *t, unsigned f)
{
	return f ? t->home[f - 1].root : t->root4;
}

/* Slot i of node (CHILD - 1: of root f). */
static uint32_t *slot_of(struct builder *b, unsigned f, uint32_t node, unsigned i)
{
	if (node != CHILD - 1)
		return &b->t->nodes[(size_t)node * 256 + i];
	b->used[f][i >> 12] |= 1ull << ((i >> 6) & 63);
	return &root_of(b->t, f)[i];
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

/* The strides, the same for both families: 16 bits in one step (a root
 * of 65,536 slots), then 8 bits a step, from byte at (IPv6's home bytes
 * skipped; 0 for IPv4). Level k of a prefix ends at bit end_of(), and
 * key_of() is its slot at that level. */
static unsigned end_of(unsigned at, unsigned level)
{
	return at * 8 + 16 + level * 8;
}

static unsigned key_of(const struct fn_cidr *c, unsigned at, unsigned level)
{
	return level ? c->ip[at + level + 1] : (unsigned)c->ip[at] << 8 | c->ip[at + 1];
}

/* The slot of key at a level: a root is indexed by its two bytes in
 * little-endian order (ip[0] | ip[1] << 8), which the lookup reads in one
 * load on the machines we run on; the others by the key. */
static unsigned slot_index(unsigned level, unsigned key)
{
	return level ? key : (key >> 8) | (key & 255) << 8;
}

/* True if home h compares every byte of prefix c from byte k on (c has
 * them whole, and they are h's: lpm.h): an address under h that reaches
 * a node taking byte k is in c. NULL for IPv4's root, which has no home. */
static bool settled(const struct fn_lpm_home *h, const struct fn_cidr *c, unsigned k)
{
	if (!h || c->prefix % 8)
		return false;
	for (; k < c->prefix / 8u; k++)
		if (!((const uint8_t *)h->mask)[k])
			return false;
	return true;
}

/* Inserts rule for the prefix c into root f (IPv6: home h's), whose first
 * step takes the two bytes after at: down to the level where it ends, then
 * into every slot it covers there (all of the root's when it is no longer
 * than at bytes: the home's bytes themselves, or a /0); or into the slot
 * from which the rest of it is bytes the home compares, so that no node
 * is built, and no step taken, for them (a site's /48s whose last bytes
 * are all 0). */
static void insert_at(struct builder *b, const struct fn_cidr *c, uint32_t rule, unsigned f,
		      const struct fn_lpm_home *h)
{
	unsigned at = h ? h->at : 0;
	uint32_t node = CHILD - 1; /* the root */
	if (c->prefix <= at * 8) {
		for (unsigned s = 0; s < FN_LPM_ROOT && !b->oom; s++)
			add_to(b, slot_of(b, f, node, s), rule);
		return;
	}
	for (unsigned level = 0;; level++) {
		unsigned end = end_of(at, level), key = key_of(c, at, level);
		if (c->prefix <= end) {
			unsigned span = 1u << (end - c->prefix), first = key & ~(span - 1);
			for (unsigned s = first; s < first + span && !b->oom; s++)
				add_to(b, slot_of(b, f, node, slot_index(level, s)), rule);
			return;
		}
		unsigned i = slot_index(level, key);
		uint32_t *slot = slot_of(b, f, node, i);
		if (!(*slot & CHILD)) {
			if (settled(h, c, end / 8)) {
				*slot = append(b, *slot, rule);
				return;
			}
			uint32_t child = new_node(b, *slot);
			if (b->oom)
				return;
			slot = slot_of(b, f, node, i); /* nodes may have moved */
			*slot = child;
		}
		node = *slot & ~CHILD;
	}
}

/* True if the IPv6 prefix c is under home h: the comparison a lookup
 * makes (a prefix of h's group has every byte h compares). */
static bool under(const struct fn_lpm_home *h, const struct fn_cidr *c)
{
	return c->prefix >= h->at * 8 && !fn_lpm_differs(h->pattern, h->mask, c->ip);
}

/* An IPv4 prefix into root4; an IPv6 one into its home's root, or a /0
 * into every home's and out6. */
static void insert(struct builder *b, const struct fn_cidr *c, uint32_t rule)
{
	struct fn_lpm *t = b->t;
	if (c->v4) {
		insert_at(b, c, rule, 0, NULL);
		return;
	}
	if (!c->prefix)
		t->out6 = append(b, t->out6, rule);
	for (const struct fn_lpm_home *h = t->home; h < t->homes_end && !b->oom; h++)
		if (!c->prefix || under(h, c)) {
			insert_at(b, c, rule, 1 + (unsigned)(h - t->home), h);
			if (c->prefix)
				return;
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
			if (need > FN_LPM_SKIP) /* offsets are below the skip mark */
				return false;
			/* Room doubles: grown by each list, the pool was a
			 * realloc per list (100,000 rules: a system call each
			 * in glibc, a copy each under ASan, 47 s). */
			if (need > b->pool_cap) {
				size_t cap = b->pool_cap * 2 > need ? b->pool_cap * 2 : need;
				uint32_t *pool =
				    arr_realloc(t->mapped, t->pool, cap * sizeof(uint32_t));
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

/* The prefixes rule r matches by address (*n of them); NULL with *n 0
 * when it matches every destination. */
static const struct fn_cidr *rule_cidrs(const struct fn_policy *p, const struct fn_rule *r,
					size_t *n)
{
	*n = r->nto;
	if (r->nto || r->to_zone < 0)
		return r->nto ? r->to : NULL;
	*n = p->zones[r->to_zone].ncidrs;
	return p->zones[r->to_zone].cidrs;
}

static bool add_rule(struct builder *b, const struct fn_policy *p, size_t i)
{
	const struct fn_rule *r = &p->rules[i];
	if (r->action == FN_ACT_DNS) /* matched by name, never by address */
		return true;
	size_t n;
	const struct fn_cidr *cidrs = rule_cidrs(p, r, &n);
	if (!cidrs) {
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

/* A group of IPv6 prefixes being gathered into a home: the bytes all of
 * them start with so far (len of home's), the bytes each of them has whole
 * and all have alike wherever they are (same), and how many there are. */
struct group {
	const uint8_t *home;
	unsigned len;
	bool same[16];
	size_t n;
};

/* Adds prefix c to group g: same loses the bytes c has not whole or has
 * otherwise, and len is the bytes from the first on that are left, at
 * most 14 (the root takes the next two). */
static void gather(struct group *g, const struct fn_cidr *c)
{
	if (!g->n++) {
		g->home = c->ip;
		memset(g->same, true, sizeof(g->same));
	}
	for (unsigned k = 0; k < 16; k++)
		g->same[k] &= k < c->prefix / 8u && c->ip[k] == g->home[k];
	for (g->len = 0; g->len < 14 && g->same[g->len];)
		g->len++;
}

/* Calls fn(arg, c) on every IPv6 prefix of the policy but a /0. */
static void each_prefix6(const struct fn_policy *p, void (*fn)(void *, const struct fn_cidr *),
			 void *arg)
{
	for (size_t i = 0; i < p->nrules; i++) {
		size_t n;
		const struct fn_cidr *c = rule_cidrs(p, &p->rules[i], &n);
		for (size_t k = 0; p->rules[i].action != FN_ACT_DNS && k < n; k++)
			if (!c[k].v4 && c[k].prefix)
				fn(arg, &c[k]);
	}
}

/* The split of a policy's IPv6 prefixes by their byte after the bytes
 * they all share (at): a group per value, while there are few. */
struct split {
	struct group all, by[FN_LPM_HOMES];
	uint8_t value[FN_LPM_HOMES];
	unsigned ngroups;
	bool ok; /* every prefix has the byte, in one of few values */
};

static void gather_all(void *arg, const struct fn_cidr *c)
{
	gather(&((struct split *)arg)->all, c);
}

static void gather_split(void *arg, const struct fn_cidr *c)
{
	struct split *sp = arg;
	unsigned at = sp->all.len, g = 0;
	if (!sp->ok || c->prefix < at * 8 + 8) {
		sp->ok = false;
		return;
	}
	while (g < sp->ngroups && sp->value[g] != c->ip[at])
		g++;
	if (g == FN_LPM_HOMES) {
		sp->ok = false;
		return;
	}
	if (g == sp->ngroups)
		sp->value[sp->ngroups++] = c->ip[at];
	gather(&sp->by[g], c);
}

/* A home compares the bytes its prefixes start with and, further on, any
 * others they all have (a site's /48s below their varying bytes): an
 * address that differs there is under none of them either. */
static void set_home(struct fn_lpm_home *h, const struct group *g)
{
	h->at = g->n ? g->len : 0;
	for (unsigned k = 0; g->n && k < 16; k++)
		if (g->same[k]) {
			((uint8_t *)h->pattern)[k] = g->home[k];
			((uint8_t *)h->mask)[k] = 0xff;
		}
}

/* The homes: the bytes every IPv6 prefix shares; or, when those are
 * fewer than 14 and the prefixes differ in the next byte in at most
 * FN_LPM_HOMES ways, a home per way (each then starts at least one byte
 * further, and is found by that byte: lpm.h). */
static void find_homes(struct fn_lpm *t, const struct fn_policy *p)
{
	struct split sp = {.ok = true};
	each_prefix6(p, gather_all, &sp);
	unsigned n = 1;
	if (sp.all.n && sp.all.len < 14) {
		each_prefix6(p, gather_split, &sp);
		n = sp.ok && sp.ngroups > 1 ? sp.ngroups : 1;
	}
	if (n == 1)
		set_home(&t->home[0], &sp.all);
	for (unsigned g = 0; n > 1 && g < n; g++)
		set_home(&t->home[g], &sp.by[g]);
	t->homes_end = &t->home[n];
	t->sel_at = n > 1 ? sp.all.len : 0;
	for (unsigned v = 0; v < 256; v++)
		t->sel[v] = &t->home[0];
	for (unsigned g = 1; g < n; g++)
		t->sel[sp.value[g]] = &t->home[g];
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
		    t->skip0 + cap <= FN_LPM_SKIP
			? arr_realloc(t->mapped, t->skips, cap * sizeof(*more))
			: NULL;
		if (!more)
			return false;
		t->skips = more;
		b->skips_cap = cap;
	}
	t->skips[t->nskips] = *s;
	*slot = t->skip0 + (uint32_t)t->nskips++;
	return true;
}

/* Compresses the IPv6 subtrie under *slot, whose node takes the address's
 * byte k: a run of SKIP_MIN or more one-way nodes that share their other
 * list becomes a skip. The nodes stay in the array, unreachable. False when
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
	if (s.to - k < SKIP_MIN) { /* nothing worth a skip here: each child in turn */
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

/* A skip's slot, read as a list's offset, finds the index no rule has
 * past the end (fn_lpm_down6): one entry each after the lists, which also
 * gives back the pool's spare room. */
static bool skip_lists(struct fn_lpm *t)
{
	uint32_t *pool = arr_realloc(t->mapped, t->pool, (t->npool + t->nskips) * sizeof(uint32_t));
	if (!pool)
		return !t->nskips; /* the spare room kept, when there was none to add */
	t->pool = pool;
	for (size_t i = 0; i < t->nskips; i++)
		pool[t->npool++] = t->end + 1;
	return true;
}

/* Calls what(b, slots, 64) on each touched block of 64 slots of root f
 * (root_of); false as soon as a call is. */
static bool each_block(struct builder *b, unsigned f, uint32_t *offset,
		       bool (*what)(struct builder *, uint32_t *, uint32_t *))
{
	uint32_t *root = root_of(b->t, f);
	b->at_now = f ? b->t->home[f - 1].at : 0;
	/* Word by word, set bits only: a test of each of a root's 1,024
	 * blocks was 31k instructions of a 10-rule policy's start. */
	for (unsigned w = 0; w < FN_LPM_ROOT / 64 / 64; w++)
		for (uint64_t bits = b->used[f][w]; bits; bits &= bits - 1) {
			unsigned blk = w * 64 + (unsigned)__builtin_ctzll(bits);
			if (!what(b, &root[blk * 64], offset))
				return false;
		}
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

/* A home's root block's runs compressed (the nodes under it finished). */
static bool compress_block(struct builder *b, uint32_t *slots, uint32_t *offset)
{
	(void)offset;
	for (unsigned i = 0; i < 64; i++)
		if (!compress(b, &slots[i], b->at_now + 2))
			return false;
	return true;
}

/* A root: 256 KiB mapped for it alone, so that its untouched pages stay
 * unwritten (0 is the empty list). calloc wrote them all once glibc's mmap
 * threshold had risen past 256 KiB (after a larger chunk was freed): a
 * memset of 256 KiB for the one-rule policy of every add. */
static uint32_t *root_new(void)
{
	void *r = mmap(NULL, FN_LPM_ROOT * sizeof(uint32_t), PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return r == MAP_FAILED ? NULL : r;
}

static void root_free(uint32_t *r)
{
	if (r)
		munmap(r, FN_LPM_ROOT * sizeof(uint32_t));
}

/* The index, its roots and the empty list allocated (NULL when memory is
 * short). */
static struct fn_lpm *new_index(const struct fn_policy *p)
{
	struct fn_lpm *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->refs = 1;
	t->end = (uint32_t)p->nrules;
	t->mapped = p->nrules >= MAPPED_RULES;
	find_homes(t, p);
	bool ok =
	    (t->root4 = root_new()) && (t->pool = arr_realloc(t->mapped, NULL, sizeof(uint32_t)));
	for (struct fn_lpm_home *h = t->home; ok && h < t->homes_end; h++)
		ok = (h->root = root_new());
	if (!ok) {
		fn_lpm_put(t);
		return NULL;
	}
	t->pool[0] = t->end; /* the empty list, at offset 0: what a slot starts as */
	t->npool = 1;
	return t;
}

/* Calls what on the touched blocks of every root; false as soon as it
 * fails. */
static bool each_root(struct builder *b, uint32_t *offset,
		      bool (*what)(struct builder *, uint32_t *, uint32_t *), bool v4)
{
	unsigned roots = 1 + (unsigned)(b->t->homes_end - b->t->home);
	for (unsigned f = v4 ? 0 : 1; f < roots; f++)
		if (!each_block(b, f, offset, what))
			return false;
	return true;
}

_Thread_local size_t fn_lpm_builds;

struct fn_lpm *fn_lpm_build(const struct fn_policy *p)
{
	struct builder b = {.pool_cap = 1};
	fn_lpm_builds++;
	struct fn_lpm *t = new_index(p);
	if (!t)
		return NULL;
	b.t = t;
	new_list(&b, 0, 0); /* id 0: the empty list */
	for (size_t i = 0; i < p->nrules && !b.oom; i++)
		add_rule(&b, p, i);
	uint32_t *offset = b.oom ? NULL : arr_calloc(t->mapped, b.nlists + 1, sizeof(uint32_t));
	bool ok = offset && each_root(&b, offset, finish_block, true) &&
		  finish_slots(&b, t->nodes, t->nnodes * 256, offset) &&
		  finish_slots(&b, &t->out6, 1, offset);
	if (ok) {
		child_offsets(t->nodes, t->nnodes * 256);
		t->nodes_biased = (uintptr_t)t->nodes - ((uintptr_t)CHILD << 2);
		t->skip0 = (uint32_t)t->npool;
		ok = each_root(&b, NULL, compress_block, false) && skip_lists(t);
	}
	arr_free(t->mapped, offset);
	arr_free(t->mapped, b.parent);
	arr_free(t->mapped, b.last);
	arr_free(t->mapped, b.len);
	arr_free(t->mapped, b.memo);
	arr_free(t->mapped, b.memo_id);
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
	root_free(t->root4);
	for (struct fn_lpm_home *h = t->home; h < t->homes_end; h++)
		root_free(h->root);
	arr_free(t->mapped, t->skips);
	arr_free(t->mapped, t->nodes);
	arr_free(t->mapped, t->pool);
	free(t);
}

size_t fn_lpm_bytes(const struct fn_lpm *t)
{
	size_t roots = 1 + (size_t)(t->homes_end - t->home);
	return sizeof(*t) + (roots * FN_LPM_ROOT + t->nnodes * 256 + t->npool) * sizeof(uint32_t) +
	       t->nskips * sizeof(struct fn_lpm_skip);
}
