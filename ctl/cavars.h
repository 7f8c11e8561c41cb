/* cavars.h - faultctl run's part of HTTPS trust: clients that read their
 * trust once at start from a variable, out of the trust hook's reach (the
 * npm node binary links its OpenSSL statically), need the run's CA to exist
 * before their main. */
#ifndef FAULTNET_CTL_CAVARS_H
#define FAULTNET_CTL_CAVARS_H

#include <stdbool.h>

#include "core/rules.h"

/* When policy p has HTTP rules: the run's CA made in the run directory if
 * it is not there yet (OpenSSL loaded in faultctl, never in the command at
 * its start), and NODE_EXTRA_CA_CERTS set for the command: the CA's file,
 * or, when the user had set it, a file of the user's certificates followed
 * by the CA (mode 0600, in the run directory): what the user trusted is
 * kept; and JAVA_TOOL_OPTIONS given -Djavax.net.ssl.trustStore naming a
 * JKS store of the user's trust store (the last -Djavax.net.ssl.trustStore
 * already in JAVA_TOOL_OPTIONS, with its password), else Java's own
 * (/etc/ssl/certs/java/cacerts, when there is one), plus the CA; and
 * GRPC_DEFAULT_SSL_ROOTS_FILE_PATH naming a PEM bundle of the user's file
 * (else the system's bundle) followed by the CA, mode 0600, in the run
 * directory. A failure is a warning on stderr, never fatal. */
void run_ca_vars(const struct fn_policy *p);

/* For the kernel-side backend's HTTP rules (Go verifies with its own
 * crypto/tls, which reads SSL_CERT_FILE): when p has HTTP rules, the run's
 * CA made as above and SSL_CERT_FILE set to a PEM bundle of the roots the
 * command would have read (the user's SSL_CERT_FILE, else the system's
 * bundle) followed by the CA, mode 0600, in the run directory. True when
 * p has HTTP rules (whether or not the bundle could be made: a failure is
 * a warning). */
bool run_ca_cert_file(const struct fn_policy *p);
/* The same whatever the policy (run --backend=bpf --ca-vars: HTTP rules
 * added live). */
void run_ca_cert_file_now(void);

/* The same whatever the policy: for a command whose HTTP rules come later
 * (a scenario's add or load steps). Setting them twice is harmless: a
 * variable that already names the run's CA is left as it is. */
void run_ca_vars_now(void);

#endif
