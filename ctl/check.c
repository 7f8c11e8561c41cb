/* check.c - a group change checked by faultctl itself, so that a flip asks
 * no member anything: the policy one member has is rebuilt from what it
 * started with (its FAULTNET_CONFIG and FAULTNET_ZONE, read from
 * /proc/PID/environ) and the group's journal before the change, replayed
 * as members replay it (core/edit.c), and the change is applied to it. */
#include "ctl/check.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/config.h"
#include "core/edit.h"
#include "core/rules.h"
#include "core/wire.h"

/* The environment pid was started with: NUL-separated, NUL-ended; NULL
 * when it cannot be read (another user's process, or a gone one). */
static char *environ_of(pid_t pid, size_t *len)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct fn_buf b = {0};
	char buf[8192];
	ssize_t n = 0;
	while (fd >= 0 && (n = read(fd, buf, sizeof(buf))) > 0)
		fn_buf_add(&b, buf, (size_t)n);
	if (fd >= 0)
		close(fd);
	if (n < 0 || fd < 0 || b.oom || !b.len) {
		fn_buf_free(&b);
		return NULL;
	}
	fn_buf_add(&b, "", 1);
	*len = b.len;
	return b.s;
}

/* VAR's value in env, NULL when unset; "" counts as unset, as for the
 * shim. */
static const char *value(const char *env, size_t len, const char *var)
{
	size_t vl = strlen(var);
	for (const char *e = env; e < env + len; e += strlen(e) + 1)
		if (strncmp(e, var, vl) == 0 && e[vl] == '=')
			return e[vl + 1] ? e + vl + 1 : NULL;
	return NULL;
}

/* What pid started with, or NULL with *config set to why not. A relative
 * path is not followed: the member read it from the directory it started
 * in, which may not be its directory now. */
static struct fn_policy *base_of(pid_t pid, char *config, size_t clen, char *err, size_t elen)
{
	size_t len;
	char *env = environ_of(pid, &len);
	if (!env) {
		snprintf(err, elen, "cannot read process %d's environment", (int)pid);
		return NULL;
	}
	const char *path = value(env, len, "FAULTNET_CONFIG");
	const char *zone = value(env, len, "FAULTNET_ZONE");
	struct fn_policy *p = NULL;
	snprintf(config, clen, "%s", path ? path : "");
	if (path && path[0] != '/')
		snprintf(err, elen, "process %d's FAULTNET_CONFIG is a relative path", (int)pid);
	else
		p = path ? fn_config_load_file(path, zone, err, elen) : fn_edit_empty();
	free(env);
	return p;
}

/* One change line applied to *p (replaced when it applies); the reply in
 * reply. reset goes back to base. */
static bool apply(struct fn_policy **p, const struct fn_policy *base, const char *config,
		  char *line, char *reply, size_t len)
{
	struct fn_policy *np;
	int rule;
	uint64_t at;
	if (strncmp(line, "reset", 5) == 0 && (!line[5] || line[5] == ' ')) {
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

/* The journal's entries before seq replayed on *p; false when the journal
 * cannot be read. Entries a member refused are skipped, as members skip
 * them ("SEQ refused" is no verb). */
static bool replay(struct fn_policy **p, const struct fn_policy *base, const char *config,
		   const char *journal, unsigned long long seq)
{
	FILE *f = fopen(journal, "re");
	if (!f)
		return false;
	char *line = NULL, reply[1200];
	size_t cap = 0;
	ssize_t n;
	while ((n = getline(&line, &cap, f)) > 0 && line[n - 1] == '\n') {
		line[n - 1] = '\0';
		char *rest;
		unsigned long long s = strtoull(line, &rest, 10);
		if (rest != line && *rest == ' ' && s < seq)
			apply(p, base, config, rest + 1, reply, sizeof(reply));
	}
	free(line);
	fclose(f);
	return true;
}

int check_change(pid_t pid, const char *journal, unsigned long long seq, const char *line,
		 char *reply, size_t len)
{
	char config[4096];
	struct fn_policy *base = base_of(pid, config, sizeof(config), reply, len);
	struct fn_policy *p = base ? fn_policy_clone(base) : NULL;
	char *copy = strdup(line);
	int rc = -1;
	if (p && copy && replay(&p, base, config, journal, seq))
		rc = apply(&p, base, config, copy, reply, len);
	else if (base)
		snprintf(reply, len, "cannot replay %s", journal);
	free(copy);
	fn_policy_free(p);
	fn_policy_free(base);
	return rc;
}
