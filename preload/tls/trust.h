/* trust.h - the run's CA trusted by the app's own OpenSSL 3, one
 * verification at a time: the hook on the app's libcrypto's
 * X509_STORE_CTX_init, when the leaf to verify is one the relay served,
 * verifies the chain the real server showed the relay against the app's
 * own store and the name, and only if it passes lets that verification
 * (that ctx, never the store) trust the run's CA. A server the app would
 * not trust stays untrusted. The relay's own
 * OpenSSL lives in a namespace of its own (ossl.h): its verification never
 * comes here. */
#ifndef FAULTNET_TLS_TRUST_H
#define FAULTNET_TLS_TRUST_H

#include <stdbool.h>
#include <stddef.h>

/* The hook's body: ctx, store, x509 and chain as the app passed them;
 * caller is the hook's return address (whose library names the libcrypto
 * the call was meant for), self the hook's own address (never forwarded
 * to). Returns what the real function returns. */
int fn_trust_ctx_init(void *ctx, void *store, void *x509, void *chain, const void *caller,
		      const void *self);

/* Called by the relay when it answers an app's handshake with leaf (DER):
 * chain (DER certificates, the server's leaf first, as it sent them) is
 * what the server showed for name (an address when ip). Not reached: no
 * server was (requests the rules answer still are; nothing of a server's
 * is trusted), and the leaf is accepted. Reached with no chain (memory):
 * the leaf is trusted by no verification. No leaf (memory): every entry
 * is dropped. Takes both buffers (malloc'd); a leaf's last record
 * replaces an earlier one. */
void fn_trust_record(unsigned char *leaf, size_t leaf_len, unsigned char *chain, size_t chain_len,
		     bool reached, const char *name, bool ip);

/* How many verifications of the app's own OpenSSL the hook let trust the
 * run's CA in this process so far. */
unsigned long fn_trust_count(void);

/* In a fork child: the table's lock made free again. */
void fn_trust_atfork_child(void);

#endif
