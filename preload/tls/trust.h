/* trust.h - the app's own OpenSSL 3 judges the real server behind a leaf
 * the relay served: the hook on the app's libcrypto's X509_verify_cert,
 * for such a leaf, runs the app's verification (its store, parameters and
 * callback) on the chain the real server showed the relay instead, so the
 * app trusts it, or fails with its own error, exactly as it would
 * directly. Where no server is behind the leaf, that one verification
 * (that ctx, never the store) trusts the run's CA. The relay's own
 * OpenSSL lives in a namespace of its own (ossl.h): its verification never
 * comes here. */
#ifndef FAULTNET_TLS_TRUST_H
#define FAULTNET_TLS_TRUST_H

#include <stdbool.h>
#include <stddef.h>

/* The hook's body (X509_verify_cert): ctx as the app passed it; caller is
 * the hook's return address (whose library names the libcrypto the call
 * was meant for), self the hook's own address (never forwarded to).
 * Returns what the real function returns. */
int fn_trust_verify(void *ctx, const void *caller, const void *self);

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

/* What the relay met behind a leaf it served (fn_trust_record): the
 * server's chain (DER, leaf first; a malloc'd copy, the caller's to free;
 * NULL where none was recorded) and whether a server was reached. */
struct fn_trust_seen {
	unsigned char *chain;
	size_t chain_len;
	bool reached;
};

/* Finds the leaf whose DER is der (n bytes) among those the relay served:
 * false when it is none of them (or memory is short). For the hooks on
 * other TLS libraries (gtrust.h). */
bool fn_trust_find(const unsigned char *der, size_t n, struct fn_trust_seen *out);

/* Counts one verification of a relay's leaf a hook let pass. */
void fn_trust_passed(void);

/* Whether the app's TLS verification in this process can come through the
 * hook: the system's libcrypto 3 is loaded (in the app's namespace, not
 * the relay's own). Then a server the system's roots do not know may still
 * be reached: the hook lets the app judge its chain with its own store. A
 * process without it (a Node.js or JVM with TLS of its own) is judged by
 * the relay against the system's roots instead. */
bool fn_trust_reaches_app(void);

/* How many verifications of the relay's leaves by the app's own OpenSSL
 * the hook let pass in this process so far. */
unsigned long fn_trust_count(void);

/* In a fork child: the table's lock made free again. */
void fn_trust_atfork_child(void);

#endif
