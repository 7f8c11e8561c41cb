/* cavars.c - trust for clients that read it once, from a variable, at start
 * (see cavars.h): the run's CA made by faultctl before the command runs,
 * since the shim makes it only when a connection is terminated, too late
 * for them; NODE_EXTRA_CA_CERTS naming it, or a combined file;
 * JAVA_TOOL_OPTIONS naming a combined JKS trust store; and
 * GRPC_DEFAULT_SSL_ROOTS_FILE_PATH naming a combined PEM bundle (grpcio's
 * PyPI wheels verify with a BoringSSL of their own, out of the trust hook's
 * reach; Debian's build uses the system's OpenSSL, which the hook reaches). */
#include "ctl/cavars.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/actions.h"
#include "core/hash.h"
#include "core/rundir.h"
#include "ctl/jks.h"
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

/* Java's own trust store on Debian (ca-certificates-java), which JDKs'
 * lib/security/cacerts links to. */
#define JAVA_CACERTS "/etc/ssl/certs/java/cacerts"
#define JAVA_STORE "-Djavax.net.ssl.trustStore="
#define JAVA_PASS "-Djavax.net.ssl.trustStorePassword="

/* a then b written whole to path, mode 0600, through a temporary name. */
static int write_file(const char *path, const char *a, size_t an, const char *b, size_t bn)
{
	char tmp[4200];
	snprintf(tmp, sizeof(tmp), "%s.%d.new", path, (int)getpid());
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	/* Between two PEM files a newline: the first may lack its last. */
	bool ok = write(fd, a, an) == (ssize_t)an && (!bn || write(fd, "\n", 1) == 1) &&
		  (!bn || write(fd, b, bn) == (ssize_t)bn);
	ok = close(fd) == 0 && ok;
	if (!ok || rename(tmp, path) < 0) {
		unlink(tmp);
		return -1;
	}
	return 0;
}

/* The user's own file followed by the run's CA, in the run directory under
 * a name made of what (node, grpc) and their contents (so later runs reuse
 * it), into out. */
static int combine(const char *dir, const char *what, const char *user, const char *ca, char *out,
		   size_t len)
{
	size_t un = 0, cn = 0;
	char *u = slurp(user, &un), *c = u ? slurp(ca, &cn) : NULL;
	int rc = -1;
	if (u && c) {
		uint64_t h = fn_hash_bytes(fn_hash_bytes(FN_HASH_START, u, un), c, cn);
		snprintf(out, len, "%s/ca.%s-%016llx.pem", dir, what, (unsigned long long)h);
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
	if (combine(dir, "node", old, ca, both, sizeof(both)) < 0) {
		fprintf(stderr,
			"faultctl run: NODE_EXTRA_CA_CERTS=%s: %s: left as it is, without the "
			"run's CA (Node.js will refuse the relay's leaves)\n",
			old, strerror(errno));
		return;
	}
	setenv("NODE_EXTRA_CA_CERTS", both, 1);
}

/* gRPC's C core (grpcio, Debian's libgrpc) reads its roots from this file
 * when it is set, before any other source. Unset, Debian's libgrpc reads
 * the system's bundle. */
#define GRPC_ROOTS "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH"
#define SYSTEM_BUNDLE "/etc/ssl/certs/ca-certificates.crt"

/* GRPC_DEFAULT_SSL_ROOTS_FILE_PATH: the roots gRPC would have read (the
 * user's file, else the system's bundle) and the run's CA, combined. The
 * variable replaces gRPC's roots: never the CA alone, which would leave
 * every server the relay does not terminate untrusted. */
static void set_grpc(const char *dir, const char *ca)
{
	const char *old = getenv(GRPC_ROOTS);
	const char *src = old && *old ? old : SYSTEM_BUNDLE;
	char both[4200];
	if (strncmp(src, dir, strlen(dir)) == 0 && strstr(src, "/ca.grpc-"))
		return; /* ours already (a faultctl run inside another) */
	if (combine(dir, "grpc", src, ca, both, sizeof(both)) < 0) {
		fprintf(stderr,
			"faultctl run: %s%s: %s: %s, without the run's CA (gRPC clients will "
			"refuse the relay's leaves)\n",
			old && *old ? GRPC_ROOTS "=" : "the system's bundle ", src, strerror(errno),
			old && *old ? "left as it is" : GRPC_ROOTS " not set");
		return;
	}
	setenv(GRPC_ROOTS, both, 1);
}

/* The value of -Dname=... in a JAVA_TOOL_OPTIONS value (up to a space),
 * into out; false when it is not there. The last one is Java's. */
static bool java_opt(const char *opts, const char *name, char *out, size_t len)
{
	const char *at = NULL;
	for (const char *s = opts; (s = strstr(s, name)); s++)
		at = s + strlen(name);
	if (!at)
		return false;
	snprintf(out, len, "%.*s", (int)strcspn(at, " \t"), at);
	return true;
}

/* The store src (the user's, or Java's own) with the run's CA added, in
 * the run directory under a name made of their contents, into out. */
static const char *java_combine(const char *dir, const char *src, const char *pass,
				const struct fn_ca *ca, char *out, size_t len)
{
	const struct fn_ossl *o = fn_ossl_get(NULL);
	size_t sn = 0;
	char *store = slurp(src, &sn);
	int dn = o ? o->i2d_X509(ca->cert, NULL) : -1;
	unsigned char *der = store && dn > 0 ? malloc((size_t)dn) : NULL, *dp = der, *jks = NULL;
	size_t jn = 0;
	const char *bad = !store ? strerror(errno) : !der ? "no memory" : NULL;
	if (!bad) {
		o->i2d_X509(ca->cert, &dp);
		bad = fn_jks_add((unsigned char *)store, sn, der, (size_t)dn, "faultnet-run-ca",
				 pass, &jks, &jn);
	}
	if (!bad) {
		/* Named by what went in (never the entry's time): reused. */
		uint64_t h = fn_hash_bytes(fn_hash_str(pass), store, sn);
		h = fn_hash_bytes(h, der, (size_t)dn);
		snprintf(out, len, "%s/ca.java-%016llx.jks", dir, (unsigned long long)h);
		if (access(out, R_OK) != 0 && write_file(out, (char *)jks, jn, "", 0) < 0)
			bad = strerror(errno);
	}
	free(store);
	free(der);
	free(jks);
	return bad;
}

/* JAVA_TOOL_OPTIONS: a trust store of the roots Java trusted (the user's
 * javax.net.ssl.trustStore, else Java's own) and the run's CA, named after
 * what was there (the last -D of a name is Java's). */
static void set_java(const char *dir, const struct fn_ca *ca)
{
	const char *old = getenv("JAVA_TOOL_OPTIONS");
	char src[2048] = JAVA_CACERTS, pass[256] = "changeit", jks[4200], val[8192];
	bool mine = old && java_opt(old, JAVA_STORE, src, sizeof(src));
	if (old)
		java_opt(old, JAVA_PASS, pass, sizeof(pass));
	if (strncmp(src, dir, strlen(dir)) == 0 && strstr(src, "/ca.java-"))
		return; /* ours already (a faultctl run inside another) */
	if (!mine && access(src, R_OK) != 0)
		return; /* no Java here */
	const char *bad = java_combine(dir, src, pass, ca, jks, sizeof(jks));
	if (bad) {
		fprintf(stderr,
			"faultctl run: the Java trust store %s: %s: JAVA_TOOL_OPTIONS left as it "
			"is, without the run's CA (Java will refuse the relay's leaves)\n",
			src, bad);
		return;
	}
	snprintf(val, sizeof(val), "%s%s" JAVA_STORE "%s -Djavax.net.ssl.trustStoreType=JKS",
		 old ? old : "", old && *old ? " " : "", jks);
	setenv("JAVA_TOOL_OPTIONS", val, 1);
}

/* The run directory and the run's CA (made if it is not there yet), its
 * PEM file's name into ca; NULL with a warning naming who will refuse. */
static const struct fn_ca *the_ca(char *dir, size_t dlen, char *ca, size_t clen, const char *who)
{
	const char *why = NULL;
	const char *bad = fn_rundir(dir, dlen);
	const struct fn_ca *c = bad ? NULL : fn_ca_get(&why);
	if (!bad && !c)
		bad = why;
	if (bad) {
		fprintf(stderr,
			"faultctl run: warning: the run's CA cannot be made (%s): clients that "
			"read their trust from a variable (%s) will refuse terminated "
			"connections\n",
			bad, who);
		return NULL;
	}
	snprintf(ca, clen, "%s/ca.pem", dir);
	return c;
}

bool run_ca_cert_file(const struct fn_policy *p)
{
	if (!has_http(p))
		return false;
	run_ca_cert_file_now();
	return true;
}

void run_ca_cert_file_now(void)
{
	char dir[4096], ca[4200], both[4200];
	if (!the_ca(dir, sizeof(dir), ca, sizeof(ca), "SSL_CERT_FILE"))
		return;
	const char *old = getenv("SSL_CERT_FILE");
	const char *src = old && *old ? old : SYSTEM_BUNDLE;
	if (strncmp(src, dir, strlen(dir)) == 0 && strstr(src, "/ca.certfile-"))
		return; /* ours already (a faultctl run inside another) */
	if (combine(dir, "certfile", src, ca, both, sizeof(both)) < 0) {
		fprintf(stderr,
			"faultctl run: %s%s: %s: %s, without the run's CA (Go clients will refuse "
			"the relay's leaves)\n",
			old && *old ? "SSL_CERT_FILE=" : "the system's bundle ", src,
			strerror(errno), old && *old ? "left as it is" : "SSL_CERT_FILE not set");
		return;
	}
	setenv("SSL_CERT_FILE", both, 1);
}

void run_ca_vars(const struct fn_policy *p)
{
	if (has_http(p))
		run_ca_vars_now();
}

void run_ca_vars_now(void)
{
	char dir[4096], ca[4200];
	const struct fn_ca *c = the_ca(dir, sizeof(dir), ca, sizeof(ca), "NODE_EXTRA_CA_CERTS");
	if (!c)
		return;
	set_node(dir, ca);
	set_java(dir, c);
	set_grpc(dir, ca);
}
