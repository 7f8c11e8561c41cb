/* intercept.h - what each interposed call does. hooks.c forwards every
 * exported libc symbol to one of these; nothing here is exported. */
#ifndef FAULTNET_INTERCEPT_H
#define FAULTNET_INTERCEPT_H

#include <stdbool.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

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
ssize_t fn_readv(int fd, const struct iovec *iov, int iovcnt);

/* dlopen.c */
void *fn_dlopen(const char *file, int flags);

/* fdlife.c */
/* Start-up: classifies the sockets the process inherited (socket
 * activation, exec), which no socket() hook saw. */
void fn_fd_classify_inherited(void);
int fn_socket(int domain, int type, int protocol);
int fn_accept4(int fd, struct sockaddr *sa, socklen_t *len, int flags, bool four);
int fn_close(int fd);
int fn_close_range(unsigned int lo, unsigned int hi, int flags);
int fn_dup(int fd);
int fn_dup3(int oldfd, int newfd, int flags, int which);
int fn_fcntl(int fd, int cmd, void *arg, bool is64);

#endif
