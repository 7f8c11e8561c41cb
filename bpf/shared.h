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

struct fnb_key4 {
	__u32 prefixlen;
	__u32 addr; /* network order */
};

struct fnb_key6 {
	__u32 prefixlen;
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
};

/* What a socket sent to an endpoint asked for (network order). */
struct fnb_orig {
	__u32 addr[4];
	__u16 port;
	__u16 set;
};

struct fnb_count {
	__u64 attempts, faults;
};

#endif
