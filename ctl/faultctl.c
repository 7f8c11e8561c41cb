/* faultctl.c - the faultnet command line: checks policy files and runs
 * commands under the shim. Grammar in the style of ip(8): a verb, then its
 * arguments. */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../preload/config.h"

static const char usage[] = "usage: faultctl check FILE\n"
			    "       faultctl run [--config FILE] [--zone ZONE] -- CMD [ARG...]\n"
			    "       faultctl help\n";

/* faultctl check FILE: the shim's own parser and messages. */
static int cmd_check(int argc, char **argv)
{
	if (argc != 1) {
		fputs(usage, stderr);
		return 2;
	}
	char err[1024];
	struct fn_policy *p = fn_config_load_file(argv[0], NULL, err, sizeof(err));
	if (!p) {
		fprintf(stderr, "faultctl: %s\n", err);
		return 1;
	}
	size_t on = 0;
	for (size_t i = 0; i < p->nrules; i++)
		on += p->rules[i].enabled;
	printf("%s: ok (%zu zones, %zu rules, %zu enabled)\n", argv[0], p->nzones, p->nrules, on);
	fn_policy_free(p);
	return 0;
}

/* The shim sits next to faultctl in the build tree (build/) and in ../lib
 * in an install tree (PREFIX/bin, PREFIX/lib). */
static int find_library(char *out, size_t len)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n < 0)
		return -1;
	self[n] = '\0';
	const char *dir = dirname(self);
	const char *const tries[] = {"%s/libfaultnet.so", "%s/../lib/libfaultnet.so"};
	for (size_t i = 0; i < sizeof(tries) / sizeof(tries[0]); i++) {
		snprintf(out, len, tries[i], dir);
		if (access(out, R_OK) == 0)
			return 0;
	}
	return -1;
}

static int set_preload(void)
{
	char lib[PATH_MAX + 32], value[2 * PATH_MAX + 64];
	if (find_library(lib, sizeof(lib)) < 0) {
		fprintf(stderr,
			"faultctl: libfaultnet.so not found next to faultctl or in ../lib\n");
		return -1;
	}
	/* After what is there already: a sanitizer runtime must stay first. */
	const char *old = getenv("LD_PRELOAD");
	snprintf(value, sizeof(value), "%s%s%s", old ? old : "", old && *old ? ":" : "", lib);
	return setenv("LD_PRELOAD", value, 1);
}

static int set_config(const char *file)
{
	char abs[PATH_MAX], err[1024];
	if (!realpath(file, abs)) {
		fprintf(stderr, "faultctl: --config %s: %s\n", file, strerror(errno));
		return -1;
	}
	/* Refuse a bad file here, with the same message the shim would give. */
	struct fn_policy *p = fn_config_load_file(abs, getenv("FAULTNET_ZONE"), err, sizeof(err));
	if (!p) {
		fprintf(stderr, "faultctl: %s\n", err);
		return -1;
	}
	fn_policy_free(p);
	return setenv("FAULTNET_CONFIG", abs, 1);
}

static int cmd_run(int argc, char **argv)
{
	int i = 0;
	const char *config = NULL;
	for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
		if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
			config = argv[++i];
		} else if (strcmp(argv[i], "--zone") == 0 && i + 1 < argc) {
			setenv("FAULTNET_ZONE", argv[++i], 1);
		} else {
			fprintf(stderr, "faultctl run: unknown option '%s'\n%s", argv[i], usage);
			return 2;
		}
	}
	if (i + 1 >= argc) {
		fprintf(stderr, "faultctl run: no command after --\n%s", usage);
		return 2;
	}
	if (config && set_config(config) < 0)
		return FN_EXIT_CONFIG;
	if (set_preload() < 0)
		return 1;
	execvp(argv[i + 1], argv + i + 1);
	fprintf(stderr, "faultctl run: %s: %s\n", argv[i + 1], strerror(errno));
	return errno == ENOENT ? 127 : 126;
}

int main(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0) {
		fputs(usage, argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (strcmp(argv[1], "check") == 0)
		return cmd_check(argc - 2, argv + 2);
	if (strcmp(argv[1], "run") == 0)
		return cmd_run(argc - 2, argv + 2);
	fprintf(stderr, "faultctl: unknown command '%s'\n%s", argv[1], usage);
	return 2;
}
