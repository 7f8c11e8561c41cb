/* actions.h - the actions: what each is (the predicates the shim and the
 * backend ask of a rule's action) and what each accepts (the rule keys that
 * carry its numbers and conditions, which actions take which key, and the
 * checks that a rule's keys make sense together). The config parser and
 * `faultctl add` share it. */
#ifndef FAULTNET_ACTIONS_H
#define FAULTNET_ACTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The actions, in the order of their names (fn_action_name). */
enum fn_action {
	FN_ACT_BLACKHOLE,
	FN_ACT_STALL,
	FN_ACT_DROP,
	FN_ACT_REFUSE,
	FN_ACT_RESET,
	FN_ACT_UNREACHABLE,
	FN_ACT_DELAY,
	FN_ACT_LATENCY,
	FN_ACT_BANDWIDTH,
	FN_ACT_DRIP,
	FN_ACT_CLOSE,
	/* Per-request actions on plain HTTP/1.x connections (core/http.h). */
	FN_ACT_RESPOND,
	FN_ACT_SLOW,
	FN_ACT_ABORT,
	/* Name lookups (core/dns.h): matched by name, never by address. */
	FN_ACT_DNS,
	/* A TLS handshake faulted (core/http.h's FN_TLS_*): carried out by the
	 * relay's HTTP engine at the app's ClientHello, so an HTTP action too. */
	FN_ACT_TLS,
	FN_ACT_COUNT
};

/* rules.h's struct fn_rule needs the enum above, and the declarations
 * below need the struct: included here, after the enum, whichever of the
 * two headers comes first. */
#include "core/rules.h"

struct fn_rule;

const char *fn_action_name(enum fn_action a);

/* True for respond, slow, abort and tls: the relay's HTTP engine carries
 * them out (tls at the handshake, the others per request). */
bool fn_rule_http(const struct fn_rule *r);

/* True for the actions established = true may be given: those a live
 * route or ACL change does to open connections. */
bool fn_rule_follows(const struct fn_rule *r);

/* True for the actions the relay carries out on an established stream. */
bool fn_rule_relayed(const struct fn_rule *r);

enum fn_key_kind { FN_KEY_UINT, FN_KEY_MS, FN_KEY_PROB, FN_KEY_DIRECTION, FN_KEY_UNREACH };

struct fn_key {
	const char *name;
	enum fn_key_kind kind;
	uint32_t actions; /* bit per fn_action that takes it; 0 = every action */
	uint64_t max;
};

/* The key called name, or NULL when no action takes such a key. */
const struct fn_key *fn_key_find(const char *name);
/* Every key's name (up to max of them, into out): the count. For the
 * loader's "did you mean". */
size_t fn_key_names(const char **out, size_t max);

/* Stores a value already checked against the key's kind and bounds. */
void fn_key_set_number(struct fn_rule *r, const struct fn_key *k, uint64_t v);
void fn_key_set_probability(struct fn_rule *r, double v);
/* "up"/"down"/"both" or "host"/"net"; NULL if fine, else what is allowed. */
const char *fn_key_set_word(struct fn_rule *r, const struct fn_key *k, const char *v);

/* Resets r's numbers and conditions to "unset" before parsing. */
void fn_rule_params_init(struct fn_rule *r);

/* After parsing: required numbers present, protocols compatible, defaults
 * filled in. NULL when fine, else a sentence for the message. */
const char *fn_rule_params_check(struct fn_rule *r, bool proto_given, char *buf, size_t len);

/* The rule's numbers and conditions as "key=value" words, the way a config
 * file would set them ("latency_ms=50 direction=both"); "" for none. */
void fn_rule_describe(const struct fn_rule *r, char *buf, size_t len);

#endif
