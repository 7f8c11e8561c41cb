/* it_catalogue_conditions.c - the conditions (first, every, after, probability with
 * FAULTNET_SEED, start_ms and for_ms), each deciding per connect.
 * Runs under the shim with FAULTNET_CONFIG=tests/faults/catalogue.conf. */
#include "catalogue.h"

/* ---- conditions --------------------------------------------------------- */

/* n connects to ip: R refused, X reset, P passed. */
static void outcomes(const char *ip, int n, char *out)
{
	for (int i = 0; i < n; i++) {
		struct cl c;
		char b[4];
		int err = cl_connect(&c, ip, M_BLOCK, NULL);
		if (err == ECONNREFUSED)
			out[i] = 'R';
		else if (err == ECONNRESET)
			out[i] = 'X';
		else if (err)
			out[i] = '?';
		else if (!cl_write(&c, "x", 1)) {
			out[i] = errno == ECONNRESET || errno == EPIPE ? 'X' : '?';
		} else {
			ssize_t r = cl_read(&c, b, 1, 2000);
			out[i] = r == 1 ? 'P' : r < 0 && errno == ECONNRESET ? 'X' : '?';
		}
		cl_close(&c);
	}
	out[n] = '\0';
}

static void test_counting_conditions(void)
{
	char got[16];
	outcomes("127.72.0.14", 5, got);
	CU_ASSERT_STRING_EQUAL(got, "RRPPP"); /* first = 2 */
	outcomes("127.72.0.15", 6, got);
	CU_ASSERT_STRING_EQUAL(got, "PPRPPR"); /* every = 3 */
	outcomes("127.72.0.16", 5, got);
	CU_ASSERT_STRING_EQUAL(got, "PPRRR"); /* after = 2 */
	outcomes("127.72.0.19", 4, got);
	CU_ASSERT_STRING_EQUAL(got, "XRXR"); /* declined: the next rule applies */
}

/* Runs this program as `--child mode` with env added; its stdout in out. */
static int run_child(const char *mode, const char *env, char *out, size_t n)
{
	int p[2];
	if (pipe(p) < 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		dup2(p[1], 1);
		if (env)
			putenv((char *)env);
		execl(self_path, "it_catalogue_conditions", "--child", mode, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	size_t got = 0;
	ssize_t r;
	while (got + 1 < n && (r = read(p[0], out + got, n - 1 - got)) > 0)
		got += (size_t)r;
	out[got] = '\0';
	close(p[0]);
	int st;
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_seed(void)
{
	char a[64], b[64], c[64];
	CU_ASSERT_EQUAL(run_child("coin", "FAULTNET_SEED=7", a, sizeof(a)), 0);
	CU_ASSERT_EQUAL(run_child("coin", "FAULTNET_SEED=7", b, sizeof(b)), 0);
	CU_ASSERT_EQUAL(run_child("coin", "FAULTNET_SEED=8", c, sizeof(c)), 0);
	CU_ASSERT_EQUAL(strlen(a), 40);
	CU_ASSERT_STRING_EQUAL(a, b);
	CU_ASSERT_STRING_NOT_EQUAL(a, c);
	CU_ASSERT(strchr(a, 'R') && strchr(a, 'P'));
	char bad[64];
	CU_ASSERT_EQUAL(run_child("coin", "FAULTNET_SEED=x", bad, sizeof(bad)), 78);
}

static void test_window(void)
{
	/* A fresh process: the window counts from when the rule was loaded. */
	char got[64];
	CU_ASSERT_EQUAL(run_child("window", NULL, got, sizeof(got)), 0);
	/* start_ms 400, for_ms 400, one connect every 100 ms for 1.2 s. */
	const char *r1 = strchr(got, 'R'), *r2 = strrchr(got, 'R');
	CU_ASSERT(got[0] == 'P' && r1 && r2 && got[strlen(got) - 1] == 'P');
	if (r1 && r2) {
		CU_ASSERT(strspn(r1, "R") == (size_t)(r2 - r1) + 1); /* one run */
		CU_ASSERT(r2 - r1 + 1 >= 2 && r2 - r1 + 1 <= 6);
	}
}

static int child_main(const char *mode)
{
	char got[64];
	if (strcmp(mode, "coin") == 0) {
		outcomes("127.72.0.17", 40, got);
	} else if (strcmp(mode, "window") == 0) {
		long t0 = now_ms();
		int i = 0;
		for (; i < 13; i++) {
			while (now_ms() - t0 < i * 100)
				usleep(2000);
			outcomes("127.72.0.18", 1, got + i);
		}
		got[i] = '\0';
	} else {
		return 98;
	}
	printf("%s", got);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct it_test tests[] = {
	    {"first, every, after; a declined rule passes on", test_counting_conditions},
	    {"probability: the same FAULTNET_SEED, the same decisions", test_seed},
	    {"start_ms and for_ms", test_window},
	    {NULL, NULL},
	};
	return catalogue_main(argc, argv, "conditions", tests, child_main);
}
