/* actions.c - the keys each action takes and the checks on them (see
 * actions.h). One table, so that an unknown or misplaced key is always
 * named in the same words. */
#include "core/actions.h"

#include "core/dns.h"
#include "core/http.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

static const char *const action_names[FN_ACT_COUNT] = {
    "blackhole", "stall", "drop",  "refuse",  "reset", "unreachable", "delay", "latency",
    "bandwidth", "drip",  "close", "respond", "slow",  "abort",	      "dns",   "tls"};

const char *fn_action_name(enum fn_action a)
{
	return (unsigned)a < FN_ACT_COUNT ? action_names[a] : "?";
}

bool fn_rule_http(const struct fn_rule *r)
{
	return r->action == FN_ACT_RESPOND || r->action == FN_ACT_SLOW ||
	       r->action == FN_ACT_ABORT || r->action == FN_ACT_TLS;
}

bool fn_rule_follows(const struct fn_rule *r)
{
	switch (r->action) {
	case FN_ACT_BLACKHOLE:
	case FN_ACT_DROP:
	case FN_ACT_STALL:
	case FN_ACT_RESET:
	case FN_ACT_LATENCY:
	case FN_ACT_BANDWIDTH:
	case FN_ACT_DRIP:
		return true;
	default:
		return false;
	}
}

bool fn_rule_relayed(const struct fn_rule *r)
{
	switch (r->action) {
	case FN_ACT_RESPOND:
	case FN_ACT_SLOW:
	case FN_ACT_ABORT:
	case FN_ACT_TLS:
		return true;
	case FN_ACT_BLACKHOLE:
	case FN_ACT_STALL:
	case FN_ACT_RESET:
		return r->par.after_bytes >= 0 || r->par.after_ms >= 0;
	case FN_ACT_DELAY:
	case FN_ACT_LATENCY:
	case FN_ACT_BANDWIDTH:
	case FN_ACT_DRIP:
	case FN_ACT_CLOSE:
		return true;
	default:
		return false;
	}
}

#define A(x) (1u << FN_ACT_##x)
#define STREAM (A(STALL) | A(RESET) | A(LATENCY) | A(BANDWIDTH) | A(DRIP) | A(CLOSE))
#define DAY_MS 86400000u

static const struct fn_key keys[] = {
    {"delay_ms", FN_KEY_MS, A(DELAY) | A(RESPOND) | A(SLOW) | A(DNS), DAY_MS},
    {"jitter_ms", FN_KEY_MS, A(DELAY) | A(LATENCY) | A(BANDWIDTH) | A(SLOW) | A(DNS), DAY_MS},
    /* A slow link: latency and bandwidth together, in either action. */
    {"latency_ms", FN_KEY_MS, A(LATENCY) | A(BANDWIDTH), DAY_MS},
    {"rate", FN_KEY_UINT, A(BANDWIDTH) | A(LATENCY), 1ull << 40},
    {"bytes", FN_KEY_UINT, A(DRIP), 1u << 20},
    {"every_ms", FN_KEY_MS, A(DRIP), DAY_MS},
    {"after_bytes", FN_KEY_UINT, A(STALL) | A(RESET) | A(CLOSE) | A(BLACKHOLE) | A(ABORT),
     1ull << 50},
    {"after_ms", FN_KEY_MS, A(STALL) | A(RESET) | A(BLACKHOLE), DAY_MS},
    {"direction", FN_KEY_DIRECTION, STREAM, 0},
    {"error", FN_KEY_UNREACH, A(UNREACHABLE), 0},
    {"probability", FN_KEY_PROB, 0, 0},
    {"first", FN_KEY_UINT, 0, 1ull << 50},
    {"every", FN_KEY_UINT, 0, 1ull << 50},
    {"after", FN_KEY_UINT, 0, 1ull << 50},
    {"start_ms", FN_KEY_MS, 0, 100 * (uint64_t)DAY_MS},
    {"for_ms", FN_KEY_MS, 0, 100 * (uint64_t)DAY_MS},
};

const struct fn_key *fn_key_find(const char *name)
{
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (strcmp(keys[i].name, name) == 0)
			return &keys[i];
	return NULL;
}

size_t fn_key_names(const char **out, size_t max)
{
	size_t n = 0;
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]) && n < max; i++)
		out[n++] = keys[i].name;
	return n;
}

void fn_rule_params_init(struct fn_rule *r)
{
	memset(&r->par, 0, sizeof(r->par));
	r->par.after_bytes = r->par.after_ms = -1;
	memset(&r->cond, 0, sizeof(r->cond));
	r->cond.probability = 1;
	r->cond.start_ms = r->cond.for_ms = -1;
	r->has_cond = false;
}

void fn_key_set_number(struct fn_rule *r, const struct fn_key *k, uint64_t v)
{
	static const struct {
		const char *name;
		size_t off;
		int size;
	} slots[] = {
	    {"delay_ms", offsetof(struct fn_rule, par.delay_ms), 4},
	    {"jitter_ms", offsetof(struct fn_rule, par.jitter_ms), 4},
	    {"latency_ms", offsetof(struct fn_rule, par.latency_ms), 4},
	    {"every_ms", offsetof(struct fn_rule, par.every_ms), 4},
	    {"rate", offsetof(struct fn_rule, par.rate), 8},
	    {"bytes", offsetof(struct fn_rule, par.bytes), 8},
	    {"after_bytes", offsetof(struct fn_rule, par.after_bytes), 8},
	    {"after_ms", offsetof(struct fn_rule, par.after_ms), 8},
	    {"first", offsetof(struct fn_rule, cond.first), 8},
	    {"every", offsetof(struct fn_rule, cond.every), 8},
	    {"after", offsetof(struct fn_rule, cond.after), 8},
	    {"start_ms", offsetof(struct fn_rule, cond.start_ms), 8},
	    {"for_ms", offsetof(struct fn_rule, cond.for_ms), 8},
	};
	for (size_t i = 0; i < sizeof(slots) / sizeof(slots[0]); i++) {
		if (strcmp(slots[i].name, k->name) != 0)
			continue;
		char *at = (char *)r + slots[i].off;
		if (slots[i].size == 4) {
			uint32_t v32 = (uint32_t)v;
			memcpy(at, &v32, 4);
		} else {
			memcpy(at, &v, 8);
		}
	}
	if (k->actions == 0)
		r->has_cond = true;
}

void fn_key_set_probability(struct fn_rule *r, double v)
{
	r->cond.probability = v;
	r->has_cond = true;
}

const char *fn_key_set_word(struct fn_rule *r, const struct fn_key *k, const char *v)
{
	if (k->kind == FN_KEY_UNREACH) {
		if (strcmp(v, "host") && strcmp(v, "net"))
			return "\"host\" (EHOSTUNREACH) or \"net\" (ENETUNREACH)";
		r->par.net_unreachable = v[0] == 'n';
		return NULL;
	}
	if (strcmp(v, "up") == 0)
		r->par.direction = FN_DIR_UP;
	else if (strcmp(v, "down") == 0)
		r->par.direction = FN_DIR_DOWN;
	else if (strcmp(v, "both") == 0)
		r->par.direction = FN_DIR_BOTH;
	else
		return "\"up\", \"down\" or \"both\"";
	return NULL;
}

/* The number an action cannot do without, or NULL. */
static const char *missing(const struct fn_rule *r)
{
	const struct fn_params *p = &r->par;
	switch (r->action) {
	case FN_ACT_DELAY:
		return p->delay_ms ? NULL : "delay_ms (more than 0)";
	case FN_ACT_LATENCY:
		return p->latency_ms ? NULL : "latency_ms (more than 0)";
	case FN_ACT_BANDWIDTH:
		return p->rate ? NULL : "rate (bytes per second, more than 0)";
	case FN_ACT_DRIP:
		return p->bytes && p->every_ms ? NULL : "bytes and every_ms (both more than 0)";
	case FN_ACT_CLOSE:
		return p->after_bytes >= 0 ? NULL : "after_bytes";
	case FN_ACT_SLOW:
		return p->delay_ms ? NULL : "delay_ms (more than 0)";
	case FN_ACT_RESPOND:
		return r->http && r->http->status ? NULL : "status (100 to 599)";
	case FN_ACT_TLS:
		return r->http && r->http->tls_fault
			   ? NULL
			   : "fault (stall, reset, alert or a certificate fault)";
	case FN_ACT_DNS:
		return r->dns && (r->dns->error || r->dns->nanswer || p->delay_ms)
			   ? NULL
			   : "error, answer or delay_ms";
	default:
		return NULL;
	}
}

static bool tcp_only(const struct fn_rule *r)
{
	if (r->action == FN_ACT_BLACKHOLE) /* on an open connection: a stream */
		return r->par.after_bytes >= 0 || r->par.after_ms >= 0;
	return r->action != FN_ACT_DROP && r->action != FN_ACT_DELAY;
}

const char *fn_rule_params_check(struct fn_rule *r, bool proto_given, char *buf, size_t len)
{
	const char *act = fn_action_name(r->action);
	const char *need = missing(r);
	if (need) {
		snprintf(buf, len, "action %s needs %s", act, need);
		return buf;
	}
	if (r->action == FN_ACT_TLS && r->http->tls_alert && r->http->tls_fault != FN_TLSF_ALERT) {
		snprintf(buf, len, "alert applies to fault \"alert\" only, not \"%s\"",
			 fn_tls_fault_name(r->http->tls_fault));
		return buf;
	}
	if (r->action == FN_ACT_TLS && !r->http->tls_alert)
		r->http->tls_alert = 40; /* handshake_failure */
	if (r->action == FN_ACT_DNS) {
		if (r->dns->error && r->dns->nanswer) {
			snprintf(buf, len, "action dns takes error or answer, not both");
			return buf;
		}
		r->protos = 0; /* matched by name, never by address */
		return NULL;
	}
	if (r->established && !fn_rule_follows(r)) {
		snprintf(buf, len,
			 "established applies to blackhole, drop, stall, reset, latency, bandwidth "
			 "and drip, not %s",
			 act);
		return buf;
	}
	if (r->established && proto_given && !(r->protos & FN_PROTO_TCP)) {
		snprintf(buf, len, "established applies to TCP connections, not proto \"udp\"");
		return buf;
	}
	if (r->par.after_bytes >= 0 && r->par.after_ms >= 0) {
		snprintf(buf, len, "action %s takes after_bytes or after_ms, not both", act);
		return buf;
	}
	if (tcp_only(r)) {
		if (proto_given && r->protos == FN_PROTO_UDP) {
			snprintf(buf, len, "action %s applies to TCP only, not proto \"udp\"", act);
			return buf;
		}
		r->protos = FN_PROTO_TCP;
	}
	if (!r->par.direction)
		r->par.direction = r->action == FN_ACT_LATENCY || r->action == FN_ACT_BANDWIDTH ||
					   r->action == FN_ACT_DRIP || r->action == FN_ACT_BLACKHOLE
				       ? FN_DIR_BOTH
				       : FN_DIR_DOWN;
	return NULL;
}

static void word(char *buf, size_t len, size_t *at, const char *fmt, unsigned long long v)
{
	if (*at >= len)
		return;
	int n = snprintf(buf + *at, len - *at, fmt, *at ? " " : "", v);
	if (n > 0)
		*at += (size_t)n;
}

void fn_rule_describe(const struct fn_rule *r, char *buf, size_t len)
{
	const struct fn_params *p = &r->par;
	const struct fn_cond *c = &r->cond;
	size_t at = 0;
	buf[0] = '\0';
	if (p->delay_ms)
		word(buf, len, &at, "%sdelay_ms=%llu", p->delay_ms);
	if (p->latency_ms)
		word(buf, len, &at, "%slatency_ms=%llu", p->latency_ms);
	if (p->jitter_ms)
		word(buf, len, &at, "%sjitter_ms=%llu", p->jitter_ms);
	if (p->rate)
		word(buf, len, &at, "%srate=%llu", p->rate);
	if (p->bytes)
		word(buf, len, &at, "%sbytes=%llu", p->bytes);
	if (p->every_ms)
		word(buf, len, &at, "%severy_ms=%llu", p->every_ms);
	if (p->after_bytes >= 0)
		word(buf, len, &at, "%safter_bytes=%llu", (unsigned long long)p->after_bytes);
	if (p->after_ms >= 0)
		word(buf, len, &at, "%safter_ms=%llu", (unsigned long long)p->after_ms);
	if (r->host && at < len)
		at += (size_t)snprintf(buf + at, len - at, "%shost=%s", at ? " " : "", r->host);
	if (r->http)
		fn_http_describe(r, buf, len, &at);
	if (r->dns && r->dns->error && at < len)
		at += (size_t)snprintf(buf + at, len - at, "%serror=%s", at ? " " : "",
				       fn_dns_error_name(r->dns->error));
	if (r->dns && r->dns->nanswer && at < len)
		at += (size_t)snprintf(buf + at, len - at, "%sanswer=%d", at ? " " : "",
				       r->dns->nanswer);
	if (fn_rule_relayed(r) && r->action != FN_ACT_DELAY && !fn_rule_http(r)) {
		static const char *const dirs[] = {"", "up", "down", "both"};
		if (at < len)
			at += (size_t)snprintf(buf + at, len - at, "%sdirection=%s", at ? " " : "",
					       dirs[p->direction & 3]);
	}
	if (r->established && at < len)
		at += (size_t)snprintf(buf + at, len - at, "%sestablished", at ? " " : "");
	if (r->action == FN_ACT_UNREACHABLE && at < len)
		at += (size_t)snprintf(buf + at, len - at, "%serror=%s", at ? " " : "",
				       p->net_unreachable ? "net" : "host");
	if (c->probability < 1 && at < len)
		at += (size_t)snprintf(buf + at, len - at, "%sprobability=%g", at ? " " : "",
				       c->probability);
	if (c->first)
		word(buf, len, &at, "%sfirst=%llu", c->first);
	if (c->every)
		word(buf, len, &at, "%severy=%llu", c->every);
	if (c->after)
		word(buf, len, &at, "%safter=%llu", c->after);
	if (c->start_ms >= 0)
		word(buf, len, &at, "%sstart_ms=%llu", (unsigned long long)c->start_ms);
	if (c->for_ms >= 0)
		word(buf, len, &at, "%sfor_ms=%llu", (unsigned long long)c->for_ms);
}
