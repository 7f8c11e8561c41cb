/* hash.h - the one hash of the tree, 64-bit FNV-1a: rule names to their
 * slots (in the shared segment, where the shim and faultctl must agree on
 * it, and in faultctl's tables), endpoints and names to their places in the
 * shim's tables. Fast and good enough for table places; not for anything an
 * adversary picks to collide. */
#ifndef FAULTNET_HASH_H
#define FAULTNET_HASH_H

#include <stddef.h>
#include <stdint.h>

#define FN_HASH_START 1469598103934665603ull

/* h with byte b mixed in. */
static inline uint64_t fn_hash_byte(uint64_t h, uint8_t b)
{
	return (h ^ b) * 1099511628211ull;
}

/* h with the n bytes at p mixed in. */
static inline uint64_t fn_hash_bytes(uint64_t h, const void *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = fn_hash_byte(h, ((const uint8_t *)p)[i]);
	return h;
}

/* The hash of the string s. */
static inline uint64_t fn_hash_str(const char *s)
{
	uint64_t h = FN_HASH_START;
	for (; *s; s++)
		h = fn_hash_byte(h, (uint8_t)*s);
	return h;
}

/* The same for an ASCII name compared without case (a host name): each
 * byte with its 0x20 bit set, so that 'A' and 'a' hash alike. */
static inline uint64_t fn_hash_name(const char *s)
{
	uint64_t h = FN_HASH_START;
	for (; *s; s++)
		h = fn_hash_byte(h, (uint8_t)(*s | 0x20));
	return h;
}

#endif
