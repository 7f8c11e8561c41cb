/* resolve.c - the resolver hooks: getaddrinfo and the gethostbyname
 * family. A lookup a dns rule takes gets what the rule says, as glibc
 * itself would return it: an error (nxdomain EAI_NONAME / HOST_NOT_FOUND,
 * servfail EAI_AGAIN / TRY_AGAIN, nodata EAI_NODATA / NO_DATA, timeout
 * EAI_AGAIN after the resolver's own wait from /etc/resolv.conf), the real
 * answer late (delay_ms), or the rule's addresses (answer). Lookups no rule
 * takes go to glibc; when some connect rule names hosts, what they return
 * is remembered (names.h). Without dns or host rules a hook is one load
 * and a call. */
#include "preload/dns/resolve.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/chance.h"
#include "core/clock.h"
#include "core/dns.h"
#include "preload/base/libc.h"
#include "preload/base/policy.h"
#include "preload/dns/names.h"
#include "preload/stats/stats.h"

static void sleep_ms(uint64_t ms)
{
	struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* inet_pton's two tries, out of line: in line, their frame was set up for
 * every name looked up (eight instructions a lookup). */
static __attribute__((noinline)) bool parses_as_address(const char *name)
{
	unsigned char buf[16];
	return inet_pton(AF_INET, name, buf) == 1 || inet_pton(AF_INET6, name, buf) == 1;
}

/* Whether name is an address, which no dns rule takes. Only hex digits,
 * dots and colons make one: a host name fails at its first other letter,
 * mostly its first, without the two calls of inet_pton (about 140
 * instructions a lookup, twice a lookup under dns rules). */
static __attribute__((noinline)) bool numeric_rest(const char *name)
{
	for (const char *c = name; *c; c++)
		if (!((*c >= '0' && *c <= '9') || ((*c | 0x20) >= 'a' && (*c | 0x20) <= 'f') ||
		      *c == '.' || *c == ':'))
			return false;
	return parses_as_address(name);
}

/* The bytes an address may begin with (numeric_rest's letters), and the
 * NUL of an empty name. */
static const bool may_begin_address[256] = {
    [0] = true,		  ['0' ... '9'] = true, ['a' ... 'f'] = true,
    ['A' ... 'F'] = true, ['.'] = true,		[':'] = true};

/* numeric(): a name whose first letter cannot begin an address (most
 * names: a letter past f) is told in line, by a table, without a call. */
static inline bool numeric(const char *name)
{
	return may_begin_address[(unsigned char)name[0]] && numeric_rest(name);
}

/* name when a rule may take it or its addresses are remembered: not an
 * address, under dns or host rules (sum, the policy's summary, read once
 * a lookup with its catch-up); else NULL. Asked once a lookup. */
static inline __attribute__((always_inline)) const char *named(unsigned sum, const char *name)
{
	return (sum & (FN_PS_DNS | FN_PS_HOST)) && name && !numeric(name) ? name : NULL;
}

/* The last name this thread looked up under dns rules, as it was spelled,
 * and the dns rules whose pattern covers it (fn_dns_candidates) under the
 * policy published as serial (0: nothing kept), and the list of addresses
 * last recorded for it. A program looks the same names up again and
 * again: then neither the name index nor the patterns are read again,
 * only the candidates' state and conditions, which change without a new
 * policy or are drawn per lookup; and the name memory is only compared
 * with (fn_names_record_kept). Per thread, so read and written without a
 * lock; busy while this thread uses it, so that a signal handler's lookup
 * in between passes it by. */
#define MEMO_BYTES 64
#define MEMO_CANDS 6
struct memo {
	bool busy;
	int n;
	uint64_t serial;
	size_t len;
	uint32_t cand[MEMO_CANDS];
	uint64_t gen;		   /* raised at each rewrite: a later use's proof of the name */
	struct fn_names_kept kept; /* the name's last list recorded (names.h) */
	char name[MEMO_BYTES];
};
static __thread struct memo memo_ __attribute__((tls_model("initial-exec")));

/* This thread's memo, its address taken once a use (opaque to the
 * compiler, which would otherwise load the thread's offset again at each
 * access: two instructions each). */
static inline __attribute__((always_inline)) struct memo *memo(void)
{
	struct memo *m = &memo_;
	__asm__("" : "+r"(m));
	return m;
}

static inline uint64_t word_at(const char *p)
{
	uint64_t w;
	memcpy(&w, p, 8);
	return w;
}

/* Whether the memo's name is the len bytes of name, as they are: eight
 * bytes at a time, the last word the eight that end the name. */
static inline bool memo_is(const struct memo *m, const char *name, size_t len)
{
	if (m->len != len)
		return false;
	if (len < 8) {
		for (size_t i = 0; i < len; i++)
			if (m->name[i] != name[i])
				return false;
		return true;
	}
	for (size_t i = 0; i + 8 < len; i += 8)
		if (word_at(m->name + i) != word_at(name + i))
			return false;
	return word_at(m->name + len - 8) == word_at(name + len - 8);
}

/* pick() for a name the memo does not hold (m busy): its candidates found
 * and kept. Out of line: most lookups do not come here. */
static __attribute__((noinline)) const struct fn_rule *
pick_new(struct memo *m, const struct fn_policy *p, uint64_t serial, const char *name, size_t len)
{
	const struct fn_rule *seen;
	m->serial = 0;
	m->gen++;
	m->kept.changes = 0;
	int n = fn_dns_candidates(p, name, len, m->cand, MEMO_CANDS);
	if (n < 0)
		return fn_dns_decide_len(p, name, len, &seen);
	m->n = n;
	m->len = len;
	memcpy(m->name, name, len);
	m->serial = serial;
	return fn_dns_pick(p, m->cand, n, NULL);
}

/* fn_dns_decide_len through the memo: its candidates kept when the name
 * and the policy are the ones it holds, else found and kept. A name
 * longer than the memo holds, or with more candidates, is decided as
 * before. */
static inline __attribute__((always_inline)) const struct fn_rule *
pick(const struct fn_policy *p, uint64_t serial, const char *name, size_t len, uint64_t *gen)
{
	struct memo *m = memo();
	if (m->busy || len > MEMO_BYTES) {
		const struct fn_rule *seen;
		return fn_dns_decide_len(p, name, len, &seen);
	}
	m->busy = true;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	const struct fn_rule *r;
	if (m->serial == serial && memo_is(m, name, len)) {
		*gen = m->gen;
		r = fn_dns_pick(p, m->cand, m->n, NULL);
	} else {
		/* No generation given: the list recorded is kept for a name
		 * looked up twice running, not for each name of a program
		 * that alternates them (its bookkeeping would be lost). */
		r = pick_new(m, p, serial, name, len);
	}
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	m->busy = false;
	return r;
}

/* What the rules say of a lookup of name (from named(); len: its strlen,
 * taken once a lookup for the index and the name memory): the rule's part
 * (NULL: glibc's answer), held for the caller (fn_dns_put), after any
 * wait the rule asks for. The section on the policy ends before the
 * wait, which may be long and is a cancellation point. */
static inline __attribute__((always_inline)) struct fn_dns *decide(unsigned sum, const char *name,
								   size_t len, uint64_t *gen)
{
	*gen = 0;
	if (!name || !(sum & FN_PS_DNS))
		return NULL;
	struct fn_policy_hold h;
	const struct fn_policy *p = fn_policy_enter(&h);
	const struct fn_rule *r = p ? pick(p, h.serial, name, len, gen) : NULL;
	if (!r) {
		fn_stats_lookup_len(name, len, NULL, FN_LOOKUP_REAL);
		fn_policy_exit(&h);
		return NULL;
	}
	struct fn_dns *d = r->dns;
	int what = d->error ? (int)d->error : d->nanswer ? FN_LOOKUP_ANSWERED : FN_LOOKUP_DELAYED;
	fn_stats_lookup_len(name, len, r, what);
	int64_t wait = (int64_t)r->par.delay_ms;
	if (r->par.jitter_ms)
		wait +=
		    (int64_t)((fn_random(fn_rule_key(r), fn_now_ns()) * 2 - 1) * r->par.jitter_ms);
	fn_dns_get(d);
	fn_policy_exit(&h);
	if (d->error == FN_DNS_TIMEOUT)
		wait += fn_resolver_timeout_ms("/etc/resolv.conf");
	if (wait > 0)
		sleep_ms((uint64_t)wait);
	return d;
}

/* remember_ai when the memo does not already show the list recorded. */
static __attribute__((noinline)) void remember_new(struct memo *m, const char *name, size_t len,
						   const struct addrinfo *ai, uint64_t gen)
{
	if (m->busy || m->gen != gen) {
		fn_names_record_ai_len(name, len, ai);
		return;
	}
	m->busy = true;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	fn_names_record_kept(&m->kept, name, len, ai);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	m->busy = false;
}

/* Records ai for name (from named()); gen: the memo's when decide found
 * name there (0 when not), so that the list kept for it is compared with
 * when the memo still holds that name (a handler's lookup in between
 * may have put another there: then gen differs). The comparison only
 * reads, in line and without a call; a handler that changes the list
 * kept for the same name in between leaves one recorded as well. */
static inline void remember_ai(const char *name, size_t len, const struct addrinfo *ai,
			       uint64_t gen)
{
	if (!name)
		return;
	if (!gen) {
		fn_names_record_ai_len(name, len, ai);
		return;
	}
	struct memo *m = memo();
	if (!m->busy && m->gen == gen && fn_names_kept_same(&m->kept, ai)) {
		/* A handler's lookup of another name during the comparison
		 * (its list kept instead) has changed the generation. */
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		if (m->gen == gen)
			return;
	}
	remember_new(m, name, len, ai, gen);
}

/* ---- getaddrinfo ----------------------------------------------------------- */

static int ai_error(enum fn_dns_error e)
{
	return e == FN_DNS_NXDOMAIN ? EAI_NONAME : e == FN_DNS_NODATA ? EAI_NODATA : EAI_AGAIN;
}

/* The service as a port, as getaddrinfo reads it; -1 for an unknown one. */
static int service_port(const char *service, const struct addrinfo *hints)
{
	if (!service)
		return 0;
	char *end;
	long v = strtol(service, &end, 10);
	if (*service && !*end && v >= 0 && v <= 65535)
		return (int)v;
	if (hints && (hints->ai_flags & AI_NUMERICSERV))
		return -1;
	const char *proto = hints && hints->ai_socktype == SOCK_DGRAM ? "udp" : "tcp";
	struct servent *se = getservbyname(service, proto);
	return se ? ntohs((uint16_t)se->s_port) : -1;
}

/* One entry, its address in the same block, as glibc's freeaddrinfo frees
 * them (each entry and its canonical name with free). */
static struct addrinfo *entry(const struct fn_endpoint *a, int port, int socktype, int proto)
{
	size_t sl = a->v4 ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
	struct addrinfo *ai = calloc(1, sizeof(*ai) + sl);
	if (!ai)
		return NULL;
	ai->ai_family = a->v4 ? AF_INET : AF_INET6;
	ai->ai_socktype = socktype;
	ai->ai_protocol = proto;
	ai->ai_addrlen = (socklen_t)sl;
	ai->ai_addr = (struct sockaddr *)(ai + 1);
	if (a->v4) {
		struct sockaddr_in *in = (struct sockaddr_in *)ai->ai_addr;
		in->sin_family = AF_INET;
		in->sin_port = htons((uint16_t)port);
		memcpy(&in->sin_addr, a->ip, 4);
	} else {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ai->ai_addr;
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)port);
		memcpy(&in6->sin6_addr, a->ip, 16);
	}
	return ai;
}

/* The rule's addresses as getaddrinfo's list, for the families and socket
 * types hints ask for (all three types when it names none, as glibc). */
static int answer_ai(const struct fn_dns *d, const char *name, const char *service,
		     const struct addrinfo *hints, struct addrinfo **res)
{
	static const int types[3][2] = {
	    {SOCK_STREAM, IPPROTO_TCP}, {SOCK_DGRAM, IPPROTO_UDP}, {SOCK_RAW, 0}};
	int port = service_port(service, hints), family = hints ? hints->ai_family : AF_UNSPEC;
	if (port < 0)
		return EAI_SERVICE;
	struct addrinfo *head = NULL, **tail = &head;
	for (int i = 0; i < d->nanswer; i++) {
		const struct fn_endpoint *a = &d->answer[i];
		if (family != AF_UNSPEC && family != (a->v4 ? AF_INET : AF_INET6))
			continue;
		for (int t = 0; t < 3; t++) {
			if (hints && hints->ai_socktype && hints->ai_socktype != types[t][0])
				continue;
			struct addrinfo *ai = entry(a, port, types[t][0], types[t][1]);
			if (!ai) {
				freeaddrinfo(head);
				return EAI_MEMORY;
			}
			*tail = ai;
			tail = &ai->ai_next;
		}
	}
	if (!head)
		return EAI_NODATA; /* no address of the family asked for */
	if (hints && (hints->ai_flags & AI_CANONNAME))
		head->ai_canonname = strdup(name);
	*res = head;
	return 0;
}

int fn_getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
		   struct addrinfo **res)
{
	unsigned sum = fn_policy_summary_fresh();
	const char *name = named(sum, node);
	size_t len = name ? strlen(name) : 0;
	uint64_t gen = 0;
	struct fn_dns *d = name && (sum & FN_PS_DNS) ? decide(sum, name, len, &gen) : NULL;
	if (d && (d->error || d->nanswer)) {
		int rc = d->error ? ai_error(d->error) : answer_ai(d, node, service, hints, res);
		fn_dns_put(d);
		if (rc == 0)
			remember_ai(name, len, *res, gen);
		return rc;
	}
	fn_dns_put(d);
	int rc = LIBC(getaddrinfo)(node, service, hints, res);
	if (rc == 0)
		remember_ai(name, len, *res, gen);
	return rc;
}

/* ---- the gethostbyname family ------------------------------------------------ */

static int h_error(enum fn_dns_error e)
{
	return e == FN_DNS_NXDOMAIN ? HOST_NOT_FOUND : e == FN_DNS_NODATA ? NO_DATA : TRY_AGAIN;
}

/* Fills ret from the rule's addresses of family af, in buf; ERANGE if buf
 * is too small, ENOENT (NO_DATA) if none is of that family. */
static int answer_hostent(const struct fn_dns *d, const char *name, int af, struct hostent *ret,
			  char *buf, size_t buflen)
{
	size_t alen = af == AF_INET ? 4 : 16, n = 0, nl = strlen(name) + 1;
	for (int i = 0; i < d->nanswer; i++)
		n += d->answer[i].v4 == (af == AF_INET);
	if (!n)
		return ENOENT;
	size_t need = (n + 1) * sizeof(char *) + sizeof(char *) + n * alen + nl + 16;
	if (buflen < need)
		return ERANGE;
	char *at = buf + ((8 - ((uintptr_t)buf & 7)) & 7);
	char **list = (char **)at, **aliases = list + n + 1;
	char *addrs = (char *)(aliases + 1);
	size_t k = 0;
	for (int i = 0; i < d->nanswer; i++)
		if (d->answer[i].v4 == (af == AF_INET)) {
			list[k] = addrs + k * alen;
			memcpy(list[k], d->answer[i].ip, alen);
			k++;
		}
	list[k] = NULL;
	aliases[0] = NULL;
	char *nm = addrs + n * alen;
	memcpy(nm, name, nl);
	ret->h_name = nm;
	ret->h_aliases = aliases;
	ret->h_addrtype = af;
	ret->h_length = (int)alen;
	ret->h_addr_list = list;
	return 0;
}

static void remember_hostent(const char *name, const struct hostent *h)
{
	if (!name || !h) /* name from named() */
		return;
	for (char **a = h->h_addr_list; *a; a++) {
		struct fn_endpoint ep = {.v4 = h->h_addrtype == AF_INET};
		memcpy(ep.ip, *a, ep.v4 ? 4 : 16);
		fn_names_record(name, &ep);
	}
}

/* A lookup of name the rule's part d answers (its error or its
 * addresses); nm is name from named(). */
static int ruled_hostent(const struct fn_dns *d, const char *nm, const char *name, int af,
			 struct hostent *ret, char *buf, size_t buflen, struct hostent **result,
			 int *h_errnop)
{
	if (d->error) {
		*h_errnop = h_error(d->error);
		return *h_errnop == TRY_AGAIN ? EAGAIN : 0;
	}
	int rc = answer_hostent(d, name, af, ret, buf, buflen);
	if (rc == ENOENT) {
		*h_errnop = NO_DATA;
		return 0;
	}
	if (rc == 0) {
		*result = ret;
		*h_errnop = 0;
		remember_hostent(nm, ret);
	}
	return rc;
}

int fn_gethostbyname2_r(const char *name, int af, struct hostent *ret, char *buf, size_t buflen,
			struct hostent **result, int *h_errnop, bool has_af)
{
	unsigned sum = fn_policy_summary_fresh();
	const char *nm = named(sum, name);
	uint64_t gen;
	struct fn_dns *d = decide(sum, nm, nm ? strlen(nm) : 0, &gen);
	*result = NULL;
	if (d && (d->error || d->nanswer)) {
		int rc = ruled_hostent(d, nm, name, af, ret, buf, buflen, result, h_errnop);
		fn_dns_put(d);
		return rc;
	}
	fn_dns_put(d);
	int rc = has_af ? LIBC(gethostbyname2_r)(name, af, ret, buf, buflen, result, h_errnop)
			: LIBC(gethostbyname_r)(name, ret, buf, buflen, result, h_errnop);
	if (rc == 0 && *result)
		remember_hostent(nm, *result);
	return rc;
}

struct hostent *fn_gethostbyname2(const char *name, int af, bool has_af)
{
	if (!(fn_policy_summary_fresh() & (FN_PS_DNS | FN_PS_HOST)))
		return has_af ? LIBC(gethostbyname2)(name, af) : LIBC(gethostbyname)(name);
	/* glibc's own are not thread-safe either: one static result. */
	static struct hostent he;
	static char buf[8192];
	struct hostent *res;
	int err;
	int rc = fn_gethostbyname2_r(name, af, &he, buf, sizeof(buf), &res, &err, has_af);
	if (rc != 0 || !res) {
		h_errno = err;
		return NULL;
	}
	return res;
}
