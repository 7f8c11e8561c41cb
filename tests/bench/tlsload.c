/* tlsload.c - the HTTPS client of make bench's TLS section (bench.py, 12):
 * the system's OpenSSL 3, verifying the server's chain and name as real
 * clients do (so, under the shim, the trust hook runs), no session
 * resumption (every connection a full handshake), ALPN http/1.1.
 *   tlsload hs IP PORT NAME N CAFILE     N connections one after another,
 *                                        each a handshake and one GET
 *   tlsload ka IP PORT NAME N CAFILE     one connection, N GETs on it
 *   tlsload names IP PORT SUFFIX N CAFILE  as hs, each to a name of its own
 *                                        (cPID-I.SUFFIX)
 * One connection (and GET) first, untimed, to a name of its own: what a
 * process pays once (a relay's library loaded, its CA read) is left out.
 * Prints the seconds the N took and the CPU seconds the process (every
 * thread: under the shim, the relay's too) used for them; a failure prints
 * why and exits 1. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const char *ip, *cafile;
static int port;

static void die(const char *what)
{
	char e[256] = "";
	ERR_error_string_n(ERR_get_error(), e, sizeof(e));
	fprintf(stderr, "tlsload: %s: %s\n", what, e);
	exit(1);
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static double cpu(void)
{
	struct rusage u;
	getrusage(RUSAGE_SELF, &u);
	return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
	       (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

static SSL_CTX *client_ctx(void)
{
	SSL_CTX *x = SSL_CTX_new(TLS_client_method());
	static const unsigned char h11[] = "\x08http/1.1";
	if (!x || SSL_CTX_load_verify_locations(x, cafile, NULL) != 1)
		die("the client context (CAFILE)");
	SSL_CTX_set_verify(x, SSL_VERIFY_PEER, NULL);
	SSL_CTX_set_session_cache_mode(x, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_alpn_protos(x, h11, sizeof(h11) - 1);
	return x;
}

/* A verified TLS connection to ip:port for name. */
static SSL *open_tls(SSL_CTX *x, const char *name)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	inet_pton(AF_INET, ip, &sa.sin_addr);
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		perror("tlsload: connect");
		exit(1);
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	SSL *s = SSL_new(x);
	if (!s || SSL_set_fd(s, fd) != 1 || SSL_set_tlsext_host_name(s, name) != 1 ||
	    SSL_set1_host(s, name) != 1)
		die("a new connection");
	if (SSL_connect(s) != 1)
		die("the handshake");
	return s;
}

/* One GET and its whole answer (a Content-Length body). */
static void get(SSL *s, const char *name)
{
	char req[512], buf[16384];
	int n = snprintf(req, sizeof(req), "GET /bench HTTP/1.1\r\nHost: %s\r\n\r\n", name);
	if (SSL_write(s, req, n) != n)
		die("writing the request");
	size_t have = 0;
	char *end = NULL;
	while (!end) {
		int k = SSL_read(s, buf + have, (int)(sizeof(buf) - 1 - have));
		if (k <= 0)
			die("reading the answer's head");
		have += (size_t)k;
		buf[have] = '\0';
		end = strstr(buf, "\r\n\r\n");
	}
	if (strncmp(buf, "HTTP/1.1 200", 12) != 0) {
		fprintf(stderr, "tlsload: the answer is not a 200: %.40s\n", buf);
		exit(1);
	}
	char *cl = strcasestr(buf, "\r\ncontent-length:");
	size_t body = cl ? strtoul(cl + 17, NULL, 10) : 0, got = have - (size_t)(end + 4 - buf);
	while (got < body) {
		int k = SSL_read(s, buf, sizeof(buf));
		if (k <= 0)
			die("reading the answer's body");
		got += (size_t)k;
	}
}

static void close_tls(SSL *s)
{
	int fd = SSL_get_fd(s);
	SSL_shutdown(s);
	SSL_free(s);
	close(fd);
}

int main(int argc, char **argv)
{
	if (argc != 7) {
		fprintf(stderr, "usage: tlsload hs|ka|names IP PORT NAME N CAFILE\n");
		return 2;
	}
	ip = argv[2];
	port = atoi(argv[3]);
	long n = atol(argv[5]);
	cafile = argv[6];
	SSL_CTX *x = client_ctx();
	char warm[300];
	snprintf(warm, sizeof(warm), "warm-%d.%s", (int)getpid(), argv[4]);
	bool names = strcmp(argv[1], "names") == 0;
	SSL *w = open_tls(x, names ? warm : argv[4]);
	get(w, names ? warm : argv[4]);
	close_tls(w);
	double t0 = now(), c0 = cpu();
	if (strcmp(argv[1], "ka") == 0) {
		SSL *s = open_tls(x, argv[4]);
		for (long i = 0; i < n; i++)
			get(s, argv[4]);
		close_tls(s);
	} else {
		for (long i = 0; i < n; i++) {
			char name[300];
			snprintf(name, sizeof(name), "c%d-%ld.%s", (int)getpid(), i, argv[4]);
			SSL *s = open_tls(x, names ? name : argv[4]);
			get(s, names ? name : argv[4]);
			close_tls(s);
		}
	}
	printf("%.6f %.6f\n", now() - t0, cpu() - c0);
	SSL_CTX_free(x);
	return 0;
}
