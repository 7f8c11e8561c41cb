/* commands.c - info, rules, stats, events and the policy changes: enable,
 * disable, add, rm, load, zone, reset. Changes sent to a group carry a
 * sequence number ("@SEQ verb ...") and are also kept in the group's
 * journal, so that a process that joins or forks later replays them. */
#include "shim/control/commands.h"

#include "core/actions.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/config.h"
#include "core/edit.h"
#include "core/http.h"
#include "shim/base/policy.h"
#include "shim/stats/stats.h"

static const char *base_config, *base_zone;
static char group[FN_NAME_MAX] = "default";
static char journal[4096];
static uint64_t applied_seq;

#define GRACE_SECONDS 60

/* Old policies may still be read by a thread that loaded the pointer just
 * before a swap; they are freed only after a long grace period. A list, so
 * that any number of changes a minute keeps them all reachable. */
struct retired {
	struct fn_policy *p;
	time_t at;
	struct retired *next;
};
static struct retired *retired; /* newest first */
static bool alone;		/* replaying with no other thread: see fn_cmd_catch_up() */

void fn_cmd_set_base(const char *config, const char *zone)
{
	base_config = config;
	base_zone = zone;
}

void fn_cmd_set_group(const char *g, const char *j)
{
	snprintf(group, sizeof(group), "%s", g);
	snprintf(journal, sizeof(journal), "%s", j);
}

static void retire(struct fn_policy *old)
{
	time_t now = time(NULL);
	struct retired *r = malloc(sizeof(*r)), **pp = &retired;
	if (r) {
		*r = (struct retired){old, now, retired};
		retired = r;
	}
	/* Entries are newest first: everything after the first expired one
	 * has expired too. */
	while (*pp && now - (*pp)->at <= GRACE_SECONDS)
		pp = &(*pp)->next;
	for (struct retired *x = *pp, *next; x; x = next) {
		next = x->next;
		fn_policy_free(x->p);
		free(x);
	}
	*pp = NULL;
	/* Out of memory for the list entry: keeping the policy forever is
	 * the safe choice. */
}

/* Counters are cumulative per rule name for the process's life, whatever
 * load, reset, rm and add do in between: a rule that goes keeps its counts
 * here (and in stats), and a rule of the same name that comes back takes
 * them up again. */
#define GONE_MAX 256
static struct gone {
	char name[FN_NAME_MAX];
	enum fn_action action;
	uint64_t attempts, faults, bytes;
} gone[GONE_MAX];
static size_t ngone;

static void add_counts(struct fn_rulestat *to, uint64_t a, uint64_t f, uint64_t b)
{
	__atomic_add_fetch(&to->attempts, a, __ATOMIC_RELAXED);
	__atomic_add_fetch(&to->faults, f, __ATOMIC_RELAXED);
	__atomic_add_fetch(&to->bytes, b, __ATOMIC_RELAXED);
}

static void take_gone(struct fn_rule *r)
{
	for (size_t i = 0; i < ngone; i++)
		if (strcmp(gone[i].name, r->name) == 0) {
			add_counts(r->stat, gone[i].attempts, gone[i].faults, gone[i].bytes);
			gone[i] = gone[--ngone];
			return;
		}
}

static void keep_gone(const struct fn_rule *r)
{
	const struct fn_rulestat *s = r->stat;
	if (!s || ngone == GONE_MAX)
		return;
	struct gone *g = &gone[ngone++];
	snprintf(g->name, sizeof(g->name), "%s", r->name);
	g->action = r->action;
	g->attempts = __atomic_load_n(&s->attempts, __ATOMIC_RELAXED);
	g->faults = __atomic_load_n(&s->faults, __ATOMIC_RELAXED);
	g->bytes = __atomic_load_n(&s->bytes, __ATOMIC_RELAXED);
}

static void carry_counts(const struct fn_policy *old, struct fn_policy *p)
{
	for (size_t i = 0; i < p->nrules; i++) {
		struct fn_rule *r = &p->rules[i];
		int o = old ? fn_policy_rule_index(old, r->name) : -1;
		const struct fn_rulestat *os = o >= 0 ? old->rules[o].stat : NULL;
		if (!r->stat || os == r->stat)
			continue; /* the same counters: a copy of the old rule */
		if (os)
			add_counts(r->stat, __atomic_load_n(&os->attempts, __ATOMIC_RELAXED),
				   __atomic_load_n(&os->faults, __ATOMIC_RELAXED),
				   __atomic_load_n(&os->bytes, __ATOMIC_RELAXED));
		else
			take_gone(r);
	}
	for (size_t i = 0; old && i < old->nrules; i++)
		if (fn_policy_rule_index(p, old->rules[i].name) < 0)
			keep_gone(&old->rules[i]);
}

static void publish(struct fn_policy *p)
{
	fn_policy_finish(p);
	carry_counts(fn_policy_current(), p);
	struct fn_policy *old = fn_policy_publish(p);
	if (old && alone)
		fn_policy_free(old);
	else if (old)
		retire(old);
}

static struct fn_policy *current_copy(void)
{
	const struct fn_policy *cur = fn_policy_current();
	return cur ? fn_policy_clone(cur) : fn_edit_empty();
}

static void reply_error(struct fn_buf *out, const char *msg)
{
	fn_buf_printf(out, "error %s\n", msg);
}

/* Conditions count and time from the moment a rule is switched on: r's
 * when it goes from off to on. */
static void switched_on(struct fn_rule *r, uint64_t at)
{
	if (!r->stat)
		return;
	fn_rulestat_restart(r->stat);
	if (at)
		__atomic_store_n(&r->stat->enabled_ns, at, __ATOMIC_RELEASE);
}

static void reset(struct fn_buf *out)
{
	char err[1024];
	struct fn_policy *p = base_config
				  ? fn_config_load_file(base_config, base_zone, err, sizeof(err))
				  : fn_edit_empty();
	if (!p)
		return reply_error(out, err);
	publish(p);
	fn_buf_printf(out, "ok reset to %s\n", base_config ? base_config : "no rules");
}

static void info(struct fn_buf *out)
{
	const struct fn_policy *p = fn_policy_current();
	size_t on = 0, n = p ? p->nrules : 0;
	for (size_t i = 0; i < n; i++)
		on += p->rules[i].enabled;
	char cmd[512] = "";
	FILE *f = fopen("/proc/self/cmdline", "re");
	size_t len = f ? fread(cmd, 1, sizeof(cmd) - 1, f) : 0;
	if (f)
		fclose(f);
	for (size_t i = 0; i + 1 < len; i++)
		if (!cmd[i])
			cmd[i] = ' ';
	fn_buf_printf(out, "process pid=%d", (int)getpid());
	fn_buf_field(out, "group", group);
	fn_buf_field(out, "zone", p && p->self_zone >= 0 ? p->zones[p->self_zone].name : "-");
	fn_buf_printf(out, " rules=%zu enabled=%zu seq=%llu", n, on,
		      (unsigned long long)applied_seq);
	fn_buf_field(out, "sockets",
		     __atomic_load_n(&fn_sockets_seen, __ATOMIC_RELAXED) ? "seen"
									 : "no socket calls seen");
	fn_buf_field(out, "cmd", cmd);
	fn_buf_add(out, "\nend\n", 5);
}

static void rules(struct fn_buf *out)
{
	const struct fn_policy *p = fn_policy_current();
	for (size_t i = 0; p && i < p->nrules; i++) {
		const struct fn_rule *r = &p->rules[i];
		fn_buf_printf(out, "rule pid=%d", (int)getpid());
		fn_buf_field(out, "name", r->name);
		char params[256];
		fn_rule_describe(r, params, sizeof(params));
		fn_buf_printf(out, " action=%s enabled=%s faults=%llu attempts=%llu",
			      fn_action_name(r->action), r->enabled ? "yes" : "no",
			      (unsigned long long)(r->stat ? r->stat->faults : 0),
			      (unsigned long long)(r->stat ? r->stat->attempts : 0));
		fn_buf_field(out, "params", params);
		fn_buf_add(out, "\n", 1);
	}
	fn_buf_add(out, "end\n", 4);
}

/* An HTTP rule's requests: seen, and what became of them. */
static void request_counts(struct fn_buf *out, const struct fn_rule *r, const struct fn_rulestat *s)
{
	fn_buf_printf(out, " requests=%llu answered=%llu slowed=%llu aborted=%llu forwarded=%llu",
		      (unsigned long long)__atomic_load_n(&s->requests, __ATOMIC_RELAXED),
		      (unsigned long long)__atomic_load_n(&s->answered, __ATOMIC_RELAXED),
		      (unsigned long long)__atomic_load_n(&s->slowed, __ATOMIC_RELAXED),
		      (unsigned long long)__atomic_load_n(&s->aborted, __ATOMIC_RELAXED),
		      (unsigned long long)__atomic_load_n(&s->forwarded, __ATOMIC_RELAXED));
	if (r->action == FN_ACT_RESPOND)
		fn_buf_printf(out, " status=%d", r->http->status);
}

void fn_cmd_stats(struct fn_buf *out)
{
	const struct fn_policy *p = fn_policy_current();
	for (size_t i = 0; p && i < p->nrules; i++) {
		const struct fn_rule *r = &p->rules[i];
		const struct fn_rulestat *s = r->stat;
		fn_buf_printf(out, "rule pid=%d", (int)getpid());
		fn_buf_field(out, "name", r->name);
		fn_buf_printf(
		    out, " action=%s attempts=%llu faults=%llu bytes=%llu",
		    fn_action_name(r->action),
		    (unsigned long long)(s ? __atomic_load_n(&s->attempts, __ATOMIC_RELAXED) : 0),
		    (unsigned long long)(s ? __atomic_load_n(&s->faults, __ATOMIC_RELAXED) : 0),
		    (unsigned long long)(s ? __atomic_load_n(&s->bytes, __ATOMIC_RELAXED) : 0));
		if (fn_rule_http(r) && s)
			request_counts(out, r, s);
		fn_buf_add(out, "\n", 1);
	}
	for (size_t i = 0; i < ngone; i++) {
		fn_buf_printf(out, "rule pid=%d", (int)getpid());
		fn_buf_field(out, "name", gone[i].name);
		fn_buf_printf(out, " action=%s attempts=%llu faults=%llu bytes=%llu\n",
			      fn_action_name(gone[i].action), (unsigned long long)gone[i].attempts,
			      (unsigned long long)gone[i].faults,
			      (unsigned long long)gone[i].bytes);
	}
	fn_stats_dump(out);
	fn_stats_requests_dump(out);
	fn_stats_lookups_dump(out);
}

/* One change: reset here (it goes back to what this process started
 * with), the others as core/edit.c makes them; published when good. */
static void run_change(char *line, struct fn_buf *out)
{
	if (strncmp(line, "reset", 5) == 0 && (!line[5] || line[5] == ' '))
		return reset(out);
	char reply[1200];
	int i;
	uint64_t at;
	const struct fn_policy *cur = fn_policy_current();
	struct fn_policy *p = fn_edit_line(cur, line, &i, &at, reply, sizeof(reply));
	if (p && i >= 0 && p->rules[i].enabled && !cur->rules[i].enabled)
		switched_on(&p->rules[i], at);
	fn_buf_printf(out, "%s\n", reply);
	if (p)
		publish(p);
}

/* Replaying a journal at start-up is linear in its length: consecutive
 * enables and disables are applied to one private copy of the policy,
 * found by a hash of rule names, and published once; any other change
 * publishes what came before it first. While the process is alone (at
 * start, or in a fork child) a replaced policy is freed at once: no thread
 * can be reading it. */
static struct batch {
	struct fn_policy *p;
	int *slot; /* rule index + 1 by name hash; 0 when free */
	size_t mask;
} batch;

static uint64_t name_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

static bool batch_open(void)
{
	if (batch.p)
		return true;
	batch.p = current_copy();
	size_t n = batch.p ? batch.p->nrules : 0, size = 16;
	while (size < 2 * n)
		size *= 2;
	batch.slot = calloc(size, sizeof(int));
	batch.mask = size - 1;
	if (!batch.p || !batch.slot) {
		fn_policy_free(batch.p);
		free(batch.slot);
		batch = (struct batch){0};
		return false;
	}
	for (size_t i = 0; i < n; i++) {
		size_t h = name_hash(batch.p->rules[i].name) & batch.mask;
		while (batch.slot[h])
			h = (h + 1) & batch.mask;
		batch.slot[h] = (int)i + 1;
	}
	return true;
}

static void batch_flush(void)
{
	if (!batch.p)
		return;
	publish(batch.p);
	free(batch.slot);
	batch = (struct batch){0};
}

/* An enable or disable applied to the batch; false if it is not one or
 * names no rule (then it runs the ordinary way, which replies the error). */
static bool batch_toggle(char *line)
{
	bool on = strncmp(line, "enable ", 7) == 0;
	if ((!on && strncmp(line, "disable ", 8) != 0) || !batch_open())
		return false;
	char *name = line + (on ? 7 : 8);
	uint64_t at = fn_edit_enabled_at(name);
	for (size_t h = name_hash(name) & batch.mask; batch.slot[h]; h = (h + 1) & batch.mask) {
		struct fn_rule *r = &batch.p->rules[batch.slot[h] - 1];
		if (strcmp(r->name, name) != 0)
			continue;
		if (on && !r->enabled)
			switched_on(r, at);
		r->enabled = on;
		return true;
	}
	return false;
}

/* Applies one journal line "SEQ verb ..." if it is the next one. */
static void apply_entry(char *line)
{
	char *end;
	unsigned long long seq = strtoull(line, &end, 10);
	if (end == line || *end != ' ' || seq <= applied_seq)
		return;
	if (!batch_toggle(end + 1)) {
		batch_flush();
		struct fn_buf ignored = {0};
		run_change(end + 1, &ignored);
		fn_buf_free(&ignored);
	}
	applied_seq = seq;
}

void fn_cmd_catch_up(bool only_thread)
{
	if (!journal[0])
		return;
	FILE *f = fopen(journal, "re");
	if (!f)
		return;
	alone = only_thread;
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	/* Only whole lines: one being appended right now reaches us by its
	 * own message, since our socket already exists. */
	while ((n = getline(&line, &cap, f)) > 0 && line[n - 1] == '\n') {
		line[n - 1] = '\0';
		apply_entry(line);
	}
	batch_flush();
	alone = false;
	free(line);
	fclose(f);
}

/* "@SEQ verb ...": a change sent to the whole group. */
static void run_sequenced(char *line, struct fn_buf *out)
{
	char *end;
	unsigned long long seq = strtoull(line + 1, &end, 10);
	if (end == line + 1 || *end != ' ')
		return reply_error(out, "malformed sequence number");
	if (seq > applied_seq + 1)
		fn_cmd_catch_up(false);
	if (seq <= applied_seq) {
		fn_buf_printf(out, "ok already applied (seq %llu)\n", seq);
		return;
	}
	run_change(end + 1, out);
	applied_seq = seq;
}

void fn_cmd_run(char *line, struct fn_buf *out, bool *follow, uint64_t *since)
{
	if (line[0] == '@')
		return run_sequenced(line, out);
	if (strcmp(line, "info") == 0)
		return info(out);
	if (strcmp(line, "rules") == 0)
		return rules(out);
	if (strcmp(line, "stats") == 0) {
		fn_cmd_stats(out);
		fn_buf_add(out, "end\n", 4);
		return;
	}
	if (strcmp(line, "events") == 0 || strcmp(line, "events follow") == 0) {
		*since = 0;
		fn_events_dump(out, since);
		*follow = line[6] != '\0';
		if (!*follow)
			fn_buf_add(out, "end\n", 4);
		return;
	}
	run_change(line, out);
}
