/* jks.h - a Java KeyStore (JKS) of trusted certificates made from another:
 * its entries kept, one trusted certificate added, its integrity digest made
 * again. For faultctl run's JAVA_TOOL_OPTIONS (cavars.c): Java reads its
 * trust store once, at start, out of the trust hook's reach. */
#ifndef FAULTNET_CTL_JKS_H
#define FAULTNET_CTL_JKS_H

#include <stddef.h>

/* The JKS store (n bytes) with the certificate der (dn bytes) added as a
 * trusted entry named alias, digested with password (Java's default
 * store's is "changeit"): a malloc'd store in *out, *outn bytes. NULL on
 * success, else why the store is refused (not a JKS store, version 2). */
const char *fn_jks_add(const unsigned char *store, size_t n, const unsigned char *der, size_t dn,
		       const char *alias, const char *password, unsigned char **out, size_t *outn);

#endif
