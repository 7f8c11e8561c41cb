/* cgroup.h - the cgroup a kernel-side run puts its command in
 * (cgroup.c). */
#ifndef FAULTNET_BPF_CGROUP_H
#define FAULTNET_BPF_CGROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* The cgroup v2 directory this process is in; false with the reason. */
bool fnb_cgroup_own(char *out, size_t len, char *err, size_t errlen);
/* Removes the cgroups of earlier runs under parent whose faultctl is gone. */
void fnb_cgroup_sweep(const char *parent);
/* Moves every process left in cg to parent, then removes cg. */
void fnb_cgroup_remove(const char *cg, const char *parent);
/* Forks argv into cg: the child moves itself there, then execs. */
pid_t fnb_cgroup_start(const char *cg, char **argv);

#endif
