/* ossl.c - binds OpenSSL 3 once, in a namespace of its own (see ossl.h). */
#include "preload/tls/ossl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

static struct fn_ossl lib;
static const char *failure;
static char failbuf[256];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static int bind_all(void *crypto, void *ssl)
{
	void *h;
#define FN_OSSL_BIND(l, name)                                             \
	h = (l);                                                          \
	*(void **)&lib.name = dlvsym(h, #name, "OPENSSL_3.0.0");          \
	if (!lib.name) {                                                  \
		snprintf(failbuf, sizeof(failbuf),                        \
			 "lib" #l ".so.3 lacks " #name "@OPENSSL_3.0.0"); \
		return -1;                                                \
	}
	FN_OSSL_FUNCS(FN_OSSL_BIND)
#undef FN_OSSL_BIND
	return 0;
}

static void load(void)
{
	/* A new namespace: libssl, libcrypto and a libc of their own, none of
	 * them in the app's symbol scope. libcrypto is then found in it by
	 * name, as libssl's dependency. */
	void *ssl = dlmopen(LM_ID_NEWLM, "libssl.so.3", RTLD_NOW | RTLD_LOCAL);
	if (!ssl) {
		const char *e = dlerror();
		snprintf(failbuf, sizeof(failbuf),
			 "cannot load libssl.so.3 (install the Debian package libssl3): %s",
			 e ? e : "no reason given");
		failure = failbuf;
		return;
	}
	Lmid_t ns;
	void *crypto = NULL;
	if (dlinfo(ssl, RTLD_DI_LMID, &ns) == 0)
		crypto = dlmopen(ns, "libcrypto.so.3", RTLD_NOW | RTLD_LOCAL);
	if (!crypto || bind_all(crypto, ssl) < 0) {
		if (!crypto)
			snprintf(failbuf, sizeof(failbuf),
				 "cannot find libcrypto.so.3 beside libssl");
		failure = failbuf;
		return;
	}
	/* No atexit handler in a libc whose exit handlers never run, and no
	 * configuration file: the relay's TLS is the same on every machine. */
	if (!lib.OPENSSL_init_ssl(OPENSSL_INIT_NO_ATEXIT | OPENSSL_INIT_NO_LOAD_CONFIG, NULL)) {
		failure = "OpenSSL failed to initialise";
		return;
	}
}

const struct fn_ossl *fn_ossl_get(const char **why)
{
	pthread_once(&once, load);
	if (why)
		*why = failure;
	return failure ? NULL : &lib;
}

const char *fn_ossl_error(char *buf, size_t len)
{
	unsigned long e = lib.ERR_get_error ? lib.ERR_get_error() : 0;
	if (!e) {
		snprintf(buf, len, "no reason given");
		return buf;
	}
	lib.ERR_error_string_n(e, buf, len);
	lib.ERR_clear_error();
	return buf;
}
