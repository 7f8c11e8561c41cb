/* render.c - tables and JSON from record lines. */
#include "ctl/state/render.h"

#include <stdlib.h>
#include <string.h>

#include "core/wire.h"

#define FIELDS 32

void render_json_string(FILE *out, const char *s)
{
	fputc('"', out);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(out, "\\%c", *p);
		else if (*p < 0x20)
			fprintf(out, "\\u%04x", *p);
		else
			fputc(*p, out);
	}
	fputc('"', out);
}

static bool is_number(const char *s)
{
	if (!*s || (s[0] == '0' && s[1]))
		return false;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return false;
	return true;
}

void render_json_record(FILE *out, const char *line)
{
	char *copy = strdup(line), *keys[FIELDS], *values[FIELDS];
	char *sp = strchr(copy, ' ');
	int n = 0;
	if (sp)
		*sp = '\0';
	fputs("{\"type\":", out);
	render_json_string(out, copy);
	if (sp && fn_record_parse(sp + 1, keys, values, FIELDS, &n))
		for (int i = 0; i < n; i++) {
			fputc(',', out);
			render_json_string(out, keys[i]);
			fputc(':', out);
			if (is_number(values[i]))
				fputs(values[i], out);
			else
				render_json_string(out, values[i]);
		}
	fputs("}", out);
	free(copy);
}

const char *record_get(const char *line, const char *key, char *buf, size_t len)
{
	char *copy = strdup(line), *keys[FIELDS], *values[FIELDS];
	char *sp = strchr(copy, ' ');
	int n = 0;
	buf[0] = '\0';
	if (sp && fn_record_parse(sp + 1, keys, values, FIELDS, &n))
		for (int i = 0; i < n; i++)
			if (strcmp(keys[i], key) == 0)
				snprintf(buf, len, "%s", values[i]);
	free(copy);
	return buf;
}

/* A cell as a terminal should show it: control bytes (a newline in a
 * command line, an escape sequence) written as \n or \xNN, never raw. */
static const char *cell(const char *line, const char *column, char *buf, size_t len)
{
	char raw[512];
	record_get(line, column, raw, sizeof(raw));
	size_t at = 0;
	for (const unsigned char *p = (const unsigned char *)raw; *p && at + 5 < len; p++) {
		if (*p == '\n')
			at += (size_t)snprintf(buf + at, len - at, "\\n");
		else if (*p < ' ' || *p == 0x7f)
			at += (size_t)snprintf(buf + at, len - at, "\\x%02x", *p);
		else
			buf[at++] = (char)*p;
	}
	buf[at] = '\0';
	return buf;
}

void render_header(FILE *out, const char *const *columns, const int *width, int ncolumns)
{
	for (int c = 0; c < ncolumns; c++)
		fprintf(out, "%-*s%s", c + 1 < ncolumns ? width[c] : 0, columns[c],
			c + 1 < ncolumns ? "  " : "\n");
}

void render_row(FILE *out, const char *line, const char *const *columns, const int *width,
		int ncolumns)
{
	char buf[512];
	for (int c = 0; c < ncolumns; c++) {
		cell(line, columns[c], buf, sizeof(buf));
		fprintf(out, "%-*s%s", c + 1 < ncolumns ? width[c] : 0, *buf ? buf : "-",
			c + 1 < ncolumns ? "  " : "\n");
	}
}

void render_table(FILE *out, char **lines, int n, const char *const *columns, int ncolumns)
{
	int width[FIELDS];
	char buf[512];
	for (int c = 0; c < ncolumns; c++) {
		width[c] = (int)strlen(columns[c]);
		for (int i = 0; i < n; i++) {
			int w = (int)strlen(cell(lines[i], columns[c], buf, sizeof(buf)));
			if (w > width[c])
				width[c] = w;
		}
	}
	render_header(out, columns, width, ncolumns);
	for (int i = 0; i < n; i++)
		render_row(out, lines[i], columns, width, ncolumns);
}
