/* slots.c - rule names to counter slots (see slots.h). A name keeps its
 * slot for the whole run, so that a rule replaced by load, or removed and
 * added again, keeps its counts, as the shim's do; slots are never reused. */
#include "bpf/slots.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bpf/compile.h"
#include "core/hash.h"

bool fnb_slots_init(struct fnb_slots *s, uint32_t cap)
{
	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->lock, NULL);
	s->cap = cap;
	s->name = calloc(cap, sizeof(*s->name));
	s->par = calloc(cap, sizeof(*s->par));
	s->action = calloc(cap, sizeof(*s->action));
	s->on = calloc(cap, sizeof(*s->on));
	s->bytes = calloc(cap, sizeof(*s->bytes));
	uint32_t size = 16;
	while (size < 2 * cap)
		size *= 2;
	s->mask = size - 1;
	s->table = calloc(size, sizeof(*s->table));
	return s->name && s->par && s->action && s->on && s->bytes && s->table;
}

void fnb_slots_free(struct fnb_slots *s)
{
	free(s->name);
	free(s->par);
	free(s->action);
	free(s->on);
	free(s->bytes);
	free(s->table);
	pthread_mutex_destroy(&s->lock);
}

/* The table's bucket for name: the one holding it, or the free one where
 * it would go. */
static uint32_t *bucket(const struct fnb_slots *s, const char *name)
{
	uint64_t h = fn_hash_str(name);
	for (uint32_t i = (uint32_t)h & s->mask;; i = (i + 1) & s->mask)
		if (!s->table[i] || strcmp(s->name[s->table[i] - 1], name) == 0)
			return &s->table[i];
}

static int find(const struct fnb_slots *s, const char *name)
{
	return (int)*bucket(s, name) - 1;
}

bool fnb_slots_assign(struct fnb_slots *s, struct fnb_plan *pl)
{
	const struct fn_policy *p = pl->policy;
	uint32_t fresh = 0;
	for (size_t i = 0; i < p->nrules; i++)
		fresh += find(s, p->rules[i].name) < 0;
	if (s->n + fresh > s->cap)
		return false;
	bool *kept = calloc(s->cap, sizeof(bool));
	if (!kept)
		return false;
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < p->nrules; i++) {
		uint32_t *b = bucket(s, p->rules[i].name);
		int k = (int)*b - 1;
		if (k < 0) {
			k = (int)s->n++;
			strcpy(s->name[k], p->rules[i].name);
			*b = (uint32_t)k + 1;
		}
		s->par[k] = p->rules[i].par;
		s->action[k] = (int)p->rules[i].action;
		__atomic_store_n(&s->on[k], pl->rules[i].on, __ATOMIC_RELAXED);
		pl->rules[i].slot = (uint32_t)k;
		kept[k] = true;
	}
	for (uint32_t k = 0; k < s->n; k++) /* a rule gone is off */
		if (!kept[k])
			__atomic_store_n(&s->on[k], false, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&s->lock);
	free(kept);
	return true;
}

bool fnb_slots_params(struct fnb_slots *s, uint32_t slot, struct fn_params *par,
		      enum fn_action *action)
{
	pthread_mutex_lock(&s->lock);
	bool ok = slot < s->n;
	if (ok) {
		*par = s->par[slot];
		*action = (enum fn_action)s->action[slot];
	}
	pthread_mutex_unlock(&s->lock);
	return ok;
}

void fnb_slots_describe(struct fnb_slots *s, uint32_t slot, char *name, size_t len, int *action)
{
	pthread_mutex_lock(&s->lock);
	bool ok = slot < s->n;
	snprintf(name, len, "%s", ok ? s->name[slot] : "-");
	*action = ok ? s->action[slot] : 0;
	pthread_mutex_unlock(&s->lock);
}
