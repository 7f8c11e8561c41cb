/* forkprobe.c - a test-only preload for it_catalogue_stream: counts the
 * allocator calls a fork child makes before fork() returns in it, that is in
 * the atfork handlers. Another thread of the parent may hold an allocator's
 * lock at the fork; an allocator without fork handlers of its own (ASan's
 * runtime is one) then spins for ever in the child's first free. */
#include <dlfcn.h>
#include <malloc.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

static pid_t forking;		  /* the pid calling fork(), 0 when none */
static unsigned long in_handlers; /* allocator calls in a child's handlers */

unsigned long forkprobe_allocs(void);
unsigned long forkprobe_allocs(void)
{
	return in_handlers;
}

/* A call in a child before its fork() returned: the copy of `forking` is
 * the parent's pid, not its own. */
static void seen(void)
{
	if (forking && (pid_t)syscall(SYS_getpid) != forking)
		in_handlers++;
}

/* glibc's own entry points: a dlsym from inside free would recurse (a
 * failed dlsym's error string is freed by the next one). */
void *__libc_malloc(size_t n);
void __libc_free(void *p);
void *__libc_calloc(size_t a, size_t b);
void *__libc_realloc(void *p, size_t n);

void *malloc(size_t n)
{
	seen();
	return __libc_malloc(n);
}

void free(void *p)
{
	seen();
	__libc_free(p);
}

void *calloc(size_t a, size_t b)
{
	seen();
	return __libc_calloc(a, b);
}

void *realloc(void *p, size_t n)
{
	seen();
	return __libc_realloc(p, n);
}

/* The aligned ones, which OpenSSL's CRYPTO_aligned_alloc uses; glibc
 * names no __libc_ entry for the first two, so they are found at load. */
static __typeof__(posix_memalign) *real_posix_memalign;
static __typeof__(aligned_alloc) *real_aligned_alloc;
void *__libc_memalign(size_t a, size_t n);
void *__libc_valloc(size_t n);

__attribute__((constructor)) static void find(void)
{
	real_posix_memalign = (__typeof__(posix_memalign) *)dlsym(RTLD_NEXT, "posix_memalign");
	real_aligned_alloc = (__typeof__(aligned_alloc) *)dlsym(RTLD_NEXT, "aligned_alloc");
}

int posix_memalign(void **p, size_t a, size_t n)
{
	seen();
	return real_posix_memalign(p, a, n);
}

void *aligned_alloc(size_t a, size_t n)
{
	seen();
	return real_aligned_alloc(a, n);
}

void *memalign(size_t a, size_t n)
{
	seen();
	return __libc_memalign(a, n);
}

void *valloc(size_t n)
{
	seen();
	return __libc_valloc(n);
}

pid_t fork(void)
{
	static __typeof__(fork) *real;
	if (!real)
		real = (__typeof__(fork) *)dlsym(RTLD_NEXT, "fork");
	forking = (pid_t)syscall(SYS_getpid);
	pid_t pid = real();
	forking = 0;
	return pid;
}
