/* events.c - a kernel-side run's events (see events.h), in the shim's
 * formats, written by the shim's own formatter (core/segment.c): the "event"
 * record for faultctl, a JSON line for FAULTNET_EVENTS. The fd is -1: the
 * programs see a socket, not the app's descriptor for it. Only the control
 * thread calls these. */
#include "bpf/events.h"

#include <errno.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bpf/lbpf.h"

#include "bpf/shared.h"
#include "bpf/slots.h"
#include "core/addr.h"
#include "core/rules.h"
#include "core/segment.h"
#include "core/wire.h"

#define KEPT 4096

/* A kept event: the shim's record of it (fd -1) and the process it
 * happened in, formatted by core/segment.c as the shim's are. */
struct fnb_event_line {
	struct fn_seg_event ev;
	int pid;
};

static const char *outcome_of(uint8_t fnb_action, uint8_t proto)
{
	static const char *const names[] = {"-",       "blackholed", "dropped", "refused",
					    "stalled", "reset",	     "delayed", "relayed"};
	if (proto == FNB_UDP)
		return "dropped";
	return fnb_action < sizeof(names) / sizeof(names[0]) ? names[fnb_action] : "-";
}

static int64_t wall_of(uint64_t mono_ns)
{
	struct timespec rt, mono;
	clock_gettime(CLOCK_REALTIME, &rt);
	clock_gettime(CLOCK_MONOTONIC, &mono);
	int64_t now_mono = (int64_t)mono.tv_sec * 1000000000 + mono.tv_nsec;
	int64_t now_wall = (int64_t)rt.tv_sec * 1000000000 + rt.tv_nsec;
	return (now_wall - (now_mono - (int64_t)mono_ns)) / 1000;
}

static void format(const struct fnb_events *e, uint64_t seq, struct fn_buf *b)
{
	const struct fnb_event_line *l = &e->ring[seq % KEPT];
	fn_seg_event_record(b, &l->ev, l->pid, seq);
}

static void json(const struct fnb_events *e, const struct fnb_event_line *l)
{
	char line[512];
	size_t n = fn_seg_event_json(&l->ev, l->pid, line, sizeof(line));
	if (n)
		(void)!write(e->json_fd, line, n);
}

static void tell_followers(struct fnb_events *e, uint64_t seq)
{
	struct fn_buf b = {0};
	format(e, seq, &b);
	for (int i = 0; i < FNB_FOLLOWERS && b.s; i++)
		if (e->follower[i] >= 0 && send(e->follower[i], b.s, b.len,
						MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)b.len) {
			close(e->follower[i]); /* gone, or too slow to keep up */
			e->follower[i] = -1;
		}
	fn_buf_free(&b);
}

static int take(void *ctx, void *data, size_t size)
{
	struct fnb_events *e = ctx;
	const struct fnb_event *ev = data;
	if (size < sizeof(*ev))
		return 0;
	struct fnb_event_line *l = &e->ring[e->head % KEPT];
	struct fn_endpoint ep = {.v4 = !ev->v6, .port = ntohs(ev->port)};
	memcpy(ep.ip, ev->addr, ev->v6 ? 16 : 4);
	int action;
	memset(l, 0, sizeof(*l));
	l->ev.mono_us = (int64_t)(ev->mono_ns / 1000);
	l->ev.wall_us = wall_of(ev->mono_ns);
	l->ev.fd = -1;
	l->ev.proto = ev->proto == FNB_UDP ? FN_PROTO_UDP : FN_PROTO_TCP;
	l->ev.ep = ep;
	snprintf(l->ev.outcome, sizeof(l->ev.outcome), "%s", outcome_of(ev->action, ev->proto));
	fnb_slots_describe(e->slots, ev->slot, l->ev.rule, sizeof(l->ev.rule), &action);
	l->ev.action = (int8_t)action;
	l->pid = (int)ev->pid;
	if (e->json_fd >= 0)
		json(e, l);
	tell_followers(e, e->head);
	e->head++;
	return 0;
}

bool fnb_events_open(struct fnb_events *e, int map_fd, struct fnb_slots *slots, char *err,
		     size_t errlen)
{
	memset(e, 0, sizeof(*e));
	e->slots = slots;
	e->json_fd = -1;
	for (int i = 0; i < FNB_FOLLOWERS; i++)
		e->follower[i] = -1;
	const char *path = secure_getenv("FAULTNET_EVENTS");
	if (path && *path &&
	    (e->json_fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600)) < 0) {
		snprintf(err, errlen, "FAULTNET_EVENTS=%s: %s", path, strerror(errno));
		return false;
	}
	e->ring = calloc(KEPT, sizeof(*e->ring));
	e->rb = e->ring ? ring_buffer__new(map_fd, take, e, NULL) : NULL;
	if (e->rb)
		return true;
	snprintf(err, errlen, "cannot read the programs' events: %s", strerror(errno));
	fnb_events_close(e);
	return false;
}

void fnb_events_poll(struct fnb_events *e)
{
	if (e->rb)
		ring_buffer__consume(e->rb);
}

void fnb_events_dump(const struct fnb_events *e, struct fn_buf *out)
{
	for (uint64_t s = e->head > KEPT ? e->head - KEPT : 0; s < e->head; s++)
		format(e, s, out);
}

void fnb_events_follow(struct fnb_events *e, int fd)
{
	for (int i = 0; i < FNB_FOLLOWERS; i++)
		if (e->follower[i] < 0) {
			e->follower[i] = fd;
			return;
		}
	close(fd);
}

void fnb_events_close(struct fnb_events *e)
{
	if (e->rb)
		ring_buffer__free(e->rb);
	free(e->ring);
	for (int i = 0; i < FNB_FOLLOWERS; i++)
		if (e->follower[i] >= 0)
			close(e->follower[i]);
	if (e->json_fd >= 0)
		close(e->json_fd);
	memset(e, 0, sizeof(*e));
}
