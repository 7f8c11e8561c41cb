/* gtrust.h - the app's own GnuTLS (wget, git through libcurl-gnutls)
 * judges the real server behind a leaf the relay served, as trust.h does
 * for OpenSSL 3: the hooks on gnutls_certificate_verify_peers{,2,3}, for
 * such a leaf, verify the chain the real server showed the relay against
 * the trust list of the session's own credentials (its system trust, its
 * --ca-certificate, its CAINFO), with the app's own hostname and typed
 * data, and give the app that status: it trusts the server, or refuses it
 * with the status it would have met directly. Where no server is behind
 * the leaf (the rules answer, none reached), that one verification trusts
 * the run's CA, through a trust list of its own: never the app's. Any
 * other certificate goes to the real function untouched. GnuTLS is never
 * loaded here: its functions are looked up in the copy the process
 * already has (RTLD_NOLOAD), at version GNUTLS_3_4. */
#ifndef FAULTNET_TLS_GTRUST_H
#define FAULTNET_TLS_GTRUST_H

/* Which of the three hooks called: the real one each forwards to. */
enum fn_gtrust_entry { FN_GT_PEERS, FN_GT_PEERS2, FN_GT_PEERS3 };

/* The hooks' body: session, data and elements (the app's typed data, a
 * gnutls_typed_vdata_st array; PEERS only), hostname (PEERS3 only) and
 * status as the app passed them. Returns what the app's call returns. */
int fn_gtrust_verify(enum fn_gtrust_entry entry, void *session, void *data, unsigned elements,
		     const char *hostname, unsigned *status);

#endif
