/* say.c - the shim's only way to print: one write(2) to fd 2 per line. The
 * shim does not interpose write, so this never re-enters a hook. */
#include "preload/base/say.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

void fn_say(const char *fmt, ...)
{
	char buf[4400];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof(buf) - 2)
		n = sizeof(buf) - 2;
	buf[n++] = '\n';
	ssize_t w = write(2, buf, (size_t)n);
	(void)w;
}
