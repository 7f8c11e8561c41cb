/* test_locktab.c - the table of file locks (ctl/state/locktab.c): the
 * lines each kind of lock gives, and a lock this process takes found in
 * the kernel's own table, as faultctl finds a member's. */
#include <CUnit/CUnit.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "ctl/state/locktab.h"

static void test_lines(void)
{
	struct lock_entry e;
	CU_ASSERT_TRUE(locktab_parse("1: FLOCK  ADVISORY  WRITE 2761 fe:00:10989608 0 EOF\n", &e));
	CU_ASSERT_EQUAL(e.pid, 2761);
	CU_ASSERT_EQUAL(e.major, 0xfe);
	CU_ASSERT_EQUAL(e.minor, 0);
	CU_ASSERT_EQUAL(e.ino, 10989608);
	CU_ASSERT_TRUE(e.exclusive);
	CU_ASSERT_TRUE(locktab_parse("12: FLOCK  ADVISORY  READ  7 103:1a:42 0 EOF\n", &e));
	CU_ASSERT_EQUAL(e.major, 0x103);
	CU_ASSERT_EQUAL(e.minor, 0x1a);
	CU_ASSERT_FALSE(e.exclusive);
	/* a waiter holds nothing; other kinds are not a member's */
	CU_ASSERT_FALSE(
	    locktab_parse("1: -> FLOCK  ADVISORY  WRITE 2762 fe:00:10989608 0 EOF\n", &e));
	CU_ASSERT_FALSE(locktab_parse("3: POSIX  ADVISORY  WRITE 55 08:01:77 0 EOF\n", &e));
	CU_ASSERT_FALSE(locktab_parse("4: OFDLCK ADVISORY  WRITE -1 08:01:77 0 EOF\n", &e));
	CU_ASSERT_FALSE(locktab_parse("5: LEASE  ACTIVE    READ  9 08:01:77 0 EOF\n", &e));
	CU_ASSERT_FALSE(locktab_parse("6: FLOCK  ADVISORY  WRITE 9 <none>:0 0 EOF\n", &e));
	CU_ASSERT_FALSE(locktab_parse("7: FLOCK  ADVISORY  WRITE 9x 08:01:77 0 EOF\n", &e));
	CU_ASSERT_FALSE(locktab_parse("8: FLOCK  ADVISORY  WRITE 9 08:01:77x 0 EOF\n", &e));
	CU_ASSERT_FALSE(locktab_parse("9: FLOCK\n", &e));
	/* the tail of a waiter's line longer than the buffer, and no ID */
	CU_ASSERT_FALSE(locktab_parse("   -> FLOCK  ADVISORY  WRITE 9 08:01:77 0 EOF\n", &e));
	CU_ASSERT_FALSE(locktab_parse("x: FLOCK  ADVISORY  WRITE 9 08:01:77 0 EOF\n", &e));
	CU_ASSERT_FALSE(locktab_parse(": FLOCK  ADVISORY  WRITE 9 08:01:77 0 EOF\n", &e));
	CU_ASSERT_FALSE(locktab_parse("", &e));
}

/* The device the table shows for (ino, pid): st_dev's, except on a file
 * system whose superblock's differs from what stat says (btrfs). */
static bool listed_dev(const struct locktab *t, uint64_t ino, pid_t pid, unsigned *major,
		       unsigned *minor)
{
	for (int i = 0; i < t->n; i++)
		if (t->v[i].ino == ino && t->v[i].pid == pid) {
			*major = t->v[i].major;
			*minor = t->v[i].minor;
			return true;
		}
	return false;
}

/* A file of ours locked as a member locks its state file. */
static void test_own_lock(void)
{
	char path[] = "/tmp/fn-locktab-XXXXXX";
	int fd = mkstemp(path);
	CU_ASSERT_FATAL(fd >= 0);
	struct stat sb;
	CU_ASSERT_EQUAL_FATAL(fstat(fd, &sb), 0);
	CU_ASSERT_EQUAL(flock(fd, LOCK_EX), 0);
	struct locktab t = {0};
	locktab_read(&t, 0);
	CU_ASSERT_TRUE(t.whole);
	unsigned major = 0, minor = 0;
	CU_ASSERT_TRUE_FATAL(listed_dev(&t, sb.st_ino, getpid(), &major, &minor));
	bool same = major == major(sb.st_dev) && minor == minor(sb.st_dev);
	if (!same)
		printf("\n  (/tmp's file system shows another device in /proc/locks: "
		       "faultctl probes each file there)\n");
	CU_ASSERT_EQUAL(locktab_holds(&t, sb.st_dev, sb.st_ino, getpid()), same);
	CU_ASSERT_FALSE(locktab_holds(&t, sb.st_dev, sb.st_ino, getpid() + 1));
	CU_ASSERT_FALSE(locktab_holds(&t, sb.st_dev + 1, sb.st_ino, getpid()));
	CU_ASSERT_FALSE(locktab_holds(&t, sb.st_dev, sb.st_ino + 1, getpid()));
	/* read again in part: only a call for all of it reads it again */
	locktab_read(&t, 1);
	CU_ASSERT_TRUE(t.whole);
	locktab_free(&t);
	locktab_read(&t, 1);
	CU_ASSERT_TRUE(t.n <= 1);
	locktab_read(&t, 0);
	CU_ASSERT_TRUE(t.whole && listed_dev(&t, sb.st_ino, getpid(), &major, &minor));
	locktab_free(&t);
	/* shared: not a member's lock */
	CU_ASSERT_EQUAL(flock(fd, LOCK_SH), 0);
	locktab_read(&t, 0);
	CU_ASSERT_FALSE(locktab_holds(&t, sb.st_dev, sb.st_ino, getpid()));
	locktab_free(&t);
	close(fd);
	unlink(path);
	locktab_read(&t, 0);
	CU_ASSERT_FALSE(listed_dev(&t, sb.st_ino, getpid(), &major, &minor));
	locktab_free(&t);
}

void add_locktab_tests(void)
{
	CU_pSuite s = CU_add_suite("table of file locks", NULL, NULL);
	CU_add_test(s, "the lines of each kind of lock", test_lines);
	CU_add_test(s, "a lock of this process, found in the kernel's table", test_own_lock);
}
