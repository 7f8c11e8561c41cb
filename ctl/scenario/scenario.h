/* scenario.h - faultctl scenario: a timed plan of rule changes on a group,
 * probes that watch health while it runs, expectations checked at the end,
 * and the report (JSON, SVG, JUnit, a summary). The model is filled by
 * parse.c, run by run.c and written by report.c. */
#ifndef FAULTCTL_SCENARIO_H
#define FAULTCTL_SCENARIO_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define SC_NAME 64
/* A step later than this (ms) fails the scenario unless late_ms_max says. */
#define SC_LATE_MS_MAX 500
/* How long the clock waits for the command to join its group (ms). */
#define SC_JOIN_WAIT_MS 10000
/* How long it then waits for the ready probes to be healthy, unless
 * ready_ms_max says (ms). */
#define SC_READY_MS_MAX 10000

enum sc_verb { SV_ENABLE, SV_DISABLE, SV_ADD, SV_RM, SV_LOAD, SV_ZONE, SV_COUNT };

struct sc_step {
	char name[SC_NAME];
	enum sc_verb verb;
	char *arg;	     /* rule name, rule text, file or zone */
	char rule[SC_NAME];  /* add: the added rule's name, for the undo */
	char group[SC_NAME]; /* "" for the scenario's group */
	int pids[16];	     /* or these processes (faultctl -p) */
	int npids;
	int64_t at_ms;		  /* -1 when it follows another step */
	int after;		  /* index of that step, -1 for none */
	int64_t after_ms, for_ms; /* for_ms -1: never undone before the end */
	int64_t plan_ms;	  /* its time if every step before it is on time */
	int line;
	/* What happened. */
	int64_t planned_ms, actual_ms, undo_planned_ms, undo_actual_ms; /* -1 when not */
	int rc, undo_rc;
	char message[256];
};

struct sc_sample {
	int64_t t_ms, took_ms;
	bool ok;
};

struct sc_probe {
	char name[SC_NAME];
	char *command; /* run with sh -c; exit 0 is healthy */
	char *url;     /* or an HTTP GET that must answer status */
	int status;
	int64_t interval_ms, timeout_ms;
	bool shim;  /* run under the shim, in the scenario's group */
	bool ready; /* the clock starts once it has answered healthy */
	int line;
	struct sc_sample *samples;
	size_t n, cap;
	pid_t pid; /* the run in flight, 0 for none */
	int64_t started_ms, next_ms;
	int streak; /* failures in a row */
};

enum sc_expect_kind {
	EX_HEALTHY_WITHIN,
	EX_UNHEALTHY_WITHIN,
	EX_MAX_FAILURES,
	EX_RULE_MAX,
	EX_RULE_MIN
};

struct sc_expect {
	enum sc_expect_kind kind;
	int probe;     /* index, or -1 for a rule expectation */
	int after;     /* step index, -1 for the start */
	bool from_end; /* measured from the step's undo, not its start */
	int64_t bound;
	char rule[SC_NAME];
	char counter[16]; /* attempts, faults, requests, answered, ... */
	int line;
	bool held;
	int64_t measured; /* -1: never happened */
	char text[256];
};

struct sc_stop {
	int probe, failures, after;
	int64_t time_ms; /* -1 for none */
	int line;
};

/* A moment the app marked: faultctl mark NAME, or a line of marks_file. */
struct sc_mark {
	int64_t t_ms; /* on the scenario's clock */
	char name[SC_NAME];
	bool by_ctl; /* from faultctl mark (its own time), else read at t_ms */
};

/* A file of marks, read as it grows (marks.c). */
struct sc_marks_src {
	char path[PATH_MAX];
	off_t off;
	bool by_ctl; /* lines "NS NAME" (GROUP.marks), else NAME */
	char line[256];
	size_t len;
};

/* Per-rule totals over time, summed over the group's processes. */
#define SC_TOTALS 9
struct sc_rate {
	char rule[SC_NAME];
	uint64_t *attempts, *faults, *requests; /* one per second of the run */
	/* attempts faults bytes requests answered slowed aborted untouched
	 * to_server (SC_TOTALS, as the stats' rule lines name them) */
	uint64_t total[9];
	int len; /* entries filled in the series */
};

struct scenario {
	char file[PATH_MAX];
	char policy[PATH_MAX]; /* the file the processes start with */
	char group[SC_NAME];
	int64_t duration_ms;
	int64_t late_ms_max;	   /* a step later than this fails the scenario */
	int64_t ready_ms_max;	   /* how long the clock waits for the ready probes */
	bool strict;		   /* --strict: a rule switched on that never fired fails */
	char marks_file[PATH_MAX]; /* the app's file of marks, "" for none */
	struct sc_step *steps;
	int nsteps;
	struct sc_probe *probes;
	int nprobes;
	struct sc_expect *expects;
	int nexpects;
	struct sc_stop *stops;
	int nstops;
	/* What happened. */
	int64_t ended_ms;
	char end_reason[128];
	struct sc_rate *rates;
	int nrates, seconds;
	int cmd_status; /* -1 while running or without a command */
	int64_t cmd_exit_ms;
	int joined;	       /* processes of the group seen (their state files) */
	int64_t join_wait_ms;  /* how long the clock waited for CMD to join */
	int64_t ready_wait_ms; /* then for the ready probes to be healthy */
	const char *not_ready; /* a ready probe that never was, NULL for none */
	uint64_t not_http;     /* connections HTTP rules met but could not read */
	uint64_t tls_passed;   /* of them, TLS passed through (h2 only, unavailable) */
	bool policy_tmp;       /* policy was written from inline rules: removed at the end */
	bool http;	       /* its policy or a step's rule has HTTP rules: the CA variables */
	struct sc_mark *marks; /* the app's marks, in the order read */
	int nmarks, capmarks;
	/* The request log (FAULTNET_REQUESTS) of the run's processes, "" for
	 * none, and the clock's start on CLOCK_MONOTONIC, which its lines use. */
	char requests[PATH_MAX + 32];
	int64_t t0_mono_us;
	/* Its requests by outcome (fault, server, failed): in total, and per
	 * second of the run (rq_secs entries each; NULL when not read). */
	uint64_t rq_total[3], *rq_per[3];
	int rq_secs;
};

const char *sc_verb_name(enum sc_verb v);

/* Reads and checks a scenario file; NULL with "FILE:LINE: problem" in err. */
struct scenario *sc_load(const char *path, char *err, size_t errlen);
void sc_free(struct scenario *s);
/* True when path looks like a scenario (it has steps or probes), for
 * faultctl check. */
bool sc_is_scenario(const char *path);

/* faultctl scenario FILE [--report DIR] [-- CMD...]: the exit status. */
int cmd_scenario(int argc, char **argv, const char *self);

/* marks.c: faultctl [-g GROUP] mark NAME, into the group's marks file of
 * a running scenario (refused when none runs): 0, else the exit status
 * with the reason in err. */
int sc_mark_write(const char *group, const char *name, char *err, size_t len);
/* Whether the scenario that made the GROUP.marks at path still runs (its
 * header's pid and start time): faultctl gc keeps the file while it does. */
bool sc_marks_owned(const char *path);
/* Reads what src has gained since the last call into s->marks: a line
 * from faultctl mark at its own time (t0_ns: the scenario clock's zero),
 * another at now (ms). */
void sc_marks_poll(struct scenario *s, struct sc_marks_src *src, int64_t t0_ns, int64_t now);

/* report.c: evaluates the expectations, then writes report.json,
 * report.svg and junit.xml into dir (if given) and the summary to out. */
void sc_evaluate(struct scenario *s);
/* Reads the run's request log first (s->requests), for both reports. */
bool sc_write_report(struct scenario *s, const char *dir, char *err, size_t errlen);
void sc_summary(const struct scenario *s, FILE *out);
/* Whether the run passed: every step ran, on time (late_ms_max) and was
 * taken, every expectation held, it ran its duration, and under --strict
 * every rule a step switched on fired, no HTTP rule met traffic it could
 * not read and some process joined. */
bool sc_passed(const struct scenario *s);
/* Why step st failed the run ("" when it did not); the length written. */
int sc_step_problem(const struct scenario *s, const struct sc_step *st, char *why, size_t len);
/* The rules a step switched on (enable, add) that never matched anything:
 * each name in turn, i from 0; NULL at the end. */
const char *sc_unfired(const struct scenario *s, int *i);

#endif
