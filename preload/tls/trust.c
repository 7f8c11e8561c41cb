/* trust.c - adds the run's CA to the store an app's OpenSSL 3 verifies
 * with (see trust.h). The call is forwarded to the libcrypto the caller's
 * library binds to, found from the caller's address: an app may load more
 * than one OpenSSL, and a 1.1 library's call (bound here too: the hook is
 * exported unversioned) must reach its own, untouched. */
#include "preload/tls/trust.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "preload/base/libc.h"
#include "preload/tls/ca.h"

#define V3 "OPENSSL_3.0.0"
#define LIBS 8 /* callers' libraries remembered */

typedef int init_fn(void *, void *, void *, void *);

/* What one caller's library binds to. */
struct lib {
	const void *base; /* the caller's library (dladdr's dli_fbase) */
	init_fn *init;	  /* the real X509_STORE_CTX_init */
	bool v3;	  /* it is OpenSSL 3's: the functions below are set */
	void *(*bio_new_mem_buf)(const void *, int);
	void *(*pem_read_bio_x509)(void *, void **, void *, void *);
	int (*store_add_cert)(void *, void *);
	int (*bio_free)(void *);
	void *ca; /* the run's CA parsed by that library, once */
};

static struct lib libs[LIBS];
static unsigned nlibs;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* Looks up e's functions in h, OpenSSL 3's by version, else the name's
 * default version (another OpenSSL: forwarded, nothing added). */
static void bind_lib(struct lib *e, void *h, const void *self)
{
	*(void **)&e->init = dlvsym(h, "X509_STORE_CTX_init", V3);
	e->v3 = e->init && (const void *)e->init != self;
	if (!e->v3)
		*(void **)&e->init = dlsym(h, "X509_STORE_CTX_init");
	if ((const void *)e->init == self)
		e->init = NULL;
	if (!e->v3)
		return;
	*(void **)&e->bio_new_mem_buf = dlvsym(h, "BIO_new_mem_buf", V3);
	*(void **)&e->pem_read_bio_x509 = dlvsym(h, "PEM_read_bio_X509", V3);
	*(void **)&e->store_add_cert = dlvsym(h, "X509_STORE_add_cert", V3);
	*(void **)&e->bio_free = dlvsym(h, "BIO_free", V3);
	e->v3 = e->bio_new_mem_buf && e->pem_read_bio_x509 && e->store_add_cert && e->bio_free;
}

/* Binds e to what handle h finds, and lets h go (RTLD_NOLOAD took a
 * reference: the library stays). False when h finds no X509_STORE_CTX_init. */
static bool bind_from(struct lib *e, void *h, const void *self)
{
	if (!h)
		return false;
	bind_lib(e, h, self);
	dlclose(h);
	return e->init != NULL;
}

/* The caller's library's entry (made on its first call); under the lock.
 * The real function is looked for from the caller's own library (its
 * dependencies), else from libcrypto.so.3 by its soname (a caller that
 * reaches libcrypto through the global scope, a program called through
 * ctypes), else as the next definition: nothing added then. */
static struct lib *lib_for(const void *caller, const void *self)
{
	Dl_info di;
	const void *base = dladdr(caller, &di) ? di.dli_fbase : NULL;
	for (unsigned i = 0; base && i < nlibs; i++)
		if (libs[i].base == base)
			return &libs[i];
	struct lib fresh = {.base = base};
	const char *file = base && di.dli_fname && di.dli_fname[0] == '/' ? di.dli_fname : NULL;
	if (!bind_from(&fresh, file ? LIBC(dlopen)(file, RTLD_NOLOAD | RTLD_LAZY) : NULL, self) &&
	    !bind_from(&fresh, LIBC(dlopen)("libcrypto.so.3", RTLD_NOLOAD | RTLD_LAZY), self)) {
		fresh.v3 = false;
		*(void **)&fresh.init = dlvsym(RTLD_NEXT, "X509_STORE_CTX_init", V3);
		if (!fresh.init)
			*(void **)&fresh.init = dlsym(RTLD_NEXT, "X509_STORE_CTX_init");
	}
	struct lib *e = &libs[nlibs < LIBS ? nlibs++ : LIBS - 1];
	*e = fresh;
	return e;
}

/* The run's CA as e's library's own X509, parsed once; NULL if it cannot. */
static void *ca_for(struct lib *e, const char *pem)
{
	if (e->ca || !e->v3)
		return e->ca;
	void *b = e->bio_new_mem_buf(pem, (int)strlen(pem));
	if (b) {
		e->ca = e->pem_read_bio_x509(b, NULL, NULL, NULL);
		e->bio_free(b);
	}
	return e->ca;
}

void fn_trust_atfork_child(void)
{
	/* Held at fork by a thread the child lacks: an entry may be half
	 * written, so the table starts again (its CA copies are let go). */
	if (pthread_mutex_trylock(&lock) != 0)
		nlibs = 0;
	pthread_mutex_init(&lock, NULL);
}

int fn_trust_ctx_init(void *ctx, void *store, void *x509, void *chain, const void *caller,
		      const void *self)
{
	pthread_mutex_lock(&lock);
	struct lib *e = lib_for(caller, self);
	init_fn *init = e->init;
	const char *pem = store ? fn_ca_pem() : NULL;
	void *ca = pem ? ca_for(e, pem) : NULL;
	/* A copy already in the store is not added twice (OpenSSL 3 keeps
	 * one), so adding it on every verification costs a lookup. */
	if (ca)
		e->store_add_cert(store, ca);
	pthread_mutex_unlock(&lock);
	if (!init)
		return 0; /* no libcrypto behind the caller: cannot happen */
	return init(ctx, store, x509, chain);
}
