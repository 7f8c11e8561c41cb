/* relay_port.c - the relay's connection to the peer leaves from the app's
 * own address and port, so that the server's accept and getpeername name
 * what the app's getsockname does (issue 38, item 10).
 *
 * The app's socket and the relay's socket to the peer have different
 * 4-tuples (app port to the hold sink, app port to the peer), so the
 * kernel lets both hold the port once both carry SO_REUSEADDR at the
 * instant of the second bind. The relay's socket keeps it; the app's gets
 * it only for that bind and then its own value back, so its getsockopt
 * never sees ours. Where the kernel refuses (the port is also held by a
 * socket without SO_REUSEADDR, or the 4-tuple to the peer is taken), the
 * connection is relayed from another port, as before (docs/relay-limits.md,
 * "The server's view of the app's port"). */
#include "preload/relay/relay_port.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <sys/socket.h>

static uint16_t port_of(const struct sockaddr_storage *ss)
{
	return ss->ss_family == AF_INET ? ((const struct sockaddr_in *)ss)->sin_port
					: ((const struct sockaddr_in6 *)ss)->sin6_port;
}

static void set_port(struct sockaddr_storage *ss, uint16_t port)
{
	if (ss->ss_family == AF_INET)
		((struct sockaddr_in *)ss)->sin_port = port;
	else
		((struct sockaddr_in6 *)ss)->sin6_port = port;
}

static int opt(int fd, int level, int name)
{
	int v = 0;
	socklen_t len = sizeof(v);
	return getsockopt(fd, level, name, &v, &len) == 0 ? v : -1;
}

/* Binds fd to a with SO_REUSEADDR (and, when no_port, with
 * IP_BIND_ADDRESS_NO_PORT) set on the app's socket for this bind only:
 * its own values are put back before returning. */
static int bind_with(int appfd, int fd, const struct sockaddr_storage *a, socklen_t len,
		     bool no_port)
{
	int one = 1, reuse = opt(appfd, SOL_SOCKET, SO_REUSEADDR);
	int nop = no_port ? opt(appfd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT) : 1;
	if (reuse < 0 || nop < 0) /* the app's values unknown: nothing to put back */
		return -1;
	if (!reuse)
		setsockopt(appfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (!nop)
		setsockopt(appfd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
	int rc = bind(fd, (const struct sockaddr *)a, len);
	int e = errno;
	if (!reuse)
		setsockopt(appfd, SOL_SOCKET, SO_REUSEADDR, &reuse, sizeof(reuse));
	if (!nop)
		setsockopt(appfd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &nop, sizeof(nop));
	errno = e;
	return rc;
}

/* A failed bind clears the socket's address: puts the app's back, without
 * a port (the kernel picks it at the app's connect). */
static void restore(int appfd, struct sockaddr_storage *me, socklen_t len)
{
	set_port(me, 0);
	bind_with(appfd, appfd, me, len, true);
}

static bool app_name(int appfd, struct sockaddr_storage *me, socklen_t *len)
{
	*len = sizeof(*me);
	return getsockname(appfd, (struct sockaddr *)me, len) == 0 &&
	       (me->ss_family == AF_INET || me->ss_family == AF_INET6);
}

/* The app's socket holds no port yet: up leaves from the address the app
 * bound, if any (without a port: the kernel picks it at up's connect). */
static enum fn_port free_port(int up, const struct sockaddr_storage *me, socklen_t len)
{
	int one = 1;
	bool any = me->ss_family == AF_INET
		       ? ((const struct sockaddr_in *)me)->sin_addr.s_addr == htonl(INADDR_ANY)
		       : IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)me)->sin6_addr);
	if (!any && (setsockopt(up, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one)) < 0 ||
		     bind(up, (const struct sockaddr *)me, len) < 0))
		return FN_PORT_NONE;
	return FN_PORT_APP_FREE;
}

enum fn_port fn_port_bind_up(int appfd, int up)
{
	int one = 1;
	struct sockaddr_storage me;
	socklen_t len;
	/* Every relayed socket carries SO_REUSEADDR, so that the app's socket
	 * can take its port afterwards (fn_port_give_app). */
	if (setsockopt(up, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    !app_name(appfd, &me, &len))
		return FN_PORT_NONE;
	if (!port_of(&me))
		return free_port(up, &me, len);
	/* getsockname still names the port of a connect that failed, which
	 * the kernel took back unless the app bound that port by number (a
	 * bind of port 0 keeps none): a bind without a port then succeeds,
	 * and the next connect picks a port, as for a socket never bound.
	 * EINVAL: the socket holds its port. */
	uint16_t port = port_of(&me);
	set_port(&me, 0);
	if (bind_with(appfd, appfd, &me, len, true) == 0)
		return free_port(up, &me, len);
	if (errno != EINVAL)
		return FN_PORT_NONE;
	set_port(&me, port);
	return bind_with(appfd, up, &me, len, false) == 0 ? FN_PORT_UP_BOUND : FN_PORT_NONE;
}

bool fn_port_give_app(int appfd, int up)
{
	struct sockaddr_storage me, via;
	socklen_t len, vlen = sizeof(via);
	if (!app_name(appfd, &me, &len) || getsockname(up, (struct sockaddr *)&via, &vlen) < 0 ||
	    !port_of(&via))
		return false;
	/* An app socket with SO_REUSEADDR or SO_REUSEPORT of its own: its
	 * earlier connections to the hold sink from that port (TIME_WAIT)
	 * would not stop the bind, and the app's connect would then meet
	 * EADDRNOTAVAIL, which no direct connect does. */
	if (opt(appfd, SOL_SOCKET, SO_REUSEADDR) != 0 || opt(appfd, SOL_SOCKET, SO_REUSEPORT) != 0)
		return false;
	set_port(&me, port_of(&via));
	if (bind_with(appfd, appfd, &me, len, false) == 0)
		return true;
	restore(appfd, &me, len);
	return false;
}
