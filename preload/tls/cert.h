/* cert.h - what the CA and the leaves both make: an EC P-256 key, a v3
 * certificate's frame (random serial, validity, key) and its extensions. */
#ifndef FAULTNET_TLS_CERT_H
#define FAULTNET_TLS_CERT_H

#include "preload/tls/ossl.h"

/* A new EC P-256 key, or NULL. */
EVP_PKEY *fn_cert_key(const struct fn_ossl *o);

/* A v3 certificate for key with a random 16-byte positive serial, valid
 * from an hour ago (clocks of client and relay may differ) for seconds;
 * no name, no extension, unsigned. NULL on failure. */
X509 *fn_cert_frame(const struct fn_ossl *o, EVP_PKEY *key, long seconds);

/* Adds the extension nid = value (OpenSSL's configuration syntax), with
 * issuer for authorityKeyIdentifier (the certificate itself when NULL).
 * 0, or -1. */
int fn_cert_ext(const struct fn_ossl *o, X509 *cert, X509 *issuer, int nid, const char *value);

/* SHA-256 of the certificate's DER encoding: its fingerprint. 0 or -1. */
int fn_cert_fingerprint(const struct fn_ossl *o, X509 *cert, unsigned char out[32]);

#endif
