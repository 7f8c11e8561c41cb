/* test_rundir.c - the group's change counter file: one page, grown and
 * never shrunk, shared between a writer (faultctl) and readers (members),
 * and refused when it is not a private regular file of this user. */
#include <CUnit/CUnit.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/rundir.h"

static int open_seq(const char *dir, const char *name, mode_t mode)
{
	char path[256];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd >= 0)
		fchmod(fd, mode);
	return fd;
}

/* fd is not a counter to trust: no mapping, EPERM. Closes fd. */
static void refused(int fd)
{
	CU_ASSERT_TRUE_FATAL(fd >= 0);
	errno = 0;
	CU_ASSERT_PTR_NULL(fn_seq_map(fd, false));
	CU_ASSERT_EQUAL(errno, EPERM);
	close(fd);
}

static void test_seq_shared(void)
{
	char dir[] = "/tmp/fn-seq-XXXXXX";
	CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
	int wfd = open_seq(dir, "g.seq", 0600), rfd = open_seq(dir, "g.seq", 0600);
	uint64_t *w = fn_seq_map(wfd, true);
	const uint64_t *r = fn_seq_map(rfd, false);
	CU_ASSERT_PTR_NOT_NULL_FATAL(w);
	CU_ASSERT_PTR_NOT_NULL_FATAL(r);
	struct stat sb;
	fstat(rfd, &sb);
	CU_ASSERT_EQUAL(sb.st_size, FN_SEQ_FILE_SIZE); /* grown from 0 */
	CU_ASSERT_EQUAL(*r, 0);
	__atomic_store_n(w, 42, __ATOMIC_RELEASE);
	CU_ASSERT_EQUAL(__atomic_load_n(r, __ATOMIC_ACQUIRE), 42); /* another mapping sees it */
	/* A longer file is left as it is. */
	ftruncate(wfd, 3 * FN_SEQ_FILE_SIZE);
	CU_ASSERT_PTR_NOT_NULL(fn_seq_map(wfd, false));
	fstat(wfd, &sb);
	CU_ASSERT_EQUAL(sb.st_size, 3 * FN_SEQ_FILE_SIZE);
	munmap(w, FN_SEQ_FILE_SIZE);
	munmap((void *)r, FN_SEQ_FILE_SIZE);
	close(wfd);
	close(rfd);
	/* Readable by others: not ours to trust. */
	refused(open_seq(dir, "open.seq", 0644));
	/* A directory is not a counter. */
	char sub[300];
	snprintf(sub, sizeof(sub), "%s/d.seq", dir);
	mkdir(sub, 0700);
	refused(open(sub, O_RDONLY | O_DIRECTORY));
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	CU_ASSERT_EQUAL(system(cmd), 0);
}

/* FAULTNET_RUNDIR naming a symbolic link is refused however it is spelt:
 * a trailing slash makes lstat follow the link. */
static void test_rundir_symlink(void)
{
	char dir[] = "/tmp/fn-rundir-XXXXXX";
	CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
	char target[300], link[300], out[4096];
	snprintf(target, sizeof(target), "%s/target", dir);
	snprintf(link, sizeof(link), "%s/link", dir);
	CU_ASSERT_EQUAL_FATAL(mkdir(target, 0700), 0);
	CU_ASSERT_EQUAL_FATAL(symlink(target, link), 0);
	const char *old = getenv("FAULTNET_RUNDIR");
	char *saved = old ? strdup(old) : NULL;
	static const char *const tails[] = {"", "/", "//", "/./"};
	for (size_t i = 0; i < sizeof(tails) / sizeof(tails[0]); i++) {
		char v[400];
		snprintf(v, sizeof(v), "%s%s", link, tails[i]);
		setenv("FAULTNET_RUNDIR", v, 1);
		const char *why = fn_rundir(out, sizeof(out));
		CU_ASSERT_PTR_NOT_NULL(why);
		if (why)
			CU_ASSERT_STRING_EQUAL(why, "is a symbolic link");
	}
	snprintf(out, sizeof(out), "%s/..", link);
	setenv("FAULTNET_RUNDIR", out, 1);
	CU_ASSERT_PTR_NOT_NULL(fn_rundir(out, sizeof(out)));
	/* The real directory, with a trailing slash, is accepted. */
	char v[400];
	snprintf(v, sizeof(v), "%s/", target);
	setenv("FAULTNET_RUNDIR", v, 1);
	CU_ASSERT_PTR_NULL(fn_rundir(out, sizeof(out)));
	if (saved)
		setenv("FAULTNET_RUNDIR", saved, 1);
	else
		unsetenv("FAULTNET_RUNDIR");
	free(saved);
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	CU_ASSERT_EQUAL(system(cmd), 0);
}

void add_rundir_tests(void)
{
	CU_pSuite s = CU_add_suite("run directory", NULL, NULL);
	CU_add_test(s, "the group's change counter", test_seq_shared);
	CU_add_test(s, "a symbolic link, however spelt", test_rundir_symlink);
}
