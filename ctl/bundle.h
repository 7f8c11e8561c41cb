/* bundle.h - the self-contained bundle (make bundle: libfaultnet.so and the
 * libraries it loads, scripts/bundle.sh) found, read, and checked against
 * the C library of the root it is to be mounted into. */
#ifndef FAULTCTL_BUNDLE_H
#define FAULTCTL_BUNDLE_H

#include <stdbool.h>
#include <stddef.h>

/* What a bundle needs of an image, from its faultnet-bundle.txt. */
struct fn_bundle {
	char dir[4096];
	char arch[32];	/* uname -m of the machine it was built on */
	char glibc[32]; /* the newest GLIBC_x.y any of its files needs */
};

/* Finds the bundle: $FAULTNET_BUNDLE, else bundle/ beside faultctl (the
 * build tree), else ../lib/faultnet/bundle (an install tree). NULL on
 * success, else the reason (written into err). */
const char *fn_bundle_find(struct fn_bundle *b, char *err, size_t len);

/* The C library of the file system under root (a chroot's root, or the
 * files copied out of an image): NULL when the bundle can run there, else
 * the reason it cannot (a musl C library, no C library found, another
 * machine, a glibc older than the bundle needs), in err. found, when not
 * NULL, gets "glibc 2.36" (or "musl") when a C library was read. */
const char *fn_bundle_check_root(const struct fn_bundle *b, const char *root, char *found,
				 size_t flen, char *err, size_t len);

/* The paths, relative to an image's root, where a C library may be: read
 * one by one (faultctl docker copies each out of the image). NULL-ended. */
extern const char *const fn_libc_paths[];

/* `faultctl bundle [check ROOT]`: where the bundle is and what it needs;
 * with check, whether it can run in the root ROOT. */
int cmd_bundle(int argc, char **argv);

#endif
