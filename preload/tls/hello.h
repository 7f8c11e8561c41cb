/* hello.h - what the relay reads in an app's TLS ClientHello before it
 * decides to terminate the connection: the SNI name (which names the leaf
 * and which match.host meets) and the ALPN list (which the relay offers the
 * server). Pure: bytes in, fields out. */
#ifndef FAULTNET_TLS_HELLO_H
#define FAULTNET_TLS_HELLO_H

#include <stddef.h>

enum fn_hello_result {
	FN_HELLO_OK,   /* a whole ClientHello: the fields are filled */
	FN_HELLO_MORE, /* a ClientHello's start: read more, then ask again */
	FN_HELLO_BAD,  /* not a TLS ClientHello in one record */
};

struct fn_hello {
	char sni[256];		 /* "" when the client sent none (or one too long) */
	unsigned char alpn[256]; /* the client's list, wire format; alpn_len 0: none */
	size_t alpn_len;
};

/* Reads the first record of a connection's bytes (p, n). */
enum fn_hello_result fn_hello_parse(const unsigned char *p, size_t n, struct fn_hello *h);

#endif
