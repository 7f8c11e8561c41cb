/* ca.c - the run's CA (see ca.h): found in the run directory or made there
 * once, under a lock, by whichever process of the run needs it first. */
#include "preload/tls/ca.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/rundir.h"
#include "preload/base/libc.h"
#include "preload/tls/cert.h"

#define CA_SECONDS (3650L * 86400) /* ten years: as long as any run lasts */
#define PEM_MAX 16384		   /* a P-256 key or certificate is under 1 KiB */

enum { FOUND, ABSENT, REFUSED };

/* Reads dir/name if it is a regular file of this euid, mode 0600, reached
 * without a symbolic link. O_NONBLOCK: a FIFO put there must not hang us. */
static int read_private(const char *dir, const char *name, char *data, size_t *n, char *why,
			size_t len)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0 && errno == ENOENT)
		return ABSENT;
	if (fd < 0) {
		snprintf(why, len, "%s %s: the run's CA is refused", path,
			 errno == ELOOP ? "is a symbolic link" : strerror(errno));
		return REFUSED;
	}
	struct stat sb;
	const char *bad = NULL;
	if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode))
		bad = "is not a regular file";
	else if (sb.st_uid != geteuid())
		bad = "is owned by another user";
	else if ((sb.st_mode & 07777) != 0600)
		bad = "is not mode 0600 (owner only)";
	else if (sb.st_size >= PEM_MAX)
		bad = "is too large for a PEM key or certificate";
	ssize_t got = bad ? 0 : LIBC(read)(fd, data, PEM_MAX - 1);
	LIBC(close)(fd);
	if (!bad && got < 0)
		bad = "cannot be read";
	if (bad) {
		snprintf(why, len, "%s %s: the run's CA is refused", path, bad);
		return REFUSED;
	}
	data[got] = '\0';
	*n = (size_t)got;
	return FOUND;
}

static int no_passphrase(char *buf, int size, int rw, void *u)
{
	(void)buf, (void)size, (void)rw, (void)u;
	return 0; /* an encrypted key is not ours: never ask a terminal */
}

/* ca.pem and ca.key parsed, and checked to be a pair and a CA. */
static int parse(const struct fn_ossl *o, const char *pem, size_t pn, const char *key, size_t kn,
		 struct fn_ca *ca)
{
	BIO *b = o->BIO_new_mem_buf(pem, (int)pn);
	ca->cert = b ? o->PEM_read_bio_X509(b, NULL, no_passphrase, NULL) : NULL;
	o->BIO_free(b);
	b = o->BIO_new_mem_buf(key, (int)kn);
	ca->key = b ? o->PEM_read_bio_PrivateKey(b, NULL, no_passphrase, NULL) : NULL;
	o->BIO_free(b);
	if (ca->cert && ca->key && o->X509_check_private_key(ca->cert, ca->key) == 1 &&
	    (o->X509_get_extension_flags(ca->cert) & EXFLAG_CA) &&
	    fn_cert_fingerprint(o, ca->cert, ca->sha256) == 0)
		return 0;
	o->X509_free(ca->cert);
	o->EVP_PKEY_free(ca->key);
	ca->cert = NULL;
	ca->key = NULL;
	return -1;
}

/* FOUND (in *ca), ABSENT (either file missing) or REFUSED (why). */
static int load(const struct fn_ossl *o, const char *dir, struct fn_ca *ca, char *why, size_t len)
{
	char *pem = malloc(2 * PEM_MAX), *key = pem + PEM_MAX;
	if (!pem) {
		snprintf(why, len, "no memory for the run's CA");
		return REFUSED;
	}
	size_t pn = 0, kn = 0;
	int r = read_private(dir, "ca.pem", pem, &pn, why, len);
	int k = r == REFUSED ? r : read_private(dir, "ca.key", key, &kn, why, len);
	int bad = r == FOUND && k == FOUND ? parse(o, pem, pn, key, kn, ca) : 0;
	memset(key, 0, PEM_MAX); /* no copy of the key left in the heap */
	free(pem);
	if (r == REFUSED || k == REFUSED)
		return REFUSED;
	if (r == ABSENT || k == ABSENT)
		return ABSENT;
	if (bad) {
		snprintf(why, len,
			 "%s/ca.pem and ca.key are not a CA certificate and its key: refused", dir);
		return REFUSED;
	}
	return FOUND;
}

/* dir/name written whole with mode 0600 under a temporary name, then
 * renamed into place: a reader never sees half a file. The caller holds
 * the lock, so the temporary name is ours to remove first. */
static int write_private(const char *dir, const char *name, const char *data, size_t n)
{
	char tmp[4096], path[4096];
	snprintf(tmp, sizeof(tmp), "%s/%s.new", dir, name);
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	unlink(tmp);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	size_t done = 0;
	while (done < n) {
		ssize_t w = write(fd, data + done, n - done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		done += (size_t)w;
	}
	/* fchmod: a umask such as 0277 must not leave it 0400. */
	int bad = done < n || fchmod(fd, 0600) < 0 || fsync(fd) < 0;
	LIBC(close)(fd);
	if (bad || rename(tmp, path) < 0) {
		unlink(tmp);
		return -1;
	}
	return 0;
}

/* The PEM text of a BIO's contents written to dir/name. */
static int write_bio(const struct fn_ossl *o, BIO *b, const char *dir, const char *name)
{
	char *p = NULL;
	long n = o->BIO_ctrl(b, BIO_CTRL_INFO, 0, &p);
	return n > 0 && p ? write_private(dir, name, p, (size_t)n) : -1;
}

/* A self-signed CA naming faultnet and the owner's uid. */
static X509 *self_signed(const struct fn_ossl *o, EVP_PKEY *key)
{
	X509 *c = fn_cert_frame(o, key, CA_SECONDS);
	char cn[64];
	snprintf(cn, sizeof(cn), "faultnet run CA, uid %u", (unsigned)geteuid());
	X509_NAME *n = c ? o->X509_get_subject_name(c) : NULL;
	if (!n ||
	    !o->X509_NAME_add_entry_by_txt(n, "O", MBSTRING_UTF8, (const unsigned char *)"faultnet",
					   -1, -1, 0) ||
	    !o->X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_UTF8, (const unsigned char *)cn, -1,
					   -1, 0) ||
	    !o->X509_set_issuer_name(c, n) ||
	    fn_cert_ext(o, c, NULL, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") < 0 ||
	    fn_cert_ext(o, c, NULL, NID_key_usage, "critical,keyCertSign,cRLSign") < 0 ||
	    fn_cert_ext(o, c, NULL, NID_subject_key_identifier, "hash") < 0 ||
	    !o->X509_sign(c, key, o->EVP_sha256())) {
		o->X509_free(c);
		return NULL;
	}
	return c;
}

/* Makes the CA and writes ca.key, then ca.pem (a reader needs both). */
static int create(const struct fn_ossl *o, const char *dir, char *why, size_t len)
{
	EVP_PKEY *key = fn_cert_key(o);
	X509 *cert = key ? self_signed(o, key) : NULL;
	BIO *kb = o->BIO_new(o->BIO_s_mem()), *cb = o->BIO_new(o->BIO_s_mem());
	int ok = cert && kb && cb &&
		 o->PEM_write_bio_PrivateKey(kb, key, NULL, NULL, 0, NULL, NULL) &&
		 o->PEM_write_bio_X509(cb, cert) && write_bio(o, kb, dir, "ca.key") == 0 &&
		 write_bio(o, cb, dir, "ca.pem") == 0;
	if (!ok)
		snprintf(why, len, "cannot make the run's CA in %s: %s", dir,
			 errno ? strerror(errno) : "OpenSSL failed");
	o->BIO_free(kb);
	o->BIO_free(cb);
	o->X509_free(cert);
	o->EVP_PKEY_free(key);
	return ok ? 0 : -1;
}

/* Under dir/ca.lock: loaded if another process made it meanwhile, else
 * made (a missing half, left by a process that died while making it, is
 * made again with the other). */
static int locked_open(const struct fn_ossl *o, const char *dir, struct fn_ca *ca, char *why,
		       size_t len)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/ca.lock", dir);
	int fd =
	    open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY, 0600);
	struct stat sb;
	if (fd < 0 || fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) || sb.st_uid != geteuid()) {
		snprintf(why, len, "%s cannot be used as this user's lock: the run's CA is refused",
			 path);
		if (fd >= 0)
			LIBC(close)(fd);
		return REFUSED;
	}
	while (flock(fd, LOCK_EX) < 0 && errno == EINTR)
		;
	int r = load(o, dir, ca, why, len);
	if (r == ABSENT) {
		errno = 0;
		r = create(o, dir, why, len) < 0 ? REFUSED : load(o, dir, ca, why, len);
	}
	LIBC(close)(fd); /* and with it the lock */
	return r;
}

const char *fn_ca_open(const struct fn_ossl *o, const char *dir, struct fn_ca *ca, char *buf,
		       size_t len)
{
	memset(ca, 0, sizeof(*ca));
	int r = load(o, dir, ca, buf, len);
	if (r == ABSENT)
		r = locked_open(o, dir, ca, buf, len);
	return r == FOUND ? NULL : buf;
}

static struct fn_ca the_ca;
static const char *the_failure;
static char the_reason[512];
static pthread_once_t the_once = PTHREAD_ONCE_INIT;

/* The process's CA as PEM text, for the trust hook (trust.c), which reads
 * it with the app's own OpenSSL: set once the CA is loaded, never before. */
static char the_pem[PEM_MAX];
static _Atomic(const char *) pem_published;

static void publish_pem(const struct fn_ossl *o)
{
	BIO *b = o->BIO_new(o->BIO_s_mem());
	char *data = NULL;
	long n = b && o->PEM_write_bio_X509(b, the_ca.cert) == 1
		     ? o->BIO_ctrl(b, BIO_CTRL_INFO, 0, &data)
		     : 0;
	if (n > 0 && (size_t)n < sizeof(the_pem)) {
		memcpy(the_pem, data, (size_t)n);
		the_pem[n] = '\0';
		atomic_store_explicit(&pem_published, the_pem, memory_order_release);
	}
	o->BIO_free(b);
}

const char *fn_ca_pem(void)
{
	return atomic_load_explicit(&pem_published, memory_order_acquire);
}

static void get_once(void)
{
	const struct fn_ossl *o = fn_ossl_get(&the_failure);
	if (!o)
		return;
	char dir[4096];
	the_failure = fn_rundir(dir, sizeof(dir));
	if (the_failure) {
		snprintf(the_reason, sizeof(the_reason), "the run directory %s %s", dir,
			 the_failure);
		the_failure = the_reason;
		return;
	}
	the_failure = fn_ca_open(o, dir, &the_ca, the_reason, sizeof(the_reason));
	if (!the_failure)
		publish_pem(o);
}

const struct fn_ca *fn_ca_get(const char **why)
{
	pthread_once(&the_once, get_once);
	if (why)
		*why = the_failure;
	return the_failure ? NULL : &the_ca;
}
