/* test_rundir.c - the group's change counter file: one page, grown and
 * never shrunk, shared between a writer (faultctl) and readers (members),
 * and refused when it is not a private regular file of this user. */
#include <CUnit/CUnit.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/pathcat.h"
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

/* A member's name carries its id whole, whatever its group holds: two
 * pid namespaces' pid 1 are two names, and the parse gives back what
 * fn_mem_path wrote. */
static void test_member_names(void)
{
	const struct fn_member_id a = {.pid = 1, .ns = 4026532370u, .start = 77},
				  b = {.pid = 1, .ns = 4026532372u, .start = 77};
	char pa[200], pb[200], group[64];
	CU_ASSERT_TRUE(fn_mem_path(pa, sizeof(pa), "/r", "g.1.2", &a));
	CU_ASSERT_TRUE(fn_mem_path(pb, sizeof(pb), "/r", "g.1.2", &b));
	CU_ASSERT_STRING_NOT_EQUAL(pa, pb);
	struct fn_member_id got;
	const char *ext;
	CU_ASSERT_TRUE(fn_member_name(pa + 3, group, sizeof(group), &got, &ext));
	CU_ASSERT_STRING_EQUAL(group, "g.1.2");
	CU_ASSERT_STRING_EQUAL(ext, ".mem");
	CU_ASSERT_TRUE(got.pid == 1 && got.ns == a.ns && got.start == 77);
	CU_ASSERT_TRUE(fn_member_name("g.5.6.7.done", group, sizeof(group), &got, &ext));
	CU_ASSERT_TRUE(got.pid == 5 && got.ns == 6 && got.start == 7 && !strcmp(ext, ".done"));
	CU_ASSERT_TRUE(fn_member_name("g.42.sock", group, sizeof(group), &got, &ext));
	CU_ASSERT_TRUE(got.pid == 42 && got.ns == 0 && !strcmp(group, "g"));
	/* an earlier faultnet's GROUP.PID.mem, a dot file, no group, pid 0 */
	CU_ASSERT_FALSE(fn_member_name("g.42.mem", group, sizeof(group), &got, &ext));
	CU_ASSERT_FALSE(fn_member_name(".g.1.2.3.mem", group, sizeof(group), &got, &ext));
	CU_ASSERT_FALSE(fn_member_name("1.2.3.mem", group, sizeof(group), &got, &ext));
	CU_ASSERT_FALSE(fn_member_name("g.0.2.3.mem", group, sizeof(group), &got, &ext));
	CU_ASSERT_FALSE(fn_member_name("g.1.2.3.seq", group, sizeof(group), &got, &ext));
	CU_ASSERT_FALSE(fn_member_name("toolong.1.2.3.mem", group, 4, &got, &ext));
	const struct fn_member_id any = {.pid = 1, .start = 77};
	CU_ASSERT_TRUE(fn_member_is(&a, &a) && fn_member_is(&any, &b));
	CU_ASSERT_FALSE(fn_member_is(&a, &b));
}

/* Held while an open file of it holds the lock, even with every fd of
 * that open file closed but a mapping; free once the mapping goes. */
static void test_member_held(void)
{
	char path[] = "/tmp/fn-held-XXXXXX";
	int fd = mkstemp(path);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL(ftruncate(fd, 4096), 0);
	int other = open(path, O_RDONLY | O_CLOEXEC);
	CU_ASSERT_FALSE(fn_member_held(other));
	CU_ASSERT_FALSE(fn_member_held(other)); /* the try let its lock go */
	CU_ASSERT_EQUAL(flock(fd, LOCK_EX | LOCK_NB), 0);
	void *m = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
	CU_ASSERT_FATAL(m != MAP_FAILED);
	close(fd);
	CU_ASSERT_TRUE(fn_member_held(other));
	munmap(m, 4096);
	CU_ASSERT_FALSE(fn_member_held(other));
	close(other);
	unlink(path);
}

/* A reader that found a member's file free renames it to its .done, but
 * not a file that took the name after the reader opened the old one (an
 * exec'd image's own, under the same name): that rename is undone. */
static void test_member_gone_if(void)
{
	char dir[] = "/tmp/fn-gone-XXXXXX", mem[100], done[100], other[100];
	CU_ASSERT_FATAL(mkdtemp(dir) != NULL);
	snprintf(mem, sizeof(mem), "%s/g.1.2.3.mem", dir);
	snprintf(done, sizeof(done), "%s/g.1.2.3.done", dir);
	snprintf(other, sizeof(other), "%s/new", dir);
	int old = open(mem, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	close(open(other, O_RDWR | O_CREAT | O_CLOEXEC, 0600));
	CU_ASSERT_EQUAL(rename(other, mem), 0); /* the new image's file */
	fn_member_gone_if(mem, old);
	CU_ASSERT_EQUAL(access(mem, F_OK), 0);
	CU_ASSERT_NOT_EQUAL(access(done, F_OK), 0);
	close(old);
	old = open(mem, O_RDONLY | O_CLOEXEC); /* now the one found free */
	fn_member_gone_if(mem, old);
	CU_ASSERT_NOT_EQUAL(access(mem, F_OK), 0);
	CU_ASSERT_EQUAL(access(done, F_OK), 0);
	close(old);
	unlink(done);
	rmdir(dir);
}

/* What /proc/self/cmdline holds for this process, at most len - 1 bytes. */
static size_t proc_cmdline(char *buf, size_t len)
{
	int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, len - 1) : -1;
	if (fd >= 0)
		close(fd);
	return n > 0 ? (size_t)n : 0;
}

/* The member's command line (issue 42): /proc/self/cmdline until the
 * constructor's arguments are noted, then those arguments as laid out,
 * NULs kept, cut at the room given; arguments not one after the other (a
 * loader that copied them) are not taken. */
static void test_self_cmd(void)
{
	char want[512], got[512];
	size_t wn = proc_cmdline(want, sizeof(want));
	CU_ASSERT_TRUE(wn > 0);
	CU_ASSERT_EQUAL(fn_self_cmd(got, sizeof(got)), wn);
	CU_ASSERT_EQUAL(memcmp(got, want, wn), 0);
	static char gap[] = "x\0\0prog"; /* a byte between the two strings */
	char *scattered[] = {gap, gap + 3};
	fn_self_cmd_note(2, scattered);
	fn_self_cmd_note(0, scattered);
	CU_ASSERT_EQUAL(fn_self_cmd(got, sizeof(got)), wn); /* still the file's */
	static char area[] = "prog\0a b\0c";
	char *argv[] = {area, area + 5, area + 9, NULL};
	fn_self_cmd_note(3, argv);
	CU_ASSERT_EQUAL(fn_self_cmd(got, sizeof(got)), sizeof(area));
	CU_ASSERT_EQUAL(memcmp(got, area, sizeof(area)), 0);
	CU_ASSERT_EQUAL(fn_self_cmd(got, 5), 4);
	CU_ASSERT_STRING_EQUAL(got, "prog");
	CU_ASSERT_EQUAL(fn_self_cmd(got, 1), 0);
	CU_ASSERT_EQUAL(got[0], '\0');
}

/* Paths put together by hand (core/pathcat.h) are what snprintf makes of
 * the same parts, cut where snprintf cuts; numbers too. */
static void test_pathcat_as_printf(void)
{
	static const char *const a[] = {"", "/", "/tmp/faultnet-run", "0123456789abcdef"};
	for (size_t len = 1; len < 40; len++)
		for (size_t i = 0; i < 4; i++)
			for (size_t j = 0; j < 4; j++) {
				char got[64], want[64];
				int n = snprintf(want, len, "%s/x%s", a[i], a[j]);
				bool fits = FN_PATHCAT(got, len, a[i], "/x", a[j]);
				CU_ASSERT_STRING_EQUAL(got, want);
				CU_ASSERT_EQUAL(fits, (size_t)n < len);
			}
	static const uint64_t v[] = {0, 1, 9, 10, 4095, 65534, 4294967295u, UINT64_MAX};
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		char buf[FN_UTOA_MAX], want[64];
		snprintf(want, sizeof(want), "%llu", (unsigned long long)v[i]);
		CU_ASSERT_STRING_EQUAL(fn_utoa(buf, v[i], 10, 0), want);
		snprintf(want, sizeof(want), "%016llx", (unsigned long long)v[i]);
		CU_ASSERT_STRING_EQUAL(fn_utoa(buf, v[i], 16, 16), want);
	}
}

/* The run directory each variable names, as the shim and faultctl found
 * it when it was made with snprintf. */
static void test_rundir_names(void)
{
	char dir[] = "/tmp/fn-rundir-XXXXXX", out[4096], want[4200], cwd[4096];
	CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
	CU_ASSERT_PTR_NOT_NULL_FATAL(getcwd(cwd, sizeof(cwd)));
	const char *old = getenv("FAULTNET_RUNDIR"), *oldx = getenv("XDG_RUNTIME_DIR");
	char *saved = old ? strdup(old) : NULL, *savedx = oldx ? strdup(oldx) : NULL;
	CU_ASSERT_EQUAL_FATAL(chdir(dir), 0);
	setenv("FAULTNET_RUNDIR", "rel", 1);
	CU_ASSERT_PTR_NULL(fn_rundir(out, sizeof(out)));
	snprintf(want, sizeof(want), "%s/rel", dir);
	CU_ASSERT_STRING_EQUAL(out, want);
	unsetenv("FAULTNET_RUNDIR");
	setenv("XDG_RUNTIME_DIR", dir, 1);
	CU_ASSERT_PTR_NULL(fn_rundir(out, sizeof(out)));
	snprintf(want, sizeof(want), "%s/faultnet", dir);
	CU_ASSERT_STRING_EQUAL(out, want);
	unsetenv("XDG_RUNTIME_DIR");
	fn_rundir(out, sizeof(out));
	snprintf(want, sizeof(want), "/tmp/faultnet-%u", (unsigned)geteuid());
	struct stat sb;
	/* Someone else's /tmp/faultnet-UID sends it to the home directory. */
	if (lstat(want, &sb) == 0 && sb.st_uid == geteuid() && S_ISDIR(sb.st_mode))
		CU_ASSERT_STRING_EQUAL(out, want);
	CU_ASSERT_EQUAL(chdir(cwd), 0);
	if (saved)
		setenv("FAULTNET_RUNDIR", saved, 1);
	if (savedx)
		setenv("XDG_RUNTIME_DIR", savedx, 1);
	free(saved);
	free(savedx);
	snprintf(want, sizeof(want), "rm -rf %s", dir);
	CU_ASSERT_EQUAL(system(want), 0);
}

void add_rundir_tests(void)
{
	CU_pSuite s = CU_add_suite("run directory", NULL, NULL);
	CU_add_test(s, "the group's change counter", test_seq_shared);
	CU_add_test(s, "i38.18: a symbolic link, however spelt (a trailing slash too)",
		    test_rundir_symlink);
	CU_add_test(s, "members' names: the id whole, across pid namespaces", test_member_names);
	CU_add_test(s, "a member's lock, kept by its mapping", test_member_held);
	CU_add_test(s, "a free member's file kept as .done, not its successor",
		    test_member_gone_if);
	CU_add_test(s, "the member's command line, from the noted arguments", test_self_cmd);
	CU_add_test(s, "paths and numbers put together without printf, as printf would",
		    test_pathcat_as_printf);
	CU_add_test(s, "the run directory each variable names", test_rundir_names);
}
