/* h2.h - the HTTP engine's HTTP/2 half: one connection's two sessions, the
 * app-facing one playing the server and the server-facing one playing the
 * client, with each app stream a request for the HTTP rules (preload/h2's
 * h2fault.c) and every stream no rule takes carried to the server and
 * back: its header lists in order, DATA, trailers, resets; the server's
 * SETTINGS, window updates, PINGs and GOAWAYs reach the app as the
 * server sent them, and the app's reach the server. Bytes only: the caller
 * (preload/relay/relay_http.c, on the relay thread) reads and writes the
 * sockets and the TLS ends. */
#ifndef FAULTNET_H2_H
#define FAULTNET_H2_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/rules.h"

struct fn_h2;

/* The client connection preface: 24 bytes. */
#define FN_H2_MAGIC "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#define FN_H2_MAGIC_LEN 24

/* Whether the app's first n bytes at p open an HTTP/2 connection: 1 yes, 0
 * no, -1 not known yet (a prefix of the preface). */
int fn_h2_preface(const char *p, size_t n);

/* Whether a server's first n bytes at p are (or may be: fewer than a
 * frame header) an HTTP/2 SETTINGS frame: an HTTP/2 server speaks first
 * with them, before the app's preface is in, and they must wait for it
 * rather than go on as a greeting. */
bool fn_h2_server_first(const char *p, size_t n);

/* A new engine for a connection to ep. key seeds the slow rule's jitter;
 * tls says whether it came through the TLS termination (ALPN h2).
 * server: whether the server is being reached (false when the rules answer
 * every request and none was dialled). conn_id: the connection's number
 * in FAULTNET_REQUESTS' lines. NULL with *why on failure. */
struct fn_h2 *fn_h2_new(const struct fn_endpoint *ep, uint64_t key, bool tls, bool server,
			uint64_t conn_id, const char **why);
void fn_h2_free(struct fn_h2 *h);

/* An HTTP/1.1 request with Upgrade: h2c, forwarded, was answered 101 by
 * the server: it becomes stream 1 of both sessions (the server's answer
 * to it comes as HTTP/2). settings: its HTTP2-Settings header's value
 * (base64url); head: it was a HEAD. False when the value is malformed or
 * memory is short: the connection cannot go on. */
bool fn_h2_upgrade(struct fn_h2 *h, const char *settings, bool head);

/* Bytes from the app (side 0) or the server (side 1): how many were taken
 * (the app's are held, untaken, until the server's SETTINGS are in: the
 * app must meet them as the first frame), -1 on a protocol error (the
 * connection ends: the engine's GOAWAY, if any, is in its output). */
ssize_t fn_h2_recv(struct fn_h2 *h, int side, const char *p, size_t n, uint64_t now);

/* The next bytes for the app (side 0) or the server (1), valid until the
 * next call on h: their length, 0 for none now. */
size_t fn_h2_out(struct fn_h2 *h, int side, const char **p);

/* Timers (a stream's held answer): carries out what is due; the next due
 * time, 0 for none. */
uint64_t fn_h2_tick(struct fn_h2 *h, uint64_t now);

/* The server is out of reach (failed connect, reset, closed): streams that
 * wait for it end as the app would meet it. */
void fn_h2_server_gone(struct fn_h2 *h);

/* What the connection needs of the caller. */
enum fn_h2_state {
	FN_H2_RUNNING,	/* more to do */
	FN_H2_FINISHED, /* both sessions are over: end the connection (FIN) */
	FN_H2_RESET,	/* an abort rule's mode reset: reset the app's connection */
	FN_H2_CLOSE,	/* an abort rule's mode close: close it */
};
enum fn_h2_state fn_h2_state(const struct fn_h2 *h);

/* Whether a stream needs the server (one was forwarded). */
bool fn_h2_wants_server(const struct fn_h2 *h);

#endif
