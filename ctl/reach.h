/* reach.h - can the shim reach a program at all? faultctl run asks before it
 * starts one, so that faults are never silently skipped. */
#ifndef FAULTNET_REACH_H
#define FAULTNET_REACH_H

#include <stddef.h>

/* NULL when the shim can reach cmd (looked up in PATH like execvp);
 * otherwise why not, written to why (a sentence naming the program).
 * A program that cannot be found or read is left to execvp to report. */
const char *fn_unreached(const char *cmd, char *why, size_t len);

#endif
