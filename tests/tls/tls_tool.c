/* tls_tool.c - drives preload/tls for tests/tls/tls.sh, one job per verb:
 *   ca DIR            the run's CA of DIR (made or loaded): its fingerprint
 *   get               the process's CA (FAULTNET_RUNDIR): its fingerprint
 *   private           OpenSSL absent before the first use, then loaded
 *                     outside the program's scope, beside the program's own
 *   serve N ALPN      serves N TLS connections on 127.0.0.1 (port printed
 *                     first), each with the leaf for the SNI name its
 *                     ClientHello carries (else the address it reached),
 *                     ALPN chosen from ALPN ("-": none; "h2,http/1.1"),
 *                     answering one HTTP request with "ok"; prints per
 *                     connection the SNI name and the signatures so far.
 * Failures print the reason and exit 1. */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "preload/tls/ca.h"
#include "preload/tls/hello.h"
#include "preload/tls/leaf.h"
#include "preload/tls/ossl.h"

static int fingerprint(const struct fn_ca *ca)
{
	for (int i = 0; i < 32; i++)
		printf("%02x", ca->sha256[i]);
	printf("\n");
	return 0;
}

static int ca_verb(const char *dir)
{
	const char *why;
	const struct fn_ossl *o = fn_ossl_get(&why);
	struct fn_ca ca;
	char buf[512];
	if (o && !(why = fn_ca_open(o, dir, &ca, buf, sizeof(buf))))
		return fingerprint(&ca);
	printf("refused: %s\n", why);
	return 1;
}

static int get_verb(void)
{
	const char *why;
	const struct fn_ca *ca = fn_ca_get(&why);
	if (ca)
		return fingerprint(ca);
	printf("refused: %s\n", why);
	return 1;
}

static int mapped(const char *lib)
{
	char line[4096];
	int found = 0;
	FILE *f = fopen("/proc/self/maps", "re");
	while (f && fgets(line, sizeof(line), f))
		found |= strstr(line, lib) != NULL;
	if (f)
		fclose(f);
	return found;
}

static int private_verb(void)
{
	int before = mapped("libssl.so.3");
	const char *why;
	const struct fn_ossl *o = fn_ossl_get(&why);
	if (!o) {
		printf("refused: %s\n", why);
		return 1;
	}
	int scoped = dlsym(RTLD_DEFAULT, "SSL_new") != NULL;
	/* The app's own OpenSSL, loaded globally after ours: a copy apart. */
	void *app = dlopen("libssl.so.3", RTLD_NOW | RTLD_GLOBAL);
	void *app_new = app ? dlsym(app, "SSL_new") : NULL;
	printf("mapped-before=%d mapped-after=%d in-app-scope=%d same-as-app=%d\n", before,
	       mapped("libssl.so.3"), scoped, app_new == (void *)o->SSL_new);
	return 0;
}

/* "h2,http/1.1" in ALPN's wire format; "-" is none. */
static size_t alpn_wire(const char *arg, unsigned char *out)
{
	size_t n = 0;
	if (strcmp(arg, "-") == 0)
		return 0;
	for (const char *p = arg; *p;) {
		size_t len = strcspn(p, ",");
		out[n++] = (unsigned char)len;
		memcpy(out + n, p, len);
		n += len;
		p += len + (p[len] == ',');
	}
	return n;
}

/* Peeks until the ClientHello is whole (the relay reads it the same way). */
static enum fn_hello_result peek_hello(int c, struct fn_hello *h)
{
	static unsigned char buf[16384 + 2048 + 5];
	enum fn_hello_result r = FN_HELLO_MORE;
	for (int tries = 0; r == FN_HELLO_MORE && tries < 200; tries++) {
		ssize_t got = recv(c, buf, sizeof(buf), MSG_PEEK);
		if (got <= 0)
			return FN_HELLO_BAD;
		r = fn_hello_parse(buf, (size_t)got, h);
		if (r == FN_HELLO_MORE)
			usleep(10000);
	}
	return r;
}

static void answer(const struct fn_ossl *o, SSL *s)
{
	char req[4096];
	size_t have = 0;
	while (have < sizeof(req) - 1) {
		int r = o->SSL_read(s, req + have, (int)(sizeof(req) - 1 - have));
		if (r <= 0)
			return;
		have += (size_t)r;
		req[have] = '\0';
		if (strstr(req, "\r\n\r\n"))
			break;
	}
	static const char ok[] =
	    "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n";
	o->SSL_write(s, ok, sizeof(ok) - 1);
	o->SSL_shutdown(s);
}

static void one(const struct fn_ossl *o, int c, int i, const unsigned char *alpn, size_t alen)
{
	struct timeval tv = {10, 0};
	setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	struct fn_hello h;
	if (peek_hello(c, &h) != FN_HELLO_OK) {
		printf("conn %d: not a TLS ClientHello\n", i);
		return;
	}
	struct sockaddr_storage local;
	socklen_t len = sizeof(local);
	getsockname(c, (struct sockaddr *)&local, &len);
	const char *why;
	SSL *s = fn_leaf_ssl(h.sni[0] ? h.sni : NULL, (struct sockaddr *)&local, alpn, alen, &why);
	if (!s) {
		printf("conn %d: no leaf: %s\n", i, why);
		return;
	}
	o->SSL_set_fd(s, c);
	char err[256] = "ok";
	if (o->SSL_accept(s) == 1)
		answer(o, s);
	else
		fn_ossl_error(err, sizeof(err));
	printf("conn %d sni=%s signatures=%lu handshake=%s\n", i, h.sni[0] ? h.sni : "-",
	       fn_leaf_signatures(), err);
	fflush(stdout);
	o->SSL_free(s);
}

static int serve_verb(int n, const char *alpn_arg)
{
	alarm(120); /* never outlive a test that lost its client */
	const char *why;
	const struct fn_ossl *o = fn_ossl_get(&why);
	if (!o) {
		printf("refused: %s\n", why);
		return 1;
	}
	unsigned char alpn[256];
	size_t alen = alpn_wire(alpn_arg, alpn);
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 16) < 0 ||
	    getsockname(l, (struct sockaddr *)&a, &len) < 0) {
		perror("listen");
		return 1;
	}
	printf("%d\n", ntohs(a.sin_port));
	fflush(stdout);
	for (int i = 1; i <= n; i++) {
		int c = accept(l, NULL, NULL);
		if (c < 0)
			return 1;
		one(o, c, i, alpn, alen);
		close(c);
	}
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 3 && strcmp(argv[1], "ca") == 0)
		return ca_verb(argv[2]);
	if (argc == 2 && strcmp(argv[1], "get") == 0)
		return get_verb();
	if (argc == 2 && strcmp(argv[1], "private") == 0)
		return private_verb();
	if (argc == 4 && strcmp(argv[1], "serve") == 0)
		return serve_verb(atoi(argv[2]), argv[3]);
	fprintf(stderr, "usage: tls_tool ca DIR | get | private | serve N ALPN\n");
	return 2;
}
