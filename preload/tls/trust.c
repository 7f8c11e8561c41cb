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

/* The library a call came from, opened without loading anything: the
 * caller's own file, else (the program itself) libcrypto by its soname. */
static void *caller_handle(const void *caller, const void **base)
{
	Dl_info di;
	void *h = NULL;
	*base = NULL;
	if (dladdr(caller, &di)) {
		*base = di.dli_fbase;
		if (di.dli_fname && di.dli_fname[0] == '/')
			h = LIBC(dlopen)(di.dli_fname, RTLD_NOLOAD | RTLD_LAZY);
	}
	return h ? h : LIBC(dlopen)("libcrypto.so.3", RTLD_NOLOAD | RTLD_LAZY);
}

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

/* The caller's library's entry (made on its first call); under the lock. */
static struct lib *lib_for(const void *caller, const void *self)
{
	const void *base;
	Dl_info di;
	if (dladdr(caller, &di))
		for (unsigned i = 0; i < nlibs; i++)
			if (libs[i].base == di.dli_fbase)
				return &libs[i];
	void *h = caller_handle(caller, &base);
	struct lib fresh = {.base = base};
	if (h) {
		bind_lib(&fresh, h, self);
		dlclose(h); /* RTLD_NOLOAD took a reference: the library stays */
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
