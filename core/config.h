/* config.h - reads a faultnet policy file (libconfig syntax) into a policy.
 * One parser serves the shim, `faultctl check` and the unit tests, so that
 * every one of them says the same thing about the same file. */
#ifndef FAULTNET_CONFIG_H
#define FAULTNET_CONFIG_H

#include <stddef.h>

#include "core/rules.h"

/* Exit status for a bad configuration (sysexits' EX_CONFIG). */
#define FN_EXIT_CONFIG 78

/* The largest policy file read (a larger one is refused, named). */
#define FN_CONFIG_FILE_MAX (16u << 20)

/* Parses path. zone_override (FAULTNET_ZONE, may be NULL) replaces the file's
 * `zone`. On error returns NULL and writes "FILE:LINE: problem" into err. */
struct fn_policy *fn_config_load_file(const char *path, const char *zone_override, char *err,
				      size_t errlen);

/* The same for text held in memory; origin names it in messages. */
struct fn_policy *fn_config_load_string(const char *text, const char *origin,
					const char *zone_override, char *err, size_t errlen);

/* path's whole text, NUL-terminated, its length in *len; NULL with
 * "FILE: problem" in err when it cannot be read or holds a NUL byte
 * (FILE:LINE). What fn_config_load_file parses, read the same way. */
char *fn_config_read(const char *path, size_t *len, char *err, size_t errlen);

/* A live change (faultctl add or load): zones and the process's zone come
 * from base unless text defines its own. */
struct fn_policy *fn_config_load_change(const char *text, const char *origin,
					const struct fn_policy *base, char *err, size_t errlen);

/* The same, for a text whose rules go into another policy (faultctl add):
 * what is returned is not finished (no index: see fn_policy_finish), so it
 * must not be matched. An index of its own, of a root of 256 KiB, was built
 * and freed for each add of a journal's replay. */
struct fn_policy *fn_config_load_rules(const char *text, const char *origin,
				       const struct fn_policy *base, char *err, size_t errlen);

/* A rules list of at least twice n rules is parsed n at a time (1,000
 * unless set); fn_config_slices counts the slices this thread parsed.
 * For tests. */
void fn_config_slice_rules(size_t n);
extern _Thread_local size_t fn_config_slices;
/* Texts this thread scanned for a rules list to cut (long ones only). */
extern _Thread_local size_t fn_config_scans;

#endif
