/* control.c - live control of a kernel-side run (faultctl run
 * --backend=bpf -g GROUP): faultctl itself stands in the group as a member.
 * It listens on the member socket the shim would (RUNDIR/GROUP.PID.sock),
 * answers info, rules, stats and events in the shim's formats, and carries
 * out every change the shim takes: enable and disable rewrite one rule of
 * the maps; add, rm, load, zone and reset compile the changed policy and
 * put it in force with one flip (maps.c). When it answers "ok" the change
 * is in force in the kernel; a change the backend cannot carry out is
 * answered with the reason and changes nothing. Changes another member
 * checked reach it through the group's change counter and journal, which
 * its thread reads every 2 ms. One thread owns the policy, the plan and
 * the maps' contents; the run's main thread only starts and stops it. */
#include "bpf/control.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "bpf/lbpf.h"

#include "bpf/maps.h"
#include "bpf/slots.h"
#include "core/clock.h"
#include "core/edit.h"
#include "core/rundir.h"
#include "core/actions.h"
#include "core/rules.h"
#include "core/wire.h"

static void set_rule(struct fnb_ctl *c, int i, bool on, uint64_t since)
{
	if (on && !c->p->rules[i].enabled) /* conditions start again */
		fnb_maps_cond_reset(c->maps, c->pl.rules[i].slot, since ? since : fn_now_ns());
	c->p->rules[i].enabled = on;
	fnb_rule_entry(c->p, (size_t)i, &c->pl.rules[i]);
	fnb_maps_rule(c->maps, (uint32_t)i, &c->pl.rules[i]);
	__atomic_store_n(&c->slots->on[c->pl.rules[i].slot], c->pl.rules[i].on,
			 __ATOMIC_RELAXED); /* the relay reads it */
}

/* A rule new to the policy (added, or loaded under a new name) counts and
 * times its conditions from now, as the shim's new rules do. */
static bool new_conds(struct fnb_ctl *c, const struct fn_policy *np, const struct fnb_plan *pl)
{
	uint64_t now = fn_now_ns();
	for (size_t i = 0; i < np->nrules; i++)
		if (fn_policy_rule_index(c->p, np->rules[i].name) < 0 &&
		    !fnb_maps_cond_reset(c->maps, pl->rules[i].slot, now))
			return false;
	return true;
}

/* Puts np in force in place of c->p; false (np freed, reply saying why)
 * when the backend cannot carry it out. */
static bool install(struct fnb_ctl *c, struct fn_policy *np, char *reply, size_t len)
{
	struct fnb_plan pl;
	char err[1024];
	if (!fnb_plan_build(&pl, np, err, sizeof(err)))
		snprintf(reply, len, "error %s", err);
	else if (!c->delay_ok && fnb_plan_has(&pl, FNB_DELAY))
		snprintf(reply, len, "error %s", FNB_NO_HZ);
	else if (!fnb_slots_assign(c->slots, &pl))
		snprintf(reply, len, "error more rule names than this run keeps counters for (%u)",
			 c->slots->cap);
	else if (!new_conds(c, np, &pl))
		snprintf(reply, len, "error cannot write the rules' conditions: %s",
			 strerror(errno));
	else if (!fnb_maps_install(c->maps, &pl, &c->pl))
		snprintf(reply, len,
			 "error the run's maps cannot hold it (%s; they were sized for %u rules "
			 "at its start)",
			 strerror(errno), c->maps->rcap);
	else {
		fnb_plan_free(&c->pl);
		fn_policy_free(c->p);
		c->p = np;
		c->pl = pl;
		return true;
	}
	fnb_slots_assign(c->slots, &c->pl); /* back to the policy in force */
	fnb_plan_free(&pl);
	fn_policy_free(np);
	return false;
}

static void toggle(struct fnb_ctl *c, const char *verb, char *arg, struct fn_buf *out)
{
	uint64_t since = fn_edit_enabled_at(arg);
	int i = fn_policy_rule_index(c->p, arg);
	if (i < 0) {
		fn_buf_printf(out, "error no rule named '%.64s'\n", arg);
		return;
	}
	set_rule(c, i, verb[0] == 'e', since);
	fn_buf_printf(out, "ok %s %s\n", arg, verb[0] == 'e' ? "enabled" : "disabled");
}

/* One change: enable, disable, add, rm, load, zone or reset, as the shim
 * takes them (core/edit.c), carried out by a new plan in the maps; an
 * enable or disable flips its rule in the plan in place, with no copy of
 * the policy. */
static void apply(struct fnb_ctl *c, char *line, struct fn_buf *out)
{
	char reply[1200];
	if (fn_edit_is_reset(line)) {
		struct fn_policy *np = fn_policy_clone(c->base);
		if (np && install(c, np, reply, sizeof(reply)))
			snprintf(reply, sizeof(reply), "ok reset to the run's policy");
		fn_buf_printf(out, "%s\n", np ? reply : "error out of memory");
		return;
	}
	char *arg = strchr(line, ' ');
	if (arg && arg[1] &&
	    (strncmp(line, "enable ", 7) == 0 || strncmp(line, "disable ", 8) == 0)) {
		*arg = '\0';
		return toggle(c, line, arg + 1, out);
	}
	int rule;
	uint64_t at;
	struct fn_policy *np = fn_edit_line(c->p, line, &rule, &at, reply, sizeof(reply));
	char ok[sizeof(reply)];
	snprintf(ok, sizeof(ok), "%s", reply);
	if (np && install(c, np, reply, sizeof(reply)))
		snprintf(reply, sizeof(reply), "%s", ok);
	fn_buf_printf(out, "%s\n", reply);
}

/* The journal's entries past the last one applied, in order. */
static void catch_up(struct fnb_ctl *c)
{
	FILE *f = fopen(c->journal, "re");
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	while (f && (n = getline(&line, &cap, f)) > 0 && line[n - 1] == '\n') {
		line[n - 1] = '\0';
		char *rest;
		unsigned long long seq = strtoull(line, &rest, 10);
		if (rest == line || *rest != ' ' || seq <= c->applied)
			continue;
		struct fn_buf ignored = {0};
		apply(c, rest + 1, &ignored);
		fn_buf_free(&ignored);
		c->applied = seq;
	}
	free(line);
	if (f)
		fclose(f);
}

static void info(struct fnb_ctl *c, struct fn_buf *out)
{
	size_t on = 0;
	for (size_t i = 0; i < c->p->nrules; i++)
		on += c->p->rules[i].enabled;
	fn_buf_printf(out, "process pid=%d", (int)getpid());
	fn_buf_field(out, "group", c->group);
	fn_buf_field(out, "zone", c->p->self_zone >= 0 ? c->p->zones[c->p->self_zone].name : "-");
	fn_buf_printf(out, " rules=%zu enabled=%zu seq=%llu", c->p->nrules, on, c->applied);
	fn_buf_field(out, "sockets", "kernel-side backend");
	fn_buf_field(out, "cmd", c->cmd);
	fn_buf_add(out, "\nend\n", 5);
}

static void counters(struct fnb_ctl *c, size_t i, struct fnb_count *n)
{
	uint32_t k = c->pl.rules[i].slot;
	memset(n, 0, sizeof(*n));
	bpf_map__lookup_elem(c->counts_map, &k, sizeof(k), n, sizeof(*n), 0);
}

static void rules(struct fnb_ctl *c, struct fn_buf *out, bool stats)
{
	for (size_t i = 0; i < c->p->nrules; i++) {
		const struct fn_rule *r = &c->p->rules[i];
		struct fnb_count n;
		counters(c, i, &n);
		fn_buf_printf(out, "rule pid=%d", (int)getpid());
		fn_buf_field(out, "name", r->name);
		if (stats) {
			fn_buf_printf(out, " action=%s attempts=%llu faults=%llu bytes=%llu\n",
				      fn_action_name(r->action), (unsigned long long)n.attempts,
				      (unsigned long long)n.faults,
				      (unsigned long long)__atomic_load_n(
					  &c->slots->bytes[c->pl.rules[i].slot], __ATOMIC_RELAXED));
			continue;
		}
		char params[256];
		fn_rule_describe(r, params, sizeof(params));
		fn_buf_printf(out, " action=%s enabled=%s faults=%llu attempts=%llu",
			      fn_action_name(r->action), r->enabled ? "yes" : "no",
			      (unsigned long long)n.faults, (unsigned long long)n.attempts);
		fn_buf_field(out, "params", params);
		fn_buf_add(out, "\n", 1);
	}
	fn_buf_add(out, "end\n", 4);
}

/* One request; true when the client stays, following the events. */
static bool request(struct fnb_ctl *c, char *line, struct fn_buf *out)
{
	if (line[0] == '@') { /* "@SEQ change": sent to the group */
		char *end;
		unsigned long long seq = strtoull(line + 1, &end, 10);
		if (end == line + 1 || *end != ' ') {
			fn_buf_printf(out, "error malformed sequence number\n");
			return false;
		}
		if (seq > c->applied + 1)
			catch_up(c);
		if (seq <= c->applied) {
			fn_buf_printf(out, "ok already applied (seq %llu)\n", seq);
			return false;
		}
		apply(c, end + 1, out);
		c->applied = seq;
	} else if (strcmp(line, "info") == 0) {
		info(c, out);
	} else if (strcmp(line, "rules") == 0 || strcmp(line, "stats") == 0) {
		rules(c, out, line[0] == 's');
	} else if (strcmp(line, "events") == 0 || strcmp(line, "events follow") == 0) {
		fnb_events_poll(&c->events);
		fnb_events_dump(&c->events, out);
		if (line[6])
			return true;
		fn_buf_add(out, "end\n", 4);
	} else {
		apply(c, line, out);
	}
	return false;
}

/* One client: one line in, one reply out, as faultctl talks; a follower
 * of the events stays. */
static void serve(struct fnb_ctl *c, int fd)
{
	static char buf[64 * 1024]; /* the control thread's; a load's rules fit */
	size_t got = 0;
	struct timeval tv = {.tv_sec = 1};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	while (got < sizeof(buf) - 1 && !memchr(buf, '\n', got)) {
		ssize_t n = recv(fd, buf + got, sizeof(buf) - 1 - got, 0);
		if (n <= 0)
			return;
		got += (size_t)n;
	}
	buf[got] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	struct fn_buf out = {0};
	bool follow = request(c, buf, &out);
	for (size_t off = 0; out.s && off < out.len;) {
		ssize_t n = send(fd, out.s + off, out.len - off, MSG_NOSIGNAL);
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	fn_buf_free(&out);
	if (follow)
		fnb_events_follow(&c->events, fd);
	else
		close(fd);
}

static void *loop(void *arg)
{
	struct fnb_ctl *c = arg;
	while (!__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE)) {
		if (c->seq && __atomic_load_n(c->seq, __ATOMIC_ACQUIRE) != c->applied)
			catch_up(c);
		fnb_events_poll(&c->events);
		struct pollfd pfd = {.fd = c->lfd, .events = POLLIN};
		if (poll(&pfd, 1, 2) <= 0)
			continue;
		int fd = accept4(c->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd >= 0)
			serve(c, fd);
	}
	return NULL;
}

static int listen_at(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	mode_t old = umask(077);
	unlink(path); /* ours: the name holds our pid */
	bool ok =
	    fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(fd, 64) == 0;
	umask(old);
	if (!ok && fd >= 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static void map_seq(struct fnb_ctl *c, const char *dir)
{
	char path[4200];
	fn_group_file(path, sizeof(path), dir, c->group, "seq");
	int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	c->seq = fd >= 0 ? fn_seq_map(fd, false) : NULL;
	if (fd >= 0)
		close(fd);
	if (!c->seq)
		fprintf(stderr,
			"faultctl run --backend=bpf: %s: %s: this run follows the group's "
			"changes only when faultctl sends them to it\n",
			path, strerror(errno));
}

static void unmap_seq(struct fnb_ctl *c)
{
	if (c->seq)
		munmap(c->seq, FN_SEQ_FILE_SIZE);
	c->seq = NULL;
}

bool fnb_ctl_start(struct fnb_ctl *c, char *err, size_t errlen)
{
	char dir[4096];
	const char *why = fn_rundir(dir, sizeof(dir));
	if (why) {
		snprintf(err, errlen, "run directory %s %s", dir, why);
		return false;
	}
	if (!fn_sock_path(c->path, sizeof(c->path), dir, c->group, getpid())) {
		snprintf(err, errlen, "run directory %s: the socket path is too long", dir);
		return false;
	}
	fn_group_file(c->journal, sizeof(c->journal), dir, c->group, "journal");
	map_seq(c, dir);
	catch_up(c); /* what the group was told before this run joined */
	if (!fnb_events_open(&c->events, c->events_map, c->slots, err, errlen)) {
		unmap_seq(c);
		return false;
	}
	c->lfd = listen_at(c->path);
	if (c->lfd < 0)
		snprintf(err, errlen, "cannot listen on %s: %s", c->path, strerror(errno));
	else if (pthread_create(&c->thread, NULL, loop, c) != 0)
		snprintf(err, errlen, "cannot start the control thread");
	else
		return true;
	if (c->lfd >= 0) {
		close(c->lfd);
		unlink(c->path);
	}
	fnb_events_close(&c->events);
	unmap_seq(c);
	return false;
}

void fnb_ctl_stop(struct fnb_ctl *c)
{
	__atomic_store_n(&c->stop, true, __ATOMIC_RELEASE);
	pthread_join(c->thread, NULL);
	fnb_events_poll(&c->events); /* the last ones, for FAULTNET_EVENTS */
	fnb_events_close(&c->events);
	close(c->lfd);
	unlink(c->path);
	unmap_seq(c);
}
