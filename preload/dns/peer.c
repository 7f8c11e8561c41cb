/* peer.c - is the sender of a query one of this process's sockets (see
 * peer.h)? UDP on loopback carries no credentials, but the kernel lists
 * every socket with its address, owner and inode in /proc/net/udp (udp6,
 * tcp, tcp6): the sockets bound to the sender's address must be of this
 * account and among this process's fds (a fork child shares them). Only
 * the responder's thread calls it. Socket inode numbers come from a
 * counter and are not soon reused, so the ones found among the fds are
 * remembered. */
#include "preload/dns/peer.h"

#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KNOWN 64

struct line {
	uint32_t l[4], r[4]; /* as the kernel stores them (network order) */
	unsigned lport, rport, uid;
	unsigned long inode;
};

struct want {
	uint32_t addr[4]; /* IPv6, or IPv4-mapped */
	unsigned port;
	bool v4;
	const struct sockaddr_storage *to; /* TCP: the responder's end, else NULL */
};

static unsigned long known[KNOWN];
static unsigned nknown;

static void words(const char *hex, uint32_t *w, int n)
{
	for (int i = 0; i < n; i++) {
		char part[9];
		memcpy(part, hex + 8 * i, 8);
		part[8] = '\0';
		w[i] = (uint32_t)strtoul(part, NULL, 16);
	}
}

static bool parse(const char *s, bool v6, struct line *out)
{
	char la[33], ra[33];
	unsigned st;
	if (sscanf(s, " %*u: %32[0-9A-Fa-f]:%x %32[0-9A-Fa-f]:%x %x %*x:%*x %*x:%*x %*x %u %*u %lu",
		   la, &out->lport, ra, &out->rport, &st, &out->uid, &out->inode) != 7 ||
	    strlen(la) != (v6 ? 32u : 8u) || strlen(ra) != strlen(la))
		return false;
	memset(out->l, 0, sizeof(out->l));
	memset(out->r, 0, sizeof(out->r));
	words(la, v6 ? out->l : &out->l[3], v6 ? 4 : 1);
	words(ra, v6 ? out->r : &out->r[3], v6 ? 4 : 1);
	if (!v6) { /* as IPv4-mapped, to compare with one form */
		out->l[2] = htonl(0xffff);
		out->r[2] = htonl(0xffff);
	}
	return true;
}

static void to_words(const struct sockaddr_storage *ss, uint32_t *w, unsigned *port, bool *v4)
{
	memset(w, 0, 16);
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)ss;
		w[2] = htonl(0xffff);
		w[3] = in->sin_addr.s_addr;
		*port = ntohs(in->sin_port);
		*v4 = true;
	} else {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)ss;
		memcpy(w, &in6->sin6_addr, 16);
		*port = ntohs(in6->sin6_port);
		*v4 = IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr);
	}
}

static bool is_any(const uint32_t *w, bool v4file)
{
	/* 0.0.0.0 reads as ::ffff:0.0.0.0 here, :: as all zero */
	return !w[0] && !w[1] && !w[3] && (v4file || !w[2]);
}

/* Whether line l is a socket the sender may be. */
static bool covers(const struct line *l, bool v4file, const struct want *w)
{
	if (l->lport != w->port)
		return false;
	if (w->to) { /* TCP: the connected socket itself, exactly */
		uint32_t to[4];
		unsigned tport;
		bool tv4;
		to_words(w->to, to, &tport, &tv4);
		return l->rport == tport && !memcmp(l->l, w->addr, 16) && !memcmp(l->r, to, 16);
	}
	if (!memcmp(l->l, w->addr, 16))
		return true;
	/* An unbound socket of either family sends from any address; an IPv6
	 * one sends IPv4 too unless IPV6_V6ONLY (then it cannot reach here). */
	return is_any(l->l, v4file) && (w->v4 || !v4file);
}

static bool inode_ours(unsigned long ino)
{
	for (unsigned i = 0; i < KNOWN && i < nknown; i++)
		if (known[i] == ino)
			return true;
	DIR *d = opendir("/proc/self/fd");
	bool found = false;
	char want[40], link[40];
	snprintf(want, sizeof(want), "socket:[%lu]", ino);
	for (struct dirent *e; d && !found && (e = readdir(d));) {
		ssize_t n = readlinkat(dirfd(d), e->d_name, link, sizeof(link) - 1);
		found = n > 0 && (link[n] = '\0', strcmp(link, want) == 0);
	}
	if (d)
		closedir(d);
	if (found)
		known[nknown++ % KNOWN] = ino;
	return found;
}

/* 1: every covering socket of file is ours (and there is one), 0: one is
 * not, -1: the file cannot be read. *seen counts the covering ones. */
static int scan(const char *path, bool v4file, const struct want *w, int *seen)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	char buf[512];
	int ok = 1;
	uid_t me = geteuid();
	while (ok && fgets(buf, sizeof(buf), f)) {
		struct line l;
		if (!parse(buf, !v4file, &l) || !covers(&l, v4file, w))
			continue;
		++*seen;
		ok = l.uid == me && inode_ours(l.inode);
	}
	fclose(f);
	return ok;
}

static bool ours(const struct sockaddr_storage *from, const struct sockaddr_storage *to,
		 const char *f4, const char *f6)
{
	struct want w = {.to = to};
	to_words(from, w.addr, &w.port, &w.v4);
	int seen = 0;
	int a = w.v4 ? scan(f4, true, &w, &seen) : -1;
	if (a == 0)
		return false;
	int b = scan(f6, false, &w, &seen);
	if (b == 0)
		return false;
	if (a < 0 && b < 0)
		return true; /* no /proc/net: as before (peer.h) */
	return seen > 0;
}

bool fn_dns_peer_udp(const struct sockaddr_storage *from)
{
	return ours(from, NULL, "/proc/net/udp", "/proc/net/udp6");
}

bool fn_dns_peer_tcp(const struct sockaddr_storage *from, const struct sockaddr_storage *at)
{
	return ours(from, at, "/proc/net/tcp", "/proc/net/tcp6");
}
