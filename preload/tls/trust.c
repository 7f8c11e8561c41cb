/* trust.c - lets an app's OpenSSL 3 trust the run's CA for one
 * verification, and only when the real server behind the relay's leaf
 * passes the app's own trust (see trust.h). The call is forwarded to the
 * libcrypto the caller's library binds to, found from the caller's
 * address: an app may load more than one OpenSSL, and a 1.1 library's call
 * (bound here too: the hook is exported unversioned) must reach its own,
 * untouched. */
#include "preload/tls/trust.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "preload/base/libc.h"
#include "preload/tls/ca.h"

#define V3 "OPENSSL_3.0.0"
#define LIBS 8	/* callers' libraries remembered */
#define SEEN 32 /* leaves whose server the relay met, remembered */
#define TRUST 1 /* X509_STORE_CTX_init's value on success */

typedef int init_fn(void *, void *, void *, void *);

/* The app's libcrypto functions used besides the real init, looked up by
 * version in the caller's library's own libcrypto (never the hooks). */
#define TRUST_FUNCS(X)                                                    \
	X(BIO_new_mem_buf, void *, const void *, int)                     \
	X(PEM_read_bio_X509, void *, void *, void **, void *, void *)     \
	X(BIO_free, int, void *)                                          \
	X(d2i_X509, void *, void **, const unsigned char **, long)        \
	X(i2d_X509, int, void *, unsigned char **)                        \
	X(X509_free, void, void *)                                        \
	X(X509_STORE_CTX_new, void *, void)                               \
	X(X509_STORE_CTX_free, void, void *)                              \
	X(X509_STORE_CTX_set_default, int, void *, const char *)          \
	X(X509_STORE_CTX_get0_param, void *, void *)                      \
	X(X509_STORE_CTX_set0_trusted_stack, void, void *, void *)        \
	X(X509_VERIFY_PARAM_set1_host, int, void *, const char *, size_t) \
	X(X509_VERIFY_PARAM_set1_ip_asc, int, void *, const char *)       \
	X(X509_verify_cert, int, void *)                                  \
	X(OPENSSL_sk_new_null, void *, void)                              \
	X(OPENSSL_sk_push, int, void *, const void *)                     \
	X(OPENSSL_sk_pop_free, void, void *, void (*)(void *))            \
	X(ERR_set_mark, int, void)                                        \
	X(ERR_pop_to_mark, int, void)

#define TRUST_FIELD(name, ret, ...) ret (*name)(__VA_ARGS__);
/* What one caller's library binds to. */
struct lib {
	const void *base; /* the caller's library (dladdr's dli_fbase) */
	init_fn *init;	  /* the real X509_STORE_CTX_init */
	bool v3;	  /* it is OpenSSL 3's: the functions below are set */
	TRUST_FUNCS(TRUST_FIELD)
	void *ca;      /* the run's CA parsed by that library, once */
	void *trusted; /* a stack of that library's holding ca alone */
};
#undef TRUST_FIELD

/* A leaf the relay served, and what it met behind it (trust.h). */
struct seen {
	unsigned char *leaf, *chain;
	size_t leaf_len, chain_len;
	char name[256];
	bool ip, reached;
};

static struct lib libs[LIBS];
static unsigned nlibs;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct seen seen[SEEN];
static unsigned seen_next;
static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_ulong trusts; /* verifications let trust the run's CA */

unsigned long fn_trust_count(void)
{
	return atomic_load_explicit(&trusts, memory_order_relaxed);
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
#define TRUST_BIND(name, ...)                      \
	*(void **)&e->name = dlvsym(h, #name, V3); \
	e->v3 = e->v3 && e->name;
	TRUST_FUNCS(TRUST_BIND)
#undef TRUST_BIND
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

/* The run's CA as e's library's own X509, parsed once, and the stack
 * holding it alone; NULL if it cannot be. Under the lock. */
static void *trusted_for(struct lib *e, const char *pem)
{
	if (e->trusted || !e->v3)
		return e->trusted;
	if (!e->ca) {
		void *b = e->BIO_new_mem_buf(pem, (int)strlen(pem));
		if (b) {
			e->ca = e->PEM_read_bio_X509(b, NULL, NULL, NULL);
			e->BIO_free(b);
		}
	}
	void *sk = e->ca ? e->OPENSSL_sk_new_null() : NULL;
	if (sk && e->OPENSSL_sk_push(sk, e->ca) > 0)
		e->trusted = sk;
	else if (sk)
		e->OPENSSL_sk_pop_free(sk, NULL);
	return e->trusted;
}

void fn_trust_atfork_child(void)
{
	/* Held at fork by a thread the child lacks: an entry may be half
	 * written, so the table starts again (its CA copies are let go). */
	if (pthread_mutex_trylock(&lock) != 0)
		nlibs = 0;
	pthread_mutex_init(&lock, NULL);
	if (pthread_mutex_trylock(&seen_lock) != 0)
		memset(seen, 0, sizeof(seen)); /* their buffers let go */
	pthread_mutex_init(&seen_lock, NULL);
}

/* Every entry dropped, its buffers let go. */
static void forget_all(void)
{
	struct seen old[SEEN];
	pthread_mutex_lock(&seen_lock);
	memcpy(old, seen, sizeof(old));
	memset(seen, 0, sizeof(seen));
	pthread_mutex_unlock(&seen_lock);
	for (unsigned i = 0; i < SEEN; i++) {
		free(old[i].leaf);
		free(old[i].chain);
	}
}

void fn_trust_record(unsigned char *leaf, size_t leaf_len, unsigned char *chain, size_t chain_len,
		     bool reached, const char *name, bool ip)
{
	if (!leaf) {
		free(chain);
		forget_all();
		return;
	}
	struct seen fresh = {.leaf = leaf,
			     .leaf_len = leaf_len,
			     .chain = chain,
			     .chain_len = chain ? chain_len : 0,
			     .ip = ip,
			     .reached = reached};
	snprintf(fresh.name, sizeof(fresh.name), "%s", name);
	pthread_mutex_lock(&seen_lock);
	unsigned i = 0;
	while (i < SEEN && !(seen[i].leaf_len == leaf_len && seen[i].leaf &&
			     memcmp(seen[i].leaf, leaf, leaf_len) == 0))
		i++;
	if (i == SEEN)
		i = seen_next++ % SEEN;
	struct seen old = seen[i];
	seen[i] = fresh;
	pthread_mutex_unlock(&seen_lock);
	free(old.leaf);
	free(old.chain);
}

/* What the relay met behind leaf x509 (DER, made by e), copied out: false
 * when x509 is no leaf the relay served (or memory is short). */
static bool lookup(struct lib *e, void *x509, struct seen *out)
{
	int n = e->i2d_X509(x509, NULL);
	unsigned char *der = n > 0 ? malloc((size_t)n) : NULL, *p = der;
	if (!der || e->i2d_X509(x509, &p) != n) {
		free(der);
		return false;
	}
	bool found = false;
	pthread_mutex_lock(&seen_lock);
	for (unsigned i = 0; i < SEEN && !found; i++) {
		struct seen *s = &seen[i];
		if (!s->leaf || s->leaf_len != (size_t)n || memcmp(s->leaf, der, (size_t)n) != 0)
			continue;
		*out = *s;
		out->leaf = NULL;
		out->chain = s->chain ? malloc(s->chain_len) : NULL;
		found = !s->chain || out->chain;
		if (out->chain)
			memcpy(out->chain, s->chain, s->chain_len);
	}
	pthread_mutex_unlock(&seen_lock);
	free(der);
	return found;
}

/* Whether the server's chain (DER, leaf first) verifies against the app's
 * store for the name, as the app's own check of that server would. */
static bool server_trusted(struct lib *e, void *store, const struct seen *s)
{
	void *sk = e->OPENSSL_sk_new_null(), *vctx = e->X509_STORE_CTX_new();
	const unsigned char *p = s->chain, *end = s->chain + s->chain_len;
	void *leaf = NULL;
	bool ok = sk && vctx;
	e->ERR_set_mark(); /* the app's error queue is left as it was */
	while (ok && p < end) {
		void *x = e->d2i_X509(NULL, &p, end - p);
		ok = x && e->OPENSSL_sk_push(sk, x) > 0;
		if (x && !ok)
			e->X509_free(x);
		leaf = leaf ? leaf : x;
	}
	ok = ok && leaf && e->init(vctx, store, leaf, sk) == TRUST &&
	     e->X509_STORE_CTX_set_default(vctx, "ssl_server") == 1;
	void *param = ok ? e->X509_STORE_CTX_get0_param(vctx) : NULL;
	ok = param && (s->ip ? e->X509_VERIFY_PARAM_set1_ip_asc(param, s->name)
			     : e->X509_VERIFY_PARAM_set1_host(param, s->name, 0)) == 1;
	ok = ok && e->X509_verify_cert(vctx) == 1;
	if (vctx)
		e->X509_STORE_CTX_free(vctx);
	if (sk)
		e->OPENSSL_sk_pop_free(sk, e->X509_free);
	e->ERR_pop_to_mark();
	return ok;
}

int fn_trust_ctx_init(void *ctx, void *store, void *x509, void *chain, const void *caller,
		      const void *self)
{
	pthread_mutex_lock(&lock);
	struct lib *e = lib_for(caller, self);
	init_fn *init = e->init;
	const char *pem = store && x509 ? fn_ca_pem() : NULL;
	void *trusted = pem ? trusted_for(e, pem) : NULL;
	pthread_mutex_unlock(&lock);
	if (!init)
		return 0; /* no libcrypto behind the caller: cannot happen */
	int r = init(ctx, store, x509, chain);
	struct seen s;
	if (r != TRUST || !trusted || !lookup(e, x509, &s))
		return r;
	/* This verification alone may use the run's CA, and only when the
	 * server behind the leaf passes the app's own store: the store is
	 * left as it was, for every later verification. */
	if (!s.reached || (s.chain && server_trusted(e, store, &s))) {
		e->X509_STORE_CTX_set0_trusted_stack(ctx, trusted);
		atomic_fetch_add_explicit(&trusts, 1, memory_order_relaxed);
	}
	free(s.chain);
	return r;
}
