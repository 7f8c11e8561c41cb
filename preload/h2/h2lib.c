/* h2lib.c - binds libnghttp2.so.14 once (see h2lib.h). */
#include "preload/h2/h2lib.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

static struct fn_ngh2 lib;
static const char *failure;
static char failbuf[256];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load(void)
{
	/* A namespace of its own, as OpenSSL's: an app with its own nghttp2
	 * linked in (Node.js exports one, of another version) would otherwise
	 * have the library's calls to itself bound to the app's copy, whose
	 * structures differ: Node's gRPC client died of SIGSEGV. */
	void *h = dlmopen(LM_ID_NEWLM, "libnghttp2.so.14", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *e = dlerror();
		snprintf(failbuf, sizeof(failbuf),
			 "cannot load libnghttp2.so.14 (install the Debian package "
			 "libnghttp2-14): %s",
			 e ? e : "no reason given");
		failure = failbuf;
		return;
	}
#define FN_NGH2_BIND(name)                                                           \
	*(void **)&lib.name = dlsym(h, #name);                                       \
	if (!lib.name) {                                                             \
		snprintf(failbuf, sizeof(failbuf), "libnghttp2.so.14 lacks " #name); \
		failure = failbuf;                                                   \
		return;                                                              \
	}
	FN_NGH2_FUNCS(FN_NGH2_BIND)
#undef FN_NGH2_BIND
}

const struct fn_ngh2 *fn_ngh2_get(const char **why)
{
	pthread_once(&once, load);
	if (why)
		*why = failure;
	return failure ? NULL : &lib;
}
