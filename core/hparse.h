/* hparse.h - the HTTP/1.x parser: Debian's libhttp-parser (the parser
 * Node.js used before llhttp), loaded with dlmopen(RTLD_LOCAL) on first use
 * and kept, so that the app's own copy, if any, is never disturbed and the
 * shim does not link it. */
#ifndef FAULTNET_HPARSE_H
#define FAULTNET_HPARSE_H

#include <http_parser.h>
#include <stdbool.h>

struct fn_hparse {
	void (*init)(http_parser *, enum http_parser_type);
	size_t (*execute)(http_parser *, const http_parser_settings *, const char *, size_t);
	void (*pause)(http_parser *, int);
	const char *(*errno_name)(enum http_errno);
	const char *(*method_str)(enum http_method);
	int (*keep_alive)(const http_parser *);
};

/* The bound functions, or NULL when the library cannot be loaded; *why then
 * says what to install. Thread-safe; loads once. */
const struct fn_hparse *fn_hparse_get(const char **why);

#endif
