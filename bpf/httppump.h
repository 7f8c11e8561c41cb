/* httppump.h - the kernel-side backend's HTTP pump (httppump.c, and the
 * program faultnet-pump, pumpd.c): a process under the shim, outside the
 * app's cgroup, to which the relay hands each connection an HTTP rule
 * covers. Its own connect to the address the app asked for meets the
 * shim's HTTP engine, so the requests the app sends are ruled there. */
#ifndef FAULTNET_BPF_HTTPPUMP_H
#define FAULTNET_BPF_HTTPPUMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* One connection handed over: the message, with the app's accepted socket
 * as its SCM_RIGHTS. The address asked for, in network order; v6 when it
 * is an IPv6 (or IPv4-mapped) one. */
struct fnb_pump_msg {
	uint32_t addr[4];
	uint16_t port;
	uint8_t v6, pad;
};

/* What the pump runs with: the run's policy file (NULL: none), its group,
 * the roots the app had before the run added its CA (SSL_CERT_FILE, NULL
 * when unset: the system's), and where the shim leaves its counters (NULL
 * without --stats). */
struct fnb_pump_env {
	const char *config, *group, *cert_file, *stats_dir;
	const char *requests; /* the request log (run --requests), absolute; or NULL */
	bool always; /* started without an HTTP rule too (run --ca-vars): for one added live */
};

struct fnb_httppump {
	pid_t pid; /* 0: not started */
	int fd;	   /* this end of the socket the connections go through */
};

/* Starts faultnet-pump (found next to faultctl, or in ../lib/faultnet) under the shim; false with
 * the reason. */
bool fnb_httppump_start(struct fnb_httppump *h, const struct fnb_pump_env *e, char *err,
			size_t errlen);
/* Hands the app's connection app (for the address m names) to the pump;
 * false when it could not (the caller resets it). */
bool fnb_httppump_give(int fd, int app, const struct fnb_pump_msg *m);
/* Ends the pump: it finishes what it carries (a few seconds at most) and
 * exits, its counters written. */
void fnb_httppump_stop(struct fnb_httppump *h);

#endif
