/* ca.h - the run's CA: one EC P-256 key and self-signed certificate per run
 * directory (ca.key and ca.pem there, mode 0600), made by the first process
 * of the run that needs it and reused by every later one. It signs nothing
 * but the relay's leaves, and only processes under faultnet trust it. */
#ifndef FAULTNET_TLS_CA_H
#define FAULTNET_TLS_CA_H

#include <stddef.h>

#include "preload/tls/ossl.h"

struct fn_ca {
	X509 *cert;
	EVP_PKEY *key;
	unsigned char sha256[32]; /* the certificate's fingerprint */
};

/* The CA of run directory dir, loaded into *ca, or made first (under an
 * flock on dir/ca.lock) when dir holds none. Files that are not regular,
 * not this euid's, open to anyone else (mode other than 0600), a symbolic
 * link, or whose key does not match the certificate, are refused: NULL on
 * success, else the reason (written into buf, len bytes). */
const char *fn_ca_open(const struct fn_ossl *o, const char *dir, struct fn_ca *ca, char *buf,
		       size_t len);

/* The process's CA: fn_ca_open on the run directory (core/rundir.h) the
 * first time, then the same one. NULL with *why set when it cannot be had;
 * the refusal is kept (a later call gives it again). Thread-safe. */
const struct fn_ca *fn_ca_get(const char **why);

/* The process's CA as PEM text once fn_ca_get has loaded it, else NULL:
 * only a process that terminates a connection has one. Never loads it. */
const char *fn_ca_pem(void);

#endif
