/* relay_tls.h - TLS termination for the HTTP engine (relay_http.c): when an
 * app's first bytes on a connection an HTTP rule covers are a ClientHello,
 * the relay answers its handshake with a leaf of the run's CA
 * (preload/tls/leaf.h), talks TLS to the real server itself (verified:
 * VERIFY_PEER and the name, against the system's roots), and the engine
 * reads and writes plaintext through the calls below, which behave as
 * recv and send do on the two sockets. Memory BIOs carry the records, so
 * the relay's single epoll thread never blocks in OpenSSL. Used by the
 * relay thread only. */
#ifndef FAULTNET_RELAY_TLS_H
#define FAULTNET_RELAY_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "preload/tls/hello.h"

enum fn_tls_side { FN_TLS_APP, FN_TLS_UP };

enum fn_tls_first {
	FN_TLS_NOT,	   /* not a ClientHello, or one not terminated: bytes go on */
	FN_TLS_OTHER_ALPN, /* a ClientHello whose ALPN has neither h2 nor http/1.1: bytes go on */
	FN_TLS_WAIT,	   /* a ClientHello's start: read more, then ask again */
	FN_TLS_TERMINATE,  /* *out is ready: the handshakes are the caller's to drive */
};

/* PAUSED: the server's handshake has its chain and waits for the app's
 * verdict on the leaf (fn_tls_verdict) before it goes on. */
enum fn_tls_hs { FN_TLS_HS_DONE, FN_TLS_HS_WAIT, FN_TLS_HS_FAILED, FN_TLS_HS_PAUSED };

struct fn_tls;

/* Reads the app's first bytes (p, n): FN_TLS_TERMINATE when they are a
 * whole ClientHello that may be terminated, FN_TLS_OTHER_ALPN when its ALPN
 * offers neither h2 nor http/1.1 (no protocol the engine reads); *h then holds its SNI name and
 * ALPN list. */
enum fn_tls_first fn_tls_hello(const char *p, size_t n, struct fn_hello *h);

/* Starts the TLS ends for that ClientHello (p, n, read into h) to dst.
 * fault (core/http.h's FN_TLSF_, a certificate fault, or 0) gives the app a
 * leaf with that defect and reaches no server. FN_TLS_NOT with *why set
 * when it is passed through all the same (no OpenSSL, no CA, no memory).
 * On FN_TLS_TERMINATE the bytes are the TLS state's own. */
enum fn_tls_first fn_tls_first(const char *p, size_t n, const struct fn_hello *h,
			       const struct sockaddr *dst, int fault, struct fn_tls **out,
			       const char **why);
void fn_tls_free(struct fn_tls *t);

/* One step of side's handshake over fd (the app's: answered with the leaf;
 * the server's: verified). On FN_TLS_HS_FAILED, why (len bytes) says why;
 * *unverified is set when the server's certificate failed verification.
 * *quiet as for fn_tls_recv. */
enum fn_tls_hs fn_tls_handshake(struct fn_tls *t, enum fn_tls_side side, int fd, bool *quiet,
				bool *unverified, char *why, size_t len);
/* The app's handshake with the leaf ended (accepted) or failed: the
 * paused server handshake may go on, its chain accepted or rejected. */
void fn_tls_verdict(struct fn_tls *t, bool accepted);
/* How the server's handshake failed (FN_TLS_HS_FAILED, not for its
 * certificate): the alert it sent (its description), else -1 and *reset
 * when it reset the connection rather than closing it. */
int fn_tls_server_alert(const struct fn_tls *t, bool *reset);
/* The app offered h2 and was given http/1.1 (its handshake is done): the
 * server chose it, or no server was reached and the app offered both. */
bool fn_tls_downgraded(const struct fn_tls *t);
/* The app's handshake chose h2 (the server's choice): HTTP/2 follows. */
bool fn_tls_h2(const struct fn_tls *t);

/* As recv on fd with MSG_DONTWAIT, in plaintext: bytes, 0 at the peer's
 * end (close_notify or a close), -1 with errno (EAGAIN; ECONNRESET for a
 * broken TLS stream). *quiet (the caller's struct fn_dir's, which the relay
 * clears when epoll reports input on fd): while set, fd is not read (what
 * the SSL already holds is still given); set when a read of fd emptied its
 * queue (a short read, or EAGAIN), where another read could only fail. */
ssize_t fn_tls_recv(struct fn_tls *t, enum fn_tls_side side, int fd, void *buf, size_t n,
		    bool *quiet);
/* As send: plaintext taken (its records are written, or kept to write),
 * or -1 with errno (EAGAIN while records wait for room in fd). */
ssize_t fn_tls_send(struct fn_tls *t, enum fn_tls_side side, int fd, const void *buf, size_t n);
/* Writes records kept for fd; false on a fatal error. *waiting: some are
 * still kept (fd is full). */
bool fn_tls_flush(struct fn_tls *t, enum fn_tls_side side, int fd, bool *waiting);
/* Records of side's are kept, waiting for room in its socket. */
bool fn_tls_waiting(const struct fn_tls *t, enum fn_tls_side side);
/* A close_notify is queued for side (once); flush it before a FIN. */
void fn_tls_close_notify(struct fn_tls *t, enum fn_tls_side side);
/* Plaintext or records already read from side's socket that the next
 * fn_tls_recv can give without the socket: epoll will not report them. */
bool fn_tls_buffered(const struct fn_tls *t, enum fn_tls_side side);

#endif
