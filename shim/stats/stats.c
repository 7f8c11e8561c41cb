/* stats.c - lock-free counters and event ring. Writers are the app's
 * threads; the reader is the control thread. A slot of the destination
 * table is claimed once with a compare-and-swap and never released, so a
 * reader never sees it change owner. */
#include "shim/stats/stats.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "shim/fd/fdtab.h"
#include "shim/base/libc.h"

int fn_sockets_seen;

#define DESTS 1024 /* beyond this many destinations, counts go to "other" */
#define EVENTS 4096

struct dest {
	int state; /* 0 free, 1 being claimed, 2 ready */
	struct fn_endpoint ep;
	uint8_t proto;
	uint64_t attempts, faults, bytes, by_action[FN_ACT_COUNT];
};

struct event {
	uint64_t seq; /* 0 while being written, else its number + 1 */
	int64_t wall_us, mono_us;
	int fd;
	uint8_t proto;
	int8_t action; /* -1 for none */
	struct fn_endpoint ep;
	char rule[FN_NAME_MAX];
	char outcome[24];
};

static struct dest dests[DESTS + 1]; /* the last one is "other" */
static struct event ring[EVENTS];
static uint64_t ring_head;
static int events_fd = -1;

static uint64_t hash(const struct fn_endpoint *ep, uint8_t proto)
{
	uint64_t h = 1469598103934665603ULL;
	const uint8_t *p = (const uint8_t *)ep;
	for (size_t i = 0; i < sizeof(*ep); i++)
		h = (h ^ p[i]) * 1099511628211ULL;
	return h ^ proto;
}

static struct dest *dest_for(const struct fn_endpoint *ep, uint8_t proto)
{
	struct fn_endpoint key;
	memset(&key, 0, sizeof(key));
	key.v4 = ep->v4;
	memcpy(key.ip, ep->ip, sizeof(key.ip));
	key.port = ep->port;
	uint64_t h = hash(&key, proto);
	for (int i = 0; i < 64; i++) {
		struct dest *d = &dests[(h + (uint64_t)i) % DESTS];
		int st = __atomic_load_n(&d->state, __ATOMIC_ACQUIRE);
		if (st == 0) {
			int zero = 0;
			if (__atomic_compare_exchange_n(&d->state, &zero, 1, false,
							__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
				d->ep = key;
				d->proto = proto;
				__atomic_store_n(&d->state, 2, __ATOMIC_RELEASE);
				return d;
			}
			st = zero;
		}
		while (st == 1)
			st = __atomic_load_n(&d->state, __ATOMIC_ACQUIRE);
		if (d->proto == proto && memcmp(&d->ep, &key, sizeof(key)) == 0)
			return d;
	}
	return &dests[DESTS];
}

const char *fn_errname(int e)
{
	if (e == 0)
		return "ok";
	const char *n = strerrorname_np(e);
	return n ? n : "error";
}

static int64_t usec(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void json_event(const struct event *e)
{
	char dst[64], line[512];
	fn_endpoint_format(&e->ep, dst, sizeof(dst));
	int n = snprintf(line, sizeof(line),
			 "{\"wall_us\":%lld,\"mono_us\":%lld,\"pid\":%d,\"fd\":%d,\"proto\":\"%s\","
			 "\"rule\":\"%s\",\"action\":\"%s\",\"dest\":\"%s\",\"outcome\":\"%s\"}\n",
			 (long long)e->wall_us, (long long)e->mono_us, (int)getpid(), e->fd,
			 e->proto == FN_PROTO_UDP ? "udp" : "tcp", e->rule,
			 e->action < 0 ? "none" : fn_action_name((enum fn_action)e->action), dst,
			 e->outcome);
	/* Rule names and errno names need no JSON escaping: their
	 * characters are restricted to letters, digits and _.:- */
	if (n > 0 && (size_t)n < sizeof(line)) {
		ssize_t w = write(__atomic_load_n(&events_fd, __ATOMIC_RELAXED), line, (size_t)n);
		(void)w;
	}
}

static void record_event(int fd, const struct fn_rule *r, const struct fn_rule *seen,
			 const struct fn_endpoint *ep, uint8_t proto, const char *outcome)
{
	uint64_t seq = __atomic_fetch_add(&ring_head, 1, __ATOMIC_RELAXED);
	struct event *e = &ring[seq % EVENTS];
	__atomic_store_n(&e->seq, 0, __ATOMIC_RELEASE);
	e->wall_us = usec(CLOCK_REALTIME);
	e->mono_us = usec(CLOCK_MONOTONIC);
	e->fd = fd;
	e->proto = proto;
	e->action = r ? (int8_t)r->action : -1;
	e->ep = *ep;
	snprintf(e->rule, sizeof(e->rule), "%s", seen ? seen->name : "-");
	snprintf(e->outcome, sizeof(e->outcome), "%s", outcome);
	__atomic_store_n(&e->seq, seq + 1, __ATOMIC_RELEASE);
	if (__atomic_load_n(&events_fd, __ATOMIC_RELAXED) >= 0)
		json_event(e);
}

void fn_stats_event(const struct fn_rule *r, const struct fn_rule *seen,
		    const struct fn_endpoint *ep, const char *outcome)
{
	int e = errno;
	record_event(-1, r, seen, ep, FN_PROTO_TCP, outcome);
	errno = e;
}

int fn_stats_attempt(int fd, const struct fn_rule *r, const struct fn_rule *seen,
		     const struct fn_endpoint *ep, uint8_t proto, const char *outcome,
		     uint64_t bytes)
{
	int e = errno;
	struct dest *d = dest_for(ep, proto);
	__atomic_add_fetch(&d->attempts, 1, __ATOMIC_RELAXED);
	if (seen && seen->stat)
		__atomic_add_fetch(&seen->stat->attempts, 1, __ATOMIC_RELAXED);
	if (r) {
		__atomic_add_fetch(&d->faults, 1, __ATOMIC_RELAXED);
		__atomic_add_fetch(&d->by_action[r->action], 1, __ATOMIC_RELAXED);
		__atomic_add_fetch(&d->bytes, bytes, __ATOMIC_RELAXED);
		if (r->stat) {
			__atomic_add_fetch(&r->stat->faults, 1, __ATOMIC_RELAXED);
			__atomic_add_fetch(&r->stat->bytes, bytes, __ATOMIC_RELAXED);
		}
	}
	record_event(fd, r, seen, ep, proto, outcome);
	errno = e;
	return (int)(d - dests);
}

void fn_stats_bytes(int handle, uint64_t bytes)
{
	if (handle >= 0 && handle <= DESTS)
		__atomic_add_fetch(&dests[handle].bytes, bytes, __ATOMIC_RELAXED);
}

static void dump_dest(struct fn_buf *b, const struct dest *d, const char *name)
{
	fn_buf_printf(b, "dest pid=%d", (int)getpid());
	fn_buf_field(b, "dest", name);
	fn_buf_printf(b,
		      " proto=%s attempts=%llu faults=%llu blackhole=%llu stall=%llu drop=%llu "
		      "bytes=%llu",
		      d->proto == FN_PROTO_UDP ? "udp" : "tcp",
		      (unsigned long long)__atomic_load_n(&d->attempts, __ATOMIC_RELAXED),
		      (unsigned long long)__atomic_load_n(&d->faults, __ATOMIC_RELAXED),
		      (unsigned long long)d->by_action[FN_ACT_BLACKHOLE],
		      (unsigned long long)d->by_action[FN_ACT_STALL],
		      (unsigned long long)d->by_action[FN_ACT_DROP],
		      (unsigned long long)__atomic_load_n(&d->bytes, __ATOMIC_RELAXED));
	/* The newer actions are listed only when they happened, so that the
	 * line stays short for the common ones. */
	for (int a = FN_ACT_REFUSE; a < FN_ACT_COUNT; a++) {
		uint64_t n = __atomic_load_n(&d->by_action[a], __ATOMIC_RELAXED);
		if (n)
			fn_buf_printf(b, " %s=%llu", fn_action_name((enum fn_action)a),
				      (unsigned long long)n);
	}
	fn_buf_add(b, "\n", 1);
}

void fn_stats_dump(struct fn_buf *b)
{
	char name[64];
	for (int i = 0; i < DESTS; i++) {
		const struct dest *d = &dests[i];
		if (__atomic_load_n(&d->state, __ATOMIC_ACQUIRE) != 2 || !d->attempts)
			continue;
		fn_endpoint_format(&d->ep, name, sizeof(name));
		dump_dest(b, d, name);
	}
	if (dests[DESTS].attempts)
		dump_dest(b, &dests[DESTS], "other");
}

uint64_t fn_stats_generation(void)
{
	return __atomic_load_n(&ring_head, __ATOMIC_RELAXED) + fn_stats_requests_seen();
}

void fn_events_dump(struct fn_buf *b, uint64_t *since)
{
	uint64_t head = __atomic_load_n(&ring_head, __ATOMIC_ACQUIRE);
	uint64_t from = *since;
	if (head - from > EVENTS)
		from = head - EVENTS; /* the older ones were overwritten */
	for (uint64_t s = from; s < head; s++) {
		struct event copy = ring[s % EVENTS];
		if (__atomic_load_n(&ring[s % EVENTS].seq, __ATOMIC_ACQUIRE) != s + 1 ||
		    copy.seq != s + 1)
			break; /* still being written: next time */
		char dst[64];
		fn_endpoint_format(&copy.ep, dst, sizeof(dst));
		fn_buf_printf(b, "event seq=%llu wall_us=%lld mono_us=%lld pid=%d fd=%d proto=%s",
			      (unsigned long long)s, (long long)copy.wall_us,
			      (long long)copy.mono_us, (int)getpid(), copy.fd,
			      copy.proto == FN_PROTO_UDP ? "udp" : "tcp");
		fn_buf_field(b, "rule", copy.rule);
		fn_buf_printf(b, " action=%s",
			      copy.action < 0 ? "none"
					      : fn_action_name((enum fn_action)copy.action));
		fn_buf_field(b, "dest", dst);
		fn_buf_field(b, "outcome", copy.outcome);
		fn_buf_add(b, "\n", 1);
		*since = s + 1;
	}
}

void fn_stats_fd_lost(int fd)
{
	int cur = fd;
	__atomic_compare_exchange_n(&events_fd, &cur, -1, false, __ATOMIC_RELAXED,
				    __ATOMIC_RELAXED);
}

void fn_stats_atfork_child(void)
{
	for (int i = 0; i < DESTS; i++)
		if (dests[i].state == 1)
			dests[i].state = 0;
}

const char *fn_events_open(void)
{
	const char *path = secure_getenv("FAULTNET_EVENTS");
	if (!path || !*path)
		return NULL;
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return strerror(errno);
	events_fd = fn_fd_move_high(fd, FN_RANGE_CONTROL);
	return NULL;
}
