/* shared.h - the layout of the kernel-side backend's maps, read by the BPF
 * programs (faultnet.bpf.c) and written by the loader (backend.c). Fixed
 * width types only: both sides see the same bytes. */
#ifndef FAULTNET_BPF_SHARED_H
#define FAULTNET_BPF_SHARED_H

#include <linux/types.h>

#define FNB_CANDS 8 /* rules a destination's entry may list */
#define FNB_PORTS 4 /* port ranges a rule may give */

enum { FNB_TCP = 1, FNB_UDP = 2 }; /* the protocol bits, as core's FN_PROTO_* */
enum { FNB_BLACKHOLE = 1, FNB_DROP = 2, FNB_REFUSE = 3, FNB_STALL = 4, FNB_RESET = 5 };
/* delay: the connect's first SYN is dropped and its retransmission timer
 * set to the delay. relay: latency and bandwidth, the connect goes to
 * faultctl's relay (relay.c), which shapes the bytes both ways. */
enum { FNB_DELAY = 6, FNB_RELAY = 7 };
/* http: an HTTP rule's connect goes to the relay too, which hands it to the
 * pump (httppump.c), a process under the shim whose own connect meets the
 * shim's HTTP engine. Its conditions are the engine's, per request: the
 * programs neither judge nor count it. */
enum { FNB_HTTP = 8 };

/* The maps hold two sets of rules and prefixes: the programs read the one
 * cur_set names, a live change writes the other and then flips cur_set,
 * so that a connect sees the old policy or the new one, whole. A key's
 * prefixlen counts the set's 32 bits too. */
struct fnb_key4 {
	__u32 prefixlen;
	__u32 set;
	__u32 addr; /* network order */
};

struct fnb_key6 {
	__u32 prefixlen;
	__u32 set;
	__u32 addr[4];
};

/* The rules covering a prefix, in file order (see backend.c). */
struct fnb_cands {
	__u32 n;
	__u32 rule[FNB_CANDS];
};

struct fnb_rule {
	__u8 action; /* FNB_* */
	__u8 protos;
	__u8 nports;
	__u8 on; /* enabled */
	__u16 port_lo[FNB_PORTS], port_hi[FNB_PORTS];
	__u32 delay_ms, jitter_ms; /* delay */
	__u32 slot;		   /* its counters' index, kept across changes by name */
	/* Conditions, as core's fn_cond_pass takes them: has_cond 0 when the
	 * rule has none. A draw is core's fn_random: splitmix64 of key (the
	 * seed and the rule's name, premixed) plus the match's number; it
	 * passes below prob (probability times 2^53, rounded up), always when
	 * prob_all. start_ns and for_ns are -1 when unset. */
	__u8 has_cond, prob_all, pad[2];
	__u64 first, every, after, prob, key;
	__s64 start_ns, for_ns;
};

/* Per slot: a conditional rule's matches since it was (re-)enabled, and
 * when (CLOCK_MONOTONIC ns), written by faultctl on enable. */
struct fnb_cond_state {
	__u64 matches, enabled_ns;
};

/* Per faulted socket: the address it asked for when it was sent to an
 * endpoint or the relay (network order; set), the SYN retransmission
 * timeout a delay gives it, in jiffies, and whether its first SYN is still
 * to be dropped. */
struct fnb_orig {
	__u32 addr[4];
	__u16 port;
	__u8 set, relay;
	__u32 slot; /* the rule's */
	__u32 syn_rto;
	__u8 drop_syn, v6; /* v6: the address is an IPv6 one (or IPv4-mapped) */
	__u8 ep_v6;	   /* it was sent to the relay's IPv6 listener */
	__u8 pad;
	__u32 cond_slot; /* slot + 1 of a conditional blackhole or drop it met */
};

/* A connect sent to the relay, found by the relay when it accepts: the
 * port it left from (host order) and which listener it went to. */
struct fnb_pending_key {
	__u16 port;
	__u16 v6;
};

struct fnb_pending {
	__u32 addr[4];
	__u16 port;
	__u8 v6, pad;
	__u32 slot;
};

/* One fault, as the programs report it to faultctl (events.c). */
struct fnb_event {
	__u64 mono_ns;
	__u32 pid, slot;
	__u32 addr[4]; /* the destination, network order; IPv4 in addr[0] */
	__u16 port;    /* network order */
	__u8 v6, proto, action;
	__u8 pad[3];
};

struct fnb_count {
	__u64 attempts, faults;
};

#endif
