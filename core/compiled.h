/* compiled.h - a parsed policy kept as bytes in the run directory, so that
 * a process starting under the shim rebuilds the policy its group already
 * parsed instead of loading libconfig and parsing the file again (issue 42:
 * the parse was two thirds of what a start of `true` added). A compiled
 * copy is keyed by the policy file's whole text, the zone override and the
 * shim build's identity, and holds all three: it is trusted only when they
 * are the caller's byte for byte and every part of it is whole and in
 * range. Anything else (a stale, foreign, truncated or corrupt file, one
 * another account could have written) is ignored, and the file is parsed as
 * it always was. A copy also has a second name, from the policy file's
 * identity (compiled_file.c), so that most starts find it without reading
 * the file. */
#ifndef FAULTNET_COMPILED_H
#define FAULTNET_COMPILED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "core/rules.h"

/* What a compiled copy is for: a policy file's text (textlen bytes), the
 * zone override ("" for none) and the build that compiled it. */
struct fn_compiled_key {
	const char *text;
	size_t textlen;
	const char *zone;
	const uint8_t *id;
	size_t idlen;
};

/* The program this code is linked into, by its ELF build-id (the
 * NT_GNU_BUILD_ID note of the object holding this function: the shim's
 * libfaultnet.so, or a test program); NULL when it has none. */
const uint8_t *fn_compiled_build_id(size_t *len);

/* Whether a policy made from text may be kept compiled: its result
 * depends on its text and zone alone. Not with @include (the included
 * file's text is no part of the key) nor with a rule's body_file (the
 * body's file neither): such a policy is parsed at every start. The
 * parser reads no variable and no other file. */
bool fn_compiled_cacheable(const char *text);

/* p as a compiled copy for key k: malloc'd, its length in *len; NULL when
 * memory is short. Only what the parser made goes in: a rule's counters,
 * the index and the refcounts are the process's own. */
void *fn_compiled_write(const struct fn_policy *p, const struct fn_compiled_key *k, size_t *len);

/* The policy a compiled copy holds, finished (fn_policy_finish) as the
 * parser finishes it, with fresh counters and HTTP and dns parts; NULL
 * unless the copy's key is k byte for byte, its checksum holds and every
 * length, index and word in it is in range. Reads only the len bytes of
 * blob, whatever they hold. */
struct fn_policy *fn_compiled_read(const void *blob, size_t len, const struct fn_compiled_key *k);

/* Whether blob's len bytes are a whole copy, as written (its length and
 * checksum), for k's zone and build and for k's text; a k with no text
 * takes the text the copy holds (k->text then points into blob). The
 * fields are checked as fn_compiled_read builds them. */
bool fn_compiled_whole(const void *blob, size_t len, struct fn_compiled_key *k);

/* The checksum of a copy, which also names copies (compiled_file.c). */
uint64_t fn_compiled_hash(uint64_t h, const void *data, size_t n);

/* A copy is at most this long: a policy file is at most 16 MiB, and its
 * rules, CIDRs and bodies fit in this many times as much. */
#define FN_COMPILED_MAX (512u << 20)

/* Sets a copy's length and checksum for its len bytes, as written. For
 * the tests, which change a copy's bytes and then have it read in full. */
void fn_compiled_seal(void *blob, size_t len);

/* "DIR/policy-HASH.compiled", the hash of k's text, zone and build; false
 * if it does not fit. */
bool fn_compiled_path(char *out, size_t len, const char *dir, const struct fn_compiled_key *k);

/* The shim's load of its policy file: fn_config_load_file's policy and
 * errors, from the run directory's compiled copy when one is there for
 * this text, zone and build, else parsed, and then (when it may be kept)
 * written there for the next start: to a new file of mode 0600 renamed into
 * place; a failure to write costs nothing but the next start's parse. */
struct fn_policy *fn_compiled_load_file(const char *path, const char *zone, char *err,
					size_t errlen);

/* The first half of fn_compiled_load_file, for a start that builds its
 * policy later (at its first covered call): true when the run directory
 * keeps a compiled copy for path's text and zone, that is, a start has
 * parsed this very text before and found it good. The copy is found by the
 * file's identity (one stat: a second name that an earlier start gave it,
 * once the file had not changed for a while) or else by the file's text,
 * read; its bytes are read now, checked whole and kept in *src: a later
 * edit of the file does not count, as it does not for a process that
 * loaded it whole, and the join needs no fd to build the policy. False with
 * nothing kept when there is no copy: the caller loads the file now, with
 * the parser's messages. */
struct fn_compiled_src {
	char *blob; /* the copy's bytes */
	size_t len;
	char *file;		 /* instead, a copy too large to keep: its place */
	const char *path, *zone; /* kept by the caller for the process's life */
};
bool fn_compiled_pending(const char *path, const char *zone, struct fn_compiled_src *src);

/* The second half: the policy of src's copy, its bytes freed; should that
 * fail (memory short), the file loaded as fn_compiled_load_file does, with
 * the parser's messages in err. */
struct fn_policy *fn_compiled_load_src(struct fn_compiled_src *src, char *err, size_t errlen);

/* faultctl gc: name (an entry of dir) is a compiled copy, a second name of
 * one, or the temporary name a writer killed before its rename left;
 * removed when not written for FN_KEEP_S at now (the next start writes a
 * copy again). */
bool fn_compiled_expire(const char *dir, const char *name, time_t now);

#endif
