/* leaf.h - the certificates the relay answers an app's handshake with: one
 * per name (the SNI name, else the destination's address), signed by the
 * run's CA (ca.h), cached so that only the first handshake for a name pays
 * a signature. */
#ifndef FAULTNET_TLS_LEAF_H
#define FAULTNET_TLS_LEAF_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include "preload/tls/ossl.h"

#define FN_LEAF_CACHE 1024 /* names kept; the least recently used goes */

/* The name a leaf is for, into out (256 bytes): sni, lowercased, when it is
 * a DNS name (a leading "*." label allowed) or an address; else, with no
 * or a malformed sni, dst's address (an IPv4-mapped one as IPv4). *ip says
 * which. False when neither gives a name. */
bool fn_leaf_name(const char *sni, const struct sockaddr *dst, char out[256], bool *ip);

/* A server-side SSL ready to answer one client's handshake for that name
 * with a leaf of the run's CA (TLS 1.2 or 1.3, no early data, no
 * renegotiation). alpn (wire format: length-prefixed names, e.g.
 * "\x08http/1.1"; copied) is what the relay may choose, in its order of
 * preference, among what the client offers; alpn_len 0 chooses none. NULL
 * with *why set when OpenSSL, the CA or the name cannot be had. The caller
 * frees it with the library's SSL_free (fn_ossl_get). Thread-safe. */
SSL *fn_leaf_ssl(const char *sni, const struct sockaddr *dst, const unsigned char *alpn,
		 size_t alpn_len, const char **why);

/* The same with a leaf made for this handshake alone, with the defect of
 * a tls rule's certificate fault (core/http.h's FN_TLSF_EXPIRED...). */
SSL *fn_leaf_fault_ssl(int fault, const char *sni, const struct sockaddr *dst,
		       const unsigned char *alpn, size_t alpn_len, const char **why);

/* Replaces the protocol list s (one of the above) chooses from: the
 * server's choice, once the relay's own handshake with it has one; none
 * (alpn_len 0) answers without ALPN. False when memory is short. */
bool fn_leaf_set_alpn(SSL *s, const unsigned char *alpn, size_t alpn_len);

/* Gives ssl (from fn_leaf_ssl) instead of its leaf the server's own
 * certificate real with the leaves' key in it (re-signed by the run's CA):
 * its subject, issuer name, serial, validity and extensions are the
 * server's, so an app whose verification the trust hook runs on the real
 * chain (trust.h) reads the server's own certificate; only its key and
 * signature differ. Cached per certificate. False (ssl unchanged) when it
 * cannot be made. */
bool fn_leaf_mirror(SSL *ssl, X509 *real);

/* In a fork child: the cache's lock made free again. */
void fn_leaf_atfork_child(void);

/* Signatures made by this process for leaves so far. */
unsigned long fn_leaf_signatures(void);

#endif
