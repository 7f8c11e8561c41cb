/* shim.h - the shim's internal entry points. hooks.c forwards every
 * interposed libc symbol to one of these; nothing here is exported. */
#ifndef FAULTNET_SHIM_H
#define FAULTNET_SHIM_H

#include <sys/socket.h>
#include <sys/types.h>

#include "rules.h"

/* The policy in force; NULL when the process runs without one. Immutable
 * while published: a change publishes a new one. */
extern struct fn_policy *fn_policy_now;

static inline const struct fn_policy *fn_policy_current(void)
{
	return __atomic_load_n(&fn_policy_now, __ATOMIC_ACQUIRE);
}

/* fault.c */
/* What the policy says about one connect or datagram. */
struct fn_verdict {
	const struct fn_rule *rule; /* the rule that faults it, or NULL */
	const struct fn_rule *seen; /* the rule it is counted against */
	struct fn_endpoint ep;
	uint8_t proto;
};
/* False when no rule covers the peer (the common case: nothing to do). */
bool fn_fault_match(int fd, const struct sockaddr *sa, socklen_t len, struct fn_verdict *v);
/* Where a faulted socket must connect or send instead; records the fault
 * on the fd and counts the attempt. False with errno when the fault cannot
 * be set up (the app then gets that error, never the real peer). */
bool fn_fault_target(int fd, const struct sockaddr *sa, socklen_t len, const struct fn_verdict *v,
		     uint64_t bytes, bool connecting, struct sockaddr_storage *target,
		     socklen_t *tlen);

/* True in a vfork child, which shares the parent's memory: the shim must
 * change none of its state there. Costs a syscall: slow paths only. */
bool fn_in_vfork_child(void);
void fn_owner_reset(void);

/* connect.c */
int fn_connect(int fd, const struct sockaddr *sa, socklen_t len);
int fn_getpeername(int fd, struct sockaddr *sa, socklen_t *len);

/* datagram.c */
ssize_t fn_sendto(int fd, const void *buf, size_t n, int flags, const struct sockaddr *sa,
		  socklen_t len);
ssize_t fn_sendmsg(int fd, const struct msghdr *msg, int flags);
int fn_sendmmsg(int fd, struct mmsghdr *vec, unsigned int vlen, int flags);
ssize_t fn_recv(int fd, void *buf, size_t n, int flags);
ssize_t fn_recvfrom(int fd, void *buf, size_t n, int flags, struct sockaddr *sa, socklen_t *len);
ssize_t fn_recvmsg(int fd, struct msghdr *msg, int flags);
int fn_recvmmsg(int fd, struct mmsghdr *vec, unsigned int vlen, int flags,
		struct timespec *timeout);
ssize_t fn_read(int fd, void *buf, size_t n);

/* fdlife.c */
int fn_socket(int domain, int type, int protocol);
int fn_accept4(int fd, struct sockaddr *sa, socklen_t *len, int flags, bool four);
int fn_close(int fd);
int fn_close_range(unsigned int lo, unsigned int hi, int flags);
int fn_dup(int fd);
int fn_dup3(int oldfd, int newfd, int flags, int which);
int fn_fcntl(int fd, int cmd, void *arg, bool is64);

#endif
