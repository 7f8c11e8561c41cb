/* events.h - the faults a kernel-side run's programs report, kept for
 * faultctl events (events.c): the control thread drains the programs' ring
 * buffer, keeps the last ones, streams them to followers and appends them
 * to FAULTNET_EVENTS as the shim does. */
#ifndef FAULTNET_BPF_EVENTS_H
#define FAULTNET_BPF_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct fn_buf;
struct fnb_slots;
struct ring_buffer;

#define FNB_FOLLOWERS 8

struct fnb_events {
	struct ring_buffer *rb;
	struct fnb_slots *slots;
	struct fnb_event_line *ring; /* the last FNB_EVENTS_KEPT, by seq */
	uint64_t head;		     /* events seen */
	int follower[FNB_FOLLOWERS]; /* -1 when free */
	int json_fd;		     /* FAULTNET_EVENTS, or -1 */
};

/* Opens the ring buffer of map fd and FAULTNET_EVENTS; false with the
 * reason. */
bool fnb_events_open(struct fnb_events *e, int map_fd, struct fnb_slots *slots, char *err,
		     size_t errlen);
/* Takes what the programs reported since the last call. */
void fnb_events_poll(struct fnb_events *e);
/* The kept events as "event ..." lines, the shim's. */
void fnb_events_dump(const struct fnb_events *e, struct fn_buf *out);
/* fd gets every event from now on (events follow); closed when full. */
void fnb_events_follow(struct fnb_events *e, int fd);
void fnb_events_close(struct fnb_events *e);

#endif
