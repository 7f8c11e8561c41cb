/* control.h - live control of a kernel-side run: faultctl stands in the
 * group as a member and turns changes into map updates (control.c). */
#ifndef FAULTNET_BPF_CONTROL_H
#define FAULTNET_BPF_CONTROL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bpf/shared.h"

struct fn_policy;
struct bpf_map;

struct fnb_ctl {
	/* Filled by the caller. */
	const struct fn_policy *p;
	const char *group, *cmd;
	struct fnb_rule *rules; /* the rules map's contents, one per rule */
	const bool *applies;	/* per rule: its from_zone allows it here */
	bool *enabled;		/* per rule: switched on */
	struct bpf_map *rules_map, *counts_map;
	const uint64_t *bytes; /* per rule: bytes the relay carried up */
	/* Owned by fnb_ctl_start and its thread. */
	int lfd;
	char path[4200], journal[4200];
	uint64_t *seq; /* the group's change counter, mapped read-only */
	unsigned long long applied;
	pthread_t thread;
	bool stop;
};

/* Joins c->group: replays its journal into the maps, listens on the
 * member socket and starts the thread. False with the reason. */
bool fnb_ctl_start(struct fnb_ctl *c, char *err, size_t errlen);
/* Stops the thread and removes the socket. */
void fnb_ctl_stop(struct fnb_ctl *c);

#endif
