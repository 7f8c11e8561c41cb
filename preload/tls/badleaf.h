/* badleaf.h - the certificates of the tls action's certificate faults
 * (core/http.h: expired, not yet valid, wrong host, unknown issuer, self
 * signed, incomplete chain): a leaf with exactly the one defect a real
 * server's certificate has in that outage, so that the app's own
 * verification fails with the error it would meet there. */
#ifndef FAULTNET_TLS_BADLEAF_H
#define FAULTNET_TLS_BADLEAF_H

#include <stdbool.h>

#include "preload/tls/ca.h"
#include "preload/tls/ossl.h"

/* A leaf for name (an address when ip) with fault's defect, its key key;
 * otherwise as the relay's good leaves (leaf.h). Its issuers are made once
 * per process and never sent: the CA of an unknown issuer (trusted by no
 * store) and an intermediate of the run's CA (the chain's missing link).
 * NULL on failure. Not thread-safe: the caller holds the leaves' lock. */
X509 *fn_badleaf_mint(const struct fn_ossl *o, const struct fn_ca *ca, EVP_PKEY *key, int fault,
		      const char *name, bool ip);

#endif
