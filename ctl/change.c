/* change.c - a change for a group or for named processes. It goes to the
 * group's journal first (a process joining meanwhile replays it), is
 * checked by faultctl against the policy a member has (check.c), and is
 * put in force by moving the group's change counter, which every member
 * reads at its next covered call: no member is asked anything, so a flip
 * costs the same for 1 and 4,096 processes, and a stopped member applies
 * it when it resumes. A faultctl run with the kernel-side backend is a
 * member with a control socket instead: it is asked. */
#include "ctl/change.h"

#include <dirent.h>
#include <sys/stat.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rundir.h"
#include "ctl/check.h"
#include "ctl/journal.h"
#include "ctl/state/render.h"
#include "ctl/state/segread.h"
#include "ctl/state/unjoined.h"

/* One change's outcome as a JSON line: who ("pid":N or the group's
 * fields), ok, and the reply, escaped (a reply may quote the rule text). */
static void print_json_reply(const char *who, bool ok, const char *reply)
{
	printf("{%s,\"ok\":%s,\"reply\":", who, ok ? "true" : "false");
	render_json_string(stdout, reply);
	puts("}");
}

/* A process's reply ("ok ..." or "error ..."), as a line of its own. */
static void print_pid_reply(pid_t pid, const char *reply, bool json)
{
	bool ok = strncmp(reply, "ok", 2) == 0;
	if (json) {
		char who[32];
		snprintf(who, sizeof(who), "\"pid\":%d", (int)pid);
		print_json_reply(who, ok, reply + (ok ? 2 + (reply[2] == ' ') : 6));
	} else
		fprintf(ok ? stdout : stderr, "%d: %s\n", (int)pid, reply);
}

/* Sends a change to every socket target; returns how many did not apply it. */
static int send_change(struct target *t, int n, const char *line, bool json)
{
	int bad = 0;
	struct fn_buf *all = calloc((size_t)n + 1, sizeof(*all));
	if (!all)
		return n;
	targets_request_all(t, n, line, all);
	for (int i = 0; i < n; i++) {
		struct fn_buf *r = &all[i];
		if (!r->s)
			fn_buf_printf(r, "error out of memory\n");
		r->s[strcspn(r->s, "\n")] = '\0';
		bad += strncmp(r->s, "ok", 2) != 0;
		print_pid_reply(t[i].pid, r->s, json);
		fn_buf_free(r);
	}
	free(all);
	return bad;
}

static void print_group_reply(bool json, const char *group, int n, bool ok, const char *reply)
{
	if (json) {
		char who[128];
		snprintf(who, sizeof(who), "\"group\":\"%s\",\"processes\":%d", group, n);
		print_json_reply(who, ok, reply);
	} else
		fprintf(ok ? stdout : stderr, "group %s (%d process%s): %s%s\n", group, n,
			n == 1 ? "" : "es", ok ? "ok " : "error ", reply);
}

/* The member a socket target asks: the first that answers among those not
 * stopped (a stopped one would answer only when resumed). -1 for none. */
static int asked(struct target *t, int n, const char *sequenced, char *reply, size_t len)
{
	for (int i = 0, tried = 0; i < n && tried < 3; i++) {
		if (t[i].seg || targets_stopped(t[i].pid))
			continue;
		tried++;
		struct fn_buf r = {0};
		bool ok = targets_request(&t[i], sequenced, &r);
		if (ok)
			snprintf(reply, len, "%.*s", (int)strcspn(r.s, "\n"), r.s);
		fn_buf_free(&r);
		if (ok)
			return i;
	}
	return -1;
}

/* The check: against the policy of the first member whose state can be
 * read (then the reply is "ok ..." or "error ..."); a socket target is
 * asked. Returns the member's index; -1 when none could check it (why in
 * reply). */
static int check(const char *dir, struct target *t, int n, const char *group,
		 unsigned long long seq, const char *line, char *reply, size_t len)
{
	char journal[4200], err[600];
	fn_group_file(journal, sizeof(journal), dir, group, "journal");
	snprintf(reply, len, "error no member's policy could be rebuilt");
	for (int i = 0, tried = 0; i < n && tried < 3; i++) {
		if (!t[i].seg)
			continue;
		tried++;
		struct fn_seg *s = targets_state(&t[i], SEG_HEAD, 0, err, sizeof(err));
		int rc = s ? check_change(&s->h, journal, seq, line, reply, len) : -1;
		if (!s)
			snprintf(reply, len, "error %s", err);
		free(s);
		if (rc >= 0)
			return i;
	}
	struct fn_buf sequenced = {0};
	fn_buf_printf(&sequenced, "@%llu %s", seq, line);
	int c = sequenced.s ? asked(t, n, sequenced.s, reply, len) : -1;
	fn_buf_free(&sequenced);
	return c;
}

/* A journaled change (lock held) checked and put in force; or taken back
 * out of the journal with the reason. 0 or 1. */
static int in_force(const char *dir, const char *group, unsigned long long seq, int c,
		    const char *reply, const char *who)
{
	char err[4300];
	if (c >= 0 && strncmp(reply, "ok", 2) != 0) {
		fprintf(stderr, "faultctl: the change does not apply to %s%s\n", who,
			journal_drop(dir, group, seq) ? "; it is not kept in the journal" : "");
		return 1;
	}
	if (c < 0) {
		fprintf(stderr, "faultctl: the change cannot be checked (%s)%s\n", reply + 6,
			journal_drop(dir, group, seq) ? "; it is not kept in the journal" : "");
		return 1;
	}
	if (!journal_seq_store(dir, group, seq, err, sizeof(err))) {
		fprintf(stderr, "faultctl: %s: the change is not in force%s\n", err,
			journal_drop(dir, group, seq) ? "; it is not kept in the journal" : "");
		return 1;
	}
	return 0;
}

/* The groups of the run directory that some process has joined (their
 * change counter, GROUP.seq, is made by the first member), as
 * " 'a', 'b'" for a message; "" for none. */
static void groups_joined(const char *dir, char *out, size_t len)
{
	DIR *d = opendir(dir);
	size_t used = 0;
	out[0] = '\0';
	for (struct dirent *e; d && (e = readdir(d));) {
		size_t n = strlen(e->d_name);
		if (n > 4 && strcmp(e->d_name + n - 4, ".seq") == 0 && used + n + 8 < len)
			used += (size_t)snprintf(out + used, len - used, "%s '%.*s'",
						 used ? "," : "", (int)(n - 4), e->d_name);
	}
	if (d)
		closedir(d);
	/* and those whose processes have started but not joined yet */
	struct unjoined_scan sc;
	struct unjoined t;
	unjoined_begin(&sc, dir, NULL, 0, NULL, 0);
	while (unjoined_next(&sc, &t)) {
		char name[80];
		size_t n = (size_t)snprintf(name, sizeof(name), "'%s'", t.group);
		if (!strstr(out, name) && used + n + 3 < len)
			used += (size_t)snprintf(out + used, len - used, "%s %s", used ? "," : "",
						 name);
	}
	unjoined_end(&sc);
}

/* A change to a group that no process has ever joined is most often a
 * misspelt -g: refused, with the groups that exist and the way to mean
 * it. Nothing is written for it (no journal, lock or counter). */
static bool group_known(const char *dir, const struct selection *sel, const char *group)
{
	char path[4200], seen[1024];
	struct stat st;
	fn_group_file(path, sizeof(path), dir, group, "seq");
	if (sel->ahead || lstat(path, &st) == 0 || unjoined_in(dir, group))
		return true;
	groups_joined(dir, seen, sizeof(seen));
	fprintf(stderr,
		"faultctl: no process has joined group '%s' (%s): nothing changed.\n"
		"faultctl: groups joined:%s\n"
		"faultctl: for processes that will join it later: faultctl -g %s --ahead ...\n",
		group, dir, seen[0] ? seen : " none", group);
	return false;
}

static int group_change(const char *dir, struct selection *sel, bool json, const char *line)
{
	const char *group = sel->group ? sel->group : FN_GROUP_DEFAULT;
	char err[4300], reply[1200], who[200];
	unsigned long long seq;
	if (!group_known(dir, sel, group))
		return 1;
	int lock = journal_append(dir, group, line, &seq, err, sizeof(err));
	if (lock < 0) {
		fprintf(stderr, "faultctl: %s\n", err);
		return 1;
	}
	sel->group = group;
	sel->quick = true;
	struct target *t = NULL;
	int stored = 0, rc = 0;
	/* check() tries at most 3 state files: the rest are only counted. */
	int n = targets_count(dir, sel, 3, &t, &stored, err, sizeof(err));
	if (n < 0) {
		fprintf(stderr, "faultctl: %s: the change is not in force%s\n", err,
			journal_drop(dir, group, seq) ? "; it is not kept in the journal" : "");
		rc = 1;
	} else if (n == 0) { /* on stderr, so that it is said with --json too */
		fprintf(stderr,
			"faultctl: no process of group '%s' is running; processes that join it "
			"will apply the change\n",
			group);
		rc = !journal_seq_store(dir, group, seq, err, sizeof(err));
		if (rc)
			fprintf(stderr, "faultctl: %s\n", err);
	} else {
		int c = check(dir, t, stored, group, seq, line, reply, sizeof(reply));
		bool ok = c >= 0 && strncmp(reply, "ok", 2) == 0;
		print_group_reply(json, group, n, ok,
				  reply + (ok ? 2 + (reply[2] == ' ') : 6 * (reply[0] == 'e')));
		snprintf(who, sizeof(who), "process %d of group '%s'", (int)t[c < 0 ? 0 : c].pid,
			 group);
		rc = in_force(dir, group, seq, c, reply, who);
	}
	journal_unlock(lock);
	free(t);
	return rc;
}

/* A change for one member: an entry of its group's journal that names it
 * (core/edit.h: "pid=PID.START.NS verb ..."), checked against its policy. */
static int member_change(const char *dir, struct target *t, bool json, const char *line)
{
	char err[4300], reply[1200], who[100];
	struct fn_seg *s = targets_state(t, SEG_HEAD, 0, err, sizeof(err));
	if (!s) {
		snprintf(reply, sizeof(reply), "error %s", err);
		print_pid_reply(t->pid, reply, json);
		return 1;
	}
	struct fn_buf entry = {0};
	/* Named as the member sees itself: its pid in its own namespace. */
	fn_buf_printf(&entry, "pid=%d.%llu.%llu %s", (int)s->h.pid, (unsigned long long)s->h.start,
		      (unsigned long long)s->h.pidns, line);
	unsigned long long seq;
	int lock = entry.s ? journal_append(dir, t->group, entry.s, &seq, err, sizeof(err)) : -1;
	int rc = 1;
	if (lock < 0) {
		snprintf(reply, sizeof(reply), "error %s", entry.s ? err : "out of memory");
		print_pid_reply(t->pid, reply, json);
	} else {
		char journal[4200];
		fn_group_file(journal, sizeof(journal), dir, t->group, "journal");
		int c = check_change(&s->h, journal, seq, line, reply, sizeof(reply));
		print_pid_reply(t->pid, reply, json);
		snprintf(who, sizeof(who), "process %d", (int)t->pid);
		rc = in_force(dir, t->group, seq, c < 0 ? -1 : 0, reply, who);
		journal_unlock(lock);
	}
	fn_buf_free(&entry);
	free(s);
	return rc;
}

static int pid_change(const char *dir, struct selection *sel, bool json, const char *line)
{
	struct target *t = NULL;
	char err[4300];
	int n = targets_find(dir, sel, &t, err, sizeof(err)), bad = 0, sockets = 0;
	if (n < 0) {
		fprintf(stderr, "faultctl: %s\n", err);
		return 1;
	}
	if (n < sel->npids)
		fprintf(stderr, "faultctl: %d of the %d processes named are not under the shim\n",
			sel->npids - n, sel->npids);
	for (int i = 0; i < n; i++) {
		if (t[i].seg)
			bad += member_change(dir, &t[i], json, line);
		else
			t[sockets++] = t[i];
	}
	bad += sockets ? send_change(t, sockets, line, json) : 0;
	if (bad)
		fprintf(stderr, "faultctl: %d of %d processes did not apply the change\n", bad, n);
	free(t);
	return bad > 0 || n < sel->npids;
}

int change_run(const char *dir, struct selection *sel, bool json, const char *line)
{
	return sel->npids ? pid_change(dir, sel, json, line) : group_change(dir, sel, json, line);
}
