/* trust.h - the run's CA in the app's own trust store: the hook on the
 * app's libcrypto's X509_STORE_CTX_init (OpenSSL 3) adds it to the store a
 * verification is about to use, in a process that terminates a connection
 * (one whose relay has loaded the CA) and in no other. The relay's own
 * OpenSSL lives in a namespace of its own (ossl.h): its verification never
 * comes here. */
#ifndef FAULTNET_TLS_TRUST_H
#define FAULTNET_TLS_TRUST_H

/* The hook's body: ctx, store, x509 and chain as the app passed them;
 * caller is the hook's return address (whose library names the libcrypto
 * the call was meant for), self the hook's own address (never forwarded
 * to). Returns what the real function returns. */
int fn_trust_ctx_init(void *ctx, void *store, void *x509, void *chain, const void *caller,
		      const void *self);

/* In a fork child: the table's lock made free again. */
void fn_trust_atfork_child(void);

#endif
