/* relay_tls.c - the relay's two TLS ends of a terminated connection (see
 * relay_tls.h): a server end for the app with a leaf of the run's CA, a
 * client end for the real server, verified against the system's roots,
 * or, where the app's TLS comes through the trust hook, by the app's own
 * store (trust.h).
 * Records go through memory BIOs; the sockets are read and written here
 * with the shim's own libc calls, never by OpenSSL. */
#include "preload/relay/relay_tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "preload/base/libc.h"
#include "preload/tls/hello.h"
#include "preload/tls/leaf.h"
#include "preload/tls/ossl.h"
#include "preload/tls/trust.h"

#define CHUNK 16384 /* one TLS record's plaintext at most */

static const unsigned char HTTP11[] = "\x08http/1.1";

/* One end: its SSL (which owns the BIOs) and the records it wrote that the
 * socket has not taken yet. */
struct tside {
	SSL *ssl;
	BIO *rb, *wb;
	char *out;
	size_t lo, len, cap;
	bool raw_eof;
	bool notified;
};

struct fn_tls {
	const struct fn_ossl *o;
	struct tside s[2];
	bool h2_offered, downgraded;
	/* The app's offer of the protocols the engine reads (h2, http/1.1),
	 * in its order, wire format: what the server is offered; the app is
	 * then given the server's choice (choose_alpn). */
	unsigned char offer[12];
	size_t offer_len;
	bool alpn_chosen; /* the app's end was given its list */
	bool up_known;	  /* the server's handshake got as far as its choice */
	bool h2;	  /* h2 was chosen */
	bool recorded;	  /* the trust hook was told what is behind the leaf */
	bool app_judges;  /* the app's own store judges the server (trust.h) */
	int up_alert;	  /* the alert the server's failed handshake sent, or -1 */
	int app_alert;	  /* the alert the app's refusal of the leaf sent, or -1 */
	bool up_reset;	  /* its connection was reset during the handshake */
	bool up_paused;	  /* its handshake waits for the app's verdict */
	int verdict;	  /* the app's verdict on the leaf: enum verdict */
	char name[256];	  /* the leaf's name: the SNI, else the address */
	bool ip;
};

/* Whether the wire-format ALPN list holds proto. */
static bool alpn_has(const unsigned char *l, size_t n, const char *proto)
{
	size_t pl = strlen(proto);
	for (size_t i = 0; i < n; i += 1 + l[i])
		if (l[i] == pl && i + 1 + pl <= n && memcmp(l + i + 1, proto, pl) == 0)
			return true;
	return false;
}

/* The relay's client context: TLS 1.2 or later, the server's chain and
 * name verified against the system's default roots (roots); without
 * them where the app's own store judges the server (server_end,
 * await_app): its verdict alone decides there, so a look through the
 * system's roots would be work for nothing (a stat and a scan of
 * /etc/ssl/certs, twice, at each verification of a chain they lack).
 * Each made once. */
static SSL_CTX *client_ctx(const struct fn_ossl *o, bool roots)
{
	static SSL_CTX *x[2];
	if (x[roots])
		return x[roots];
	SSL_CTX *n = o->SSL_CTX_new(o->TLS_client_method());
	if (!n)
		return NULL;
	o->SSL_CTX_ctrl(n, SSL_CTRL_SET_MIN_PROTO_VERSION, TLS1_2_VERSION, NULL);
	o->SSL_CTX_set_options(n, SSL_OP_NO_RENEGOTIATION);
	o->SSL_CTX_set_verify(n, SSL_VERIFY_PEER, NULL);
	if (roots && o->SSL_CTX_set_default_verify_paths(n) != 1) {
		o->SSL_CTX_free(n);
		return NULL;
	}
	return x[roots] = n;
}

enum verdict { V_PENDING, V_ACCEPTED, V_REJECTED };

/* The verification error whose alert (libssl's own mapping) is the one the
 * app sent when it refused the leaf, so the server reads the same alert. */
static int refusal(int alert)
{
	switch (alert) {
	case SSL_AD_UNKNOWN_CA:
		return X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY;
	case SSL_AD_CERTIFICATE_EXPIRED:
		return X509_V_ERR_CERT_HAS_EXPIRED;
	case SSL_AD_CERTIFICATE_REVOKED:
		return X509_V_ERR_CERT_REVOKED;
	case SSL_AD_DECRYPT_ERROR:
		return X509_V_ERR_CERT_SIGNATURE_FAILURE;
	case SSL_AD_HANDSHAKE_FAILURE:
		return X509_V_ERR_APPLICATION_VERIFICATION;
	default: /* bad_certificate and the rest */
		return X509_V_ERR_CERT_REJECTED;
	}
}

/* The relay's check of the server's chain. The system's roots refuse it
 * where the app's own store cannot judge it (fn_trust_reaches_app); else
 * the handshake pauses there, before the relay's Finished, until the app
 * has judged the leaf (fn_tls_verdict): so the server meets the app's
 * refusal as a failed handshake, never a completed one. */
static int await_app(int ok, X509_STORE_CTX *x)
{
	const struct fn_ossl *o = fn_ossl_get(NULL);
	SSL *ssl = o->X509_STORE_CTX_get_ex_data(x, o->SSL_get_ex_data_X509_STORE_CTX_idx());
	struct fn_tls *t = ssl ? o->SSL_get_ex_data(ssl, 0) : NULL;
	if (!t || (!t->app_judges && !ok))
		return ok;
	if (t->verdict == V_PENDING) {
		t->up_paused = true;
		return o->SSL_ctrl(ssl, SSL_CTRL_SET_RETRY_VERIFY, 0, NULL) > 0;
	}
	if (t->verdict == V_REJECTED)
		o->X509_STORE_CTX_set_error(x, refusal(t->app_alert));
	return t->verdict == V_ACCEPTED;
}

/* Gives ssl two memory BIOs and its role. False when memory is short. */
static bool attach(const struct fn_ossl *o, struct tside *s, SSL *ssl, bool server)
{
	s->ssl = ssl;
	s->rb = o->BIO_new(o->BIO_s_mem());
	s->wb = o->BIO_new(o->BIO_s_mem());
	if (!s->rb || !s->wb) {
		o->BIO_free(s->rb);
		o->BIO_free(s->wb);
		s->rb = s->wb = NULL;
		return false;
	}
	o->SSL_set_bio(ssl, s->rb, s->wb);
	if (server)
		o->SSL_set_accept_state(ssl);
	else
		o->SSL_set_connect_state(ssl);
	return true;
}

/* The client end towards the server: SNI as the app sent it, the name (or
 * the address, with no SNI) checked, the protocols the engine reads that
 * the app offered (t->offer) offered in its order. */
static SSL *server_end(const struct fn_ossl *o, struct fn_tls *t, const struct fn_hello *h,
		       const struct sockaddr *dst)
{
	char name[256] = "";
	bool ip = false;
	/* A server the system's roots do not know (a private CA the app
	 * trusts) is reached when the app's own store can judge it; never
	 * when its TLS is out of the hook's reach. */
	bool app_judges = fn_trust_reaches_app();
	SSL_CTX *x = client_ctx(o, !app_judges);
	SSL *s = x && fn_leaf_name(h->sni, dst, name, &ip) ? o->SSL_new(x) : NULL;
	snprintf(t->name, sizeof(t->name), "%s", name);
	t->ip = ip;
	if (!s)
		return NULL;
	bool ok = o->SSL_set1_host(s, name) == 1;
	if (ok && h->sni[0] && !ip)
		ok = o->SSL_ctrl(s, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
				 name) == 1;
	if (ok && t->offer_len)
		ok = o->SSL_set_alpn_protos(s, t->offer, (unsigned)t->offer_len) == 0;
	t->app_judges = ok && app_judges;
	ok = ok && o->SSL_set_ex_data(s, 0, t) == 1;
	if (ok)
		o->SSL_set_verify(s, SSL_VERIFY_PEER, await_app);
	if (!ok) {
		o->SSL_free(s);
		return NULL;
	}
	return s;
}

/* The protocols of the app's ALPN list the engine reads, in its order. */
static void offer_of(const struct fn_hello *h, struct fn_tls *t)
{
	const unsigned char *l = h->alpn;
	for (size_t i = 0; i < h->alpn_len; i += 1 + l[i]) {
		size_t n = l[i];
		if (i + 1 + n > h->alpn_len)
			break;
		bool ours = (n == 2 && memcmp(l + i + 1, "h2", 2) == 0) ||
			    (n == 8 && memcmp(l + i + 1, "http/1.1", 8) == 0);
		if (ours && t->offer_len + 1 + n <= sizeof(t->offer)) {
			memcpy(t->offer + t->offer_len, l + i, 1 + n);
			t->offer_len += 1 + n;
		}
	}
}

/* The app's end is given the server's choice of protocol, as the server
 * made it (none when it chose none). With no server reached (the rules
 * answer, a certificate fault), http/1.1 if the app offered it, else h2. */
static void choose_alpn(struct fn_tls *t)
{
	const struct fn_ossl *o = t->o;
	const unsigned char *sel = NULL;
	unsigned int sl = 0;
	t->alpn_chosen = true;
	if (!t->offer_len)
		return;
	if (t->s[FN_TLS_UP].ssl && t->up_known) {
		o->SSL_get0_alpn_selected(t->s[FN_TLS_UP].ssl, &sel, &sl);
	} else {
		bool h1 = alpn_has(t->offer, t->offer_len, "http/1.1");
		sel = (const unsigned char *)(h1 ? "http/1.1" : "h2");
		sl = h1 ? 8 : 2;
	}
	t->h2 = sl == 2 && memcmp(sel, "h2", 2) == 0;
	unsigned char wire[256];
	wire[0] = (unsigned char)sl;
	if (sl)
		memcpy(wire + 1, sel, sl);
	fn_leaf_set_alpn(t->s[FN_TLS_APP].ssl, wire, sl ? sl + 1 : 0);
}

enum fn_tls_first fn_tls_hello(const char *p, size_t n, struct fn_hello *h)
{
	if (!n || (unsigned char)p[0] != 0x16)
		return FN_TLS_NOT;
	enum fn_hello_result r = fn_hello_parse((const unsigned char *)p, n, h);
	if (r != FN_HELLO_OK)
		return r == FN_HELLO_MORE ? FN_TLS_WAIT : FN_TLS_NOT;
	if (h->alpn_len && !alpn_has(h->alpn, h->alpn_len, "http/1.1") &&
	    !alpn_has(h->alpn, h->alpn_len, "h2"))
		return FN_TLS_OTHER_ALPN; /* no protocol the engine reads */
	return FN_TLS_TERMINATE;
}

enum fn_tls_first fn_tls_first(const char *p, size_t n, const struct fn_hello *h,
			       const struct sockaddr *dst, int fault, struct fn_tls **out,
			       const char **why)
{
	*why = NULL;
	const struct fn_ossl *o = fn_ossl_get(why);
	SSL *app = !o	   ? NULL
		   : fault ? fn_leaf_fault_ssl(fault, h->sni, dst, HTTP11, sizeof(HTTP11) - 1, why)
			   : fn_leaf_ssl(h->sni, dst, HTTP11, sizeof(HTTP11) - 1, why);
	if (!app)
		return FN_TLS_NOT;
	struct fn_tls *t = calloc(1, sizeof(*t));
	if (t) {
		t->up_alert = t->app_alert = -1;
		offer_of(h, t);
	}
	/* A certificate fault reaches no server: its leaf is the whole story. */
	SSL *up = t && !fault ? server_end(o, t, h, dst) : NULL;
	if (t)
		t->o = o;
	if (t && fault)
		fn_leaf_name(h->sni, dst, t->name, &t->ip);
	bool ok = (up || fault) && attach(o, &t->s[FN_TLS_APP], app, true) &&
		  (fault || attach(o, &t->s[FN_TLS_UP], up, false)) &&
		  o->BIO_write(t->s[FN_TLS_APP].rb, p, (int)n) == (int)n;
	if (!ok) {
		*why = "cannot set up the TLS ends (memory or OpenSSL)";
		if (t && !t->s[FN_TLS_APP].ssl)
			o->SSL_free(app);
		if (t && !t->s[FN_TLS_UP].ssl && up)
			o->SSL_free(up);
		fn_tls_free(t);
		return FN_TLS_NOT;
	}
	t->h2_offered = alpn_has(h->alpn, h->alpn_len, "h2");
	*out = t;
	return FN_TLS_TERMINATE;
}

void fn_tls_free(struct fn_tls *t)
{
	if (!t)
		return;
	for (int i = 0; i < 2; i++) {
		if (t->s[i].ssl)
			t->o->SSL_free(t->s[i].ssl);
		free(t->s[i].out);
	}
	free(t);
}

/* Records the SSL wrote, moved to the side's own buffer. */
static bool take_records(const struct fn_ossl *o, struct tside *s)
{
	char tmp[CHUNK];
	int k;
	while ((k = o->BIO_read(s->wb, tmp, sizeof(tmp))) > 0) {
		if (s->lo == s->len)
			s->lo = s->len = 0;
		if (s->len + (size_t)k > s->cap) {
			size_t cap = s->cap ? s->cap : CHUNK;
			while (cap < s->len + (size_t)k)
				cap *= 2;
			char *b = realloc(s->out, cap);
			if (!b)
				return false;
			s->out = b;
			s->cap = cap;
		}
		memcpy(s->out + s->len, tmp, (size_t)k);
		s->len += (size_t)k;
	}
	return true;
}

bool fn_tls_flush(struct fn_tls *t, enum fn_tls_side side, int fd, bool *waiting)
{
	struct tside *s = &t->s[side];
	*waiting = false;
	if (!take_records(t->o, s)) {
		errno = ENOMEM;
		return false;
	}
	while (s->lo < s->len) {
		ssize_t w = LIBC(sendto)(fd, s->out + s->lo, s->len - s->lo,
					 MSG_DONTWAIT | MSG_NOSIGNAL, NULL, 0);
		if (w < 0) {
			*waiting = errno == EAGAIN || errno == EINTR;
			return *waiting;
		}
		s->lo += (size_t)w;
	}
	return true;
}

/* Reads what fd holds into the side's SSL: bytes read, 0 at its end, -1
 * for nothing yet, -2 on an error (errno). *quiet (see fn_tls_recv): set
 * when the read emptied the socket's queue (it came back short, or found
 * nothing), so that the next read waits for epoll's word. */
static int pull(struct fn_tls *t, struct tside *s, int fd, bool *quiet)
{
	char tmp[CHUNK];
	ssize_t n = LIBC(recv)(fd, tmp, sizeof(tmp), MSG_DONTWAIT);
	*quiet = n < 0 ? errno == EAGAIN : n > 0 && n < (ssize_t)sizeof(tmp);
	if (n == 0)
		s->raw_eof = true;
	if (n <= 0)
		return n == 0 ? 0 : errno == EAGAIN || errno == EINTR ? -1 : -2;
	if (t->o->BIO_write(s->rb, tmp, (int)n) != (int)n) {
		errno = ENOMEM;
		return -2;
	}
	return (int)n;
}

/* The certificates of sk (leaf first) as DER, one after another, in a
 * buffer of ours (malloc'd); NULL when there are none or memory is short. */
static unsigned char *ders(const struct fn_ossl *o, const OPENSSL_STACK *sk, size_t *len)
{
	int n = sk ? o->OPENSSL_sk_num(sk) : 0;
	size_t total = 0;
	for (int i = 0; i < n; i++) {
		int k = o->i2d_X509(o->OPENSSL_sk_value(sk, i), NULL);
		if (k <= 0)
			return NULL;
		total += (size_t)k;
	}
	unsigned char *buf = total ? malloc(total) : NULL, *p = buf;
	for (int i = 0; buf && i < n; i++)
		o->i2d_X509(o->OPENSSL_sk_value(sk, i), &p); /* sized above */
	*len = total;
	return buf;
}

/* Tells the trust hook (preload/tls/trust.h), before the app's handshake
 * is answered, which server is behind the leaf: the chain the server
 * showed (its handshake done: it passed the system's roots, or the app's
 * store is to judge it), else none. */
static void record_trust(struct fn_tls *t)
{
	const struct fn_ossl *o = t->o;
	t->recorded = true;
	SSL *up = t->s[FN_TLS_UP].ssl;
	bool reached = up && (t->up_paused || o->SSL_is_init_finished(up));
	/* Where the app judges the server's own chain, it may as well read
	 * the server's own certificate (its subject, serial, dates): only the
	 * key is the relay's. Elsewhere the leaf must chain to the run's CA. */
	const OPENSSL_STACK *peer =
	    reached ? (const OPENSSL_STACK *)o->SSL_get_peer_cert_chain(up) : NULL;
	if (t->app_judges && peer && o->OPENSSL_sk_num(peer) > 0)
		fn_leaf_mirror(t->s[FN_TLS_APP].ssl, o->OPENSSL_sk_value(peer, 0));
	X509 *leaf = o->SSL_get_certificate(t->s[FN_TLS_APP].ssl);
	int n = leaf ? o->i2d_X509(leaf, NULL) : 0;
	unsigned char *der = n > 0 ? malloc((size_t)n) : NULL, *p = der;
	if (der)
		o->i2d_X509(leaf, &p);
	size_t clen = 0;
	unsigned char *chain =
	    reached ? ders(o, (const OPENSSL_STACK *)o->SSL_get_peer_cert_chain(up), &clen) : NULL;
	/* No leaf (memory): every entry dropped; no chain of a server met:
	 * an entry that trusts nothing. Never a stale entry left to trust. */
	fn_trust_record(der, (size_t)n, chain, clen, reached, t->name, t->ip);
}

/* Why side's handshake failed, into why. */
static void failure(struct fn_tls *t, enum fn_tls_side side, bool *unverified, char *why,
		    size_t len)
{
	const struct fn_ossl *o = t->o;
	long v = side == FN_TLS_UP && !t->app_judges ? o->SSL_get_verify_result(t->s[side].ssl)
						     : X509_V_OK;
	if (v != X509_V_OK) {
		*unverified = true;
		snprintf(why, len, "the server's certificate failed verification: %s",
			 o->X509_verify_cert_error_string(v));
		o->ERR_clear_error();
		return;
	}
	/* An alert the peer sent is its reason code less SSL_AD_REASON_OFFSET. */
	int reason = ERR_GET_REASON(o->ERR_peek_last_error());
	if (reason >= SSL_AD_REASON_OFFSET && reason < SSL_AD_REASON_OFFSET + 256)
		*(side == FN_TLS_UP ? &t->up_alert : &t->app_alert) = reason - SSL_AD_REASON_OFFSET;
	char e[200];
	snprintf(why, len, "%s", fn_ossl_error(e, sizeof(e)));
}

enum fn_tls_hs fn_tls_handshake(struct fn_tls *t, enum fn_tls_side side, int fd, bool *quiet,
				bool *unverified, char *why, size_t len)
{
	const struct fn_ossl *o = t->o;
	struct tside *s = &t->s[side];
	*unverified = false;
	if (side == FN_TLS_UP && t->up_paused && t->verdict == V_PENDING)
		return FN_TLS_HS_PAUSED;
	if (side == FN_TLS_APP && !t->recorded)
		record_trust(t);
	if (side == FN_TLS_APP && !t->alpn_chosen)
		choose_alpn(t);
	for (;;) {
		o->ERR_clear_error();
		int r = o->SSL_do_handshake(s->ssl);
		bool waiting;
		if (!fn_tls_flush(t, side, fd, &waiting)) {
			snprintf(why, len, "writing the handshake: %s", strerror(errno));
			return FN_TLS_HS_FAILED;
		}
		if (r == 1)
			break;
		int e = o->SSL_get_error(s->ssl, r);
		if (e == SSL_ERROR_WANT_RETRY_VERIFY) {
			t->up_known = true;
			return FN_TLS_HS_PAUSED;
		}
		if (e != SSL_ERROR_WANT_READ) {
			failure(t, side, unverified, why, len);
			return FN_TLS_HS_FAILED;
		}
		if (*quiet)
			return FN_TLS_HS_WAIT; /* the socket is empty: epoll says when not */
		int got = pull(t, s, fd, quiet);
		if (got == -1)
			return FN_TLS_HS_WAIT;
		if (got <= 0) {
			t->up_reset = side == FN_TLS_UP && got < 0 && errno == ECONNRESET;
			snprintf(why, len, "the %s closed its end during the handshake%s%s",
				 side == FN_TLS_APP ? "app" : "server", got ? ": " : "",
				 got ? strerror(errno) : "");
			return FN_TLS_HS_FAILED;
		}
	}
	if (side == FN_TLS_UP)
		t->up_known = true;
	if (side == FN_TLS_APP && t->h2_offered && !t->up_known) {
		const unsigned char *sel = NULL;
		unsigned int sl = 0;
		o->SSL_get0_alpn_selected(s->ssl, &sel, &sl);
		t->downgraded = sl == 8 && memcmp(sel, "http/1.1", 8) == 0;
	}
	return FN_TLS_HS_DONE;
}

void fn_tls_verdict(struct fn_tls *t, bool accepted)
{
	t->verdict = accepted ? V_ACCEPTED : V_REJECTED;
}

int fn_tls_server_alert(const struct fn_tls *t, bool *reset)
{
	*reset = t->up_reset;
	return t->up_alert;
}

bool fn_tls_downgraded(const struct fn_tls *t)
{
	return t->downgraded;
}

bool fn_tls_h2(const struct fn_tls *t)
{
	return t->h2;
}

ssize_t fn_tls_recv(struct fn_tls *t, enum fn_tls_side side, int fd, void *buf, size_t n,
		    bool *quiet)
{
	const struct fn_ossl *o = t->o;
	struct tside *s = &t->s[side];
	for (;;) {
		o->ERR_clear_error();
		int r = o->SSL_read(s->ssl, buf, n > INT_MAX ? INT_MAX : (int)n);
		bool waiting;
		/* A read may answer (a TLS 1.3 key update): best effort here,
		 * the next send or flush writes what stays. */
		fn_tls_flush(t, side, fd, &waiting);
		if (r > 0)
			return r;
		int e = o->SSL_get_error(s->ssl, r);
		if (e == SSL_ERROR_ZERO_RETURN)
			return 0;
		if (e != SSL_ERROR_WANT_READ) {
			o->ERR_clear_error();
			errno = ECONNRESET; /* a broken stream: as a reset */
			return -1;
		}
		/* A close with no close_notify still ends the stream: most
		 * servers and clients close so. */
		if (!s->raw_eof && *quiet) { /* no read that would find nothing */
			errno = EAGAIN;
			return -1;
		}
		int got = s->raw_eof ? 0 : pull(t, s, fd, quiet);
		if (got > 0)
			continue;
		if (got == -1)
			errno = EAGAIN;
		return got == 0 ? 0 : -1;
	}
}

ssize_t fn_tls_send(struct fn_tls *t, enum fn_tls_side side, int fd, const void *buf, size_t n)
{
	const struct fn_ossl *o = t->o;
	bool waiting;
	if (!fn_tls_flush(t, side, fd, &waiting))
		return -1;
	if (waiting) {
		errno = EAGAIN;
		return -1;
	}
	o->ERR_clear_error();
	int r = o->SSL_write(t->s[side].ssl, buf, n > CHUNK ? CHUNK : (int)n);
	if (r <= 0) {
		o->ERR_clear_error();
		errno = ECONNRESET;
		return -1;
	}
	if (!fn_tls_flush(t, side, fd, &waiting))
		return -1;
	return r;
}

void fn_tls_close_notify(struct fn_tls *t, enum fn_tls_side side)
{
	struct tside *s = &t->s[side];
	if (s->notified)
		return;
	s->notified = true;
	t->o->ERR_clear_error();
	t->o->SSL_shutdown(s->ssl);
	t->o->ERR_clear_error();
}

bool fn_tls_buffered(const struct fn_tls *t, enum fn_tls_side side)
{
	const struct tside *s = &t->s[side];
	return t->o->SSL_pending(s->ssl) > 0 ||
	       t->o->BIO_ctrl(s->rb, BIO_CTRL_PENDING, 0, NULL) > 0;
}

bool fn_tls_waiting(const struct fn_tls *t, enum fn_tls_side side)
{
	return t->s[side].lo < t->s[side].len;
}
