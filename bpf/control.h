/* control.h - live control of a kernel-side run: faultctl stands in the
 * group as a member and turns changes into map updates (control.c). */
#ifndef FAULTNET_BPF_CONTROL_H
#define FAULTNET_BPF_CONTROL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bpf/compile.h"
#include "bpf/events.h"

struct fn_policy;
struct fnb_maps;
struct fnb_slots;

struct fnb_ctl {
	/* Filled by the caller; p and pl are the control thread's from
	 * fnb_ctl_start to fnb_ctl_stop (each change replaces them), the
	 * caller's again after. */
	struct fn_policy *p;	      /* the policy in force */
	struct fnb_plan pl;	      /* p, compiled: what the maps hold */
	const struct fn_policy *base; /* what reset goes back to */
	const char *group, *cmd;
	struct fnb_maps *maps;
	struct fnb_slots *slots;
	struct bpf_map *counts_map;
	bool delay_ok;	/* the kernel's CONFIG_HZ is known */
	int events_map; /* the programs' ring buffer of faults */
	/* Owned by fnb_ctl_start and its thread. */
	int lfd;
	char path[4200], journal[4200];
	uint64_t *seq; /* the group's change counter, mapped read-only */
	unsigned long long applied;
	struct fnb_events events;
	pthread_t thread;
	bool stop;
};

/* Joins c->group: replays its journal into the maps, listens on the
 * member socket and starts the thread. False with the reason. */
bool fnb_ctl_start(struct fnb_ctl *c, char *err, size_t errlen);
/* Stops the thread and removes the socket. */
void fnb_ctl_stop(struct fnb_ctl *c);

#endif
