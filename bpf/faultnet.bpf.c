/* faultnet.bpf.c - the kernel-side backend's programs, attached to the
 * cgroup that `faultctl run --backend=bpf` puts a program in. They make
 * faults out of the kernel's own behaviour, as the shim does, for programs
 * the shim cannot reach (Go, static binaries, raw syscalls, io_uring):
 *  - cgroup_skb egress/ingress: a covered packet under blackhole or drop is
 *    dropped. Egress drops with a congestion notice (return 2), which TCP
 *    and UDP take as "sent": a SYN is retransmitted until the app's own
 *    timeout, a datagram is gone, exactly as on a dead route.
 *  - cgroup/connect4 and connect6: a covered TCP connect under refuse is
 *    sent to a port faultctl holds bound and not listening, so the kernel
 *    answers with a reset (ECONNREFUSED); under stall, to a listener
 *    faultctl holds and never accepts from: the handshake completes and
 *    nothing ever answers; under reset, to a listener whose connections
 *    faultctl resets when the app's first bytes arrive (or 100 ms after
 *    the accept); under latency or bandwidth, to
 *    faultctl's relay, which connects to the address asked for and shapes
 *    the bytes. cgroup/getpeername4 and 6 give such a socket the address it
 *    asked for; a sockops program tells the relay which connect it accepts.
 *  - delay: the connect goes where it asked, but its first SYN is dropped
 *    (egress) and its retransmission timeout (sockops TIMEOUT_INIT) is the
 *    delay, so the handshake completes that much later: the socket waits
 *    in SYN_SENT, as behind a slow path.
 * The rules are found as the shim finds them: a longest-prefix trie per
 * family gives, for a destination, the rules covering it in file order;
 * the first enabled one whose protocol and ports match decides.
 * Only UAPI context structures are read (struct __sk_buff, struct
 * bpf_sock_addr), so the object needs no BTF of the running kernel. */
#include <linux/bpf.h>
#include <linux/in.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "bpf/shared.h"

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1); /* set by the loader */
	__type(key, struct fnb_key4);
	__type(value, struct fnb_cands);
} dst4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1);
	__type(key, struct fnb_key6);
	__type(value, struct fnb_cands);
} dst6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fnb_rule);
} rules SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fnb_count);
} counts SEC(".maps");

/* Per socket sent to an endpoint: the address it asked for. */
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct fnb_orig);
} orig SEC(".maps");

/* Per slot, the state of a conditional rule (see shared.h). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fnb_cond_state);
} conds SEC(".maps");

/* Each fault, for faultctl events (read by faultctl's control thread). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");

/* Connects sent to the relay, until the relay accepts them. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct fnb_pending_key);
	__type(value, struct fnb_pending);
} pending SEC(".maps");

/* The endpoints faultctl holds (port 0: none), filled in before load. */
const volatile __u16 refuse_port4 = 0;
const volatile __u16 refuse_port6 = 0;
const volatile __u16 stall_port4 = 0;
const volatile __u16 stall_port6 = 0;
const volatile __u16 reset_port4 = 0;
const volatile __u16 reset_port6 = 0;
const volatile __u16 relay_port4 = 0;
const volatile __u16 relay_port6 = 0;
const volatile __u32 hz = 0;   /* the kernel's jiffies per second */
const volatile __u32 rcap = 1; /* rules per set in the rules map */
/* The set of rules and prefixes in force (see shared.h); faultctl writes it. */
volatile __u32 cur_set = 0;

static __always_inline int port_ok(const struct fnb_rule *r, __u16 port)
{
	if (!r->nports)
		return 1;
	for (int i = 0; i < FNB_PORTS; i++)
		if (i < r->nports && port >= r->port_lo[i] && port <= r->port_hi[i])
			return 1;
	return 0;
}

static __always_inline const struct fnb_rule *rule_at(__u32 set, __u32 idx)
{
	__u32 k = set * rcap + idx;
	return bpf_map_lookup_elem(&rules, &k);
}

/* core's splitmix64 finaliser (core/chance.c), for the same draws. */
static __always_inline __u64 mix(__u64 x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* core's fn_cond_pass: the time window from the rule's enable, then the
 * match counted and first, after, every and probability judged. */
static __always_inline int cond_pass(const struct fnb_rule *r)
{
	__u32 slot = r->slot;
	struct fnb_cond_state *st = bpf_map_lookup_elem(&conds, &slot);
	if (!st)
		return 0;
	if (r->start_ns >= 0 || r->for_ns >= 0) {
		__u64 since = bpf_ktime_get_ns() - st->enabled_ns;
		__u64 start = r->start_ns < 0 ? 0 : (__u64)r->start_ns;
		if (since < start || (r->for_ns >= 0 && since - start >= (__u64)r->for_ns))
			return 0;
	}
	__u64 n = __sync_fetch_and_add(&st->matches, 1) + 1;
	if ((r->first && n > r->first) || (r->after && n <= r->after) ||
	    (r->every && n % r->every != 0))
		return 0;
	return r->prob_all || (mix(r->key + n) >> 11) < r->prob;
}

/* The conditional blackhole or drop a TCP segment's socket met at its
 * connect: slot + 1, 0 for none. */
static __always_inline __u32 marked(struct __sk_buff *seg)
{
	struct bpf_sock *sk = seg->sk;
	if (!sk || !(sk = bpf_sk_fullsock(sk)))
		return 0;
	struct fnb_orig *o = bpf_sk_storage_get(&orig, sk, 0, 0);
	return o ? o->cond_slot : 0;
}

/* The deciding rule for a destination, or NULL; *idx its index in set. A
 * conditional rule is judged for a connect or a datagram (its match
 * counted; a no hands on to the next rule), and taken for a TCP segment
 * (seg) only when the segment's socket was marked for it at its connect.
 * HTTP rules decide TCP connects only, as the shim's: one switched on
 * takes the connect as any rule; one switched off takes it when no other
 * rule does, so that, enabled later, it sees the requests of connections
 * already open (the pump's shim judges it per request). */
static __always_inline const struct fnb_rule *decide(const struct fnb_cands *c, __u32 set,
						     __u8 proto, __u16 port, int *idx,
						     struct __sk_buff *seg)
{
	const struct fnb_rule *off = 0;
	int off_idx = -1;
	if (!c)
		return 0;
	for (int i = 0; i < FNB_CANDS; i++) {
		if (i >= c->n)
			break;
		const struct fnb_rule *r = rule_at(set, c->rule[i]);
		if (!r || !(r->protos & proto) || !port_ok(r, port))
			continue;
		if (r->action == FNB_HTTP && !seg && proto == FNB_TCP && !r->on && !off) {
			off = r;
			off_idx = (int)c->rule[i];
		}
		if (!r->on || (r->action == FNB_HTTP && (seg || proto != FNB_TCP)))
			continue;
		if (r->has_cond && (seg ? marked(seg) != r->slot + 1 : !cond_pass(r)))
			continue;
		*idx = (int)c->rule[i];
		return r;
	}
	*idx = off_idx;
	return off;
}

static __always_inline const struct fnb_cands *find4(__u32 set, __u32 addr)
{
	struct fnb_key4 k = {.prefixlen = 64, .set = set, .addr = addr};
	return bpf_map_lookup_elem(&dst4, &k);
}

static __always_inline const struct fnb_cands *find6(__u32 set, const __u32 *addr)
{
	struct fnb_key6 k = {.prefixlen = 160, .set = set};
	__builtin_memcpy(k.addr, addr, 16);
	return bpf_map_lookup_elem(&dst6, &k);
}

static __always_inline void count(const struct fnb_rule *r)
{
	__u32 i = r->slot;
	struct fnb_count *n = bpf_map_lookup_elem(&counts, &i);
	if (!n)
		return;
	__sync_fetch_and_add(&n->attempts, 1);
	__sync_fetch_and_add(&n->faults, 1);
}

/* Reports a fault to faultctl; a full ring loses it (counted all the
 * same). */
static __always_inline void emit(const struct fnb_rule *r, __u8 proto, int v6, const __u32 *addr,
				 __u16 port)
{
	struct fnb_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e)
		return;
	e->mono_ns = bpf_ktime_get_ns();
	e->pid = (__u32)(bpf_get_current_pid_tgid() >> 32);
	e->slot = r->slot;
	e->addr[0] = addr[0];
	e->addr[1] = v6 ? addr[1] : 0;
	e->addr[2] = v6 ? addr[2] : 0;
	e->addr[3] = v6 ? addr[3] : 0;
	e->port = port;
	e->v6 = (__u8)v6;
	e->proto = proto;
	e->action = r->action;
	bpf_ringbuf_submit(e, 0);
}

static __always_inline __u8 proto_bit(__u8 ipproto)
{
	return ipproto == IPPROTO_TCP ? FNB_TCP : ipproto == IPPROTO_UDP ? FNB_UDP : 0;
}

/* A packet's peer: its destination (egress) or source (ingress). */
struct peer {
	__u32 addr[4];
	__u16 port; /* network order */
	int v6;
};

/* The rule a packet meets, or NULL; *pe its peer. */
static __always_inline const struct fnb_rule *packet_rule(struct __sk_buff *skb, int egress,
							  __u8 *proto, __u32 *l4, struct peer *pe)
{
	__u8 ipproto;
	__u32 off, set = cur_set;
	int idx;
	const struct fnb_cands *c;
	if (skb->protocol == bpf_htons(ETH_P_IP)) {
		struct iphdr ip;
		if (bpf_skb_load_bytes(skb, 0, &ip, sizeof(ip)))
			return 0;
		if (ip.frag_off & bpf_htons(0x1fff)) /* a later fragment: no ports */
			return 0;
		ipproto = ip.protocol;
		off = ip.ihl * 4;
		pe->addr[0] = egress ? ip.daddr : ip.saddr;
		c = find4(set, pe->addr[0]);
	} else if (skb->protocol == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr ip6;
		if (bpf_skb_load_bytes(skb, 0, &ip6, sizeof(ip6)))
			return 0;
		ipproto = ip6.nexthdr;
		off = sizeof(ip6);
		__builtin_memcpy(
		    pe->addr, egress ? ip6.daddr.in6_u.u6_addr32 : ip6.saddr.in6_u.u6_addr32, 16);
		pe->v6 = 1;
		c = find6(set, pe->addr);
	} else {
		return 0;
	}
	*proto = proto_bit(ipproto);
	*l4 = off;
	if (!c || !*proto)
		return 0;
	__u16 ports[2]; /* source, destination */
	if (bpf_skb_load_bytes(skb, off, ports, sizeof(ports)))
		return 0;
	pe->port = ports[egress ? 1 : 0];
	return decide(c, set, *proto, bpf_ntohs(pe->port), &idx, *proto == FNB_TCP ? skb : 0);
}

static __always_inline int drops(const struct fnb_rule *r)
{
	return r && (r->action == FNB_BLACKHOLE || r->action == FNB_DROP);
}

/* Whether this is the first SYN of a connect under delay, which is
 * dropped: the kernel sends it again when the delay has passed. */
static __always_inline int held_syn(struct __sk_buff *skb, __u32 l4)
{
	__u8 flags;
	struct bpf_sock *sk = skb->sk;
	if (bpf_skb_load_bytes(skb, l4 + 13, &flags, 1) || (flags & 0x12) != 0x02 || !sk)
		return 0;
	sk = bpf_sk_fullsock(sk);
	if (!sk)
		return 0;
	struct fnb_orig *o = bpf_sk_storage_get(&orig, sk, 0, 0);
	if (!o || !o->drop_syn)
		return 0;
	o->drop_syn = 0;
	return 1;
}

SEC("cgroup_skb/egress")
int fn_egress(struct __sk_buff *skb)
{
	__u8 proto = 0;
	__u32 l4 = 0;
	struct peer pe = {};
	const struct fnb_rule *r = packet_rule(skb, 1, &proto, &l4, &pe);
	if (proto == FNB_TCP && held_syn(skb, l4))
		return 2;
	if (!drops(r))
		return 1;
	if (proto == FNB_UDP) { /* TCP is counted per connect, not per segment */
		count(r);
		emit(r, proto, pe.v6, pe.addr, pe.port);
	}
	return 2; /* dropped, with a congestion notice: the sender sees success */
}

SEC("cgroup_skb/ingress")
int fn_ingress(struct __sk_buff *skb)
{
	__u8 proto = 0;
	__u32 l4 = 0;
	struct peer pe = {};
	return drops(packet_rule(skb, 0, &proto, &l4, &pe)) ? 0 : 1;
}

enum { AS_V4, AS_V6, AS_MAPPED }; /* how a connect's address is written */

/* The loopback endpoint a TCP connect under action goes to (port 0: none,
 * the connect goes on untouched). */
static __always_inline __u16 endpoint(__u8 action, int as)
{
	if (action == FNB_REFUSE)
		return as == AS_V6 ? refuse_port6 : refuse_port4;
	if (action == FNB_STALL)
		return as == AS_V6 ? stall_port6 : stall_port4;
	if (action == FNB_RESET)
		return as == AS_V6 ? reset_port6 : reset_port4;
	if (action == FNB_RELAY || action == FNB_HTTP)
		return as == AS_V6 ? relay_port6 : relay_port4;
	return 0;
}

/* Points the connect at port on loopback, in the socket's own family. */
static __always_inline void redirect(struct bpf_sock_addr *ctx, int as, __u16 port)
{
	if (as == AS_V4) {
		ctx->user_ip4 = bpf_htonl(0x7f000001);
	} else {
		ctx->user_ip6[0] = 0;
		ctx->user_ip6[1] = 0;
		ctx->user_ip6[2] = as == AS_V6 ? 0 : bpf_htonl(0xffff);
		ctx->user_ip6[3] = as == AS_V6 ? bpf_htonl(1) : bpf_htonl(0x7f000001);
	}
	ctx->user_port = bpf_htons(port);
}

/* A delayed connect: its first SYN is dropped and sent again after the
 * delay (plus or minus the jitter), in whole jiffies, at least one. */
static __always_inline void hold(struct bpf_sock_addr *ctx, const struct fnb_rule *r)
{
	struct fnb_orig *o = bpf_sk_storage_get(&orig, ctx->sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!o || !hz)
		return;
	__s64 ms = r->delay_ms;
	if (r->jitter_ms)
		ms += (__s64)(bpf_get_prandom_u32() % (2 * r->jitter_ms + 1)) - r->jitter_ms;
	__u64 j = ms > 0 ? ((__u64)ms * hz + 999) / 1000 : 1;
	o->syn_rto = j ? (__u32)j : 1;
	o->drop_syn = 1;
}

/* Keeps the address a connect asked for in its socket's storage. */
static __always_inline void remember(struct bpf_sock_addr *ctx, int as, const struct fnb_rule *r)
{
	struct fnb_orig *o = bpf_sk_storage_get(&orig, ctx->sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!o)
		return;
	if (as == AS_V4) {
		o->addr[0] = ctx->user_ip4;
	} else {
		o->addr[0] = ctx->user_ip6[0];
		o->addr[1] = ctx->user_ip6[1];
		o->addr[2] = ctx->user_ip6[2];
		o->addr[3] = ctx->user_ip6[3];
	}
	o->port = ctx->user_port;
	o->v6 = as != AS_V4;
	o->ep_v6 = as == AS_V6;
	o->slot = r->slot;
	o->relay = r->action == FNB_RELAY || r->action == FNB_HTTP;
	o->set = 1;
}

/* A connect's rule: counted once per connect; under delay its SYN is
 * held; under refuse, stall, reset or a relayed action the connect goes to
 * that endpoint, and the socket keeps the address asked for, which
 * getpeername gives back. */
static __always_inline int on_connect(struct bpf_sock_addr *ctx, __u32 set,
				      const struct fnb_cands *c, int as)
{
	__u8 proto = proto_bit((__u8)ctx->protocol);
	int idx;
	if (!c || proto != FNB_TCP) /* a datagram is judged as it is sent */
		return 1;
	const struct fnb_rule *r = decide(c, set, proto, bpf_ntohs((__u16)ctx->user_port), &idx, 0);
	if (!r)
		return 1;
	if (r->action == FNB_HTTP) { /* the engine decides and counts, per request */
		remember(ctx, as, r);
		redirect(ctx, as, endpoint(r->action, as));
		return 1;
	}
	count(r);
	if (r->has_cond && drops(r)) { /* its segments are dropped: see decide() */
		struct fnb_orig *o =
		    bpf_sk_storage_get(&orig, ctx->sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
		if (o)
			o->cond_slot = r->slot + 1;
	}
	if (as == AS_V4)
		emit(r, proto, 0, &ctx->user_ip4, (__u16)ctx->user_port);
	else {
		__u32 a[4] = {ctx->user_ip6[0], ctx->user_ip6[1], ctx->user_ip6[2],
			      ctx->user_ip6[3]};
		emit(r, proto, 1, a, (__u16)ctx->user_port);
	}
	if (r->action == FNB_DELAY) {
		hold(ctx, r);
		return 1;
	}
	__u16 port = endpoint(r->action, as);
	if (!port)
		return 1;
	remember(ctx, as, r);
	redirect(ctx, as, port);
	return 1;
}

/* getpeername: the address the app asked for, not the endpoint's. */
static __always_inline int peer(struct bpf_sock_addr *ctx, int v6)
{
	struct fnb_orig *o = bpf_sk_storage_get(&orig, ctx->sk, 0, 0);
	if (!o || !o->set)
		return 1;
	if (v6) {
		ctx->user_ip6[0] = o->addr[0];
		ctx->user_ip6[1] = o->addr[1];
		ctx->user_ip6[2] = o->addr[2];
		ctx->user_ip6[3] = o->addr[3];
	} else {
		ctx->user_ip4 = o->addr[0];
	}
	ctx->user_port = o->port;
	return 1;
}

SEC("cgroup/getpeername4")
int fn_getpeername4(struct bpf_sock_addr *ctx)
{
	return peer(ctx, 0);
}

SEC("cgroup/getpeername6")
int fn_getpeername6(struct bpf_sock_addr *ctx)
{
	return peer(ctx, 1);
}

SEC("cgroup/connect4")
int fn_connect4(struct bpf_sock_addr *ctx)
{
	__u32 set = cur_set;
	return on_connect(ctx, set, find4(set, ctx->user_ip4), AS_V4);
}

SEC("cgroup/connect6")
int fn_connect6(struct bpf_sock_addr *ctx)
{
	__u32 a[4] = {ctx->user_ip6[0], ctx->user_ip6[1], ctx->user_ip6[2], ctx->user_ip6[3]};
	__u32 set = cur_set;
	/* An IPv4-mapped destination is an IPv4 one on the wire. */
	if (!a[0] && !a[1] && a[2] == bpf_htonl(0xffff))
		return on_connect(ctx, set, find4(set, a[3]), AS_MAPPED);
	return on_connect(ctx, set, find6(set, a), AS_V6);
}

/* TIMEOUT_INIT: a delayed connect's SYN timeout. TCP_CONNECT_CB: a connect
 * sent to the relay, by the port it leaves from, for the relay to find when
 * it accepts it (the port is chosen by then, the SYN not yet sent). */
SEC("sockops")
int fn_sockops(struct bpf_sock_ops *skops)
{
	struct bpf_sock *sk = skops->sk;
	if (!sk ||
	    (skops->op != BPF_SOCK_OPS_TIMEOUT_INIT && skops->op != BPF_SOCK_OPS_TCP_CONNECT_CB))
		return 1;
	struct fnb_orig *o = bpf_sk_storage_get(&orig, sk, 0, 0);
	if (!o)
		return 1;
	if (skops->op == BPF_SOCK_OPS_TIMEOUT_INIT) {
		if (o->syn_rto)
			skops->reply = (__s32)o->syn_rto;
		return 1;
	}
	if (!o->relay)
		return 1;
	struct fnb_pending_key k = {.port = (__u16)skops->local_port, .v6 = o->ep_v6};
	struct fnb_pending v = {.port = o->port, .v6 = o->v6, .slot = o->slot};
	__builtin_memcpy(v.addr, o->addr, 16);
	bpf_map_update_elem(&pending, &k, &v, BPF_ANY);
	return 1;
}
