/* compiled.c - a parsed policy as the bytes of a compiled copy, written
 * once to the run directory and rebuilt from there by every later start,
 * without libconfig (see compiled.h; compiled_file.c keeps the copies). The bytes are this build's
 * own structures (the build-id is part of the key, so no other layout is ever read), each followed
 * by what its pointers held; every length, index, enum and bool is checked as it is read, and a
 * checksum covers the whole copy. */
#include "core/compiled.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/bigalloc.h"
#include "core/config.h"
#include "core/dns.h"
#include "core/hparse.h"
#include "core/http.h"
#include "core/pathcat.h"
#include "core/startdata.h"

#define MAGIC "FNPOLC1\n"
#define NONE UINT32_MAX	    /* a NULL string */
#define STR_MAX (16u << 20) /* a policy file's size: no string of one is longer */

struct head {
	char magic[8];
	uint64_t len; /* the whole copy */
	uint64_t sum; /* of every byte after this field */
	uint64_t textlen;
	uint32_t idlen, zonelen;
};

/* A checksum a word at a time: each step a bijection of the state for a
 * given word, so that any one word changed changes the sum. Against
 * corruption, not against an adversary (the key is compared whole). */
FN_START_TEXT static uint64_t sum_bytes(uint64_t h, const void *data, size_t n)
{
	const uint8_t *p = data;
	for (; n >= 8; p += 8, n -= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		h = (h ^ w) * 0x100000001b3ull;
		h ^= h >> 32;
	}
	for (; n; p++, n--)
		h = (h ^ *p) * 0x100000001b3ull;
	return h;
}

/* ---- the build's identity ------------------------------------------------ */

struct id_search {
	uintptr_t addr; /* an address in the object wanted */
	const uint8_t *id;
	size_t len;
};

/* The NT_GNU_BUILD_ID note's bytes in a PT_NOTE segment, or NULL. */
FN_START_TEXT static const uint8_t *note_id(const uint8_t *p, size_t size, size_t align,
					    size_t *len)
{
	align = align == 8 ? 8 : 4;
	size_t at = 0;
	while (size - at >= sizeof(ElfW(Nhdr))) {
		ElfW(Nhdr) nh;
		memcpy(&nh, p + at, sizeof(nh));
		size_t name = at + sizeof(nh);
		size_t desc = name + ((nh.n_namesz + align - 1) & ~(align - 1));
		if (desc > size || nh.n_descsz > size - desc)
			return NULL;
		if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
		    memcmp(p + name, "GNU", 4) == 0 && nh.n_descsz) {
			*len = nh.n_descsz;
			return p + desc;
		}
		at = desc + ((nh.n_descsz + align - 1) & ~(align - 1));
		if (at > size)
			return NULL;
	}
	return NULL;
}

FN_START_TEXT static int find_id(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct id_search *s = arg;
	bool mine = false;
	for (int i = 0; i < info->dlpi_phnum && !mine; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
		mine = ph->p_type == PT_LOAD && s->addr >= lo && s->addr - lo < ph->p_memsz;
	}
	for (int i = 0; i < info->dlpi_phnum && mine && !s->id; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_NOTE)
			s->id = note_id((const uint8_t *)(info->dlpi_addr + ph->p_vaddr),
					ph->p_memsz, ph->p_align, &s->len);
	}
	return mine;
}

/* Looked up once: a start asks for it at its check and again at its
 * join. Threads that race find and store the same. */
FN_START_TEXT const uint8_t *fn_compiled_build_id(size_t *len)
{
	static const uint8_t *id FN_START_DATA;
	static size_t id_len FN_START_DATA;
	const uint8_t *known = __atomic_load_n(&id, __ATOMIC_ACQUIRE);
	if (known) {
		*len = id_len;
		return known;
	}
	struct id_search s = {.addr = (uintptr_t)&fn_compiled_build_id};
	dl_iterate_phdr(find_id, &s);
	*len = s.id ? s.len : 0;
	if (s.id) {
		id_len = s.len;
		__atomic_store_n(&id, s.id, __ATOMIC_RELEASE);
	}
	return s.id;
}

bool fn_compiled_cacheable(const char *text)
{
	/* Any '@' followed by "include" in any case (strcasestr took six
	 * times the instructions of this at every start). */
	for (const char *at = text; (at = strchr(at, '@')); at++)
		if (strncasecmp(at + 1, "include", 7) == 0)
			return false;
	return !strstr(text, "body_file");
}

/* ---- writing ------------------------------------------------------------- */

struct wr {
	uint8_t *b;
	size_t n, room;
	bool oom;
};

static void put(struct wr *w, const void *p, size_t n)
{
	if (w->oom || !n)
		return;
	if (w->n + n > w->room) {
		size_t room = w->room ? w->room : 4096;
		while (room < w->n + n)
			room *= 2;
		uint8_t *b = realloc(w->b, room);
		if (!b) {
			w->oom = true;
			return;
		}
		w->b = b;
		w->room = room;
	}
	memcpy(w->b + w->n, p, n);
	w->n += n;
}

static void put_u32(struct wr *w, uint32_t v)
{
	put(w, &v, sizeof(v));
}

static void put_bytes(struct wr *w, const void *p, size_t n)
{
	put_u32(w, p ? (uint32_t)n : NONE);
	put(w, p, n);
}

static void put_str(struct wr *w, const char *s)
{
	put_bytes(w, s, s ? strlen(s) : 0);
}

static void put_http(struct wr *w, const struct fn_http *h)
{
	struct fn_http c;
	memcpy(&c, h, sizeof(c)); /* padding too: calloc'd, so never undefined */
	c.refs = 0;
	c.method = c.path = c.headers = c.body = c.body_file = c.grpc_message = NULL;
	put(w, &c, sizeof(c));
	put_str(w, h->method);
	put_str(w, h->path);
	put_str(w, h->headers);
	put_bytes(w, h->body, h->bodylen);
	put_str(w, h->body_file);
	put_str(w, h->grpc_message);
}

/* A rule's copy without its pointers: the copy stores none (what they
 * point to follows it), and a rule read back owns nothing until its parts
 * are read. */
static void rule_bare(struct fn_rule *c)
{
	c->to = NULL;
	c->ports = NULL;
	c->stat = NULL;
	c->http = NULL;
	c->dns = NULL;
	c->host = NULL;
}

static void put_rule(struct wr *w, const struct fn_rule *r)
{
	struct fn_rule c;
	memcpy(&c, r, sizeof(c)); /* padding too (the rules array is calloc'd) */
	rule_bare(&c);
	put(w, &c, sizeof(c));
	put(w, r->to, r->nto * sizeof(*r->to));
	put(w, r->ports, r->nports * sizeof(*r->ports));
	put_str(w, r->host);
	uint8_t parts = (r->http ? 1 : 0) | (r->dns ? 2 : 0);
	put(w, &parts, 1);
	if (r->http)
		put_http(w, r->http);
	if (r->dns) {
		struct fn_dns d;
		memcpy(&d, r->dns, sizeof(d));
		d.refs = 0;
		put(w, &d, sizeof(d));
	}
}

/* The policy's own part: counts, the process's zone, which arrays exist. */
struct body {
	uint64_t nzones, nrules;
	int32_t self_zone;
	uint8_t zones, rules; /* whether the array exists (the parser's NULLs kept) */
};

void *fn_compiled_write(const struct fn_policy *p, const struct fn_compiled_key *k, size_t *len)
{
	struct wr w = {0};
	struct head h;
	memset(&h, 0, sizeof(h));
	h.textlen = k->textlen;
	h.idlen = (uint32_t)k->idlen;
	h.zonelen = (uint32_t)strlen(k->zone);
	memcpy(h.magic, MAGIC, 8);
	put(&w, &h, sizeof(h));
	put(&w, k->id, k->idlen);
	put(&w, k->zone, h.zonelen);
	put(&w, k->text, k->textlen);
	struct body b;
	memset(&b, 0, sizeof(b)); /* its padding is written too */
	b.nzones = p->nzones;
	b.nrules = p->nrules;
	b.self_zone = p->self_zone;
	b.zones = p->zones != NULL;
	b.rules = p->rules != NULL;
	put(&w, &b, sizeof(b));
	for (size_t i = 0; i < p->nzones; i++) {
		struct fn_zone z;
		memcpy(&z, &p->zones[i], sizeof(z));
		z.cidrs = NULL;
		put(&w, &z, sizeof(z));
		put(&w, p->zones[i].cidrs, p->zones[i].ncidrs * sizeof(struct fn_cidr));
	}
	for (size_t i = 0; i < p->nrules; i++)
		put_rule(&w, &p->rules[i]);
	if (w.oom || w.n > FN_COMPILED_MAX) {
		free(w.b);
		return NULL;
	}
	fn_compiled_seal(w.b, w.n);
	*len = w.n;
	return w.b;
}

void fn_compiled_seal(void *blob, size_t len)
{
	struct head h;
	if (len < sizeof(h))
		return;
	memcpy(&h, blob, sizeof(h));
	h.len = len;
	size_t from = offsetof(struct head, textlen);
	h.sum = sum_bytes(0, (const uint8_t *)blob + from, len - from);
	memcpy(blob, &h, sizeof(h));
}

/* ---- reading: every byte is the file's, checked before use -------------- */

struct rd {
	const uint8_t *p;
	size_t left;
};

FN_START_TEXT static const uint8_t *rd_take(struct rd *r, size_t n)
{
	if (n > r->left)
		return NULL;
	const uint8_t *at = r->p;
	r->p += n;
	r->left -= n;
	return at;
}

FN_START_TEXT static bool rd_get(struct rd *r, void *out, size_t n)
{
	const uint8_t *at = rd_take(r, n);
	if (at)
		memcpy(out, at, n);
	return at != NULL;
}

/* count items of size bytes, copied into a new array (NULL for none). */
static bool get_array(struct rd *r, size_t count, size_t size, void **out)
{
	*out = NULL;
	if (!count)
		return true;
	if (count > r->left / size)
		return false;
	*out = malloc(count * size);
	return *out && rd_get(r, *out, count * size);
}

/* A string or bytes (binary: NULs allowed), NUL-terminated; *out NULL for
 * a NULL. */
static bool get_bytes(struct rd *r, char **out, size_t *len, bool binary)
{
	uint32_t n;
	*out = NULL;
	if (!rd_get(r, &n, sizeof(n)))
		return false;
	if (n == NONE)
		return true;
	const uint8_t *at = rd_take(r, n);
	if (!at || n > STR_MAX || (!binary && memchr(at, 0, n)) || !(*out = malloc((size_t)n + 1)))
		return false;
	memcpy(*out, at, n);
	(*out)[n] = '\0';
	if (len)
		*len = n;
	return true;
}

/* A bool as stored must be 0 or 1: any other byte read as a bool is
 * undefined behaviour. raw is the struct's bytes. */
static bool bools_ok(const void *raw, const size_t *at, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (((const uint8_t *)raw)[at[i]] > 1)
			return false;
	return true;
}

/* As the parser leaves a CIDR (fn_cidr_parse): a prefix of the family's
 * length at most, and no bit set after it (an IPv4 address in the first
 * four bytes), which the rule index relies on. */
static bool cidrs_ok(const struct fn_cidr *c, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (!bools_ok(&c[i], (const size_t[]){offsetof(struct fn_cidr, v4)}, 1) ||
		    c[i].prefix > (c[i].v4 ? 32 : 128))
			return false;
		unsigned bit = c[i].prefix;
		if (bit % 8 && (c[i].ip[bit / 8] & (0xff >> (bit % 8))))
			return false;
		for (unsigned byte = (bit + 7) / 8; byte < 16; byte++)
			if (c[i].ip[byte])
				return false;
	}
	return true;
}

static bool name_ok(const char name[FN_NAME_MAX])
{
	return memchr(name, 0, FN_NAME_MAX) && fn_name_valid(name);
}

static bool http_ok(const struct fn_http *h)
{
	static const size_t b[] = {offsetof(struct fn_http, close),
				   offsetof(struct fn_http, grpc_after_headers),
				   offsetof(struct fn_http, ping_unanswered)};
	return bools_ok(h, b, 3) && (!h->status || (h->status >= 100 && h->status <= 599)) &&
	       h->nheaders >= 0 && h->nheaders <= FN_HTTP_HEADERS_MAX &&
	       h->bodylen <= FN_HTTP_BODY_MAX && h->retry_after >= -1 &&
	       (h->mode == FN_ABORT_RESET || h->mode == FN_ABORT_CLOSE) && h->tls_fault >= 0 &&
	       h->tls_fault < FN_TLSF_COUNT && h->tls_alert >= 0 && h->tls_alert <= 255 &&
	       h->grpc_status >= -1 && h->grpc_status <= 16 && h->grpc_pushback_ms >= -1 &&
	       (h->rst_stream == -1 || fn_h2_error_name(h->rst_stream)) &&
	       (h->rst_after == FN_RST_REQUEST || h->rst_after == FN_RST_HEADERS) &&
	       (h->goaway == -1 || fn_h2_error_name(h->goaway));
}

static bool get_http(struct rd *r, struct fn_rule *rule)
{
	struct fn_http h;
	if (!rd_get(r, &h, sizeof(h)) || !http_ok(&h) || !(rule->http = fn_http_new()))
		return false;
	size_t bodylen = 0;
	struct fn_http *n = rule->http;
	h.refs = 1;
	h.method = h.path = h.headers = h.body = h.body_file = h.grpc_message = NULL;
	*n = h; /* its strings, NULL, are filled one by one: each freed with it */
	return get_bytes(r, &n->method, NULL, false) && get_bytes(r, &n->path, NULL, false) &&
	       get_bytes(r, &n->headers, NULL, false) && get_bytes(r, &n->body, &bodylen, true) &&
	       bodylen == n->bodylen && get_bytes(r, &n->body_file, NULL, false) &&
	       get_bytes(r, &n->grpc_message, NULL, false);
}

static bool get_dns(struct rd *r, struct fn_rule *rule)
{
	struct fn_dns d;
	if (!rd_get(r, &d, sizeof(d)) || (unsigned)d.error > FN_DNS_REFUSED || d.nanswer < 0 ||
	    d.nanswer > FN_DNS_ANSWERS_MAX)
		return false;
	for (int i = 0; i < FN_DNS_ANSWERS_MAX; i++)
		if (!bools_ok(&d.answer[i], (const size_t[]){offsetof(struct fn_endpoint, v4)}, 1))
			return false;
	if (!(rule->dns = fn_dns_new()))
		return false;
	d.refs = 1;
	*rule->dns = d;
	return true;
}

/* The rule's scalars, as stored: in range for this policy. */
static bool rule_ok(const struct fn_rule *c, size_t nzones)
{
	static const size_t b[] = {
	    offsetof(struct fn_rule, enabled), offsetof(struct fn_rule, has_cond),
	    offsetof(struct fn_rule, established),
	    offsetof(struct fn_rule, par) + offsetof(struct fn_params, net_unreachable)};
	long zones = (long)nzones;
	return bools_ok(c, b, 4) && name_ok(c->name) && (unsigned)c->action < FN_ACT_COUNT &&
	       c->protos <= FN_PROTO_ANY && c->from_zone >= -1 && c->from_zone < zones &&
	       c->to_zone >= -1 && c->to_zone < zones;
}

static bool get_rule(struct rd *r, struct fn_rule *rule, size_t nzones)
{
	struct fn_rule c;
	uint8_t parts;
	if (!rd_get(r, &c, sizeof(c)) || !rule_ok(&c, nzones))
		return false;
	rule_bare(&c);
	*rule = c; /* owns nothing yet: fn_policy_free frees what is set below */
	if (!get_array(r, c.nto, sizeof(*c.to), (void **)&rule->to) || !cidrs_ok(rule->to, c.nto) ||
	    !get_array(r, c.nports, sizeof(*c.ports), (void **)&rule->ports))
		return false;
	for (size_t i = 0; i < c.nports; i++)
		if (rule->ports[i].lo > rule->ports[i].hi)
			return false;
	if (!get_bytes(r, &rule->host, NULL, false) || !rd_get(r, &parts, 1) || parts > 3)
		return false;
	/* What the parser gives each action, and nothing else. */
	if (!!(parts & 1) != fn_rule_http(rule) || !!(parts & 2) != (c.action == FN_ACT_DNS))
		return false;
	if ((parts & 1) && !get_http(r, rule))
		return false;
	if ((parts & 2) && !get_dns(r, rule))
		return false;
	return (rule->stat = fn_rulestat_new()) != NULL;
}

static bool get_zone(struct rd *r, struct fn_zone *z)
{
	struct fn_zone c;
	if (!rd_get(r, &c, sizeof(c)) || !name_ok(c.name))
		return false;
	c.cidrs = NULL;
	*z = c;
	return get_array(r, c.ncidrs, sizeof(*c.cidrs), (void **)&z->cidrs) &&
	       cidrs_ok(z->cidrs, c.ncidrs);
}

/* The key as the copy (blob, len bytes) holds it, compared whole with k,
 * and the checksum; r is left at the policy's own part. */
FN_START_TEXT static bool key_matches(const uint8_t *blob, size_t len, struct rd *r,
				      const struct fn_compiled_key *k)
{
	struct head h;
	if (!rd_get(r, &h, sizeof(h)) || memcmp(h.magic, MAGIC, 8) != 0 || h.len != len)
		return false;
	size_t zonelen = strlen(k->zone);
	if (h.idlen != k->idlen || h.zonelen != zonelen || h.textlen != k->textlen)
		return false;
	const uint8_t *id = rd_take(r, h.idlen), *zone = rd_take(r, h.zonelen),
		      *text = rd_take(r, h.textlen);
	/* The build-id and the zone by hand (core/pathcat.h), and no text
	 * compared with itself: a start that finds its copy by the file's
	 * identity takes the copy's own text (fn_compiled_whole), and
	 * memcmp's first call was one more for it to pay. */
	if (!id || !zone || !text || !fn_same_bytes(id, k->id, k->idlen) ||
	    !fn_same_bytes(zone, k->zone, zonelen) ||
	    (text != (const uint8_t *)k->text && memcmp(text, k->text, k->textlen) != 0))
		return false;
	size_t from = offsetof(struct head, textlen);
	return sum_bytes(0, blob + from, len - from) == h.sum;
}

/* The policy's zones and rules from r, into p (zeroed): false at the
 * first thing out of place, p then holding only what it owns. */
static bool get_policy(struct rd *r, struct fn_policy *p)
{
	struct body b;
	if (!rd_get(r, &b, sizeof(b)) || b.zones > 1 || b.rules > 1 ||
	    b.nzones > r->left / sizeof(struct fn_zone) ||
	    b.nrules > r->left / sizeof(struct fn_rule) || (b.nzones && !b.zones) ||
	    (b.nrules && !b.rules) || b.self_zone < -1 || b.self_zone >= (int64_t)b.nzones)
		return false;
	p->self_zone = b.self_zone;
	if (b.zones && !(p->zones = calloc(b.nzones ? b.nzones : 1, sizeof(*p->zones))))
		return false;
	for (p->nzones = 0; p->nzones < b.nzones; p->nzones++)
		if (!get_zone(r, &p->zones[p->nzones]))
			return ++p->nzones, false;
	if (b.rules && !(p->rules = fn_big_calloc(b.nrules ? b.nrules : 1, sizeof(*p->rules))))
		return false;
	/* Every rule counted from the start: zeroed ones own nothing. */
	p->nrules = b.nrules;
	for (size_t i = 0; i < b.nrules; i++)
		if (!get_rule(r, &p->rules[i], b.nzones))
			return false;
	return r->left == 0;
}

/* A policy with HTTP rules needs the HTTP parser, as its parse says
 * (config_http.c: cfg_http_ready); without it the file is parsed, for the
 * message. */
static bool http_ready(const struct fn_policy *p)
{
	const char *why;
	for (size_t i = 0; i < p->nrules; i++)
		if (fn_rule_http(&p->rules[i]))
			return fn_hparse_get(&why) != NULL;
	return true;
}

FN_START_TEXT uint64_t fn_compiled_hash(uint64_t h, const void *data, size_t n)
{
	return sum_bytes(h, data, n);
}

FN_START_TEXT bool fn_compiled_whole(const void *blob, size_t len, struct fn_compiled_key *k)
{
	struct head h;
	struct rd r = {blob, len};
	if (!k->text) {
		/* The text the copy holds, after its build-id and zone. */
		if (!rd_get(&r, &h, sizeof(h)) || memcmp(h.magic, MAGIC, 8) != 0 ||
		    !rd_take(&r, h.idlen) || !rd_take(&r, h.zonelen) ||
		    !(k->text = (const char *)rd_take(&r, h.textlen)))
			return false;
		k->textlen = h.textlen;
		r = (struct rd){blob, len};
	}
	return k->id && key_matches(blob, len, &r, k);
}

struct fn_policy *fn_compiled_read(const void *blob, size_t len, const struct fn_compiled_key *k)
{
	struct rd r = {blob, len};
	if (!k->id || !key_matches(blob, len, &r, k))
		return NULL;
	struct fn_policy *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	if (!get_policy(&r, p) || !http_ready(p)) {
		fn_policy_free(p);
		return NULL;
	}
	fn_policy_finish(p);
	return p;
}
