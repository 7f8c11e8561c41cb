/* cavars.c - trust for clients that read it once, from a variable, at start
 * (see cavars.h): the run's CA made by faultctl before the command runs,
 * since the shim makes it only when a connection is terminated, too late
 * for them; and NODE_EXTRA_CA_CERTS naming it, or a combined file. */
#include "ctl/cavars.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/actions.h"
#include "core/hash.h"
#include "core/rundir.h"
#include "preload/tls/ca.h"

#define PEM_MAX (1 << 20) /* a user's bundle: Debian's whole store is ~200 KiB */

static bool has_http(const struct fn_policy *p)
{
	for (size_t i = 0; i < p->nrules; i++)
		if (fn_rule_http(&p->rules[i]))
			return true;
	return false;
}

/* The whole of a file, NUL-terminated, malloc'd; NULL with errno set. */
static char *slurp(const char *path, size_t *n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	char *buf = fd >= 0 ? malloc(PEM_MAX + 1) : NULL;
	ssize_t got = buf ? read(fd, buf, PEM_MAX + 1) : -1;
	int e = errno;
	if (fd >= 0)
		close(fd);
	if (got < 0 || got > PEM_MAX) {
		free(buf);
		errno = got > PEM_MAX ? EFBIG : e;
		return NULL;
	}
	buf[got] = '\0';
	*n = (size_t)got;
	return buf;
}

/* data written whole to path, mode 0600, through a temporary name. */
static int write_file(const char *path, const char *a, size_t an, const char *b, size_t bn)
{
	char tmp[4200];
	snprintf(tmp, sizeof(tmp), "%s.%d.new", path, (int)getpid());
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	bool ok = write(fd, a, an) == (ssize_t)an && write(fd, "\n", 1) == 1 &&
		  write(fd, b, bn) == (ssize_t)bn;
	ok = close(fd) == 0 && ok;
	if (!ok || rename(tmp, path) < 0) {
		unlink(tmp);
		return -1;
	}
	return 0;
}

/* The user's own file followed by the run's CA, in the run directory under
 * a name made of their contents (so later runs reuse it), into out. */
static int combine(const char *dir, const char *user, const char *ca, char *out, size_t len)
{
	size_t un = 0, cn = 0;
	char *u = slurp(user, &un), *c = u ? slurp(ca, &cn) : NULL;
	int rc = -1;
	if (u && c) {
		uint64_t h = fn_hash_bytes(fn_hash_bytes(FN_HASH_START, u, un), c, cn);
		snprintf(out, len, "%s/ca.node-%016llx.pem", dir, (unsigned long long)h);
		rc = access(out, R_OK) == 0 ? 0 : write_file(out, u, un, c, cn);
	}
	int e = errno;
	free(u);
	free(c);
	errno = e;
	return rc;
}

/* NODE_EXTRA_CA_CERTS: the CA, or the user's file and the CA combined. */
static void set_node(const char *dir, const char *ca)
{
	const char *old = getenv("NODE_EXTRA_CA_CERTS");
	char both[4200];
	if (!old || !*old || strcmp(old, ca) == 0 ||
	    (strncmp(old, dir, strlen(dir)) == 0 && strstr(old, "/ca.node-"))) {
		if (!old || !*old)
			setenv("NODE_EXTRA_CA_CERTS", ca, 1);
		return; /* ours already (a faultctl run inside another) */
	}
	if (combine(dir, old, ca, both, sizeof(both)) < 0) {
		fprintf(stderr,
			"faultctl run: NODE_EXTRA_CA_CERTS=%s: %s: left as it is, without the "
			"run's CA (Node.js will refuse the relay's leaves)\n",
			old, strerror(errno));
		return;
	}
	setenv("NODE_EXTRA_CA_CERTS", both, 1);
}

void run_ca_vars(const struct fn_policy *p)
{
	if (!has_http(p))
		return;
	const char *why = NULL;
	char dir[4096], ca[4200];
	const char *bad = fn_rundir(dir, sizeof(dir));
	if (!bad && !fn_ca_get(&why))
		bad = why;
	if (bad) {
		fprintf(stderr,
			"faultctl run: warning: the run's CA cannot be made (%s): clients that "
			"read their trust from a variable (NODE_EXTRA_CA_CERTS) will refuse "
			"terminated connections\n",
			bad);
		return;
	}
	snprintf(ca, sizeof(ca), "%s/ca.pem", dir);
	set_node(dir, ca);
}
