/* segment.h - a member's state, published in a file of the run directory
 * ("GROUP.PID.NS.START.mem", core/rundir.h) that the member maps shared and writes as it goes, and
 * that faultctl reads: who the process is, the rules of its policy with
 * their counters, its destinations, HTTP requests, name lookups and recent
 * events. faultctl never asks a member anything, so the process needs no
 * thread for it, and a stopped or dead member is read as it left things.
 * The layout is this file's; a reader checks magic and size. */
#ifndef FAULTNET_SEGMENT_H
#define FAULTNET_SEGMENT_H

#include <stdbool.h>
#include <stdint.h>

#include "core/actions.h"
#include "core/addr.h"
#include "core/rules.h"
#include "core/wire.h"

#define FN_SEG_MAGIC 0x35304d45534e4655ull /* "UFNSEM05" */
#define FN_SEG_RULES 4096		   /* rule names with counters */
#define FN_SEG_DESTS 1024		   /* beyond this many, counts go to "other" */
#define FN_SEG_EVENTS 4096
#define FN_SEG_KEYS 256	 /* HTTP method, Host and path prefixes */
#define FN_SEG_NAMES 256 /* names looked up */
#define FN_SEG_PARAMS 256

/* A table slot's state (rules, destinations, HTTP keys, names): free, being
 * claimed by the thread that won the compare-and-swap, or ready to be read.
 * A slot is claimed once and never given back. */
enum { FN_SLOT_FREE = 0, FN_SLOT_CLAIMING = 1, FN_SLOT_READY = 2 };

/* Claims slot state for the calling thread: true when it won (it fills the
 * slot's key, then publishes it with fn_slot_ready); false when another
 * thread holds it, once that one has published its key, so that the caller
 * can compare it. */
static inline bool fn_slot_claim(int *state)
{
	int st = __atomic_load_n(state, __ATOMIC_ACQUIRE);
	if (st == FN_SLOT_FREE) {
		int was = FN_SLOT_FREE;
		if (__atomic_compare_exchange_n(state, &was, FN_SLOT_CLAIMING, false,
						__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			return true;
		st = was;
	}
	while (st == FN_SLOT_CLAIMING)
		st = __atomic_load_n(state, __ATOMIC_ACQUIRE);
	return false;
}

static inline void fn_slot_ready(int *state)
{
	__atomic_store_n(state, FN_SLOT_READY, __ATOMIC_RELEASE);
}

/* The "tls" record's counts: connections the relay terminated, passed
 * through (the app's ALPN offered neither h2 nor http/1.1; OpenSSL or the
 * CA could not be had),
 * the app refused (its handshake with the leaf failed), ended because the
 * server failed verification, and whose ALPN was downgraded to http/1.1
 * (no server reached to choose);
 * then how the run's CA reached the process, as of its last terminated or
 * refused handshake: verifications of the app's own OpenSSL the trust hook
 * let trust it, and 1 when the process started with NODE_EXTRA_CA_CERTS
 * or JAVA_TOOL_OPTIONS naming it (set by faultctl run). */
enum fn_seg_tls {
	FN_TLS_TERMINATED,
	FN_TLS_PASSED_OTHER_ALPN,
	FN_TLS_PASSED_UNAVAILABLE,
	FN_TLS_REFUSED_BY_APP,
	FN_TLS_SERVER_UNVERIFIED,
	FN_TLS_ALPN_DOWNGRADED,
	FN_TLS_TRUSTED_BY_HOOK,
	FN_TLS_CA_VARIABLE,
	FN_SEG_TLS
};

/* The "h2" record's counts (preload/h2/, fn_stats_h2): HTTP/2 connections
 * carried, of them over TLS, and what the engine sent, by code: gRPC
 * statuses, RST_STREAMs and GOAWAYs (HTTP/2 error codes, RFC 9113 7). The
 * last of each list counts codes beyond the named ones ("other"). */
#define FN_SEG_GRPC_CODES 17
#define FN_SEG_H2_CODES 14
struct fn_seg_h2 {
	uint64_t conns, tls;
	uint64_t grpc[FN_SEG_GRPC_CODES + 1];
	uint64_t rst[FN_SEG_H2_CODES + 1];
	uint64_t goaway[FN_SEG_H2_CODES + 1];
};

struct fn_seg_head {
	uint64_t magic; /* FN_SEG_MAGIC once the file is complete */
	uint64_t size;	/* sizeof(struct fn_seg) */
	int32_t pid;
	uint32_t sockets_seen; /* the app created or accepted an IP socket */
	uint64_t start;	       /* start time, clock ticks after boot (/proc/PID/stat) */
	uint64_t pidns;	       /* its pid namespace's inode: pid is the pid seen there */
	char group[FN_NAME_MAX];
	char config[4096]; /* FAULTNET_CONFIG as an absolute path; "" for none */
	char start_zone[FN_NAME_MAX];
	char cmd[512];
	/* Written under the change lock each time a policy is published;
	 * list_gen is odd while they and the rule slots' places change. */
	uint64_t list_gen;
	uint64_t seq;			    /* the group journal's last entry applied */
	uint32_t nrules, enabled, unlisted; /* unlisted: rules no slot was left for */
	uint32_t rule_slots;		    /* rules[0 .. rule_slots) are claimed */
	char zone[FN_NAME_MAX];		    /* "-" for none */
	/* Counters of the stats room. */
	uint64_t ring_head; /* events written so far */
	uint64_t requests;  /* HTTP requests counted */
	uint64_t unparsed[3];
	uint64_t tls[FN_SEG_TLS]; /* enum fn_seg_tls */
	uint64_t events_dropped;  /* FAULTNET_EVENTS lines its full FIFO had no room for */
	struct fn_seg_h2 h2;
	/* Never set in a file: faultctl's mark on the state it makes up for
	 * a process that has not joined yet (ctl/state/unjoined.c). */
	uint32_t unjoined;
};

/* A rule name's slot: claimed once (FN_SLOT_READY), never given back, so that
 * counts are per name for the process's life, whatever load, rm and add do. */
struct fn_seg_rule {
	uint32_t state;
	int32_t order; /* its index in the policy in force, -1 when not in it */
	uint8_t action, enabled, http;
	int16_t status; /* an HTTP respond rule's */
	uint64_t owner; /* the rule definition that wrote params (fn_rulestat id) */
	char name[FN_NAME_MAX];
	char params[FN_SEG_PARAMS];
	struct fn_rulecounts n;
};

struct fn_seg_dest {
	int state; /* FN_SLOT_* */
	struct fn_endpoint ep;
	uint8_t proto;
	uint64_t attempts, faults, bytes, by_action[FN_ACT_COUNT];
};

struct fn_seg_event {
	uint64_t seq; /* 0 while being written, else its number + 1 */
	int64_t wall_us, mono_us;
	int fd;
	uint8_t proto;
	int8_t action; /* -1 for none */
	struct fn_endpoint ep;
	char rule[FN_NAME_MAX];
	char outcome[24];
};

struct fn_seg_key {
	int state; /* FN_SLOT_FREE or _READY (one writer: no claiming step) */
	char method[16], host[64], prefix[64];
	uint64_t n[5]; /* by fate (enum fn_req_fate), then sent on to the server */
};

enum {
	FN_LK_LOOKUPS,
	FN_LK_NXDOMAIN,
	FN_LK_SERVFAIL,
	FN_LK_NODATA,
	FN_LK_TIMEOUT,
	FN_LK_REFUSED,
	FN_LK_DELAYED,
	FN_LK_ANSWERED,
	FN_LK_CONNECTS,
	FN_LK_N
};

struct fn_seg_name {
	int state; /* FN_SLOT_* */
	char name[128];
	uint64_t n[FN_LK_N];
};

struct fn_seg {
	struct fn_seg_head h;
	/* The rule slots' index: by a name's hash (open addressing), its
	 * slot's number + 1, 0 for none. Slots are claimed in order, so a
	 * policy's rules sit side by side on a page or two, and the index
	 * (8 KiB) on two: a start writes those, where slots placed by the
	 * hash itself put each of 10 rules on a page of its own. */
	uint16_t rule_at[FN_SEG_RULES];
	struct fn_seg_rule rules[FN_SEG_RULES];
	struct fn_seg_dest dests[FN_SEG_DESTS + 1]; /* the last one is "other" */
	struct fn_seg_event ring[FN_SEG_EVENTS];
	struct fn_seg_key keys[FN_SEG_KEYS + 1];    /* the last one is "other" */
	struct fn_seg_name names[FN_SEG_NAMES + 1]; /* the same */
};

/* The slot of rule name: found, or claimed when claim is set; NULL when
 * the table has no room for it within a bounded search. Only the member,
 * under its change lock, claims. */
struct fn_seg_rule *fn_seg_rule_slot(struct fn_seg *s, const char *name, bool claim);

/* The index of the i-th entry of rule_at that search looks at for name (i
 * below FN_SEG_RULE_PROBES), for a member to make its pages ready first. */
#define FN_SEG_RULE_PROBES 64
size_t fn_seg_rule_at(const char *name, unsigned i);

/* Makes a copy read from a file safe to read: every string of the head (or
 * of all) ended with a NUL, every address's bool 0 or 1. The file is
 * written by another process, which faultctl does not trust. Events are
 * made safe as they are read (fn_seg_events). */
void fn_seg_terminate(struct fn_seg *s, bool whole);

/* The control protocol's records (core/wire.h) made from a segment, for
 * faultctl: "process" (ps), "rule" (rules), the stats records ("rule",
 * "dest", "tls", "parser", "http", "name"; no "end"), and "event" records after
 * *since (updated). */
void fn_seg_info(const struct fn_seg *s, struct fn_buf *b);
void fn_seg_rules(const struct fn_seg *s, struct fn_buf *b);
/* The "rule" records of policy p (the member's policy rebuilt by faultctl,
 * with changes it has not applied yet) with the member's counters. */
void fn_seg_rules_of(const struct fn_seg *s, const struct fn_policy *p, struct fn_buf *b);
void fn_seg_stats(const struct fn_seg *s, struct fn_buf *b);
/* The "tls" record's field names, in enum fn_seg_tls's order. */
extern const char *const fn_seg_tls_names[FN_SEG_TLS];
/* The "h2" record's fields after its pid: " connections=N tls=N", then
 * "grpc=", "rst=" and "goaway=" each a comma list of NAME:COUNT in code
 * order, left out when all are zero. */
void fn_seg_h2_fields(const struct fn_seg_h2 *h, struct fn_buf *b);
/* Adds the counts of an "h2" record (a line as fn_seg_stats writes it)
 * to *h, for sums across processes. */
void fn_seg_h2_add(struct fn_seg_h2 *h, const char *line);
void fn_seg_events(const struct fn_seg *s, struct fn_buf *b, uint64_t *since);

/* Event e of process pid as both backends (the shim and the kernel-side
 * one) give it: the "event" record numbered seq for faultctl, appended to
 * b, and the JSON line of FAULTNET_EVENTS into line (its length, or 0 when
 * it does not fit). One writer of each, so the two backends cannot drift. */
void fn_seg_event_record(struct fn_buf *b, const struct fn_seg_event *e, int pid, uint64_t seq);
size_t fn_seg_event_json(const struct fn_seg_event *e, int pid, char *line, size_t size);

#endif
