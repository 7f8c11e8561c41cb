/* rules.h - a compiled policy: zones, rules and the first-match lookup that
 * decides what happens to a connection or datagram. A policy is immutable once
 * published; changes build a new one. */
#ifndef FAULTNET_RULES_H
#define FAULTNET_RULES_H

#include "addr.h"

enum fn_action { FN_ACT_BLACKHOLE, FN_ACT_STALL, FN_ACT_DROP };

enum { FN_PROTO_TCP = 1, FN_PROTO_UDP = 2, FN_PROTO_ANY = 3 };

#define FN_NAME_MAX 64

/* A rule's counters. They outlive policy versions: a policy made from
 * another (enable, add, ...) shares them, so no count is lost in a swap. */
struct fn_rulestat {
	uint64_t refs;
	uint64_t attempts; /* connects and datagrams to the rule's destinations */
	uint64_t faults;   /* of those, how many the rule faulted */
	uint64_t bytes;	   /* bytes the app sent into faulted sockets */
};

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
	int line; /* where it was defined, for messages */
	struct fn_rulestat *stat;
};

struct fn_zone {
	char name[FN_NAME_MAX];
	struct fn_cidr *cidrs;
	size_t ncidrs;
};

struct fn_policy {
	struct fn_zone *zones;
	size_t nzones;
	struct fn_rule *rules;
	size_t nrules;
	int self_zone;	       /* this process's zone index, -1 for none */
	uint8_t active_protos; /* union of the enabled rules' protocols */
	uint8_t watch_protos;  /* the same over every rule that can apply here */
};

const char *fn_action_name(enum fn_action a);

/* Rule, zone and group names: 1 to FN_NAME_MAX-1 letters, digits or _.:- */
bool fn_name_valid(const char *s);

/* First enabled rule matching a peer for one of the protocols in proto;
 * NULL when none does. If seen is given, it gets the rule an attempt counts
 * against: the deciding rule, else the first disabled rule that would match
 * (so that attempts are counted while a rule is switched off), else NULL. */
const struct fn_rule *fn_policy_match(const struct fn_policy *p, const struct fn_endpoint *peer,
				      uint8_t proto, const struct fn_rule **seen);

/* Policy editing, for live changes: always on a private copy, which is
 * published whole once done. */
struct fn_policy *fn_policy_clone(const struct fn_policy *p);
int fn_policy_rule_index(const struct fn_policy *p, const char *name);
/* Moves r (its arrays and counters) into p, first or last. */
bool fn_policy_insert(struct fn_policy *p, struct fn_rule *r, bool first);
void fn_policy_remove(struct fn_policy *p, size_t i);
struct fn_rulestat *fn_rulestat_new(void);

int fn_policy_zone_index(const struct fn_policy *p, const char *name);

/* Recomputes derived fields after rules or their state changed. */
void fn_policy_finish(struct fn_policy *p);

void fn_policy_free(struct fn_policy *p);

#endif
