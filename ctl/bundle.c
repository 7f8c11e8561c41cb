/* bundle.c - the self-contained bundle (make bundle, scripts/bundle.sh):
 * found beside faultctl, its needs read from faultnet-bundle.txt, and
 * checked against the C library of a root before anything is started in
 * it. The check matters because the loader only warns when it cannot load
 * a preload: the app would run with no faults, a silent green. */
#include "ctl/bundle.h"

#include <elf.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MANIFEST "faultnet-bundle.txt"

/* glibc's first (the bundle's own kind), then musl's loader. */
const char *const fn_libc_paths[] = {
    "lib/x86_64-linux-gnu/libc.so.6",
    "usr/lib/x86_64-linux-gnu/libc.so.6",
    "lib/aarch64-linux-gnu/libc.so.6",
    "usr/lib/aarch64-linux-gnu/libc.so.6",
    "lib64/libc.so.6",
    "usr/lib64/libc.so.6",
    "lib/libc.so.6",
    "usr/lib/libc.so.6",
    "lib/ld-musl-x86_64.so.1",
    "lib/ld-musl-aarch64.so.1",
    NULL,
};

static bool read_manifest(struct fn_bundle *b, char *err, size_t len)
{
	char path[PATH_MAX + 32], line[512];
	snprintf(path, sizeof(path), "%s/" MANIFEST, b->dir);
	FILE *f = fopen(path, "r");
	if (!f)
		return false;
	b->arch[0] = b->glibc[0] = '\0';
	while (fgets(line, sizeof(line), f)) {
		sscanf(line, "arch %31s", b->arch);
		sscanf(line, "glibc %31s", b->glibc);
	}
	fclose(f);
	if (!b->arch[0] || !b->glibc[0]) {
		snprintf(err, len, "%s: no 'arch' or 'glibc' line (made by scripts/bundle.sh?)",
			 path);
		return false;
	}
	return true;
}

const char *fn_bundle_find(struct fn_bundle *b, char *err, size_t len)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	self[n > 0 ? n : 0] = '\0';
	const char *dir = dirname(self);
	const char *env = getenv("FAULTNET_BUNDLE");
	err[0] = '\0';
	for (int i = 0; i < 3; i++) {
		if (i == 0 && !(env && *env))
			continue;
		if (i == 0)
			snprintf(b->dir, sizeof(b->dir), "%s", env);
		else
			snprintf(b->dir, sizeof(b->dir),
				 i == 1 ? "%s/bundle" : "%s/../lib/faultnet/bundle", dir);
		char real[PATH_MAX];
		if (realpath(b->dir, real))
			snprintf(b->dir, sizeof(b->dir), "%s", real);
		if (read_manifest(b, err, len))
			return NULL;
		if (err[0])
			return err;
		if (i == 0) {
			snprintf(err, len, "FAULTNET_BUNDLE=%s: no %s there", env, MANIFEST);
			return err;
		}
	}
	snprintf(err, len,
		 "no bundle beside faultctl (%s/bundle) nor in %s/../lib/faultnet/bundle: "
		 "'make bundle' makes one",
		 dir, dir);
	return err;
}

/* "2.36" against "2.34": <0, 0, >0. */
static int vercmp(const char *a, const char *b)
{
	while (*a || *b) {
		long x = strtol(a, (char **)&a, 10), y = strtol(b, (char **)&b, 10);
		if (x != y)
			return x < y ? -1 : 1;
		a += *a == '.';
		b += *b == '.';
		if (!*a && !*b)
			break;
	}
	return 0;
}

/* A file under root, its symlinks resolved as if root were / (an image's
 * absolute links point into the image, not into this machine). */
static int open_in_root(int rootfd, const char *rel)
{
	struct open_how how = {.flags = O_RDONLY | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT};
	return (int)syscall(SYS_openat2, rootfd, rel, &how, sizeof(how));
}

static unsigned machine_of(const char *arch)
{
	return strcmp(arch, "x86_64") == 0    ? EM_X86_64
	       : strcmp(arch, "aarch64") == 0 ? EM_AARCH64
					      : 0;
}

/* The newest GLIBC_x.y a C library defines: the names of its version
 * definitions are strings of the file ("GLIBC_2.36"); it has none newer. */
static bool newest_glibc(const char *data, size_t n, char *out, size_t len)
{
	out[0] = '\0';
	for (const char *p = data; (p = memmem(p, n - (p - data), "GLIBC_2.", 8)); p += 8) {
		char v[32];
		size_t k = 0;
		for (const char *q = p + 6;
		     q < data + n && k + 1 < sizeof(v) && ((*q >= '0' && *q <= '9') || *q == '.');
		     q++)
			v[k++] = *q;
		v[k] = '\0';
		if (k && v[k - 1] != '.' && (!out[0] || vercmp(v, out) > 0))
			snprintf(out, len, "%s", v);
	}
	return out[0] != '\0';
}

static char *slurp(int fd, size_t *n)
{
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return NULL;
	char *buf = malloc(st.st_size + 1);
	size_t got = 0;
	ssize_t r;
	while (buf && got < (size_t)st.st_size && (r = read(fd, buf + got, st.st_size - got)) > 0)
		got += r;
	*n = got;
	return buf;
}

/* One C library file checked: NULL when the bundle runs with it. */
static const char *check_libc(const struct fn_bundle *b, const char *rel, const char *data,
			      size_t n, char *found, size_t flen, char *err, size_t len)
{
	const Elf64_Ehdr *eh = (const void *)data;
	if (n < sizeof(*eh) || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0) {
		snprintf(err, len, "/%s is not an ELF file", rel);
		return err;
	}
	if (strstr(rel, "musl")) {
		snprintf(found, flen, "musl");
		snprintf(err, len,
			 "the image's C library is musl (/%s): the bundle is built for glibc, "
			 "its preload would not load and the app would run with no faults",
			 rel);
		return err;
	}
	if (eh->e_machine != machine_of(b->arch)) {
		snprintf(err, len, "/%s is for another machine than the bundle's (%s)", rel,
			 b->arch);
		return err;
	}
	char v[32];
	if (!newest_glibc(data, n, v, sizeof(v))) {
		snprintf(err, len, "/%s defines no GLIBC_ version: not glibc", rel);
		return err;
	}
	snprintf(found, flen, "glibc %s", v);
	if (vercmp(v, b->glibc) < 0) {
		snprintf(err, len,
			 "the image's glibc is %s (/%s), older than the %s the bundle needs: its "
			 "preload would not load and the app would run with no faults",
			 v, rel, b->glibc);
		return err;
	}
	return NULL;
}

const char *fn_bundle_check_root(const struct fn_bundle *b, const char *root, char *found,
				 size_t flen, char *err, size_t len)
{
	char dummy[32];
	if (!found)
		found = dummy, flen = sizeof(dummy);
	found[0] = '\0';
	int rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0) {
		snprintf(err, len, "%s: cannot open the root", root);
		return err;
	}
	const char *why = NULL;
	bool seen = false;
	for (int i = 0; fn_libc_paths[i] && !seen; i++) {
		int fd = open_in_root(rootfd, fn_libc_paths[i]);
		if (fd < 0)
			continue;
		size_t n = 0;
		char *data = slurp(fd, &n);
		close(fd);
		if (!data)
			continue;
		seen = true;
		why = check_libc(b, fn_libc_paths[i], data, n, found, flen, err, len);
		free(data);
	}
	close(rootfd);
	if (!seen) {
		snprintf(err, len,
			 "%s: no C library found (no glibc libc.so.6, no musl loader): a static "
			 "or distroless image cannot load the preload",
			 root);
		return err;
	}
	return why;
}

int cmd_bundle(int argc, char **argv)
{
	struct fn_bundle b;
	char err[PATH_MAX + 512], found[64];
	if (argc > 0 && strcmp(argv[0], "check") != 0) {
		fprintf(stderr, "usage: faultctl bundle [check ROOT]\n");
		return 2;
	}
	if (argc == 1 || argc > 2) {
		fprintf(stderr, "usage: faultctl bundle check ROOT\n");
		return 2;
	}
	if (fn_bundle_find(&b, err, sizeof(err))) {
		fprintf(stderr, "faultctl bundle: %s\n", err);
		return 1;
	}
	if (argc == 0) {
		printf("bundle %s\narch %s\nneeds glibc %s or newer\n", b.dir, b.arch, b.glibc);
		return 0;
	}
	if (fn_bundle_check_root(&b, argv[1], found, sizeof(found), err, sizeof(err))) {
		fprintf(stderr, "faultctl bundle: refused: %s\n", err);
		return 1;
	}
	printf("faultctl bundle: %s: %s, the bundle needs glibc %s: ok\n", argv[1], found, b.glibc);
	return 0;
}
