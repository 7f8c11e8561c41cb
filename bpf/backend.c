/* backend.c - `faultctl run --backend=bpf`: runs a command in a cgroup of
 * its own (cgroup.c) with the programs of faultnet.bpf.c attached, the
 * policy compiled into their maps (compile.c, maps.c), and the endpoints
 * and the relay held by this process. What is left behind, and when:
 *  - the endpoints (endpoints.c) and the relay (relay.c) are this
 *    process's sockets and threads;
 *  - the programs are attached through bpf links this process alone holds,
 *    so the kernel detaches them when it exits, however it exits;
 *  - the cgroup is removed once the command has exited (processes it left
 *    running are moved back to the cgroup faultctl runs in first); a
 *    cgroup a killed faultctl could not remove is removed by the next
 *    run, which removes every faultnet-bpf-PID cgroup whose PID is gone. */
#include "bpf/backend.h"

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

#include "bpf/lbpf.h"

#include "bpf/cgroup.h"
#include "bpf/compile.h"
#include "bpf/control.h"
#include "bpf/endpoints.h"
#include "bpf/faultnet.skel.h"
#include "bpf/httppump.h"
#include "bpf/maps.h"
#include "bpf/relay.h"
#include "bpf/slots.h"
#include "core/chance.h"
#include "core/clock.h"
#include "core/rules.h"
#include "core/wire.h"

#define FAIL 2 /* what is missing is the machine's: exit 2, as unreachable */

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

/* How much the maps hold: live changes may grow the policy to twice the
 * rules and prefixes it starts with, and at least this much. */
#define MIN_RULES 1024
#define MIN_PREFIXES 16384

static uint32_t room(size_t n, size_t least)
{
	return (uint32_t)(2 * n > least ? 2 * n : least);
}

/* Opens, sizes and loads the programs; NULL with the reason. */
static struct faultnet_bpf *load(const struct fnb_plan *pl, const struct fnb_endpoints *ep,
				 const struct fnb_relay *relay, unsigned hz, char *err,
				 size_t errlen)
{
	struct faultnet_bpf *s = faultnet_bpf__open();
	if (!s) {
		snprintf(err, errlen, "cannot open the BPF object: %s", strerror(errno));
		return NULL;
	}
	uint32_t rcap = room(pl->policy->nrules, MIN_RULES);
	bpf_map__set_max_entries(s->maps.dst4, 2 * room(pl->n4, MIN_PREFIXES));
	bpf_map__set_max_entries(s->maps.dst6, 2 * room(pl->n6, MIN_PREFIXES));
	bpf_map__set_max_entries(s->maps.rules, 2 * rcap);
	bpf_map__set_max_entries(s->maps.counts, 2 * rcap);
	bpf_map__set_max_entries(s->maps.conds, 2 * rcap);
	s->rodata->rcap = rcap;
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

static int wait_child(void)
{
	int st = 0;
	while (waitpid(child, &st, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Rule i's counters: its attempts and faults (the BPF map), its bytes
 * (the relay's slots). */
static void counts_of(const struct faultnet_bpf *s, const struct fnb_plan *pl,
		      const struct fnb_slots *slots, uint32_t i, struct fnb_count *c,
		      unsigned long long *bytes)
{
	uint32_t slot = pl->rules[i].slot;
	*c = (struct fnb_count){0};
	*bytes = __atomic_load_n(&slots->bytes[slot], __ATOMIC_RELAXED);
	bpf_map__lookup_elem(s->maps.counts, &slot, sizeof(slot), c, sizeof(*c), 0);
}

/* The same as state records, for run --strict (backend.h). */
static void rule_records(const struct faultnet_bpf *s, const struct fnb_plan *pl,
			 const struct fnb_slots *slots, struct fn_buf *out)
{
	const struct fn_policy *p = pl->policy;
	for (uint32_t i = 0; i < p->nrules; i++) {
		const struct fn_rule *r = &p->rules[i];
		if (fn_rule_http(r))
			continue; /* the pump's records count these */
		struct fnb_count c;
		unsigned long long bytes;
		counts_of(s, pl, slots, i, &c, &bytes);
		fn_buf_printf(out,
			      "rule name=%s proto=%s action=%s attempts=%llu faults=%llu "
			      "bytes=%llu\n",
			      r->name, r->protos == FN_PROTO_UDP ? "udp" : "tcp",
			      fn_action_name(r->action), (unsigned long long)c.attempts,
			      (unsigned long long)c.faults, bytes);
	}
}

/* The rules in force at the end, with their counters. */
static void print_stats(const struct faultnet_bpf *s, const struct fnb_plan *pl,
			const struct fnb_slots *slots, bool json)
{
	const struct fn_policy *p = pl->policy;
	if (!json)
		fprintf(stderr, "faultctl: stats of the kernel-side backend:\n");
	for (uint32_t i = 0; i < p->nrules; i++) {
		struct fnb_count c;
		unsigned long long bytes;
		const struct fn_rule *r = &p->rules[i];
		if (fn_rule_http(r))
			continue; /* counted per request by the pump's shim */
		counts_of(s, pl, slots, i, &c, &bytes);
		const char *proto = r->protos == FN_PROTO_UDP ? "udp" : "tcp";
		if (json)
			fprintf(stderr,
				"{\"type\":\"rule\",\"name\":\"%s\",\"proto\":\"%s\",\"action\":"
				"\"%s\",\"attempts\":%llu,\"faults\":%llu,\"bytes\":%llu}\n",
				r->name, proto, fn_action_name(r->action),
				(unsigned long long)c.attempts, (unsigned long long)c.faults,
				bytes);
		else
			fprintf(stderr, "  rule %-24s %-4s attempts=%llu faults=%llu bytes=%llu\n",
				r->name, proto, (unsigned long long)c.attempts,
				(unsigned long long)c.faults, bytes);
	}
}

/* argv as one line, for faultctl ps. */
static void command_line(char **argv, char *out, size_t len)
{
	size_t at = 0;
	out[0] = '\0';
	for (int i = 0; argv[i] && at + 1 < len; i++)
		at += (size_t)snprintf(out + at, len - at, "%s%s", i ? " " : "", argv[i]);
}

/* Everything a run holds, from its start to its end. */
struct run {
	struct fnb_ctl ctl; /* its p and pl: the policy in force */
	struct fnb_endpoints ep;
	struct fnb_relay relay;
	struct fnb_httppump pump;
	struct fnb_slots slots;
	struct fnb_maps maps;
	struct faultnet_bpf *s;
	char parent[PATH_MAX], cg[PATH_MAX + 64];
	int cgfd;
	bool made, joined;
};

/* Every rule's conditions count and time from the run's start, as the
 * shim's from a process's: set when the maps are filled, and again just
 * before the command starts (conds_again). */
static bool conds_start(struct run *r)
{
	uint64_t now = fn_now_ns();
	for (size_t i = 0; i < r->ctl.p->nrules; i++)
		if (!fnb_maps_cond_reset(&r->maps, r->ctl.pl.rules[i].slot, now))
			return false;
	return true;
}

static bool conds_again(struct run *r, char *err, size_t errlen)
{
	if (conds_start(r))
		return true;
	snprintf(err, errlen, "cannot fill the BPF maps: %s", strerror(errno));
	return false;
}

static bool has_http(const struct fn_policy *p)
{
	for (size_t i = 0; i < p->nrules; i++)
		if (fn_rule_http(&p->rules[i]))
			return true;
	return false;
}

/* The HTTP pump, when the policy has HTTP rules or the run asked for it
 * (fnb_http_pump: they compile then, at the start or added live), started
 * once the policy compiled: the relay hands their connections to it.
 * Before any thread of faultctl's: it forks. */
static bool pump_up(struct run *r, const struct fnb_pump_env *http, char *err, size_t errlen)
{
	if (!fnb_http_pump)
		return true;
	if (!fnb_httppump_start(&r->pump, http, err, errlen))
		return false;
	r->relay.http_fd = r->pump.fd;
	return true;
}

/* Compiles the policy, opens the endpoints and the relay, loads the
 * programs and puts the policy in force; false with the reason. */
static bool set_up(struct run *r, const struct fn_policy *p, const struct fnb_pump_env *http,
		   char *err, size_t errlen)
{
	unsigned hz = kernel_hz();
	fnb_http_pump = http && (http->always || has_http(p));
	r->ctl.base = p;
	r->ctl.p = fn_policy_clone(p);
	if (!r->ctl.p) {
		snprintf(err, errlen, "out of memory");
		return false;
	}
	if (!fnb_plan_build(&r->ctl.pl, r->ctl.p, err, errlen) || !pump_up(r, http, err, errlen))
		return false;
	if (!hz && fnb_plan_has(&r->ctl.pl, FNB_DELAY)) {
		snprintf(err, errlen, "%s", FNB_NO_HZ);
		return false;
	}
	r->ctl.delay_ok = hz != 0;
	if (!fnb_cgroup_own(r->parent, sizeof(r->parent), err, errlen))
		return false;
	fnb_cgroup_sweep(r->parent);
	fnb_endpoints_open(&r->ep);
	if (!fnb_slots_init(&r->slots, 2 * room(p->nrules, MIN_RULES))) {
		snprintf(err, errlen, "out of memory");
		return false;
	}
	if (!fnb_relay_open(&r->relay)) {
		snprintf(err, errlen, "cannot open the relay's listener on 127.0.0.1: %s",
			 strerror(errno));
		return false;
	}
	libbpf_set_print(NULL);
	if (!(r->s = load(&r->ctl.pl, &r->ep, &r->relay, hz, err, errlen)))
		return false;
	r->maps = (struct fnb_maps){.dst4 = r->s->maps.dst4,
				    .dst6 = r->s->maps.dst6,
				    .rules = r->s->maps.rules,
				    .conds = r->s->maps.conds,
				    .cur = &r->s->bss->cur_set,
				    .rcap = r->s->rodata->rcap};
	r->relay.slots = &r->slots;
	r->relay.pending_fd = bpf_map__fd(r->s->maps.pending);
	if (!fnb_slots_assign(&r->slots, &r->ctl.pl) || !conds_start(r) ||
	    !fnb_maps_install(&r->maps, &r->ctl.pl, NULL)) {
		snprintf(err, errlen, "cannot fill the BPF maps: %s", strerror(errno));
		return false;
	}
	if (!fnb_relay_start(&r->relay)) {
		snprintf(err, errlen, "cannot start the relay: %s", strerror(errno));
		return false;
	}
	return true;
}

/* The cgroup the command runs in, and whatever else must be in place
 * before the programs attach; false with the reason in err. */
static bool prepare(struct run *r, char *err, size_t errlen)
{
	snprintf(r->cg, sizeof(r->cg), "%s/faultnet-bpf-%d", r->parent, (int)getpid());
	if (!(r->made = mkdir(r->cg, 0755) == 0))
		snprintf(err, errlen, "cannot make the cgroup %s: %s", r->cg, strerror(errno));
	else if ((r->cgfd = open(r->cg, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		snprintf(err, errlen, "cannot open the cgroup %s: %s", r->cg, strerror(errno));
	else if (!fnb_endpoints_ready(&r->ep, &r->ctl.pl))
		snprintf(err, errlen,
			 "cannot bind the refuse, stall or reset endpoints on loopback");
	return !err[0];
}

/* -g GROUP: this process joins the group as its member (control.c). */
static void join(struct run *r, const char *group, char **argv)
{
	static char cmd[512];
	char why[4400];
	command_line(argv, cmd, sizeof(cmd));
	r->ctl.group = group;
	r->ctl.cmd = cmd;
	r->ctl.maps = &r->maps;
	r->ctl.slots = &r->slots;
	r->ctl.counts_map = r->s->maps.counts;
	r->ctl.events_map = bpf_map__fd(r->s->maps.events);
	r->joined = fnb_ctl_start(&r->ctl, why, sizeof(why));
	if (!r->joined)
		fprintf(stderr, "faultctl run --backend=bpf: live control disabled: %s\n", why);
}

static void tear_down(struct run *r)
{
	if (r->joined)
		fnb_ctl_stop(&r->ctl);
	fnb_relay_close(&r->relay);
	fnb_httppump_stop(&r->pump);
	if (r->s)
		faultnet_bpf__destroy(r->s); /* detaches: the links go */
	if (r->cgfd >= 0)
		close(r->cgfd);
	if (r->made)
		fnb_cgroup_remove(r->cg, r->parent);
	fnb_endpoints_close(&r->ep);
	fnb_slots_free(&r->slots);
	fnb_plan_free(&r->ctl.pl);
	fn_policy_free(r->ctl.p);
}

int fnb_run(const struct fn_policy *p, const char *group, char **argv, bool stats, bool json,
	    const struct fnb_pump_env *http, struct fn_buf *records)
{
	static struct run r; /* large; one per process */
	char err[1024] = "";
	/* libbpf is loaded here, not at faultctl's start (lbpf.h) */
	const char *early = fn_lbpf_open();
	int rc = FAIL;
	if (!early)
		early = fn_seed_init();
	r = (struct run){
	    .cgfd = -1,
	    .relay = {.lfd = {-1, -1}, .ep = -1, .wake = -1, .spare = -1, .http_fd = -1},
	    .pump = {.fd = -1}};
	for (int k = 0; k < FNB_EP_KINDS; k++)
		r.ep.fd[k][0] = r.ep.fd[k][1] = -1;
	if (early)
		snprintf(err, sizeof(err), "%s", early);
	else if (set_up(&r, p, http, err, sizeof(err)) && prepare(&r, err, sizeof(err))) {
		join(&r, group, argv);
		/* The conditions counted again from here, as the shim's from
		 * the process's start: loading and attaching the programs took
		 * 100 ms and more on a loaded machine, a window's start_ms then
		 * ending that much earlier than the shim's. */
		if (attach(r.s, r.cgfd, err, sizeof(err)) && conds_again(&r, err, sizeof(err))) {
			signal(SIGINT, forward);
			signal(SIGTERM, forward);
			child = fnb_cgroup_start(r.cg, argv);
			rc = child < 0 ? 1 : wait_child();
			if (r.joined)
				fnb_ctl_stop(&r.ctl);
			r.joined = false;
			if (stats)
				print_stats(r.s, &r.ctl.pl, &r.slots, json);
			if (records)
				rule_records(r.s, &r.ctl.pl, &r.slots, records);
		}
	}
	if (rc == FAIL && err[0])
		fprintf(stderr, "faultctl run --backend=bpf: %s\n", err);
	tear_down(&r);
	return rc;
}
