/* render.h - faultctl's output: records from the processes as aligned
 * text for people, or JSON for programs. */
#ifndef FAULTCTL_RENDER_H
#define FAULTCTL_RENDER_H

#include <stdbool.h>
#include <stdio.h>

/* s as a JSON string, quoted, with quotes, backslashes and control bytes
 * escaped. */
void render_json_string(FILE *out, const char *s);

/* Prints one record line ("type key=value ...") as a JSON object. */
void render_json_record(FILE *out, const char *line);

/* Prints record lines of one type as a table with the given columns;
 * a column missing from a record prints as "-". */
void render_table(FILE *out, char **lines, int n, const char *const *columns, int ncolumns);

/* A table's header, and one row, in the given column widths: for output
 * that grows one record at a time (events --follow). */
void render_header(FILE *out, const char *const *columns, const int *width, int ncolumns);
void render_row(FILE *out, const char *line, const char *const *columns, const int *width,
		int ncolumns);

/* The value of key in a record line, copied into buf ("" if absent). */
const char *record_get(const char *line, const char *key, char *buf, size_t len);

#endif
