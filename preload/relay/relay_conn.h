/* relay_conn.h - one relayed connection: its sockets, where it is in its
 * setup, and the two byte streams the relay carries and shapes. Used only by
 * its shard's relay thread, under that shard's mutex (relay_shard.h). */
#ifndef FAULTNET_RELAY_CONN_H
#define FAULTNET_RELAY_CONN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "core/pace.h"
#include "core/rules.h"

enum fn_conn_state {
	FN_CONN_NEW,	  /* not started: the thread has yet to see it */
	FN_CONN_UPSTREAM, /* connecting to the real peer */
	FN_CONN_WAIT,	  /* peer answered; waiting out the connect delay */
	FN_CONN_OPENING,  /* completing the app's handshake */
	FN_CONN_RELAY,	  /* carrying bytes */
};

#define FN_WATCH_NONE 0xffffffffu

/* Above this rate (a second's worth of 64 MiB) the kernel's own buffers
 * cannot hold a bandwidth rule up: no small window, and the relay's
 * buffers grow as without a rule. */
#define FN_KERNEL_RATE (64ull << 20)

/* Release points a direction can hold: a latency rule stops reading when
 * they are all in use, which bounds what the relay buffers ahead. */
#define FN_MARKS 4096

/* A release point for latency: bytes up to end may go out at due. */
struct fn_mark {
	uint64_t end, due;
};

/* One direction: 0 is up (app to peer), 1 is down (peer to app). */
struct fn_dir {
	char *buf;
	size_t cap;    /* buf's size: it grows while a transfer keeps it full */
	size_t lo, hi; /* bytes [lo, hi) wait to be written */
	uint64_t in, out;
	struct fn_mark *marks;
	size_t mhead, mcount;
	uint64_t released; /* latency: bytes up to here are due */
	struct fn_pace pace;
	bool faulted; /* the rule's direction includes this one */
	bool eof;     /* the source has no more bytes */
	/* epoll reported an error on the source (EPOLLERR): after its FIN,
	 * a reset that no read will meet any more (relay_pump.c). */
	bool err_seen;
	bool shut;    /* the destination was told so */
	bool stopped; /* stall or close: nothing more goes this way */
	bool blocked; /* the destination's buffer was full */
	/* The last read found the source empty (EAGAIN or a short read) and
	 * epoll has reported no input on it since: a read now would only fail
	 * with EAGAIN. The level-triggered epoll reports whatever comes. */
	bool quiet;
	bool filled; /* the last fill() stopped at the buffer's end */
	/* The source has urgent data (epoll's EPOLLPRI): reads stop at its
	 * mark until the byte, taken with MSG_OOB, has gone out as urgent
	 * data after every byte before it (relay_pump.c). urg_held: taken,
	 * not sent yet (urg_byte); urg_hole: sent, and the next read must be
	 * a recv, which steps over the byte's place (a splice stops there). */
	bool urgent, urg_held, urg_hole;
	char urg_byte;
	/* bytes [lo, hi) are in the relay's pipe, not in buf (splice.h) */
	bool piped;
	/* Reads after a read that found bytes (see read_on() in relay_pump.c)
	 * that failed with EAGAIN in a row, and the chances skipped since. */
	uint8_t misses, skips;
	/* Bytes of the shim's own (go_dark's filler) in the source's stream,
	 * from raw offset skip_from: thrown away if the stream is read again. */
	uint64_t raw_in, skip_from, skip_len;
};

/* An established rule's hold on a connection (relay_follow.c). */
struct fn_follow {
	bool on;		 /* a rule was in force at the last look */
	char rule[FN_NAME_MAX];	 /* which one, by name: policies are swapped */
	struct fn_endpoint peer; /* the destination the rules are matched on */
	uint64_t serial;	 /* the policy of the last look (0: none yet) */
	bool dark;		 /* blackholed by go_dark, which may be undone */
	int rcvbuf;		 /* the app end's receive buffer before it */
};

struct fn_hconn;
struct fn_shard;

struct fn_conn {
	/* Its shard's list of connections (relay.c), with the link that
	 * points at this one, so that a finished connection leaves it in
	 * O(1); the next ready one and the place in the timer heap
	 * (relay_sched.h). */
	struct fn_conn *next, **pprev, *ready_next;
	size_t heap_at;
	/* The shard that carries it, set when it is handed over (NULL on the
	 * app's thread before that); never changes. */
	struct fn_shard *shard;
	enum fn_conn_state state;
	enum fn_action action;
	struct fn_params par;
	uint64_t key; /* for jitter draws */
	uint64_t draws;
	int app;      /* the relay's end of the app's connection */
	int up;	      /* the connection to the real peer */
	int opener;   /* the socket completing the app's handshake */
	int up_error; /* the peer's connect error, if it failed */
	bool up_open; /* the peer had accepted when fn_conn_dial returned */
	int appfd;    /* the app's own socket, only to watch its state */
	dev_t app_dev;
	ino_t app_ino;
	uint32_t watching[2];
	struct sockaddr_storage dest, local, hold;
	socklen_t destlen, locallen, holdlen;
	uint64_t start_ns, open_ns, est_ns, wake_ns;
	bool ready;	    /* an event arrived: step it (fn_sched_ready) */
	bool reset_pending; /* reset once the app has every byte sent to it */
	uint64_t reset_ns;  /* when the reset became due */
	bool done;
	struct fn_dir dir[2];
	bool http_mode; /* per-request HTTP rules apply (relay_http.h) */
	bool follows;	/* an established rule covers it (follow below) */
	struct fn_follow follow;
	struct fn_hconn *http; /* their state, once established */
};

/* A delayed UDP datagram: one the app sent (sent later through a duplicate
 * of its socket, fd), or one it was to receive (inbound: sent again later
 * from the shim's own socket to the app's, see reinject.h). */
struct fn_dgram {
	struct fn_dgram *next;
	int fd;		/* shared by every queued datagram of one app socket */
	dev_t sock_dev; /* that socket's identity, to find the shared fd */
	ino_t sock_ino;
	bool inbound;
	uint64_t due_ns;
	struct sockaddr_storage to, from;
	socklen_t tolen, fromlen;
	size_t len;    /* the payload, data[0 .. len) */
	size_t ctllen; /* the app's control messages (UDP_SEGMENT...), after it */
	char data[];
};

struct fn_conn *fn_conn_new(int appfd, const struct fn_rule *r, const struct sockaddr *dest,
			    socklen_t destlen, const struct sockaddr_storage *local,
			    socklen_t locallen, const struct sockaddr_storage *hold,
			    socklen_t holdlen);
/* Advances c as far as its sockets and timers allow; sets wake_ns, and done
 * once every socket is closed. */
void fn_conn_step(struct fn_conn *c, uint64_t now);
void fn_conn_free(struct fn_conn *c);
/* relay_pump.c: carries and shapes c's bytes once it is established. */
void fn_conn_pump(struct fn_conn *c, uint64_t now);
/* relay_pump.c: nothing more either way, as on a dead route. */
void fn_conn_go_dark(struct fn_conn *c);
/* relay_follow.c: applies or undoes the established rule of a connection
 * it covers, when the policy changed since the last look. */
void fn_conn_follow(struct fn_conn *c, uint64_t now);
/* relay_conn.c: on the app's thread, before c is handed over: starts the
 * connect to the real peer; the error it met at once (0 if none yet). */
int fn_conn_dial(struct fn_conn *c);
/* relay_conn.c: the last ACK of the peer's handshake, held back since
 * fn_conn_dial, goes out now (the app's handshake is done), and later
 * ACKs as the kernel would send them (TCP_QUICKACK on leaves the delayed
 * mode). Again later, it does nothing. */
void fn_conn_hold_release(const struct fn_conn *c);
/* relay_conn.c: bytes waiting unread in the app's own socket; false when
 * the app's fd no longer is that socket. */
bool fn_conn_app_unread(const struct fn_conn *c, int *unread);
/* relay_conn.c: a non-blocking TCP socket of the relay's own (high fd,
 * TCP_NODELAY), and the start of its connect; -1 or false with errno. */
int fn_conn_socket(int family);
bool fn_conn_connect(int fd, const struct sockaddr_storage *to, socklen_t len);
/* relay_pump.c: resets c once the app holds (and has read) every byte sent
 * to it, checking again shortly if not yet. */
void fn_conn_reset_when_sent(struct fn_conn *c, uint64_t now);
/* relay_conn.c: closes every socket of c (with resets if hard); c is done. */
void fn_conn_finish(struct fn_conn *c, bool hard);
/* The app closed fd, one of c's: drop it and end c. */
void fn_conn_forget_fd(struct fn_conn *c, int fd);

/* relay.c: closes one of c's sockets, with a reset if hard. */
void fn_relay_close(struct fn_conn *c, int fd, bool hard);
/* relay.c: sets what epoll reports for c's app (0) or peer (1) socket. */
void fn_relay_watch(struct fn_conn *c, int which, uint32_t events);

#endif
