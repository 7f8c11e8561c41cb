/* trust.c - lets an app's OpenSSL 3 trust the run's CA for one
 * verification, and only when the real server behind the relay's leaf
 * passes the app's own trust, with the app's own parameters (see
 * trust.h). The call is forwarded to the
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
#define LIBS 8	 /* callers' libraries remembered */
#define SEEN 32	 /* leaves whose server the relay met, remembered */
#define PARSED 4 /* servers' chains kept parsed, per library */

typedef int verify_fn(void *);

/* The app's libcrypto functions used besides the real verify, looked up by
 * version in the caller's library's own libcrypto (never the hooks). */
#define TRUST_FUNCS(X)                                                \
	X(BIO_new_mem_buf, void *, const void *, int)                 \
	X(PEM_read_bio_X509, void *, void *, void **, void *, void *) \
	X(BIO_free, int, void *)                                      \
	X(d2i_X509, void *, void **, const unsigned char **, long)    \
	X(i2d_X509, int, void *, unsigned char **)                    \
	X(X509_free, void, void *)                                    \
	X(X509_STORE_CTX_get0_cert, void *, void *)                   \
	X(X509_STORE_CTX_set_cert, void, void *, void *)              \
	X(X509_STORE_CTX_set0_untrusted, void, void *, void *)        \
	X(X509_STORE_CTX_set0_trusted_stack, void, void *, void *)    \
	X(X509_verify_cert, int, void *)                              \
	X(OPENSSL_sk_new_null, void *, void)                          \
	X(OPENSSL_sk_push, int, void *, const void *)                 \
	X(OPENSSL_sk_pop_free, void, void *, void (*)(void *))        \
	X(OPENSSL_sk_num, int, const void *)                          \
	X(OPENSSL_sk_value, void *, const void *, int)                \
	X(X509_up_ref, int, void *)

/* A server's chain as DER and as a stack of one library's X509s. */
struct parsed {
	unsigned char *der;
	size_t len;
	void *sk;
};

#define TRUST_FIELD(name, ret, ...) ret (*name)(__VA_ARGS__);
/* What one caller's library binds to. */
struct lib {
	const void *base;  /* the caller's library (dladdr's dli_fbase) */
	verify_fn *verify; /* the real X509_verify_cert */
	bool v3;	   /* it is OpenSSL 3's: the functions below are set */
	TRUST_FUNCS(TRUST_FIELD)
	void *ca;      /* the run's CA parsed by that library, once */
	void *trusted; /* a stack of that library's holding ca alone */
	/* The servers' chains last parsed: every connection to a server
	 * shows the same one, and OpenSSL 3's d2i_X509 costs as much as the
	 * verification itself. Under the lock. */
	struct parsed parsed[PARSED];
	unsigned parsed_next;
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
static atomic_ulong trusts; /* verifications of the relay's leaves let pass */

unsigned long fn_trust_count(void)
{
	return atomic_load_explicit(&trusts, memory_order_relaxed);
}

/* Looks up e's functions in h, OpenSSL 3's by version, else the name's
 * default version (another OpenSSL: forwarded, nothing added). */
static void bind_lib(struct lib *e, void *h, const void *self)
{
	*(void **)&e->verify = dlvsym(h, "X509_verify_cert", V3);
	e->v3 = e->verify && (const void *)e->verify != self;
	if (!e->v3)
		*(void **)&e->verify = dlsym(h, "X509_verify_cert");
	if ((const void *)e->verify == self)
		e->verify = NULL;
	if (!e->v3)
		return;
#define TRUST_BIND(name, ...)                      \
	*(void **)&e->name = dlvsym(h, #name, V3); \
	e->v3 = e->v3 && e->name;
	TRUST_FUNCS(TRUST_BIND)
#undef TRUST_BIND
}
/* Binds e to what handle h finds, and lets h go (RTLD_NOLOAD took a
 * reference: the library stays). False when h finds no X509_verify_cert. */
static bool bind_from(struct lib *e, void *h, const void *self)
{
	if (!h)
		return false;
	bind_lib(e, h, self);
	dlclose(h);
	return e->verify != NULL;
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
		*(void **)&fresh.verify = dlvsym(RTLD_NEXT, "X509_verify_cert", V3);
		if (!fresh.verify)
			*(void **)&fresh.verify = dlsym(RTLD_NEXT, "X509_verify_cert");
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

bool fn_trust_reaches_app(void)
{
	static bool yes; /* once loaded, libcrypto stays: only yes is kept */
	if (__atomic_load_n(&yes, __ATOMIC_RELAXED))
		return true;
	void *h = LIBC(dlopen)("libcrypto.so.3", RTLD_NOLOAD | RTLD_LAZY);
	if (!h)
		return false;
	dlclose(h);
	__atomic_store_n(&yes, true, __ATOMIC_RELAXED);
	return true;
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

bool fn_trust_find(const unsigned char *der, size_t n, struct fn_trust_seen *out)
{
	bool found = false;
	pthread_mutex_lock(&seen_lock);
	for (unsigned i = 0; i < SEEN && !found; i++) {
		struct seen *s = &seen[i];
		if (!s->leaf || s->leaf_len != n || memcmp(s->leaf, der, n) != 0)
			continue;
		out->reached = s->reached;
		out->chain_len = s->chain_len;
		out->chain = s->chain ? malloc(s->chain_len) : NULL;
		found = !s->chain || out->chain;
		if (out->chain)
			memcpy(out->chain, s->chain, s->chain_len);
	}
	pthread_mutex_unlock(&seen_lock);
	return found;
}

void fn_trust_passed(void)
{
	atomic_fetch_add_explicit(&trusts, 1, memory_order_relaxed);
}

/* What the relay met behind leaf x509 (DER, made by e), copied out: false
 * when x509 is no leaf the relay served (or memory is short). */
static bool lookup(struct lib *e, void *x509, struct fn_trust_seen *out)
{
	int n = e->i2d_X509(x509, NULL);
	unsigned char *der = n > 0 ? malloc((size_t)n) : NULL, *p = der;
	bool found = der && e->i2d_X509(x509, &p) == n && fn_trust_find(der, (size_t)n, out);
	free(der);
	return found;
}

/* The server's chain (DER, leaf first) as a stack of e's X509s, its leaf
 * in *leaf; NULL when memory is short. Freed with pop_free(X509_free). */
static void *chain_of(struct lib *e, const struct fn_trust_seen *s, void **leaf)
{
	void *sk = e->OPENSSL_sk_new_null();
	const unsigned char *p = s->chain, *end = s->chain + s->chain_len;
	*leaf = NULL;
	while (sk && p < end) {
		void *x = e->d2i_X509(NULL, &p, end - p);
		if (!x || e->OPENSSL_sk_push(sk, x) <= 0) {
			if (x)
				e->X509_free(x);
			e->OPENSSL_sk_pop_free(sk, e->X509_free);
			return NULL;
		}
		*leaf = *leaf ? *leaf : x;
	}
	return sk;
}

/* A new stack holding a reference of its own to each certificate of sk
 * (its first in *leaf); NULL when memory is short. */
static void *refs_of(struct lib *e, void *sk, void **leaf)
{
	void *out = e->OPENSSL_sk_new_null();
	int n = e->OPENSSL_sk_num(sk);
	*leaf = NULL;
	for (int i = 0; out && i < n; i++) {
		void *x = e->OPENSSL_sk_value(sk, i);
		if (e->X509_up_ref(x) != 1) {
			e->OPENSSL_sk_pop_free(out, e->X509_free);
			return NULL;
		}
		if (e->OPENSSL_sk_push(out, x) <= 0) {
			e->X509_free(x);
			e->OPENSSL_sk_pop_free(out, e->X509_free);
			return NULL;
		}
		*leaf = *leaf ? *leaf : x;
	}
	return out;
}

/* The server's chain parsed before, as a stack of its own; NULL when it
 * was not (or memory is short). */
static void *parsed_chain(struct lib *e, const struct fn_trust_seen *s, void **leaf)
{
	void *sk = NULL;
	pthread_mutex_lock(&lock);
	for (unsigned i = 0; i < PARSED && !sk; i++) {
		struct parsed *p = &e->parsed[i];
		if (p->sk && p->len == s->chain_len && memcmp(p->der, s->chain, p->len) == 0)
			sk = refs_of(e, p->sk, leaf);
	}
	pthread_mutex_unlock(&lock);
	return sk;
}

/* Keeps sk (the chain s holds, just parsed) for the next connections to
 * that server, the oldest kept let go. */
static void keep_parsed(struct lib *e, const struct fn_trust_seen *s, void *sk)
{
	void *leaf;
	unsigned char *der = malloc(s->chain_len);
	void *mine = der ? refs_of(e, sk, &leaf) : NULL;
	if (!mine) {
		free(der);
		return;
	}
	memcpy(der, s->chain, s->chain_len);
	pthread_mutex_lock(&lock);
	struct parsed *p = &e->parsed[e->parsed_next++ % PARSED], old = *p;
	*p = (struct parsed){der, s->chain_len, mine};
	pthread_mutex_unlock(&lock);
	free(old.der);
	if (old.sk)
		e->OPENSSL_sk_pop_free(old.sk, e->X509_free);
}

/* The app's verification run on the server's own chain instead of the
 * leaf: its store, parameters (the host name it checks, if any; flags such
 * as CRL checks; depth; time) and callback judge what the server showed,
 * so it trusts, or fails with the error, exactly as it would directly.
 * The chain it builds holds its own references: ours go once it returns. */
static int verify_server(struct lib *e, verify_fn *verify, void *ctx, const struct fn_trust_seen *s)
{
	void *leaf, *sk = parsed_chain(e, s, &leaf);
	if (!sk) {
		sk = chain_of(e, s, &leaf);
		if (sk && leaf)
			keep_parsed(e, s, sk);
	}
	if (!sk || !leaf) {
		if (sk)
			e->OPENSSL_sk_pop_free(sk, e->X509_free);
		return verify(ctx); /* memory: the leaf, untrusted, fails */
	}
	e->X509_STORE_CTX_set_cert(ctx, leaf);
	e->X509_STORE_CTX_set0_untrusted(ctx, sk);
	int r = verify(ctx);
	e->OPENSSL_sk_pop_free(sk, e->X509_free);
	return r;
}

int fn_trust_verify(void *ctx, const void *caller, const void *self)
{
	pthread_mutex_lock(&lock);
	struct lib *e = lib_for(caller, self);
	verify_fn *verify = e->verify;
	const char *pem = ctx ? fn_ca_pem() : NULL;
	void *trusted = pem ? trusted_for(e, pem) : NULL;
	pthread_mutex_unlock(&lock);
	if (!verify)
		return -1; /* no libcrypto behind the caller: cannot happen */
	void *x509 = trusted ? e->X509_STORE_CTX_get0_cert(ctx) : NULL;
	struct fn_trust_seen s;
	if (!x509 || !lookup(e, x509, &s))
		return verify(ctx);
	/* No server behind the leaf (out of reach: requests the rules answer
	 * need none): this verification alone trusts the run's CA, never the
	 * store. A server met: the app's own verification judges its chain. */
	int r;
	if (!s.reached) {
		e->X509_STORE_CTX_set0_trusted_stack(ctx, trusted);
		r = verify(ctx);
	} else {
		r = s.chain ? verify_server(e, verify, ctx, &s) : verify(ctx);
	}
	/* Counted: a verification of the relay's leaf the hook let pass. */
	if (r == 1)
		fn_trust_passed();
	free(s.chain);
	return r;
}
