/* backend.c - `faultctl run --backend=bpf`: runs a command in a cgroup of
 * its own with the programs of faultnet.bpf.c attached, the policy
 * compiled into their maps (compile.c), and the endpoints and the relay
 * held by this process. What is left behind, and when:
 *  - the endpoints (endpoints.c) and the relay (relay.c) are this
 *    process's sockets and threads;
 *  - the programs are attached through bpf links this process alone holds,
 *    so the kernel detaches them when it exits, however it exits;
 *  - the cgroup is removed once the command has exited (processes it left
 *    running are moved back to the cgroup faultctl runs in first); a
 *    cgroup a killed faultctl could not remove is removed by the next
 *    run, which removes every faultnet-bpf-PID cgroup whose PID is gone. */
#include "bpf/backend.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bpf/libbpf.h>
#include <zlib.h>

#include "bpf/compile.h"
#include "bpf/control.h"
#include "bpf/endpoints.h"
#include "bpf/faultnet.skel.h"
#include "bpf/relay.h"
#include "core/chance.h"
#include "core/rules.h"

#define FAIL 2 /* what is missing is the machine's: exit 2, as unreachable */

/* The cgroup v2 directory this process is in, from /proc/self/mounts and
 * /proc/self/cgroup; false with the reason. */
static bool own_cgroup(char *out, size_t len, char *err, size_t errlen)
{
	char mnt[PATH_MAX] = "", line[PATH_MAX + 200], rel[PATH_MAX] = "";
	FILE *f = fopen("/proc/self/mounts", "re");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "%*s %4095s cgroup2", mnt) == 1 && strstr(line, " cgroup2 "))
			break;
		else
			mnt[0] = '\0';
	if (f)
		fclose(f);
	if (!mnt[0]) {
		snprintf(err, errlen,
			 "no cgroup v2 hierarchy is mounted "
			 "(mount -t cgroup2 none /sys/fs/cgroup)");
		return false;
	}
	f = fopen("/proc/self/cgroup", "re");
	while (f && fgets(line, sizeof(line), f))
		if (strncmp(line, "0::", 3) == 0 && sscanf(line + 3, "%4095s", rel) == 1)
			break;
	if (f)
		fclose(f);
	snprintf(out, len, "%s%s", mnt, strcmp(rel, "/") ? rel : "");
	return true;
}

/* Removes the cgroups of earlier runs whose faultctl is gone. */
static void sweep(const char *parent)
{
	DIR *d = opendir(parent);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		int pid;
		char path[PATH_MAX + 300];
		if (sscanf(e->d_name, "faultnet-bpf-%d", &pid) != 1 || kill(pid, 0) == 0 ||
		    errno != ESRCH)
			continue;
		snprintf(path, sizeof(path), "%s/%s", parent, e->d_name);
		rmdir(path);
	}
	if (d)
		closedir(d);
}

/* Moves every process left in cg to parent, then removes cg. */
static void remove_cgroup(const char *cg, const char *parent)
{
	char path[PATH_MAX + 32], line[32];
	for (int round = 0; round < 10 && rmdir(cg) < 0 && errno == EBUSY; round++) {
		snprintf(path, sizeof(path), "%s/cgroup.procs", cg);
		FILE *in = fopen(path, "re");
		snprintf(path, sizeof(path), "%s/cgroup.procs", parent);
		while (in && fgets(line, sizeof(line), in)) {
			int fd = open(path, O_WRONLY | O_CLOEXEC);
			if (fd >= 0) {
				(void)!write(fd, line, strlen(line));
				close(fd);
			}
		}
		if (in)
			fclose(in);
	}
}

static int fill_maps(struct faultnet_bpf *s, const struct fnb_plan *pl)
{
	for (uint32_t i = 0; i < pl->policy->nrules; i++)
		if (bpf_map__update_elem(s->maps.rules, &i, sizeof(i), &pl->rules[i],
					 sizeof(pl->rules[i]), BPF_ANY))
			return -1;
	for (size_t i = 0; i < pl->n; i++) {
		const struct fnb_prefix *e = &pl->e[i];
		int rc;
		if (e->v4) {
			struct fnb_key4 k = {.prefixlen = e->len};
			memcpy(&k.addr, e->addr, 4);
			rc = bpf_map__update_elem(s->maps.dst4, &k, sizeof(k), &e->cands,
						  sizeof(e->cands), BPF_ANY);
		} else {
			struct fnb_key6 k = {.prefixlen = e->len};
			memcpy(k.addr, e->addr, 16);
			rc = bpf_map__update_elem(s->maps.dst6, &k, sizeof(k), &e->cands,
						  sizeof(e->cands), BPF_ANY);
		}
		if (rc)
			return -1;
	}
	return 0;
}

/* The kernel's jiffies per second (CONFIG_HZ), from /proc/config.gz or
 * /boot/config-RELEASE; 0 when neither says. A delay is a SYN timeout,
 * which the kernel takes in jiffies. */
static unsigned kernel_hz(void)
{
	char path[300], line[256];
	struct utsname u;
	unsigned hz = 0;
	gzFile f = gzopen("/proc/config.gz", "rb");
	if (!f && uname(&u) == 0) {
		snprintf(path, sizeof(path), "/boot/config-%s", u.release);
		f = gzopen(path, "rb"); /* reads plain files too */
	}
	while (f && !hz && gzgets(f, line, sizeof(line)))
		if (sscanf(line, "CONFIG_HZ=%u", &hz) != 1)
			hz = 0;
	if (f)
		gzclose(f);
	return hz;
}

static bool has_action(const struct fnb_plan *pl, int action)
{
	for (size_t i = 0; i < pl->policy->nrules; i++)
		if (pl->rules[i].action == action)
			return true;
	return false;
}

static uint32_t at_least_one(size_t n)
{
	return n ? (uint32_t)n : 1;
}

/* Opens, sizes, loads and fills the programs; NULL with the reason. */
static struct faultnet_bpf *load(const struct fnb_plan *pl, const struct fnb_endpoints *ep,
				 const struct fnb_relay *relay, char *err, size_t errlen)
{
	unsigned hz = has_action(pl, FNB_DELAY) ? kernel_hz() : 0;
	if (has_action(pl, FNB_DELAY) && !hz) {
		snprintf(err, errlen,
			 "a delay needs the kernel's CONFIG_HZ, and neither /proc/config.gz nor "
			 "/boot/config-RELEASE gives it");
		return NULL;
	}
	struct faultnet_bpf *s = faultnet_bpf__open();
	if (!s) {
		snprintf(err, errlen, "cannot open the BPF object: %s", strerror(errno));
		return NULL;
	}
	bpf_map__set_max_entries(s->maps.dst4, at_least_one(pl->n4));
	bpf_map__set_max_entries(s->maps.dst6, at_least_one(pl->n6));
	bpf_map__set_max_entries(s->maps.rules, at_least_one(pl->policy->nrules));
	bpf_map__set_max_entries(s->maps.counts, at_least_one(pl->policy->nrules));
	s->rodata->refuse_port4 = ep->port[FNB_EP_REFUSE][0];
	s->rodata->refuse_port6 = ep->port[FNB_EP_REFUSE][1];
	s->rodata->stall_port4 = ep->port[FNB_EP_STALL][0];
	s->rodata->stall_port6 = ep->port[FNB_EP_STALL][1];
	s->rodata->reset_port4 = ep->port[FNB_EP_RESET][0];
	s->rodata->reset_port6 = ep->port[FNB_EP_RESET][1];
	s->rodata->relay_port4 = relay->port[0];
	s->rodata->relay_port6 = relay->port[1];
	s->rodata->hz = hz;
	if (faultnet_bpf__load(s)) {
		int e = errno;
		snprintf(err, errlen, "the kernel refused the BPF programs (%s)%s", strerror(e),
			 e == EPERM ? ": it needs root, or CAP_BPF and CAP_NET_ADMIN" : "");
		faultnet_bpf__destroy(s);
		return NULL;
	}
	if (fill_maps(s, pl)) {
		snprintf(err, errlen, "cannot fill the BPF maps: %s", strerror(errno));
		faultnet_bpf__destroy(s);
		return NULL;
	}
	return s;
}

/* Attaches every program to the cgroup; false naming the hook refused. */
static bool attach(struct faultnet_bpf *s, int cgfd, char *err, size_t errlen)
{
	struct {
		struct bpf_program *prog;
		struct bpf_link **link;
		const char *hook;
	} all[] = {
	    {s->progs.fn_egress, &s->links.fn_egress, "cgroup_skb/egress"},
	    {s->progs.fn_ingress, &s->links.fn_ingress, "cgroup_skb/ingress"},
	    {s->progs.fn_connect4, &s->links.fn_connect4, "cgroup/connect4"},
	    {s->progs.fn_connect6, &s->links.fn_connect6, "cgroup/connect6"},
	    {s->progs.fn_getpeername4, &s->links.fn_getpeername4, "cgroup/getpeername4"},
	    {s->progs.fn_getpeername6, &s->links.fn_getpeername6, "cgroup/getpeername6"},
	    {s->progs.fn_sockops, &s->links.fn_sockops, "sockops"},
	};
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		*all[i].link = bpf_program__attach_cgroup(all[i].prog, cgfd);
		if (!*all[i].link) {
			snprintf(err, errlen, "the kernel refused to attach %s: %s", all[i].hook,
				 strerror(errno));
			return false;
		}
	}
	return true;
}

static pid_t child;

static void forward(int sig)
{
	if (child > 0)
		kill(child, sig);
}

/* The command, in the cgroup: it moves itself there before exec. */
static pid_t start(const char *cg, char **argv)
{
	char procs[PATH_MAX + 32];
	snprintf(procs, sizeof(procs), "%s/cgroup.procs", cg);
	pid_t pid = fork();
	if (pid != 0)
		return pid;
	int fd = open(procs, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, "0", 1) != 1) {
		fprintf(stderr, "faultctl run: cannot enter %s: %s\n", cg, strerror(errno));
		_exit(FAIL);
	}
	close(fd);
	execvp(argv[0], argv);
	fprintf(stderr, "faultctl run: %s: %s\n", argv[0], strerror(errno));
	_exit(errno == ENOENT ? 127 : 126);
}

static void print_stats(const struct faultnet_bpf *s, const struct fn_policy *p,
			const uint64_t *bytes, bool json)
{
	if (!json)
		fprintf(stderr, "faultctl: stats of the kernel-side backend:\n");
	for (uint32_t i = 0; i < p->nrules; i++) {
		struct fnb_count c = {0};
		bpf_map__lookup_elem(s->maps.counts, &i, sizeof(i), &c, sizeof(c), 0);
		const struct fn_rule *r = &p->rules[i];
		const char *proto = r->protos == FN_PROTO_UDP ? "udp" : "tcp";
		if (json)
			fprintf(stderr,
				"{\"type\":\"rule\",\"name\":\"%s\",\"proto\":\"%s\",\"action\":"
				"\"%s\",\"attempts\":%llu,\"faults\":%llu,\"bytes\":%llu}\n",
				r->name, proto, fn_action_name(r->action),
				(unsigned long long)c.attempts, (unsigned long long)c.faults,
				(unsigned long long)bytes[i]);
		else
			fprintf(stderr, "  rule %-24s %-4s attempts=%llu faults=%llu bytes=%llu\n",
				r->name, proto, (unsigned long long)c.attempts,
				(unsigned long long)c.faults, (unsigned long long)bytes[i]);
	}
}

static int wait_child(void)
{
	int st = 0;
	while (waitpid(child, &st, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* argv as one line, for faultctl ps. */
static void command_line(char **argv, char *out, size_t len)
{
	size_t at = 0;
	out[0] = '\0';
	for (int i = 0; argv[i] && at + 1 < len; i++)
		at += (size_t)snprintf(out + at, len - at, "%s%s", i ? " " : "", argv[i]);
}

/* -g GROUP: this process joins the group as its member (control.c). */
static bool join(struct fnb_ctl *c, struct faultnet_bpf *s, struct fnb_plan *pl, const char *group,
		 char **argv, const uint64_t *bytes, char *err, size_t errlen)
{
	static char cmd[512];
	const struct fn_policy *p = pl->policy;
	bool *flags = calloc(2 * (p->nrules + 1), sizeof(bool));
	if (!flags) {
		snprintf(err, errlen, "out of memory");
		return false;
	}
	for (size_t i = 0; i < p->nrules; i++) {
		flags[i] = p->rules[i].from_zone < 0 || p->rules[i].from_zone == p->self_zone;
		flags[p->nrules + 1 + i] = p->rules[i].enabled;
	}
	command_line(argv, cmd, sizeof(cmd));
	*c = (struct fnb_ctl){.p = p,
			      .group = group,
			      .cmd = cmd,
			      .rules = pl->rules,
			      .applies = flags,
			      .enabled = flags + p->nrules + 1,
			      .rules_map = s->maps.rules,
			      .counts_map = s->maps.counts,
			      .bytes = bytes};
	if (fnb_ctl_start(c, err, errlen))
		return true;
	free(flags);
	c->applies = NULL;
	return false;
}

/* The relay, when a rule sends connects to it: listening before the
 * programs load (they are given its ports), serving once the map of
 * connects sent to it exists. */
static bool relay_up(struct fnb_relay *relay, const struct fnb_plan *pl, struct faultnet_bpf *s,
		     char *err, size_t errlen)
{
	if (!has_action(pl, FNB_RELAY))
		return true;
	relay->pending_fd = bpf_map__fd(s->maps.pending);
	if (fnb_relay_start(relay))
		return true;
	snprintf(err, errlen, "cannot start the relay: %s", strerror(errno));
	return false;
}

/* The cgroup the command runs in, and whatever else must be in place
 * before the programs attach; false with the reason in err. */
static bool prepare(const char *cg, bool *made, int *cgfd, const struct fnb_endpoints *ep,
		    const struct fnb_plan *pl, char *err, size_t errlen)
{
	if (!(*made = mkdir(cg, 0755) == 0))
		snprintf(err, errlen, "cannot make the cgroup %s: %s", cg, strerror(errno));
	else if ((*cgfd = open(cg, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		snprintf(err, errlen, "cannot open the cgroup %s: %s", cg, strerror(errno));
	else if (!fnb_endpoints_ready(ep, pl))
		snprintf(err, errlen,
			 "cannot bind the refuse, stall or reset endpoints on loopback");
	return !err[0];
}

int fnb_run(const struct fn_policy *p, const char *group, char **argv, bool stats, bool json)
{
	struct fnb_ctl ctl = {0};
	char err[1024] = "", parent[PATH_MAX], cg[PATH_MAX + 64];
	const char *seed = fn_seed_init();
	struct fnb_plan pl;
	if (seed) {
		fprintf(stderr, "faultctl run --backend=bpf: %s\n", seed);
		return FAIL;
	}
	if (!fnb_plan_build(&pl, p, err, sizeof(err)) ||
	    !own_cgroup(parent, sizeof(parent), err, sizeof(err))) {
		fprintf(stderr, "faultctl run --backend=bpf: %s\n", err);
		fnb_plan_free(&pl);
		return FAIL;
	}
	sweep(parent);
	struct fnb_endpoints ep;
	fnb_endpoints_open(&ep);
	uint64_t *bytes = calloc(p->nrules + 1, sizeof(uint64_t));
	struct fnb_relay relay = {.p = p, .rules = pl.rules, .bytes = bytes};
	if (!bytes)
		snprintf(err, sizeof(err), "out of memory");
	else if (!fnb_relay_open(&relay) && has_action(&pl, FNB_RELAY))
		snprintf(err, sizeof(err), "cannot open the relay's listeners on loopback");
	libbpf_set_print(NULL);
	struct faultnet_bpf *s = err[0] ? NULL : load(&pl, &ep, &relay, err, sizeof(err));
	int rc = FAIL, cgfd = -1;
	bool made = false;
	snprintf(cg, sizeof(cg), "%s/faultnet-bpf-%d", parent, (int)getpid());
	char why[4400];
	if (s && prepare(cg, &made, &cgfd, &ep, &pl, err, sizeof(err)) &&
	    relay_up(&relay, &pl, s, err, sizeof(err)) &&
	    !join(&ctl, s, &pl, group, argv, bytes, why, sizeof(why)))
		fprintf(stderr, "faultctl run --backend=bpf: live control disabled: %s\n", why);
	if (s && cgfd >= 0 && !err[0] && attach(s, cgfd, err, sizeof(err))) {
		signal(SIGINT, forward);
		signal(SIGTERM, forward);
		child = start(cg, argv);
		rc = child < 0 ? 1 : wait_child();
		if (stats)
			print_stats(s, p, bytes, json);
	}
	if (rc == FAIL && err[0])
		fprintf(stderr, "faultctl run --backend=bpf: %s\n", err);
	if (ctl.applies) {
		fnb_ctl_stop(&ctl);
		free((void *)ctl.applies);
	}
	fnb_relay_close(&relay);
	if (s)
		faultnet_bpf__destroy(s); /* detaches: the links go */
	if (cgfd >= 0)
		close(cgfd);
	if (made)
		remove_cgroup(cg, parent);
	fnb_endpoints_close(&ep);
	fnb_plan_free(&pl);
	free(bytes);
	return rc;
}
