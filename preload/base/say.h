/* say.h - messages to the app's stderr from inside the shim. */
#ifndef FAULTNET_SAY_H
#define FAULTNET_SAY_H

/* Formats one line (a newline is added) and writes it to fd 2 with one
 * write(2): never through stdio, whose state belongs to the app. */
void fn_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
