/* slots.h - per rule name, what outlives a live change in a kernel-side
 * run (slots.c): the index of its counters in the BPF counts map, its
 * numbers for the relay, whether it is on, and the bytes the relay carried
 * for it. */
#ifndef FAULTNET_BPF_SLOTS_H
#define FAULTNET_BPF_SLOTS_H

#include <pthread.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/rules.h"

struct fnb_plan;

struct fnb_slots {
	/* names and par: written by whoever installs a plan (the control
	 * thread), read by the relay as it accepts. */
	pthread_mutex_t lock;
	uint32_t n, cap;
	char (*name)[FN_NAME_MAX];
	uint32_t *table, mask; /* by a hash of the name: slot + 1, 0 when free */
	struct fn_params *par;
	int *action;	 /* enum fn_action, for events */
	bool *on;	 /* atomic loads and stores: the relay reads it per read */
	uint64_t *bytes; /* atomic adds: the relay's, per slot */
};

bool fnb_slots_init(struct fnb_slots *s, uint32_t cap);
void fnb_slots_free(struct fnb_slots *s);
/* Gives each rule of pl the slot of its name, a new one for a new name,
 * and records its numbers and whether it is on. False when every slot is
 * taken (nothing changed then). */
bool fnb_slots_assign(struct fnb_slots *s, struct fnb_plan *pl);
/* A slot's numbers and action, as the relay takes them when it accepts;
 * false for a slot no rule has. */
bool fnb_slots_params(struct fnb_slots *s, uint32_t slot, struct fn_params *par,
		      enum fn_action *action);

/* A slot's rule name and action, for an event. */
void fnb_slots_describe(struct fnb_slots *s, uint32_t slot, char *name, size_t len, int *action);

#endif
