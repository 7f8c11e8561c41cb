/* check.c - a change checked by faultctl itself, so that no member is
 * asked anything: the policy a member has is rebuilt from what it started
 * with (its FAULTNET_CONFIG, as an absolute path, and FAULTNET_ZONE, from
 * its published state) and the group's journal before the change (the
 * entries for every member and those for it alone), replayed as members
 * replay it (core/edit.c), and the change is applied to it. */
#include "ctl/check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/compiled.h"
#include "core/config.h"
#include "core/edit.h"
#include "core/lcfg.h"
#include "core/rules.h"
#include "core/wire.h"

/* What the member started with, or NULL with the reason in err. From the
 * run directory's compiled copy, as a start reads it (core/compiled.h),
 * faultctl's own (the copy's key holds the program's build-id): after the
 * first check of a policy, a flip loads no libconfig and parses nothing. */
static struct fn_policy *base_of(const struct fn_seg_head *h, char *err, size_t len)
{
	if (!h->config[0])
		return fn_edit_empty();
	return fn_compiled_load_file(h->config, h->start_zone[0] ? h->start_zone : NULL, err, len);
}

/* libconfig held through a replay once an entry parses rule text (add,
 * load, zone): each such parse would load and unload it, most of what an
 * add cost. Loaded only then: enables and disables, most of a journal,
 * parse nothing. */
struct pin {
	struct fn_lcfg l;
	bool held;
};

static void pin_for(struct pin *pin, const char *line)
{
	static const char *const parsing[] = {"add ", "load ", "zone "};
	for (size_t k = 0; k < sizeof(parsing) / sizeof(parsing[0]) && !pin->held; k++)
		if (strncmp(line, parsing[k], strlen(parsing[k])) == 0)
			pin->held = !fn_lcfg_open(&pin->l);
}

/* One change line applied to *p (replaced when it applies); the reply in
 * reply. reset goes back to base. */
static bool apply(struct fn_policy **p, const struct fn_policy *base, const char *config,
		  char *line, char *reply, size_t len)
{
	struct fn_policy *np;
	int rule;
	uint64_t at;
	if (fn_edit_is_reset(line)) {
		np = fn_policy_clone(base);
		snprintf(reply, len, np ? "ok reset to %s" : "error out of memory",
			 *config ? config : "no rules");
	} else {
		np = fn_edit_line(*p, line, &rule, &at, reply, len);
	}
	if (!np)
		return false;
	fn_policy_free(*p);
	*p = np;
	return true;
}

/* enable, disable, add, rm and zone, most of a journal, are applied to p
 * in place (p is the replay's own), its index left stale: nothing a check
 * reads needs it. Through fn_edit_line each was a copy of the policy and
 * each add or rm a new index, so a check cost as much per entry before it
 * (a flip 500 ms after 6,000 enables of a 1,000-rule policy; 45 ms after
 * 200 adds and rms of one, against 6 ms). A change the member refused is
 * skipped, as the member skipped it. Another change (load, reset) goes
 * through apply(). */
static void edit(struct fn_policy **p, const struct fn_policy *base, const char *config, char *line,
		 struct pin *pin, char *reply, size_t len)
{
	pin_for(pin, line);
	if (fn_edit_in_place(*p, line, reply, len) < 0)
		apply(p, base, config, line, reply, len);
}

/* The journal's entries up to upto that are the member's replayed on *p;
 * false when the journal cannot be read. Entries a member refused are
 * skipped, as members skip them ("SEQ refused" is no verb). */
static bool replay(struct fn_policy **p, const struct fn_policy *base, const struct fn_seg_head *h,
		   const char *journal, unsigned long long upto, struct pin *pin)
{
	if (!upto)
		return true; /* no entry yet: there may be no journal */
	FILE *f = fopen(journal, "re");
	if (!f)
		return false;
	char *line = NULL, reply[1200];
	size_t cap = 0;
	ssize_t n;
	const struct fn_member_id who = {.pid = h->pid, .ns = h->pidns, .start = h->start};
	while ((n = getline(&line, &cap, f)) > 0 && line[n - 1] == '\n') {
		line[n - 1] = '\0';
		char *rest, *change;
		unsigned long long s = strtoull(line, &rest, 10);
		struct fn_member_id id;
		if (rest != line && *rest == ' ' && s <= upto &&
		    (change = fn_edit_target(rest + 1, &id)) &&
		    (!id.pid || fn_member_is(&id, &who)))
			edit(p, base, h->config, change, pin, reply, sizeof(reply));
	}
	free(line);
	fclose(f);
	return true;
}

struct fn_policy *check_rebuild(const struct fn_seg_head *h, const char *journal,
				unsigned long long upto, char *err, size_t len)
{
	struct pin pin = {.held = false};
	char why[1100];
	struct fn_policy *base = base_of(h, why, sizeof(why));
	struct fn_policy *p = base ? fn_policy_clone(base) : NULL;
	if (!base)
		snprintf(err, len, "process %d's policy cannot be rebuilt: %s", (int)h->pid, why);
	else if (!p || !replay(&p, base, h, journal, upto, &pin)) {
		snprintf(err, len, "cannot replay %s", journal);
		fn_policy_free(p);
		p = NULL;
	}
	fn_policy_free(base);
	if (pin.held)
		fn_lcfg_close(&pin.l);
	return p;
}

int check_change(const struct fn_seg_head *h, const char *journal, unsigned long long seq,
		 const char *line, char *reply, size_t len)
{
	char why[1200];
	struct fn_policy *p = check_rebuild(h, journal, seq - 1, why, sizeof(why));
	/* What reset goes back to, only for a reset: a config file read once
	 * a change, not twice. */
	bool reset = fn_edit_is_reset(line);
	struct fn_policy *base = p && reset ? base_of(h, why, sizeof(why)) : NULL;
	char *copy = strdup(line);
	int rc = -1;
	if (!p || (reset && !base))
		snprintf(reply, len, "error %s", why);
	else if (copy)
		rc = apply(&p, base, h->config, copy, reply, len);
	free(copy);
	fn_policy_free(p);
	fn_policy_free(base);
	return rc;
}
