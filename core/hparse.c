/* hparse.c - binds libhttp_parser.so.2.9 once (see hparse.h). */
#include "core/hparse.h"

#include <dlfcn.h>
#include <pthread.h>

static struct fn_hparse lib;
static const char *failure;
static pthread_once_t once = PTHREAD_ONCE_INIT;

#define BIND(field, sym)                                              \
	do {                                                          \
		*(void **)&lib.field = dlsym(h, sym);                 \
		if (!lib.field) {                                     \
			failure = "libhttp_parser.so.2.9 lacks " sym; \
			return;                                       \
		}                                                     \
	} while (0)

static void load(void)
{
	/* dlmopen(LM_ID_BASE) is dlopen under another name: core code must
	 * not call the shim's dlopen hook. */
	void *h = dlmopen(LM_ID_BASE, "libhttp_parser.so.2.9", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		failure = "cannot load libhttp_parser.so.2.9 (install the Debian package "
			  "libhttp-parser2.9)";
		return;
	}
	BIND(init, "http_parser_init");
	BIND(execute, "http_parser_execute");
	BIND(pause, "http_parser_pause");
	BIND(errno_name, "http_errno_name");
	BIND(method_str, "http_method_str");
	BIND(keep_alive, "http_should_keep_alive");
}

const struct fn_hparse *fn_hparse_get(const char **why)
{
	pthread_once(&once, load);
	if (why)
		*why = failure;
	return failure ? NULL : &lib;
}
