/* gtrust.c - lets an app's GnuTLS trust a leaf the relay served only when
 * the real server behind it passes the app's own trust list, and the
 * run's CA only where no server is behind it (see gtrust.h). GnuTLS's
 * types are declared here by their layout (stable since 3.4: the
 * GNUTLS_3_4 symbol version), so that building the shim needs no GnuTLS
 * headers and the shim never links it. */
#include "preload/tls/gtrust.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "preload/base/libc.h"
#include "preload/tls/ca.h"
#include "preload/tls/trust.h"

#define GV "GNUTLS_3_4"
#define MAX_CHAIN 16	   /* certificates of a chain verified, at most */
#define NOT_JUDGED INT_MIN /* the app's own call is to decide */

/* gnutls_datum_t and gnutls_typed_vdata_st. */
struct datum {
	unsigned char *data;
	unsigned size;
};
struct vdata {
	int type;
	unsigned char *data;
	unsigned size;
};

enum {
	CRD_CERTIFICATE = 1,	   /* GNUTLS_CRD_CERTIFICATE */
	FMT_DER = 0,		   /* GNUTLS_X509_FMT_DER */
	FMT_PEM = 1,		   /* GNUTLS_X509_FMT_PEM */
	DT_DNS_HOSTNAME = 1,	   /* GNUTLS_DT_DNS_HOSTNAME */
	CERT_INVALID = 1 << 1,	   /* GNUTLS_CERT_INVALID */
	SIGNER_NOT_FOUND = 1 << 6, /* GNUTLS_CERT_SIGNER_NOT_FOUND */
	E_INTERNAL = -59	   /* GNUTLS_E_INTERNAL_ERROR */
};

/* The app's GnuTLS functions used, looked up by version in the copy the
 * process has loaded. */
#define GT_FUNCS(X)                                                                           \
	X(gnutls_certificate_get_peers, const struct datum *, void *, unsigned *)             \
	X(gnutls_credentials_get, int, void *, int, void **)                                  \
	X(gnutls_certificate_get_trust_list, void, void *, void **)                           \
	X(gnutls_x509_trust_list_init, int, void **, unsigned)                                \
	X(gnutls_x509_trust_list_deinit, void, void *, unsigned)                              \
	X(gnutls_x509_trust_list_add_trust_mem, int, void *, const struct datum *,            \
	  const struct datum *, int, unsigned, unsigned)                                      \
	X(gnutls_x509_trust_list_verify_crt2, int, void *, void **, unsigned, struct vdata *, \
	  unsigned, unsigned, unsigned *, void *)                                             \
	X(gnutls_x509_crt_init, int, void **)                                                 \
	X(gnutls_x509_crt_import, int, void *, const struct datum *, int)                     \
	X(gnutls_x509_crt_deinit, void, void *)                                               \
	X(gnutls_certificate_verify_peers, int, void *, struct vdata *, unsigned, unsigned *) \
	X(gnutls_certificate_verify_peers2, int, void *, unsigned *)                          \
	X(gnutls_certificate_verify_peers3, int, void *, const char *, unsigned *)

#define GT_FIELD(name, ret, ...) ret (*name)(__VA_ARGS__);
struct gt {
	GT_FUNCS(GT_FIELD)
};
#undef GT_FIELD

/* Whether f is defined in the shim itself (one of the hooks). */
static bool ours(const void *f)
{
	Dl_info a, b;
	return dladdr(f, &a) && dladdr((const void *)fn_gtrust_verify, &b) &&
	       a.dli_fbase == b.dli_fbase;
}

/* Binds g from the GnuTLS the process has (its soname, never loaded
 * here; else the next definition after the shim). Looked up on each
 * verification, which is rare: a library the app unloads and loads again
 * is found where it is. False when any function is missing. */
static bool bind_gt(struct gt *g)
{
	void *h = LIBC(dlopen)("libgnutls.so.30", RTLD_NOLOAD | RTLD_LAZY);
	void *from = h ? h : RTLD_NEXT;
	bool ok = true;
#define GT_BIND(name, ...)                            \
	*(void **)&g->name = dlvsym(from, #name, GV); \
	ok = ok && g->name;
	GT_FUNCS(GT_BIND)
#undef GT_BIND
	if (h)
		dlclose(h); /* NOLOAD took a reference: the library stays */
	return ok && !ours((const void *)g->gnutls_certificate_verify_peers) &&
	       !ours((const void *)g->gnutls_certificate_verify_peers2) &&
	       !ours((const void *)g->gnutls_certificate_verify_peers3);
}

/* The call as the app made it, to the real function. */
static int forward(const struct gt *g, enum fn_gtrust_entry entry, void *session, void *data,
		   unsigned elements, const char *hostname, unsigned *status)
{
	switch (entry) {
	case FN_GT_PEERS2:
		return g->gnutls_certificate_verify_peers2(session, status);
	case FN_GT_PEERS3:
		return g->gnutls_certificate_verify_peers3(session, hostname, status);
	default:
		return g->gnutls_certificate_verify_peers(session, data, elements, status);
	}
}

/* The length of the DER element at p (n bytes there), header included;
 * 0 when it is not a whole one. */
static size_t der_len(const unsigned char *p, size_t n)
{
	if (n < 2 || p[0] != 0x30)
		return 0;
	size_t len = p[1], hdr = 2;
	if (len & 0x80) {
		unsigned k = len & 0x7f;
		if (k == 0 || k > 4 || n < 2 + k)
			return 0;
		len = 0;
		for (unsigned i = 0; i < k; i++)
			len = len << 8 | p[2 + i];
		hdr += k;
	}
	return len <= n - hdr ? hdr + len : 0;
}

/* Certificates given as DER (n datums) into crts, parsed by the app's
 * GnuTLS; the number made, or 0 when one fails (all freed then). */
static unsigned import_all(const struct gt *g, const struct datum *d, unsigned n, void **crts)
{
	unsigned k = 0;
	for (; k < n && k < MAX_CHAIN; k++) {
		if (g->gnutls_x509_crt_init(&crts[k]) < 0)
			break;
		if (g->gnutls_x509_crt_import(crts[k], &d[k], FMT_DER) < 0) {
			g->gnutls_x509_crt_deinit(crts[k]);
			break;
		}
	}
	if (k == n || k == MAX_CHAIN)
		return k;
	while (k)
		g->gnutls_x509_crt_deinit(crts[--k]);
	return 0;
}

/* Verifies the certificates d (leaf first) against trust list tl, with the
 * app's typed data: the return and status of the verification, or a
 * status that trusts nothing when they cannot be parsed. */
static int verify_list(const struct gt *g, void *tl, const struct datum *d, unsigned n,
		       struct vdata *vd, unsigned ve, unsigned *status)
{
	void *crts[MAX_CHAIN];
	unsigned k = import_all(g, d, n, crts);
	if (!k) {
		*status = CERT_INVALID | SIGNER_NOT_FOUND;
		return 0;
	}
	int r = g->gnutls_x509_trust_list_verify_crt2(tl, crts, k, vd, ve, 0, status, NULL);
	while (k)
		g->gnutls_x509_crt_deinit(crts[--k]);
	return r;
}

/* A server was met: the chain it showed the relay, judged by the trust
 * list of the session's own certificate credentials. NOT_JUDGED when the
 * session has none (the caller forwards: the real call then fails). */
static int judge_server(const struct gt *g, void *session, const struct fn_trust_seen *s,
			struct vdata *vd, unsigned ve, unsigned *status)
{
	void *cred = NULL, *tl = NULL;
	if (g->gnutls_credentials_get(session, CRD_CERTIFICATE, &cred) < 0 || !cred)
		return NOT_JUDGED;
	g->gnutls_certificate_get_trust_list(cred, &tl);
	if (!tl)
		return NOT_JUDGED;
	struct datum d[MAX_CHAIN];
	unsigned n = 0;
	for (size_t at = 0; s->chain && at < s->chain_len && n < MAX_CHAIN; n++) {
		size_t len = der_len(s->chain + at, s->chain_len - at);
		if (!len)
			break;
		d[n] = (struct datum){s->chain + at, (unsigned)len};
		at += len;
	}
	if (!n) { /* no chain recorded (memory): nothing is trusted */
		*status = CERT_INVALID | SIGNER_NOT_FOUND;
		return 0;
	}
	return verify_list(g, tl, d, n, vd, ve, status);
}

/* No server behind the leaf: the peer's certificates judged by a trust
 * list of their own holding the run's CA alone, never the app's. */
static int judge_leaf(const struct gt *g, const char *pem, const struct datum *peers, unsigned n,
		      struct vdata *vd, unsigned ve, unsigned *status)
{
	void *tl = NULL;
	struct datum ca = {(unsigned char *)pem, (unsigned)strlen(pem)};
	if (g->gnutls_x509_trust_list_init(&tl, 0) < 0)
		return NOT_JUDGED;
	int r = NOT_JUDGED;
	if (g->gnutls_x509_trust_list_add_trust_mem(tl, &ca, NULL, FMT_PEM, 0, 0) > 0)
		r = verify_list(g, tl, peers, n, vd, ve, status);
	g->gnutls_x509_trust_list_deinit(tl, 1);
	return r;
}

int fn_gtrust_verify(enum fn_gtrust_entry entry, void *session, void *data, unsigned elements,
		     const char *hostname, unsigned *status)
{
	struct gt g;
	if (!bind_gt(&g)) /* cannot be, with a GnuTLS 3.4 or later */
		return E_INTERNAL;
	/* Only a process that terminated a connection has the CA: elsewhere
	 * no leaf of the relay's can be met. */
	const char *pem = fn_ca_pem();
	unsigned n = 0;
	const struct datum *peers =
	    pem && status ? g.gnutls_certificate_get_peers(session, &n) : NULL;
	struct fn_trust_seen s;
	if (!peers || !n || !fn_trust_find(peers[0].data, peers[0].size, &s))
		return forward(&g, entry, session, data, elements, hostname, status);
	struct vdata host = {DT_DNS_HOSTNAME, (unsigned char *)hostname, 0};
	struct vdata *vd = entry == FN_GT_PEERS ? data : hostname ? &host : NULL;
	unsigned ve = entry == FN_GT_PEERS ? elements : hostname ? 1 : 0;
	int r = s.reached ? judge_server(&g, session, &s, vd, ve, status)
			  : judge_leaf(&g, pem, peers, n, vd, ve, status);
	free(s.chain);
	if (r == NOT_JUDGED) /* no credentials or trust list of the app's: its own call */
		return forward(&g, entry, session, data, elements, hostname, status);
	if (r == 0 && *status == 0)
		fn_trust_passed();
	return r;
}
