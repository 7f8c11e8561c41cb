/* httppump.c - faultctl's side of the kernel-side backend's HTTP pump (see
 * httppump.h): starts faultnet-pump with the shim preloaded and the run's
 * policy and group, hands it connections over a SOCK_SEQPACKET socket, and
 * ends it. The pump runs in faultctl's cgroup, not the app's, so its own
 * connects go where they ask; the shim in it sees each of them as a
 * covered connection and runs its HTTP engine (TLS termination, HTTP/1.1,
 * HTTP/2, gRPC) there: the engine exists once, in the shim. */
#include "bpf/httppump.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* NAME next to faultctl, or in ../lib (the shim's place in an install
 * tree); false when neither is there. */
static bool beside(const char *name, const char *alt, char *out, size_t len)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n < 0)
		return false;
	self[n] = '\0';
	const char *dir = dirname(self);
	snprintf(out, len, "%s/%s", dir, name);
	if (access(out, R_OK) == 0)
		return true;
	snprintf(out, len, "%s/%s", dir, alt);
	return access(out, R_OK) == 0;
}

static void set_or_unset(const char *var, const char *value)
{
	if (value)
		setenv(var, value, 1);
	else
		unsetenv(var);
}

/* The child: its environment, then the pump. Never returns. */
static void exec_pump(const char *bin, const char *lib, int fd, const struct fnb_pump_env *e)
{
	char arg[16], pre[2 * PATH_MAX + 2];
	const char *old = getenv("LD_PRELOAD");
	/* After what is there: a sanitizer runtime must stay first. */
	snprintf(pre, sizeof(pre), "%s%s%s", old ? old : "", old && *old ? ":" : "", lib);
	setenv("LD_PRELOAD", pre, 1);
	set_or_unset("FAULTNET_CONFIG", e->config);
	setenv("FAULTNET_GROUP", e->group, 1);
	set_or_unset("FAULTNET_STATS_DIR", e->stats_dir);
	set_or_unset("FAULTNET_REQUESTS", e->requests);
	/* The relay's check of the server: the roots the app had, without the
	 * run's CA that was added for the app's check of the relay. */
	set_or_unset("SSL_CERT_FILE", e->cert_file);
	unsetenv("FAULTNET_STRICT");
	/* It ends with faultctl, however faultctl ends. */
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	snprintf(arg, sizeof(arg), "%d", fd);
	execl(bin, bin, arg, (char *)NULL);
	fprintf(stderr, "faultctl run --backend=bpf: %s: %s\n", bin, strerror(errno));
	_exit(127);
}

bool fnb_httppump_start(struct fnb_httppump *h, const struct fnb_pump_env *e, char *err,
			size_t errlen)
{
	char bin[PATH_MAX + 32], lib[PATH_MAX + 32];
	int sv[2];
	if (!beside("faultnet-pump", "../lib/faultnet/faultnet-pump", bin, sizeof(bin)) ||
	    !beside("libfaultnet.so", "../lib/libfaultnet.so", lib, sizeof(lib))) {
		snprintf(err, errlen,
			 "HTTP rules need faultnet-pump next to faultctl or in ../lib/faultnet, "
			 "and libfaultnet.so next to faultctl or in ../lib");
		return false;
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		snprintf(err, errlen, "cannot make the HTTP pump's socket: %s", strerror(errno));
		return false;
	}
	pid_t pid = fork();
	if (pid == 0) {
		close(sv[0]);
		int fd = dup(sv[1]); /* without CLOEXEC: the pump's */
		exec_pump(bin, lib, fd < 0 ? sv[1] : fd, e);
	}
	close(sv[1]);
	if (pid < 0) {
		close(sv[0]);
		snprintf(err, errlen, "cannot start the HTTP pump: %s", strerror(errno));
		return false;
	}
	h->pid = pid;
	h->fd = sv[0];
	return true;
}

bool fnb_httppump_give(int fd, int app, const struct fnb_pump_msg *m)
{
	char ctl[CMSG_SPACE(sizeof(int))] = {0};
	struct iovec io = {.iov_base = (void *)m, .iov_len = sizeof(*m)};
	struct msghdr msg = {
	    .msg_iov = &io, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl)};
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &app, sizeof(int));
	ssize_t n;
	while ((n = sendmsg(fd, &msg, MSG_NOSIGNAL)) < 0 && errno == EINTR)
		;
	return n == (ssize_t)sizeof(*m);
}

void fnb_httppump_stop(struct fnb_httppump *h)
{
	if (h->fd >= 0)
		close(h->fd);
	h->fd = -1;
	if (h->pid <= 0)
		return;
	/* It finishes the connections it carries for up to 2 s; then 3 s more
	 * for its exit, before it is killed. */
	for (int i = 0; i < 100; i++) {
		if (waitpid(h->pid, NULL, WNOHANG) == h->pid) {
			h->pid = 0;
			return;
		}
		nanosleep(&(struct timespec){.tv_nsec = 50 * 1000 * 1000}, NULL);
	}
	kill(h->pid, SIGKILL);
	waitpid(h->pid, NULL, 0);
	h->pid = 0;
}
