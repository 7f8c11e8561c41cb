/* hello.c - the SNI name and ALPN list of a TLS ClientHello (see hello.h).
 * Every length is checked against what encloses it: the bytes are the
 * app's, and anything malformed is FN_HELLO_BAD, never a read past them. */
#include "preload/tls/hello.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

struct cur {
	const unsigned char *p;
	size_t n;
	bool bad;
};

static size_t take(struct cur *c, size_t bytes)
{
	size_t v = 0;
	if (c->bad || c->n < bytes) {
		c->bad = true;
		return 0;
	}
	for (size_t i = 0; i < bytes; i++)
		v = v << 8 | c->p[i];
	c->p += bytes, c->n -= bytes;
	return v;
}

/* The next len bytes as a cursor of their own, skipped in c. */
static struct cur sub(struct cur *c, size_t len)
{
	struct cur s = {c->p, len, c->bad || c->n < len};
	if (!s.bad)
		c->p += len, c->n -= len;
	else
		c->bad = true;
	return s;
}

static void server_name(struct cur e, struct fn_hello *h)
{
	struct cur list = sub(&e, take(&e, 2));
	while (!list.bad && list.n) {
		size_t type = take(&list, 1);
		struct cur name = sub(&list, take(&list, 2));
		if (!name.bad && type == 0 && name.n < sizeof(h->sni) &&
		    !memchr(name.p, '\0', name.n)) {
			memcpy(h->sni, name.p, name.n);
			h->sni[name.n] = '\0';
			return;
		}
	}
}

static void alpn(struct cur e, struct fn_hello *h)
{
	struct cur list = sub(&e, take(&e, 2));
	if (!list.bad && list.n && list.n <= sizeof(h->alpn)) {
		memcpy(h->alpn, list.p, list.n);
		h->alpn_len = list.n;
	}
}

static enum fn_hello_result extensions(struct cur body, struct fn_hello *h)
{
	if (!body.n)
		return FN_HELLO_OK; /* a ClientHello may end before its extensions */
	struct cur exts = sub(&body, take(&body, 2));
	while (!exts.bad && exts.n) {
		size_t type = take(&exts, 2);
		struct cur e = sub(&exts, take(&exts, 2));
		if (type == 0)
			server_name(e, h);
		else if (type == 16)
			alpn(e, h);
	}
	return exts.bad ? FN_HELLO_BAD : FN_HELLO_OK;
}

enum fn_hello_result fn_hello_parse(const unsigned char *p, size_t n, struct fn_hello *h)
{
	memset(h, 0, sizeof(*h));
	if (n >= 1 && p[0] != 0x16)
		return FN_HELLO_BAD; /* not a handshake record */
	if (n < 9)
		return FN_HELLO_MORE;
	struct cur c = {p, n, false};
	take(&c, 3); /* type, legacy version */
	size_t rec = take(&c, 2);
	if (rec < 4 || rec > 16384 + 2048 || p[5] != 0x01)
		return FN_HELLO_BAD;
	if (c.n < rec)
		return FN_HELLO_MORE;
	struct cur r = sub(&c, rec);
	take(&r, 1);
	struct cur body = sub(&r, take(&r, 3)); /* a hello split over records: BAD */
	take(&body, 2 + 32);			/* version, random */
	sub(&body, take(&body, 1));		/* session id */
	sub(&body, take(&body, 2));		/* cipher suites */
	sub(&body, take(&body, 1));		/* compression methods */
	if (body.bad)
		return FN_HELLO_BAD;
	return extensions(body, h);
}
