/* backend.h - the kernel-side backend, for `faultctl run --backend=bpf`. */
#ifndef FAULTNET_BPF_BACKEND_H
#define FAULTNET_BPF_BACKEND_H

#include <stdbool.h>

struct fn_buf;
struct fn_policy;
struct fnb_pump_env;

/* Runs argv in a new cgroup v2 child of faultctl's own, with the policy
 * carried out by BPF programs attached to it; returns the command's exit
 * status, or 2 with a message naming what is missing (a rule the backend
 * cannot carry out, privileges, cgroup v2, a kernel hook). With a group,
 * faultctl joins it as a member that faultctl enable, disable, reset, ps,
 * rules and stats reach (control.c). With stats, prints the rules'
 * counters as `faultctl run --stats` does. When the policy has HTTP rules,
 * the run's HTTP pump (httppump.h) is started with http (its group is
 * group) and ended before this returns. With records, the rules' counters
 * at the end are appended to it as a member's state records ("rule
 * name=N proto=P action=A attempts=N faults=N bytes=N" lines; HTTP rules
 * left to the pump's), for run --strict's judgement. */
int fnb_run(const struct fn_policy *p, const char *group, char **argv, bool stats, bool json,
	    const struct fnb_pump_env *http, struct fn_buf *records);

#endif
