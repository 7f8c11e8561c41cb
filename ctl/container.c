/* container.c - faultctl docker run, docker check and compose: an
 * unchanged image run under the shim. What is added to `docker run` (or to
 * a Compose service, by an override file) is: the bundle (make bundle)
 * mounted read-only at /opt/faultnet and preloaded from there, the policy's
 * folder mounted read-only at its own path (faultctl on the host rebuilds a
 * member's policy from that path), the run directory mounted at its own
 * path (the members' state files, control and journals: faultctl ps, rules,
 * enable... on the host reach the container's processes), the group and
 * the zone. Before a container starts, the image's C library is checked
 * against the bundle (ctl/bundle.c) and the uid its processes run as
 * against the run directory's owner: a container that could not load the
 * preload or join the run directory is refused with the reason, never run
 * with no faults. */
#include "ctl/container.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/config.h"
#include "core/rundir.h"
#include "ctl/bundle.h"
#include "ctl/run.h"

#define IN_IMAGE "/opt/faultnet"

/* What faultctl adds, gathered from its own options. */
struct setup {
	const char *docker, *config, *zone, *group;
	bool stats;
	char policy[PATH_MAX], policy_dir[PATH_MAX], rundir[PATH_MAX], statsdir[64];
	struct fn_bundle b;
};

/* Runs argv; its stdout into out (when not NULL), its stderr dropped when
 * quiet. The exit status, or -1 when it could not run. */
static int spawn(char *const argv[], char *out, size_t len, bool quiet)
{
	int fds[2] = {-1, -1};
	if (out && pipe(fds) < 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);
		if (out || quiet)
			dup2(out ? fds[1] : null, 1);
		if (quiet)
			dup2(null, 2);
		execvp(argv[0], argv);
		_exit(127);
	}
	size_t got = 0;
	if (out) {
		close(fds[1]);
		ssize_t r;
		while (pid > 0 && (r = read(fds[0], out + got, len - 1 - got)) > 0 && got + 1 < len)
			got += r;
		close(fds[0]);
		out[got] = '\0';
		while (got && (out[got - 1] == '\n' || out[got - 1] == ' '))
			out[--got] = '\0';
	}
	int st;
	if (pid < 0 || waitpid(pid, &st, 0) < 0)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The image's C library, copied out of a container created (never
 * started) from it, checked against the bundle. NULL when it can run. */
static const char *check_image(const struct setup *s, const char *image, char *found, size_t flen,
			       char *err, size_t len)
{
	char cid[128], tmp[] = "/tmp/faultctl-libc-XXXXXX";
	char *create[] = {
	    (char *)s->docker,	       "create",      "--network", "none", "--entrypoint",
	    "/faultnet-never-started", (char *)image, NULL};
	if (spawn(create, cid, sizeof(cid), true) != 0 || !cid[0]) {
		char ver[64];
		char *info[] = {(char *)s->docker, "info", "-f", "{{.ServerVersion}}", NULL};
		if (spawn(info, ver, sizeof(ver), true) != 0)
			snprintf(err, len, "cannot reach the Docker engine ('%s info' failed)",
				 s->docker);
		else
			snprintf(err, len,
				 "%s create %s failed: is the image there (docker images)?",
				 s->docker, image);
		return err;
	}
	const char *why = NULL;
	if (!mkdtemp(tmp)) {
		why = "cannot make a folder in /tmp";
	} else {
		for (int i = 0; fn_libc_paths[i]; i++) {
			char from[256], to[512], dir[512];
			snprintf(from, sizeof(from), "%s:/%s", cid, fn_libc_paths[i]);
			snprintf(to, sizeof(to), "%s/%s", tmp, fn_libc_paths[i]);
			snprintf(dir, sizeof(dir), "%s", to);
			char *mk[] = {"mkdir", "-p", dirname(dir), NULL};
			char *cp[] = {(char *)s->docker, "cp", "-L", from, to, NULL};
			if (spawn(mk, NULL, 0, true) == 0 && spawn(cp, NULL, 0, true) == 0)
				break; /* the first C library found is the one checked */
		}
		why = fn_bundle_check_root(&s->b, tmp, found, flen, err, len);
		char *rm[] = {"rm", "-rf", "--one-file-system", tmp, NULL};
		spawn(rm, NULL, 0, true);
	}
	char *rmc[] = {(char *)s->docker, "rm", "-f", cid, NULL};
	spawn(rmc, NULL, 0, true);
	return why;
}

/* The uid the container's processes run as, from --user or the image's
 * own USER; -1 with the reason when it cannot be told without running it. */
static long container_uid(const struct setup *s, const char *user, const char *image, char *err,
			  size_t len)
{
	char conf[256];
	if (!user) {
		char *inspect[] = {(char *)s->docker,  "image",	      "inspect", "-f",
				   "{{.Config.User}}", (char *)image, NULL};
		if (spawn(inspect, conf, sizeof(conf), true) != 0) {
			snprintf(err, len, "%s image inspect %s failed", s->docker, image);
			return -1;
		}
		user = conf;
	}
	char name[256];
	snprintf(name, sizeof(name), "%s", user);
	name[strcspn(name, ":")] = '\0';
	if (!name[0] || strcmp(name, "root") == 0)
		return 0;
	char *end;
	long uid = strtol(name, &end, 10);
	if (*end || uid < 0) {
		snprintf(err, len,
			 "the container runs as user '%s', whose uid cannot be told without "
			 "running the image: give --user UID (a number)",
			 name);
		return -1;
	}
	return uid;
}

/* Item 4 of the run directory's rules (one account controls and reads it):
 * the container's processes must be the run directory's owner, as the
 * engine maps them. The uid on this machine they map to, or the reason. */
static const char *check_uid(const struct setup *s, const char *user, const char *image, char *err,
			     size_t len)
{
	long uid = container_uid(s, user, image, err, len);
	if (uid < 0)
		return err;
	char info[1024];
	char *cmd[] = {(char *)s->docker, "info", "-f", "{{json .SecurityOptions}}", NULL};
	if (spawn(cmd, info, sizeof(info), true) != 0)
		info[0] = '\0';
	if (strstr(info, "name=userns")) {
		snprintf(err, len,
			 "the engine remaps container uids (userns-remap): the container's uid %ld "
			 "is another account here, which the run directory %s (uid %u's, mode "
			 "0700) refuses; run it with --userns=host",
			 uid, s->rundir, (unsigned)geteuid());
		return err;
	}
	/* A rootless engine runs the container's root as the engine's user. */
	long want = strstr(info, "name=rootless") ? 0 : (long)geteuid();
	if (uid != want) {
		snprintf(err, len,
			 "the container runs as uid %ld%s, but the run directory %s is uid %u's "
			 "(mode 0700, so that no other account controls or reads it): its "
			 "processes could not join and would run with no control; give --user %ld "
			 "or run faultctl as uid %ld",
			 uid, user ? " (--user)" : " (the image's USER)", s->rundir,
			 (unsigned)geteuid(), want, uid);
		return err;
	}
	return NULL;
}

/* faultctl's own options; the index of the first one that is not. */
static int own_options(struct setup *s, int argc, char **argv, int i, bool docker)
{
	for (; i < argc; i++) {
		if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
			s->config = argv[++i];
		else if (strcmp(argv[i], "--zone") == 0 && i + 1 < argc)
			s->zone = argv[++i];
		else if (strcmp(argv[i], "-g") == 0 && i + 1 < argc)
			s->group = argv[++i];
		else if (docker && strcmp(argv[i], "--stats") == 0)
			s->stats = true;
		else if (docker && strcmp(argv[i], "--docker") == 0 && i + 1 < argc)
			s->docker = argv[++i];
		else
			break;
	}
	return i;
}

/* The bundle, the policy (checked as the shim would read it) and the run
 * directory; false after saying why. */
static bool prepare(struct setup *s, const char *verb)
{
	char err[PATH_MAX + 512];
	if (s->group && !fn_group_valid(s->group)) {
		fprintf(stderr,
			"faultctl %s: -g: a group name is 1 to 63 letters, digits or _.:-\n", verb);
		return false;
	}
	if (fn_bundle_find(&s->b, err, sizeof(err))) {
		fprintf(stderr, "faultctl %s: %s\n", verb, err);
		return false;
	}
	if (s->config) {
		if (!realpath(s->config, s->policy)) {
			fprintf(stderr, "faultctl %s: --config %s: %s\n", verb, s->config,
				strerror(errno));
			return false;
		}
		struct fn_policy *p = fn_config_load_file(s->policy, s->zone, err, sizeof(err));
		if (!p) {
			fprintf(stderr, "faultctl %s: %s\n", verb, err);
			return false;
		}
		run_warn_broad(s->config, p);
		fn_policy_free(p);
		snprintf(s->policy_dir, sizeof(s->policy_dir), "%s", s->policy);
		dirname(s->policy_dir);
	}
	const char *why = fn_rundir(s->rundir, sizeof(s->rundir));
	if (why) {
		fprintf(stderr, "faultctl %s: run directory: %s\n", verb, why);
		return false;
	}
	return true;
}

/* docker run's options that take no value (the others take one: the
 * next word, or after '=', or glued to a short letter). */
static bool flag_alone(const char *o)
{
	static const char *const longs[] = {"--detach",
					    "--interactive",
					    "--tty",
					    "--rm",
					    "--init",
					    "--privileged",
					    "--publish-all",
					    "--read-only",
					    "--no-healthcheck",
					    "--oom-kill-disable",
					    "--disable-content-trust",
					    "--quiet",
					    "--sig-proxy",
					    NULL};
	if (o[1] == '-') {
		if (strchr(o, '='))
			return true;
		for (int i = 0; longs[i]; i++)
			if (strcmp(o, longs[i]) == 0)
				return true;
		return false;
	}
	/* -it, -d, -P: only letters that take no value; -eX=1: a value glued. */
	if (!strchr("dtiPq", o[1]))
		return o[2] != '\0';
	return !strchr("acehlmpuvw", o[strlen(o) - 1]);
}

/* The image's index in argv (docker run's options before it); --user's
 * value in *user; -1 on a user-given LD_PRELOAD, said why. */
static int find_image(int argc, char **argv, int i, const char **user)
{
	for (; i < argc && argv[i][0] == '-' && argv[i][1]; i++) {
		const char *o = argv[i];
		const char *val = NULL;
		if (!flag_alone(o) && i + 1 < argc)
			val = argv[++i];
		else if (strncmp(o, "--user=", 7) == 0)
			val = o + 7;
		else if (strncmp(o, "-u", 2) == 0 && o[2])
			val = o + 2;
		else if (strncmp(o, "-e", 2) == 0 || strncmp(o, "--env=", 6) == 0)
			val = o + (o[1] == 'e' ? 2 : 6);
		if (strcmp(o, "-u") == 0 || strcmp(o, "--user") == 0 ||
		    strncmp(o, "--user=", 7) == 0 || (strncmp(o, "-u", 2) == 0 && o[2]))
			*user = val;
		bool env = strcmp(o, "-e") == 0 || strcmp(o, "--env") == 0 ||
			   strncmp(o, "-e", 2) == 0 || strncmp(o, "--env=", 6) == 0;
		if (env && val && strncmp(val, "LD_PRELOAD", 10) == 0) {
			fprintf(stderr,
				"faultctl docker run: -e %s: LD_PRELOAD is faultctl's to set "
				"(the bundle's shim); the container's own would replace it\n",
				val);
			return -1;
		}
	}
	return i;
}

static void add(char **v, int *n, const char *fmt, const char *a, const char *b)
{
	char buf[2 * PATH_MAX + 64];
	snprintf(buf, sizeof(buf), fmt, a, b ? b : "");
	v[(*n)++] = strdup(buf);
}

/* The docker run options faultctl adds (also the Compose override's). */
static int added_options(struct setup *s, char **v, int n)
{
	v[n++] = "-v";
	add(v, &n, "%s:" IN_IMAGE ":ro", s->b.dir, NULL);
	v[n++] = "-v";
	add(v, &n, "%s:%s", s->rundir, s->rundir);
	v[n++] = "-e";
	add(v, &n, "LD_PRELOAD=" IN_IMAGE "/libfaultnet.so", NULL, NULL);
	v[n++] = "-e";
	add(v, &n, "FAULTNET_RUNDIR=%s", s->rundir, NULL);
	v[n++] = "-e";
	add(v, &n, "FAULTNET_GROUP=%s", s->group ? s->group : FN_GROUP_DEFAULT, NULL);
	if (s->config) {
		v[n++] = "-v";
		add(v, &n, "%s:%s:ro", s->policy_dir, s->policy_dir);
		v[n++] = "-e";
		add(v, &n, "FAULTNET_CONFIG=%s", s->policy, NULL);
	}
	if (s->zone) {
		v[n++] = "-e";
		add(v, &n, "FAULTNET_ZONE=%s", s->zone, NULL);
	}
	if (s->stats) {
		v[n++] = "-v";
		add(v, &n, "%s:%s", s->statsdir, s->statsdir);
		v[n++] = "-e";
		add(v, &n, "FAULTNET_STATS_DIR=%s", s->statsdir, NULL);
	}
	return n;
}

static int docker_check(struct setup *s, const char *image)
{
	char err[PATH_MAX + 512], found[64];
	if (!prepare(s, "docker check"))
		return 1;
	if (check_image(s, image, found, sizeof(found), err, sizeof(err))) {
		fprintf(stderr, "faultctl docker check: refused: %s: %s\n", image, err);
		return 1;
	}
	printf("faultctl docker check: %s: %s, the bundle needs glibc %s: ok\n", image, found,
	       s->b.glibc);
	return 0;
}

static int docker_usage(void)
{
	fprintf(stderr,
		"usage: faultctl docker run [--config FILE] [--zone Z] [-g GROUP] [--stats] "
		"[--docker PROG] [docker run options] IMAGE [CMD...]\n"
		"       faultctl docker check [--docker PROG] IMAGE\n");
	return 2;
}

int cmd_docker(int argc, char **argv, const char *group)
{
	struct setup s = {.group = group, .docker = getenv("FAULTNET_DOCKER")};
	if (!s.docker || !*s.docker)
		s.docker = "docker";
	if (argc < 1 || (strcmp(argv[0], "run") && strcmp(argv[0], "check")))
		return docker_usage();
	int i = own_options(&s, argc, argv, 1, true);
	if (strcmp(argv[0], "check") == 0)
		return i + 1 == argc ? docker_check(&s, argv[i]) : docker_usage();
	const char *user = NULL;
	int img = find_image(argc, argv, i, &user);
	if (img < 0)
		return 2;
	if (img >= argc)
		return docker_usage();
	if (!prepare(&s, "docker run"))
		return 1;
	char err[PATH_MAX + 512], found[64];
	if (check_image(&s, argv[img], found, sizeof(found), err, sizeof(err)) ||
	    check_uid(&s, user, argv[img], err, sizeof(err))) {
		fprintf(stderr, "faultctl docker run: refused: %s: %s\n", argv[img], err);
		return 1;
	}
	snprintf(s.statsdir, sizeof(s.statsdir), "/tmp/faultctl-stats-XXXXXX");
	if (s.stats && !mkdtemp(s.statsdir)) {
		perror("faultctl docker run: stats directory");
		return 1;
	}
	char **v = calloc(argc + 32, sizeof(*v));
	int n = 0;
	v[n++] = (char *)s.docker;
	v[n++] = "run";
	n = added_options(&s, v, n);
	for (int k = i; k < argc; k++)
		v[n++] = argv[k];
	if (!s.stats) {
		execvp(v[0], v);
		fprintf(stderr, "faultctl docker run: %s: %s\n", v[0], strerror(errno));
		return 127;
	}
	int rc = spawn(v, NULL, 0, false);
	run_print_stats(s.statsdir, false);
	return rc < 0 ? 127 : rc;
}

/* One service's part of the override: what docker run gets above. */
static void compose_service(FILE *f, struct setup *s, const char *name)
{
	char *v[32];
	int n = added_options(s, v, 0);
	fprintf(f, "  %s:\n    volumes:\n", name);
	for (int k = 0; k + 1 < n; k += 2)
		if (strcmp(v[k], "-v") == 0)
			fprintf(f, "      - \"%s\"\n", v[k + 1]);
	fprintf(f, "    environment:\n");
	for (int k = 0; k + 1 < n; k += 2)
		if (strcmp(v[k], "-e") == 0) {
			char *eq = strchr(v[k + 1], '=');
			fprintf(f, "      %.*s: \"%s\"\n", (int)(eq - v[k + 1]), v[k + 1], eq + 1);
		}
	for (int k = 0; k < n; k++)
		if (strcmp(v[k], "-v") && strcmp(v[k], "-e"))
			free(v[k]);
}

int cmd_compose(int argc, char **argv, const char *group)
{
	struct setup s = {.group = group};
	const char *out = NULL, *version = NULL;
	int i = 0;
	for (;;) {
		i = own_options(&s, argc, argv, i, false);
		if (i + 1 < argc && strcmp(argv[i], "-o") == 0)
			out = argv[++i], i++;
		else if (i + 1 < argc && strcmp(argv[i], "--version") == 0)
			version = argv[++i], i++;
		else
			break;
	}
	if (i >= argc || argv[i][0] == '-') {
		fprintf(stderr, "usage: faultctl compose [--config FILE] [--zone Z] [-g GROUP] "
				"[--version V] [-o FILE] SERVICE...\n");
		return 2;
	}
	if (!prepare(&s, "compose"))
		return 1;
	FILE *f = out ? fopen(out, "w") : stdout;
	if (!f) {
		fprintf(stderr, "faultctl compose: -o %s: %s\n", out, strerror(errno));
		return 1;
	}
	fprintf(f, "# Written by faultctl compose: the services below run under faultnet\n"
		   "# (docker-compose -f YOUR-FILE -f THIS-FILE up). Check each image first:\n"
		   "# faultctl docker check IMAGE.\n");
	if (version)
		fprintf(f, "version: \"%s\"\n", version);
	fprintf(f, "services:\n");
	for (; i < argc; i++)
		compose_service(f, &s, argv[i]);
	if (out && fclose(f) != 0) {
		fprintf(stderr, "faultctl compose: -o %s: %s\n", out, strerror(errno));
		return 1;
	}
	return 0;
}
