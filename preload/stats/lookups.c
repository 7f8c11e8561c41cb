/* lookups.c - per-name counts of the resolver hooks: lookups, what the dns
 * rules did to them, and the connects made to addresses the name resolved
 * to. A fixed table of names in the member's published state (fn_seg),
 * claimed with a compare-and-swap as the destination table is; the last
 * slot is "other". */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "core/dns.h"
#include "core/hash.h"
#include "preload/stats/stats.h"

static const char *const names[FN_LK_N] = {"lookups", "nxdomain", "servfail", "nodata",	 "timeout",
					   "refused", "delayed",  "answered", "connects"};

#define FOLD 0x2020202020202020ull

static inline uint64_t load8(const char *p)
{
	uint64_t w;
	memcpy(&w, p, 8);
	return w;
}

/* The k bytes at p (fewer than 8) as a word, without reading past them. */
static inline uint64_t short_word(const char *p, size_t k)
{
	uint64_t w = 0; /* a byte at a time: memcpy of k bytes is a call */
	for (size_t i = 0; i < k; i++)
		w |= (uint64_t)(uint8_t)p[i] << (8 * i);
	return w;
}

/* A name's place in the table: its bytes eight at a time, each byte with
 * its 0x20 bit set (any case alike, as the slots are compared), mixed by
 * a multiply and a rotation (FNV a byte at a time cost nine instructions
 * a byte; only this file places names). The last word is the eight bytes
 * that end the name when it has so many. */
static inline __attribute__((always_inline)) uint64_t place(const char *name, size_t k)
{
	uint64_t h = FN_HASH_START;
	size_t i = 0;
	for (; i + 8 <= k; i += 8) {
		uint64_t m = (h ^ (load8(name + i) | FOLD)) * 0x9e3779b97f4a7c15ull;
		h = m << 31 | m >> 33;
	}
	if (i < k)
		h ^= (k >= 8 ? load8(name + k - 8) : short_word(name, k)) | FOLD;
	return (h * 0xff51afd7ed558ccdull) >> 32;
}

/* Whether slot name s is the k bytes of name as they are (the case met
 * first, mostly every lookup's): a word at a time, the last word the
 * eight bytes that end the name when it has so many; then s's NUL. */
static inline __attribute__((always_inline)) bool same_as_stored(const char *s, const char *name,
								 size_t k)
{
	size_t i = 0;
	for (; i + 8 <= k; i += 8)
		if (load8(s + i) != load8(name + i))
			return false;
	if (k >= 8) {
		if (i < k && load8(s + k - 8) != load8(name + k - 8))
			return false;
	} else {
		for (; i < k; i++) /* not memcmp: a call */
			if (s[i] != name[i])
				return false;
	}
	return s[k] == '\0';
}

/* A slot claimed for name, and one compared without case: out of line,
 * so that finding a name's slot again saves no registers (in line, the
 * snprintf call made every lookup save six: 14 instructions). */
static __attribute__((noinline, cold)) void name_slot(struct fn_seg_name *s, const char *name)
{
	snprintf(s->name, sizeof(s->name), "%s", name);
	fn_slot_ready(&s->state);
}

static __attribute__((noinline)) bool same_any_case(const char *s, const char *name)
{
	return strncasecmp(s, name, sizeof(((struct fn_seg_name *)0)->name) - 1) == 0;
}

/* The slot of name from its k bytes' place h on: the walk over the
 * slots, claiming one for a name not seen yet. */
static __attribute__((noinline)) struct fn_seg_name *slot_walk(const char *name, size_t k,
							       uint64_t h)
{
	for (int i = 0; i < 32; i++) {
		struct fn_seg_name *s = &fn_seg->names[(h + (uint64_t)i) % FN_SEG_NAMES];
		fn_seg_touch(s, sizeof(*s));
		if (fn_slot_claim(&s->state)) {
			name_slot(s, name);
			return s;
		}
		if (same_as_stored(s->name, name, k) || same_any_case(s->name, name))
			return s;
	}
	fn_seg_touch(&fn_seg->names[FN_SEG_NAMES], sizeof(fn_seg->names[0]));
	return &fn_seg->names[FN_SEG_NAMES];
}

/* s, its page touched (fn_seg_touch), as a tail call: a call inside
 * slot_for would have it save registers on every lookup. */
static __attribute__((noinline)) struct fn_seg_name *touched(struct fn_seg_name *s)
{
	fn_seg_touch(s, sizeof(*s));
	return s;
}

/* The slot of name (len bytes; a slot keeps its first 127): at its place,
 * named as it is, for a name looked up before in the same case (most
 * lookups), without the walk's frame; else the walk. */
static struct fn_seg_name *slot_for(const char *name, size_t len)
{
	size_t k =
	    len < sizeof(fn_seg->names[0].name) - 1 ? len : sizeof(fn_seg->names[0].name) - 1;
	uint64_t h = place(name, k);
	struct fn_seg_name *s = &fn_seg->names[h % FN_SEG_NAMES];
	if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) == FN_SLOT_READY &&
	    same_as_stored(s->name, name, k))
		return touched(s);
	return slot_walk(name, k, h);
}

void fn_stats_lookup(const char *name, const struct fn_rule *r, int what)
{
	fn_stats_lookup_len(name, strlen(name), r, what);
}

void fn_stats_lookup_len(const char *name, size_t len, const struct fn_rule *r, int what)
{
	struct fn_seg_name *s = slot_for(name, len);
	__atomic_add_fetch(&s->n[FN_LK_LOOKUPS], 1, __ATOMIC_RELAXED);
	if (r && r->stat) {
		__atomic_add_fetch(&r->stat->n->attempts, 1, __ATOMIC_RELAXED);
		__atomic_add_fetch(&r->stat->n->faults, 1, __ATOMIC_RELAXED);
	}
	if (what == FN_LOOKUP_REAL)
		return;
	__atomic_add_fetch(&s->n[what], 1, __ATOMIC_RELAXED);
	char outcome[24];
	snprintf(outcome, sizeof(outcome), "dns-%s", names[what]);
	struct fn_endpoint none = {0};
	fn_stats_event(r, r, &none, outcome);
}

void fn_stats_name_connect(const char *name, void *unused)
{
	(void)unused;
	__atomic_add_fetch(&slot_for(name, strlen(name))->n[FN_LK_CONNECTS], 1, __ATOMIC_RELAXED);
}
