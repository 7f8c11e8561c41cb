/* fdracer.c - a library loaded after the shim in LD_PRELOAD (so its
 * constructor runs first) that starts a thread, and whose stat() makes that
 * thread open /dev/null right after a stat of /proc/self/fd: the race of
 * another thread opening an fd while the shim's start counts its fds and
 * asks the numbers in turn (fdlife.c), made to happen every time.
 * hostile_app.py test_19 preloads it. */
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <string.h>
#include <sys/stat.h>

static sem_t go, done;

static void *opener(void *arg)
{
	(void)arg;
	sem_wait(&go);
	open("/dev/null", O_RDONLY | O_CLOEXEC); /* kept open: the fd the race makes */
	sem_post(&done);
	return NULL;
}

__attribute__((constructor)) static void start(void)
{
	pthread_t t;
	sem_init(&go, 0, 0);
	sem_init(&done, 0, 0);
	pthread_create(&t, NULL, opener, NULL);
	pthread_detach(t);
}

int stat(const char *path, struct stat *sb)
{
	static int (*real)(const char *, struct stat *);
	if (!real)
		real = (int (*)(const char *, struct stat *))dlsym(RTLD_NEXT, "stat");
	int r = real(path, sb);
	if (strcmp(path, "/proc/self/fd") == 0) {
		sem_post(&go);
		sem_wait(&done);
	}
	return r;
}
