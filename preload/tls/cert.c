/* cert.c - the parts of a certificate the CA and the leaves share. */
#include "preload/tls/cert.h"

/* An hour: the notBefore slack, for a client whose clock is behind. */
#define SLACK 3600

EVP_PKEY *fn_cert_key(const struct fn_ossl *o)
{
	return o->EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
}

/* Random, and positive: DER integers are signed, so the top bit is 0. */
static int serial(const struct fn_ossl *o, X509 *cert)
{
	unsigned char b[16];
	if (o->RAND_bytes(b, sizeof(b)) != 1)
		return -1;
	b[0] &= 0x7f;
	b[0] |= 0x01; /* never a shorter encoding */
	return o->ASN1_STRING_set(o->X509_get_serialNumber(cert), b, sizeof(b)) ? 0 : -1;
}

X509 *fn_cert_frame(const struct fn_ossl *o, EVP_PKEY *key, long seconds)
{
	X509 *c = o->X509_new();
	if (!c)
		return NULL;
	if (!o->X509_set_version(c, X509_VERSION_3) || serial(o, c) < 0 ||
	    !o->X509_gmtime_adj(o->X509_getm_notBefore(c), -SLACK) ||
	    !o->X509_gmtime_adj(o->X509_getm_notAfter(c), seconds) || !o->X509_set_pubkey(c, key)) {
		o->X509_free(c);
		return NULL;
	}
	return c;
}

int fn_cert_ext(const struct fn_ossl *o, X509 *cert, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX ctx;
	o->X509V3_set_ctx(&ctx, issuer ? issuer : cert, cert, NULL, NULL, 0);
	X509_EXTENSION *e = o->X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
	if (!e)
		return -1;
	int ok = o->X509_add_ext(cert, e, -1);
	o->X509_EXTENSION_free(e);
	return ok ? 0 : -1;
}

int fn_cert_fingerprint(const struct fn_ossl *o, X509 *cert, unsigned char out[32])
{
	unsigned int n = 0;
	return o->X509_digest(cert, o->EVP_sha256(), out, &n) && n == 32 ? 0 : -1;
}
