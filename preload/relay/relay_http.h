/* relay_http.h - per-request HTTP faults on a relayed connection: the
 * app's requests are parsed as they arrive and each one is answered by
 * faultnet (respond), forwarded to the real server (as it is, or with its
 * answer held back: slow), or cut (abort). Answers go back in request order,
 * whoever wrote them. The server is connected to only when a request must
 * be forwarded. Used by the relay thread only. */
#ifndef FAULTNET_RELAY_HTTP_H
#define FAULTNET_RELAY_HTTP_H

#include <stdbool.h>
#include <stdint.h>

#include "preload/relay/relay_conn.h"

/* Sets up c's HTTP state once its app side is established. False when
 * the parser cannot be loaded or memory is short: c is then relayed as
 * bytes, untouched. */
bool fn_http_conn_init(struct fn_conn *c);
/* Carries c's requests and answers as far as its sockets and timers allow. */
void fn_http_pump(struct fn_conn *c, uint64_t now);
void fn_http_conn_free(struct fn_conn *c);
/* Before a fork child frees its copy of the parent's c (outside the fork
 * handler: relay.c, free_inherited): its TLS ends are left as they are,
 * never freed: the parent's relay thread may have been inside OpenSSL (and
 * its namespace's own malloc, which fork does not make safe) at the fork. */
void fn_http_atfork_forget(struct fn_conn *c);
/* Reads, once, in the constructor, before any relay thread runs:
 * FAULTNET_STRICT (set by faultctl run --strict and scenario --strict),
 * under which the first connection of the process that HTTP rules cover
 * but cannot read (not HTTP, TLS passed through) is said on stderr; and
 * whether NODE_EXTRA_CA_CERTS names the run's CA (a file ca.pem or
 * ca.node-*.pem of the run directory) or JAVA_TOOL_OPTIONS a trust store
 * with it (ca.java-*.jks there), as faultctl run sets them, for the "tls"
 * record's ca_variable. */
void fn_http_env_init(void);

#endif
