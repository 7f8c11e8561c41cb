/* leaf.c - a leaf certificate per name, and its server context, cached
 * (see leaf.h). One EC key serves every leaf of the process: a leaf then
 * costs one signature, not a key generation too. */
#include "preload/tls/leaf.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/hash.h"
#include "preload/tls/badleaf.h"
#include "preload/tls/ca.h"
#include "preload/tls/cert.h"

#define LEAF_SECONDS (30L * 86400) /* a month, cut to the CA's own end */
#define RENEW_BEFORE 3600	   /* minted again an hour before it ends */

struct entry {
	uint64_t hash;
	SSL_CTX *ctx;
	time_t until; /* fresh until then */
	unsigned char used;
	char name[256];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct entry *cache; /* FN_LEAF_CACHE entries, made at first use */
static unsigned hand;	    /* the clock's hand */
static EVP_PKEY *leaf_key;
static unsigned long signatures;
static int alpn_index = -1;

static bool dns_name(const char *s)
{
	size_t n = strlen(s), label = 0;
	if (n == 0 || n > 253)
		return false;
	if (s[0] == '*' && s[1] == '.')
		s += 2; /* a wildcard only as the whole first label */
	for (; *s; s++) {
		if (*s == '.') {
			if (label == 0)
				return false;
			label = 0;
		} else if (isalnum((unsigned char)*s) || *s == '-' || *s == '_') {
			if (++label > 63)
				return false;
		} else {
			return false;
		}
	}
	return label > 0;
}

static bool addr_text(const char *s)
{
	unsigned char b[16];
	return inet_pton(AF_INET, s, b) == 1 || inet_pton(AF_INET6, s, b) == 1;
}

bool fn_leaf_name(const char *sni, const struct sockaddr *dst, char out[256], bool *ip)
{
	if (sni && (dns_name(sni) || addr_text(sni))) {
		size_t i = 0;
		for (; sni[i] && i < 255; i++)
			out[i] = (char)tolower((unsigned char)sni[i]);
		out[i] = '\0';
		*ip = addr_text(out);
		return true;
	}
	*ip = true;
	if (dst && dst->sa_family == AF_INET)
		return inet_ntop(AF_INET, &((const struct sockaddr_in *)dst)->sin_addr, out, 256);
	if (!dst || dst->sa_family != AF_INET6)
		return false;
	const struct in6_addr *a = &((const struct sockaddr_in6 *)dst)->sin6_addr;
	if (IN6_IS_ADDR_V4MAPPED(a))
		return inet_ntop(AF_INET, &a->s6_addr[12], out, 256);
	return inet_ntop(AF_INET6, a, out, 256);
}

/* The leaf for name: SAN DNS:name or IP:addr, serverAuth, the CA's issuer
 * name and key id, notAfter no later than the CA's. */
static X509 *mint(const struct fn_ossl *o, const struct fn_ca *ca, const char *name, bool ip,
		  time_t *until)
{
	X509 *c = fn_cert_frame(o, leaf_key, LEAF_SECONDS);
	if (!c)
		return NULL;
	const ASN1_TIME *ca_end = o->X509_get0_notAfter(ca->cert);
	if (o->ASN1_TIME_compare(o->X509_getm_notAfter(c), ca_end) > 0)
		o->X509_set1_notAfter(c, ca_end);
	int days = 0, secs = 0;
	o->ASN1_TIME_diff(&days, &secs, NULL, o->X509_getm_notAfter(c));
	*until = time(NULL) + (time_t)days * 86400 + secs - RENEW_BEFORE;
	char san[300];
	snprintf(san, sizeof(san), "%s:%s", ip ? "IP" : "DNS", name);
	X509_NAME *subj = o->X509_get_subject_name(c);
	/* A CN holds at most 64 characters; clients read the SAN anyway. */
	bool cn = strlen(name) <= 64;
	if ((cn && !o->X509_NAME_add_entry_by_txt(subj, "CN", MBSTRING_UTF8,
						  (const unsigned char *)name, -1, -1, 0)) ||
	    !o->X509_set_issuer_name(c, o->X509_get_subject_name(ca->cert)) ||
	    fn_cert_ext(o, c, ca->cert, NID_basic_constraints, "critical,CA:FALSE") < 0 ||
	    fn_cert_ext(o, c, ca->cert, NID_key_usage, "critical,digitalSignature") < 0 ||
	    fn_cert_ext(o, c, ca->cert, NID_ext_key_usage, "serverAuth") < 0 ||
	    fn_cert_ext(o, c, ca->cert, NID_subject_alt_name, san) < 0 ||
	    fn_cert_ext(o, c, ca->cert, NID_authority_key_identifier, "keyid:always") < 0 ||
	    !o->X509_sign(c, ca->key, o->EVP_sha256())) {
		o->X509_free(c);
		return NULL;
	}
	signatures++;
	return c;
}

/* Picks, in the caller's order, the first protocol the client offered;
 * none (no ALPN in the answer) when the caller gave none or no match. */
static int select_alpn(SSL *s, const unsigned char **out, unsigned char *outlen,
		       const unsigned char *in, unsigned int inlen, void *arg)
{
	const struct fn_ossl *o = arg;
	const unsigned char *mine = o->SSL_get_ex_data(s, alpn_index);
	if (!mine || !mine[0])
		return SSL_TLSEXT_ERR_NOACK;
	unsigned char *chosen = NULL;
	if (o->SSL_select_next_proto(&chosen, outlen, mine + 1, mine[0], in, inlen) !=
	    OPENSSL_NPN_NEGOTIATED)
		return SSL_TLSEXT_ERR_NOACK;
	*out = chosen;
	return SSL_TLSEXT_ERR_OK;
}

/* Frees an SSL's copy of the caller's list with the SSL (it is our heap's). */
static void free_alpn(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl, void *argp)
{
	(void)parent, (void)ad, (void)idx, (void)argl, (void)argp;
	free(ptr);
}

static SSL_CTX *server_ctx(const struct fn_ossl *o, X509 *leaf)
{
	SSL_CTX *x = o->SSL_CTX_new(o->TLS_server_method());
	if (!x)
		return NULL;
	o->SSL_CTX_ctrl(x, SSL_CTRL_SET_MIN_PROTO_VERSION, TLS1_2_VERSION, NULL);
	o->SSL_CTX_set_options(x, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE |
				      SSL_OP_NO_TICKET);
	o->SSL_CTX_set_max_early_data(x, 0); /* never 0-RTT: it could be replayed */
	/* No session for the app to resume (no TLS 1.3 ticket, no TLS 1.2
	 * ticket or session id): a resumed handshake shows the app no chain,
	 * so the server the relay reaches afresh on that connection would be
	 * taken on the app's verdict on an earlier one. Each of the app's
	 * handshakes is a full one its own store judges (trust.h); and the
	 * relay makes no tickets (two encryptions a connection). */
	o->SSL_CTX_set_num_tickets(x, 0);
	o->SSL_CTX_ctrl(x, SSL_CTRL_SET_SESS_CACHE_MODE, SSL_SESS_CACHE_OFF, NULL);
	o->SSL_CTX_set_alpn_select_cb(x, select_alpn, (void *)o);
	if (o->SSL_CTX_use_certificate(x, leaf) != 1 ||
	    o->SSL_CTX_use_PrivateKey(x, leaf_key) != 1) {
		o->SSL_CTX_free(x);
		return NULL;
	}
	return x;
}

/* The cached context for name, or a new one in the slot the clock frees.
 * Called under the lock. */
static SSL_CTX *lookup(const struct fn_ossl *o, const struct fn_ca *ca, const char *name, bool ip)
{
	uint64_t h = fn_hash_str(name);
	time_t now = time(NULL);
	struct entry *e = NULL;
	for (unsigned i = 0; i < FN_LEAF_CACHE && !e; i++) {
		if (cache[i].ctx && cache[i].hash == h && strcmp(cache[i].name, name) == 0)
			e = &cache[i];
	}
	if (e && now < e->until) {
		e->used = 1;
		return e->ctx;
	}
	/* A stale leaf is minted again in its own slot; a new name takes the
	 * first slot the clock finds unused since its last turn. */
	while (!e && cache[hand].ctx && cache[hand].used)
		cache[hand].used = 0, hand = (hand + 1) % FN_LEAF_CACHE;
	if (!e) {
		e = &cache[hand];
		hand = (hand + 1) % FN_LEAF_CACHE;
	}
	time_t until = 0;
	X509 *leaf = mint(o, ca, name, ip, &until);
	SSL_CTX *x = leaf ? server_ctx(o, leaf) : NULL;
	o->X509_free(leaf); /* the context holds its own reference */
	if (!x)
		return NULL;
	if (e->ctx) /* an SSL made from it holds its own reference too */
		o->SSL_CTX_free(e->ctx);
	*e = (struct entry){.hash = h, .ctx = x, .until = until, .used = 1};
	snprintf(e->name, sizeof(e->name), "%s", name);
	return x;
}

/* What every leaf needs once per process: the cache, the key, the index. */
static const char *prepare(const struct fn_ossl *o)
{
	if (!cache)
		cache = calloc(FN_LEAF_CACHE, sizeof(*cache));
	if (!leaf_key)
		leaf_key = fn_cert_key(o);
	if (alpn_index < 0)
		alpn_index =
		    o->CRYPTO_get_ex_new_index(CRYPTO_EX_INDEX_SSL, 0, NULL, NULL, NULL, free_alpn);
	if (!cache || !leaf_key || alpn_index < 0)
		return "cannot set up the leaves' key and cache";
	return NULL;
}

/* The caller's list as the SSL keeps it: its length, then the list. */
static unsigned char *alpn_copy(const unsigned char *alpn, size_t n)
{
	unsigned char *p = n && n < 256 ? malloc(n + 1) : NULL;
	if (p) {
		p[0] = (unsigned char)n;
		memcpy(p + 1, alpn, n);
	}
	return p;
}

/* A server SSL for the name: with the cached leaf (fault 0), or a fresh
 * one with fault's defect (badleaf.h). */
static SSL *leaf_ssl(int fault, const char *sni, const struct sockaddr *dst,
		     const unsigned char *alpn, size_t alpn_len, const char **why)
{
	const char *dummy;
	why = why ? why : &dummy;
	const struct fn_ossl *o = fn_ossl_get(why);
	const struct fn_ca *ca = o ? fn_ca_get(why) : NULL;
	if (!ca)
		return NULL;
	char name[256];
	bool ip;
	if (!fn_leaf_name(sni, dst, name, &ip)) {
		*why = "no name for a leaf: no valid SNI and no destination address";
		return NULL;
	}
	unsigned char *list = alpn_copy(alpn, alpn_len);
	if (alpn_len && !list) {
		*why = "the ALPN list is empty or too long (255 bytes at most)";
		return NULL;
	}
	pthread_mutex_lock(&lock);
	*why = prepare(o);
	SSL_CTX *x = NULL;
	if (!*why && !fault) {
		x = lookup(o, ca, name, ip);
	} else if (!*why) {
		X509 *bad = fn_badleaf_mint(o, ca, leaf_key, fault, name, ip);
		x = bad ? server_ctx(o, bad) : NULL;
		o->X509_free(bad);
	}
	SSL *s = x ? o->SSL_new(x) : NULL;
	if (fault && x)
		o->SSL_CTX_free(x); /* the SSL holds its own reference */
	pthread_mutex_unlock(&lock);
	if (s && (!list || o->SSL_set_ex_data(s, alpn_index, list)))
		return s;
	free(list);
	if (s)
		o->SSL_free(s);
	if (!*why)
		*why = "OpenSSL could not make a leaf certificate or its context";
	return NULL;
}

SSL *fn_leaf_ssl(const char *sni, const struct sockaddr *dst, const unsigned char *alpn,
		 size_t alpn_len, const char **why)
{
	return leaf_ssl(0, sni, dst, alpn, alpn_len, why);
}

SSL *fn_leaf_fault_ssl(int fault, const char *sni, const struct sockaddr *dst,
		       const unsigned char *alpn, size_t alpn_len, const char **why)
{
	return leaf_ssl(fault, sni, dst, alpn, alpn_len, why);
}

bool fn_leaf_set_alpn(SSL *s, const unsigned char *alpn, size_t alpn_len)
{
	const struct fn_ossl *o = fn_ossl_get(NULL);
	unsigned char *list = alpn_len ? alpn_copy(alpn, alpn_len) : NULL;
	if (!o || (alpn_len && !list)) {
		free(list);
		return false;
	}
	unsigned char *old = o->SSL_get_ex_data(s, alpn_index);
	if (o->SSL_set_ex_data(s, alpn_index, list) != 1) {
		free(list);
		return false;
	}
	free(old);
	return true;
}

#define MIRRORS 64 /* servers' certificates mirrored, kept (a clock) */

static struct mirror {
	unsigned char sha256[32]; /* the server's certificate's fingerprint */
	X509 *cert;
} mirrors[MIRRORS];
static unsigned mirror_next;

/* The mirror of real, made or cached; a reference of the caller's. Under
 * the lock. */
static X509 *mirror_of(const struct fn_ossl *o, const struct fn_ca *ca, X509 *real)
{
	unsigned char fp[32];
	if (fn_cert_fingerprint(o, real, fp) != 0)
		return NULL;
	for (unsigned i = 0; i < MIRRORS; i++)
		if (mirrors[i].cert && memcmp(mirrors[i].sha256, fp, sizeof(fp)) == 0)
			return o->X509_up_ref(mirrors[i].cert) == 1 ? mirrors[i].cert : NULL;
	X509 *m = o->X509_dup(real);
	if (!m || o->X509_set_pubkey(m, leaf_key) != 1 ||
	    !o->X509_sign(m, ca->key, o->EVP_sha256())) {
		o->X509_free(m);
		return NULL;
	}
	signatures++;
	struct mirror *slot = &mirrors[mirror_next++ % MIRRORS];
	o->X509_free(slot->cert);
	slot->cert = m;
	memcpy(slot->sha256, fp, sizeof(fp));
	return o->X509_up_ref(m) == 1 ? m : NULL;
}

bool fn_leaf_mirror(SSL *ssl, X509 *real)
{
	const struct fn_ossl *o = fn_ossl_get(NULL);
	const struct fn_ca *ca = o ? fn_ca_get(NULL) : NULL;
	if (!ca || !real)
		return false;
	pthread_mutex_lock(&lock);
	X509 *m = prepare(o) ? NULL : mirror_of(o, ca, real);
	pthread_mutex_unlock(&lock);
	bool ok = m && o->SSL_use_certificate(ssl, m) == 1;
	o->X509_free(m);
	return ok;
}

void fn_leaf_atfork_child(void)
{
	/* Held at fork (the relay thread signing): a slot may be half
	 * written, so the cache starts empty (the parent's contexts are let
	 * go, as the parent's connections are). */
	if (pthread_mutex_trylock(&lock) != 0) {
		if (cache)
			memset(cache, 0, FN_LEAF_CACHE * sizeof(*cache));
		memset(mirrors, 0, sizeof(mirrors));
	}
	pthread_mutex_init(&lock, NULL);
}

unsigned long fn_leaf_signatures(void)
{
	pthread_mutex_lock(&lock);
	unsigned long n = signatures;
	pthread_mutex_unlock(&lock);
	return n;
}
