/* rules.h - a compiled policy: zones, rules and the first-match lookup that
 * decides what happens to a connection or datagram. A policy is immutable once
 * published; changes build a new one. */
#ifndef FAULTNET_RULES_H
#define FAULTNET_RULES_H

#include "core/actions.h"
#include "core/addr.h"

/* Connect-time actions first, then the ones the relay applies to an
 * established stream. stall and reset are stream faults when given
 * after_bytes or after_ms (see fn_rule_relayed). */

/* Which way a stream fault acts: up is app to peer, down is peer to app. */
enum { FN_DIR_UP = 1, FN_DIR_DOWN = 2, FN_DIR_BOTH = 3 };

/* The numbers an action takes; 0 (or -1 for the after_ fields) when unset. */
struct fn_params {
	uint32_t delay_ms, latency_ms, jitter_ms, every_ms;
	uint64_t rate;	/* bandwidth: bytes per second */
	uint64_t bytes; /* drip: bytes let through every every_ms */
	int64_t after_bytes, after_ms;
	uint8_t direction;
	bool net_unreachable; /* unreachable: ENETUNREACH, else EHOSTUNREACH */
};

/* When a matching rule applies; a rule whose condition says no lets the
 * connection or datagram go on to the next rules. */
struct fn_cond {
	double probability; /* 1 when unset */
	uint64_t first, every, after;
	int64_t start_ms, for_ms; /* -1 when unset */
};

enum { FN_PROTO_TCP = 1, FN_PROTO_UDP = 2, FN_PROTO_ANY = 3 };

#define FN_NAME_MAX 64

/* The receive buffer of the socket a stalled connection meets (the shim's
 * sink, the backend's stall endpoint): what one stalled connection may
 * swallow before the app's sends block, as they would before a peer that
 * stopped reading. */
#define FN_STALL_RCVBUF (256 * 1024)

/* A reset at accept goes out when the app's first bytes arrive, or this
 * long after the connect completed if the app waits to read (the shim's
 * relay and the backend's reset endpoint alike): the connect succeeds and
 * the reset meets the app's read, whenever its writer and reader run. */
#define FN_RESET_WAIT_MS 100

/* What a rule did, counted for faultctl. */
struct fn_rulecounts {
	uint64_t attempts; /* connects and datagrams to the rule's destinations */
	uint64_t faults;   /* of those (or of requests), how many the rule faulted */
	uint64_t bytes;	   /* bytes the app sent into faulted sockets */
	/* Request rules (respond, slow, abort): requests their match covered,
	 * and what became of them; untouched ones went to the server with
	 * nothing done, to_server counts every one sent on to it (untouched,
	 * slowed, cut after the server's first bytes). Never attempts. */
	uint64_t requests, answered, slowed, aborted, untouched, to_server;
};

/* A rule's state besides its definition. It outlives policy versions: a
 * policy made from another (enable, add, ...) shares it, so no count is
 * lost in a swap. */
struct fn_rulestat {
	uint64_t refs;
	uint64_t id; /* unique in the process: which rule definition this is */
	/* Where the counts go: own, or (in the shim) the rule name's slot in
	 * the member's published state (core/segment.h), which keeps them
	 * per name for the process's life. Set before the policy is
	 * published; written with relaxed atomic adds. */
	struct fn_rulecounts *n;
	struct fn_rulecounts own;
	bool unlisted; /* no slot was free for it: counted in own */
	/* Condition state, per process, zeroed when the rule is (re-)enabled. */
	uint64_t matches;    /* times the rule covered a connection or datagram */
	uint64_t enabled_ns; /* CLOCK_MONOTONIC when it was last enabled */
};

struct fn_http; /* an HTTP rule's match and answer, see core/http.h */
struct fn_dns;	/* a dns rule's answer, see core/dns.h */

struct fn_rule {
	char name[FN_NAME_MAX];
	enum fn_action action;
	bool enabled;
	uint8_t protos;	    /* FN_PROTO_* mask */
	int from_zone;	    /* zone index, -1 for any */
	int to_zone;	    /* zone index, -1 for any */
	struct fn_cidr *to; /* NULL (nto 0) for any destination */
	size_t nto;
	struct fn_portrange *ports; /* NULL (nports 0) for any port */
	size_t nports;
	struct fn_params par;
	struct fn_cond cond;
	bool has_cond; /* any condition besides the defaults */
	/* established = true: TCP connections to the rule's destinations are
	 * relayed from their first byte even while it is off, so that an
	 * enable reaches connections already open (preload/relay/relay_follow.c).
	 * Beside has_cond, in its padding: see the size below. */
	bool established;
	int line; /* where it was defined, for messages */
	struct fn_rulestat *stat;
	struct fn_http *http; /* HTTP actions only; shared by copies, refcounted */
	struct fn_dns *dns;   /* the dns action only; the same */
	/* match.host: for dns rules the name looked up, for HTTP rules the
	 * Host header, for the others a name this process resolved to the
	 * destination's address. NULL for any. */
	char *host;
};

/* A lookup's answer is &rules[i]: at 256 bytes that is a shift, where 264
 * took three instructions more on every covered connect (callgrind, 1,000
 * rules: IPv4 hit 38 against 35, IPv6 40 against 37; a miss the same). */
_Static_assert(sizeof(struct fn_rule) == 256, "struct fn_rule: keep it at 256 bytes");

struct fn_zone {
	char name[FN_NAME_MAX];
	struct fn_cidr *cidrs;
	size_t ncidrs;
};

struct fn_lpm;
struct fn_hostidx;

struct fn_policy {
	struct fn_lpm *lpm; /* the rule index (core/lpm.h); NULL: scan */
	bool lpm_stale;	    /* rules or their CIDRs changed since it was built */
	/* The dns rules' name index (core/hostidx.h), built and shared as lpm
	   is, stale with it; NULL: scan. */
	struct fn_hostidx *hosts;
	uint8_t *quick; /* per rule, by fn_policy_finish: its protocols when it
			   is enabled and its CIDR is all its match, else 0;
			   and 0 for indices nrules and nrules + 1 (a list's end, a
			   skip's mark: core/lpm.h). A lookup's
			   first candidate is judged with one load. */
	struct fn_zone *zones;
	size_t nzones;
	struct fn_rule *rules;
	size_t nrules;
	size_t rules_room;	/* rules allocated, by fn_policy_insert and clone;
				   0: as many as nrules (a loaded policy's) */
	int self_zone;		/* this process's zone index, -1 for none */
	uint8_t active_protos;	/* union of the enabled rules' protocols */
	uint8_t watch_protos;	/* the same over every rule that can apply here */
	bool dns_rules;		/* some rule has the dns action */
	bool host_rules;	/* some connect or HTTP rule has match.host: names are remembered */
	bool established_rules; /* some rule has established = true */
};

/* The first rule with established = true, enabled or not, that covers a
 * TCP connection to ep; NULL for none. */
const struct fn_rule *fn_established_covers(const struct fn_policy *p,
					    const struct fn_endpoint *ep);

/* Restarts a rule's condition counters and time window. */
void fn_rulestat_restart(struct fn_rulestat *s);

/* Rule, zone and group names: 1 to FN_NAME_MAX-1 letters, digits or _.:- */
bool fn_name_valid(const char *s);

/* Whether r's match (protocols, zones, CIDRs, ports) covers peer, whether
 * r is enabled or not. */
bool fn_rule_covers(const struct fn_policy *p, const struct fn_rule *r,
		    const struct fn_endpoint *peer, uint8_t proto);

/* First enabled rule of p (never NULL: the shim's connects ask, and the
 * test is an instruction less) matching a peer for one of the protocols in
 * proto; NULL when none does. If seen is given, it gets the rule an attempt counts
 * against: the deciding rule, else the first disabled rule that would match
 * (so that attempts are counted while a rule is switched off), else NULL. */
const struct fn_rule *fn_policy_match(const struct fn_policy *p, const struct fn_endpoint *peer,
				      uint8_t proto, const struct fn_rule **seen);
/* The same, starting at rule index from (for rules whose conditions said
 * no). */
const struct fn_rule *fn_policy_match_from(const struct fn_policy *p,
					   const struct fn_endpoint *peer, uint8_t proto,
					   size_t from, const struct fn_rule **seen);

/* Policy editing, for live changes: always on a private copy, which is
 * published whole once done. */
struct fn_policy *fn_policy_clone(const struct fn_policy *p);
int fn_policy_rule_index(const struct fn_policy *p, const char *name);
/* Moves r (its arrays and counters) into p, first or last; removes rule
 * i. Both leave p's index stale: fn_policy_finish() before p is used. */
bool fn_policy_insert(struct fn_policy *p, struct fn_rule *r, bool first);
void fn_policy_remove(struct fn_policy *p, size_t i);
struct fn_rulestat *fn_rulestat_new(void);

int fn_policy_zone_index(const struct fn_policy *p, const char *name);

/* Recomputes derived fields after rules or their state changed. */
void fn_policy_finish(struct fn_policy *p);

void fn_policy_free(struct fn_policy *p);

#endif
