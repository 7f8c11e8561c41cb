/* jks.c - a JKS trust store with one certificate added (see jks.h). The
 * format is Java's own (sun.security.provider.JavaKeyStore): a header
 * (magic, version, count), the entries, then a SHA-1 of the password's
 * UTF-16 bytes, "Mighty Aphrodite" and all that precedes it. SHA-1 is here
 * because the format demands it, not for any security of ours. */
#include "ctl/jks.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define JKS_MAGIC 0xFEEDFEEDu
#define DIGEST 20

struct sha1 {
	uint32_t h[5];
	unsigned char block[64];
	size_t used;
	uint64_t bytes;
};

static uint32_t rol(uint32_t x, int n)
{
	return (x << n) | (x >> (32 - n));
}

static void sha1_block(struct sha1 *s, const unsigned char *p)
{
	uint32_t w[80], a = s->h[0], b = s->h[1], c = s->h[2], d = s->h[3], e = s->h[4];
	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
		       (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
	for (int i = 16; i < 80; i++)
		w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
	for (int i = 0; i < 80; i++) {
		uint32_t f = i < 20   ? ((b & c) | (~b & d)) + 0x5A827999
			     : i < 40 ? (b ^ c ^ d) + 0x6ED9EBA1
			     : i < 60 ? ((b & c) | (b & d) | (c & d)) + 0x8F1BBCDC
				      : (b ^ c ^ d) + 0xCA62C1D6;
		uint32_t t = rol(a, 5) + f + e + w[i];
		e = d, d = c, c = rol(b, 30), b = a, a = t;
	}
	s->h[0] += a, s->h[1] += b, s->h[2] += c, s->h[3] += d, s->h[4] += e;
}

static void sha1_add(struct sha1 *s, const void *data, size_t n)
{
	const unsigned char *p = data;
	s->bytes += n;
	while (n--) {
		s->block[s->used++] = *p++;
		if (s->used == 64) {
			sha1_block(s, s->block);
			s->used = 0;
		}
	}
}

static void sha1_end(struct sha1 *s, unsigned char out[DIGEST])
{
	uint64_t bits = s->bytes * 8;
	unsigned char pad = 0x80, zero = 0, len[8];
	sha1_add(s, &pad, 1);
	while (s->used != 56)
		sha1_add(s, &zero, 1);
	for (int i = 0; i < 8; i++)
		len[i] = (unsigned char)(bits >> (56 - 8 * i));
	sha1_add(s, len, 8);
	for (int i = 0; i < DIGEST; i++)
		out[i] = (unsigned char)(s->h[i / 4] >> (24 - 8 * (i % 4)));
}

static uint32_t be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static unsigned char *put(unsigned char *p, uint64_t v, int bytes)
{
	for (int i = bytes - 1; i >= 0; i--)
		*p++ = (unsigned char)(v >> (8 * i));
	return p;
}

/* writeUTF of an ASCII string: its length on two bytes, then its bytes. */
static unsigned char *put_utf(unsigned char *p, const char *s)
{
	size_t n = strlen(s);
	p = put(p, n, 2);
	memcpy(p, s, n);
	return p + n;
}

/* The digest Java checks: password (as UTF-16BE), the phrase, the store. */
static void digest(const char *password, const unsigned char *store, size_t n,
		   unsigned char out[DIGEST])
{
	struct sha1 s = {{0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0}, {0}, 0, 0};
	for (const char *c = password; *c; c++) {
		unsigned char two[2] = {0, (unsigned char)*c};
		sha1_add(&s, two, 2);
	}
	sha1_add(&s, "Mighty Aphrodite", 16);
	sha1_add(&s, store, n);
	sha1_end(&s, out);
}

const char *fn_jks_add(const unsigned char *store, size_t n, const unsigned char *der, size_t dn,
		       const char *alias, const char *password, unsigned char **out, size_t *outn)
{
	if (n < 12 + DIGEST || be32(store) != JKS_MAGIC || be32(store + 4) != 2)
		return "not a JKS trust store (version 2)";
	size_t body = n - DIGEST, entry = 4 + 2 + strlen(alias) + 8 + 2 + 5 + 4 + dn;
	unsigned char *s = malloc(body + entry + DIGEST);
	if (!s)
		return "no memory";
	memcpy(s, store, body);
	put(s + 8, be32(store + 8) + 1, 4);
	unsigned char *p = put(s + body, 2, 4); /* a trusted certificate */
	p = put_utf(p, alias);
	p = put(p, (uint64_t)time(NULL) * 1000, 8);
	p = put_utf(p, "X.509");
	p = put(p, dn, 4);
	memcpy(p, der, dn);
	digest(password, s, body + entry, s + body + entry);
	*out = s;
	*outn = body + entry + DIGEST;
	return NULL;
}
