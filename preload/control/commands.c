/* commands.c - the policy changes (enable, disable, add, rm, load, zone,
 * reset), applied from the group's journal, where faultctl writes them
 * with sequence numbers, so that a process that joins or forks later
 * replays them too. An entry "SEQ pid=PID.START verb ..." is for the one
 * process with that pid and start time (faultctl -p). Each policy
 * published is listed in the member's published state first. */
#include "preload/control/commands.h"

#include "core/actions.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/compiled.h"
#include "core/config.h"
#include "core/edit.h"
#include "core/hash.h"
#include "core/http.h"
#include "core/lcfg.h"
#include "core/rundir.h"
#include "core/startdata.h"
#include "preload/base/policy.h"
#include "preload/stats/stats.h"

static const char *base_config FN_START_DATA, *base_zone FN_START_DATA;
static char group[FN_NAME_MAX] = "default";
static char journal[4096];
static uint64_t applied_seq;

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

static void publish(struct fn_policy *p)
{
	fn_policy_finish(p);
	fn_stats_list(p, false);
	/* The replaced policy is freed once no reader holds it (policy.c). */
	fn_policy_replace(p);
}

static struct fn_policy *current_copy(void)
{
	const struct fn_policy *cur = fn_policy_locked();
	return cur ? fn_policy_clone(cur) : fn_edit_empty();
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

/* Back to what this process started with. A config that no longer loads
 * leaves the policy as it is: faultctl checked the change against the
 * same file before journaling it. */
static void reset(void)
{
	char err[1024];
	struct fn_policy *p = base_config
				  ? fn_compiled_load_file(base_config, base_zone, err, sizeof(err))
				  : fn_edit_empty();
	if (p)
		publish(p);
}

/* One change: reset here, the others as core/edit.c makes them; published
 * when good. No reply: faultctl has checked the change (ctl/check.c) and
 * reads the outcome from the state file. */
static void run_change(char *line)
{
	if (fn_edit_is_reset(line))
		return reset();
	char reply[1200];
	int i;
	uint64_t at;
	const struct fn_policy *cur = fn_policy_locked();
	struct fn_policy *p = fn_edit_line(cur, line, &i, &at, reply, sizeof(reply));
	if (p && i >= 0 && p->rules[i].enabled && !cur->rules[i].enabled)
		switched_on(&p->rules[i], at);
	if (p)
		publish(p);
}

/* Replaying a journal is linear in its length: consecutive enables,
 * disables, adds, rms and zones are applied to one private copy of the
 * policy (a rule found by a hash of rule names, rebuilt after an add or
 * rm) and published once, its index built then; a load or a reset
 * publishes what came before it first. Each add and rm had been a copy,
 * an index and a load of libconfig: a process joining a group after 1,000
 * adds and 1,000 rms took 0.5 s to start. */
static struct batch {
	struct fn_policy *p;
	int *slot; /* rule index + 1 by name hash; 0 when free */
	size_t mask;
	bool hashed; /* slot is p's */
} batch;

/* libconfig, held through a catch-up from its first parse (an add or a
 * load) on, so that each parse does not load and unload it. */
static struct fn_lcfg parser;
static bool parser_held;

/* The name hash of batch.p's rules; false when memory is short. */
static bool batch_hash(void)
{
	if (batch.hashed)
		return true;
	size_t n = batch.p->nrules, size = 16;
	while (size < 2 * n)
		size *= 2;
	free(batch.slot);
	batch.slot = calloc(size, sizeof(int));
	batch.mask = size - 1;
	if (!batch.slot)
		return false;
	for (size_t i = 0; i < n; i++) {
		size_t h = fn_hash_str(batch.p->rules[i].name) & batch.mask;
		while (batch.slot[h])
			h = (h + 1) & batch.mask;
		batch.slot[h] = (int)i + 1;
	}
	return batch.hashed = true;
}

static bool batch_open(void)
{
	if (!batch.p && !(batch.p = current_copy()))
		return false;
	return true;
}

static void batch_flush(void)
{
	if (!batch.p)
		return;
	publish(batch.p); /* builds its index */
	free(batch.slot);
	batch = (struct batch){0};
}

/* An enable or disable of the rule name (the line's argument) applied to
 * the batch by the name hash (a rule that
 * is not there: refused, nothing changes). */
static void batch_toggle(char *name, bool on)
{
	uint64_t at = fn_edit_enabled_at(name);
	for (size_t h = fn_hash_str(name) & batch.mask; batch.slot[h]; h = (h + 1) & batch.mask) {
		struct fn_rule *r = &batch.p->rules[batch.slot[h] - 1];
		if (strcmp(r->name, name) != 0)
			continue;
		if (on && !r->enabled)
			switched_on(r, at);
		r->enabled = on;
		return;
	}
}

/* A change applied to the batch: true when it was one of the batch's
 * (applied, or refused as the ordinary way would have: a refused change
 * publishes nothing). False for a load or a reset, or when memory is
 * short: then it runs the ordinary way. */
static bool batch_edit(char *line)
{
	size_t arg;
	enum fn_edit_kind k = fn_edit_kind(line, &arg);
	if (k == FN_EDIT_OTHER || !batch_open())
		return false;
	if (k == FN_EDIT_ENABLE || k == FN_EDIT_DISABLE) {
		if (!batch_hash())
			return false;
		batch_toggle(line + arg, k == FN_EDIT_ENABLE);
		return true;
	}
	if (k == FN_EDIT_ADD && !parser_held)
		parser_held = !fn_lcfg_open(&parser);
	char reply[1200];
	if (fn_edit_in_place(batch.p, line, reply, sizeof(reply)) > 0 &&
	    (k == FN_EDIT_ADD || k == FN_EDIT_RM))
		batch.hashed = false; /* rule indexes moved */
	return true;
}

/* Applies one journal line "SEQ [pid=PID.START.NS ]verb ..." if it is the
 * next one (and, with a target, this process is it: fn_self_id, which a
 * fork child makes anew). */
static void apply_entry(char *line)
{
	char *end;
	unsigned long long seq = strtoull(line, &end, 10);
	if (end == line || *end != ' ' || seq <= applied_seq)
		return;
	struct fn_member_id id;
	char *change = fn_edit_target(end + 1, &id);
	if (change && (!id.pid || fn_member_is(&id, fn_self_id())) && !batch_edit(change)) {
		batch_flush();
		if (strncmp(change, "load ", 5) == 0 && !parser_held)
			parser_held = !fn_lcfg_open(&parser);
		run_change(change);
	}
	applied_seq = seq;
	fn_seg->h.seq = seq;
}

uint64_t fn_cmd_applied(void)
{
	return applied_seq;
}

const char *fn_cmd_base_config(void)
{
	return base_config;
}

const char *fn_cmd_base_zone(void)
{
	return base_zone;
}

void fn_cmd_catch_up(void)
{
	if (!journal[0])
		return;
	FILE *f = fopen(journal, "re");
	if (!f)
		return;
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	/* Only whole lines: faultctl moves the group's counter after it has
	 * written a line, and this runs again when it has. */
	while ((n = getline(&line, &cap, f)) > 0 && line[n - 1] == '\n') {
		line[n - 1] = '\0';
		apply_entry(line);
	}
	batch_flush();
	if (parser_held)
		fn_lcfg_close(&parser);
	parser_held = false;
	free(line);
	fclose(f);
}
