/* listing.c - the policy in force, as faultctl reads it from the member's
 * published state: each rule's name slot (where its counters go), its
 * place in the policy, action, state and parameters. Runs under the change
 * lock, before the policy it lists is published. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/http.h"
#include "preload/stats/stats.h"

/* Gives blocks to the index entries the search for name reads, in its
 * order, up to the one where it stops (an empty entry, or name's own), and
 * to the slot a claim would take there: each is touched before it is read
 * or written. Only this process writes its index and slots, under the
 * change lock, so the search stops at the same entry. */
static void touch_probes(struct fn_seg *s, const char *name)
{
	for (unsigned i = 0; i < FN_SEG_RULE_PROBES; i++) {
		uint16_t *e = &s->rule_at[fn_seg_rule_at(name, i)];
		fn_seg_touch_listing(e, sizeof(*e));
		unsigned v = __atomic_load_n(e, __ATOMIC_ACQUIRE);
		if (!v) {
			if (s->h.rule_slots < FN_SEG_RULES)
				fn_seg_touch_listing(&s->rules[s->h.rule_slots],
						     sizeof(s->rules[0]));
			return;
		}
		if (v <= FN_SEG_RULES &&
		    strncmp(s->rules[v - 1].name, name, sizeof(s->rules[0].name)) == 0)
			return;
	}
}

static struct fn_seg_rule *claim(struct fn_seg *s, const char *name)
{
	touch_probes(s, name);
	return fn_seg_rule_slot(s, name, true);
}

/* The slot a rule's counters already go to, or one found or claimed for
 * its name; NULL when the table has no room (then once for all). */
static struct fn_seg_rule *slot_of(struct fn_seg *s, const struct fn_rule *r, bool fresh)
{
	struct fn_rulestat *st = r->stat;
	if (!fresh && st->n != &st->own)
		return (struct fn_seg_rule *)((char *)st->n - offsetof(struct fn_seg_rule, n));
	if (!fresh && st->unlisted)
		return NULL;
	struct fn_seg_rule *slot = claim(s, r->name);
	st->unlisted = slot == NULL;
	/* Counters move to the slot before any thread can count there: the
	 * policy is not published yet, or (a fork child's new file) no
	 * other thread counts before its catch-up, which runs this. */
	st->n = slot ? &slot->n : &st->own;
	return slot;
}

/* What does not change while the rule stays the same object: written when
 * the slot last described another (a rule added or loaded again). */
static void describe(struct fn_seg_rule *slot, const struct fn_rule *r)
{
	if (slot->owner == r->stat->id)
		return;
	slot->action = (uint8_t)r->action;
	slot->http = fn_rule_http(r);
	slot->status = (int16_t)(r->action == FN_ACT_RESPOND && r->http ? r->http->status : 0);
	fn_rule_describe(r, slot->params, sizeof(slot->params));
	slot->owner = r->stat->id;
}

void fn_stats_list(const struct fn_policy *p, bool fresh)
{
	/* Nobody reads the shim's own memory: a listing there (a journal's
	 * replay before the file is made; FAULTNET_CONTROL=off) only wrote
	 * a slot of 408 bytes per rule, a page fault for most, and the file's
	 * first listing (fresh) claims them all again. Counts go to each
	 * rule's own counters meanwhile. */
	if (!fresh && fn_stats_private())
		return;
	struct fn_seg *s = fn_seg;
	struct fn_seg_head *h = &s->h;
	__atomic_store_n(&h->list_gen, h->list_gen + 1, __ATOMIC_RELEASE); /* odd: changing */
	for (uint32_t i = 0; i < h->rule_slots && i < FN_SEG_RULES; i++)
		s->rules[i].order = -1;
	uint32_t on = 0, listed = 0, unlisted = 0;
	for (size_t i = 0; p && i < p->nrules; i++) {
		const struct fn_rule *r = &p->rules[i];
		on += r->enabled;
		struct fn_seg_rule *slot = r->stat ? slot_of(s, r, fresh) : NULL;
		if (!slot) {
			unlisted++;
			continue;
		}
		describe(slot, r);
		slot->enabled = r->enabled;
		slot->order = (int32_t)listed++;
	}
	h->nrules = p ? (uint32_t)p->nrules : 0;
	h->enabled = on;
	h->unlisted = unlisted;
	snprintf(h->zone, sizeof(h->zone), "%s",
		 p && p->self_zone >= 0 ? p->zones[p->self_zone].name : "-");
	__atomic_store_n(&h->list_gen, h->list_gen + 1, __ATOMIC_RELEASE);
}
