/* slices.c - cuts a policy file's rules list at its rules (see slices.h).
 * It knows just enough of libconfig's syntax to stay out of strings and
 * comments; whatever it does not know (an @include, a list element that is
 * not a group) makes it decline, and config.c then parses the whole file,
 * so a cut never changes what a file means or what an error says. */
#include "core/slices.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Past blanks and comments from i, counting lines; SIZE_MAX at an
 * unterminated comment. */
static size_t blank(const char *t, size_t i, int *line)
{
	for (;;) {
		char ch = t[i];
		if (ch == '\n') {
			(*line)++;
			i++;
		} else if (ch == ' ' || ch == '\t' || ch == '\r' || ch == '\f' || ch == '\v') {
			i++;
		} else if (ch == '#' || (ch == '/' && t[i + 1] == '/')) {
			while (t[i] && t[i] != '\n')
				i++;
		} else if (ch == '/' && t[i + 1] == '*') {
			const char *e = strstr(t + i + 2, "*/");
			if (!e)
				return SIZE_MAX;
			for (; t + i < e; i++)
				*line += t[i] == '\n';
			i += 2;
		} else {
			return i;
		}
	}
}

/* Past the string that starts at t[i] ('"'); SIZE_MAX if unterminated. */
static size_t string_end(const char *t, size_t i, int *line)
{
	for (i++; t[i] && t[i] != '"'; i++) {
		if (t[i] == '\\' && t[i + 1])
			i++;
		*line += t[i] == '\n';
	}
	return t[i] ? i + 1 : SIZE_MAX;
}

/* Past the bracketed value that starts at t[i]; SIZE_MAX at an @, an
 * unterminated string or comment, or the text's end. */
static size_t balanced(const char *t, size_t i, int *line)
{
	int depth = 0;
	for (;;) {
		if ((i = blank(t, i, line)) == SIZE_MAX)
			return SIZE_MAX;
		char ch = t[i];
		if (!ch || ch == '@')
			return SIZE_MAX;
		if (ch == '"') {
			if ((i = string_end(t, i, line)) == SIZE_MAX)
				return SIZE_MAX;
			continue;
		}
		if (ch == '(' || ch == '{' || ch == '[')
			depth++;
		else if ((ch == ')' || ch == '}' || ch == ']') && --depth <= 0)
			return depth == 0 ? i + 1 : SIZE_MAX;
		i++;
	}
}

static bool grow(struct fn_slices *s, size_t *cap)
{
	if (s->n + 1 < *cap)
		return true;
	*cap *= 2;
	size_t *at = realloc(s->at, *cap * sizeof(*at));
	if (at)
		s->at = at;
	int *line = realloc(s->line, *cap * sizeof(*line));
	if (line)
		s->line = line;
	return at && line;
}

/* The list whose '(' is t[i]: every element a group. */
static bool cut(const char *t, size_t i, int *lines, struct fn_slices *s)
{
	size_t cap = 1024;
	int line = *lines;
	s->open = i;
	s->open_line = line;
	s->n = 0;
	if (!(s->at = malloc(cap * sizeof(*s->at))) || !(s->line = malloc(cap * sizeof(int))))
		return false;
	for (i++;;) {
		if (!grow(s, &cap))
			return false;
		s->at[s->n] = i;
		s->line[s->n] = line;
		size_t k = blank(t, i, &line);
		if (k == SIZE_MAX || t[k] != '{' || (k = balanced(t, k, &line)) == SIZE_MAX ||
		    (k = blank(t, k, &line)) == SIZE_MAX)
			return false;
		s->n++;
		if (t[k] == ')') {
			s->close = k;
			s->at[s->n] = k + 1;
			*lines = line;
			return true;
		}
		if (t[k] != ',')
			return false;
		i = k + 1;
	}
}

static bool name_char(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
	       ch == '_' || ch == '-' || ch == '*';
}

/* At t[i], a top-level name: the rules list's '(' if it is "rules = (",
 * else where the name ends. */
static size_t setting(const char *t, size_t i, int *line, bool *rules)
{
	size_t j = i;
	while (name_char(t[j]))
		j++;
	*rules = j - i == 5 && memcmp(t + i, "rules", 5) == 0;
	if (!*rules)
		return j;
	size_t k = blank(t, j, line);
	if (k == SIZE_MAX || (t[k] != '=' && t[k] != ':'))
		return SIZE_MAX;
	k = blank(t, k + 1, line);
	return k != SIZE_MAX && t[k] == '(' ? k : SIZE_MAX;
}

static bool find(const char *t, struct fn_slices *s)
{
	bool found = false;
	int line = 1;
	for (size_t i = 0;;) {
		if ((i = blank(t, i, &line)) == SIZE_MAX || t[i] == '@')
			return false;
		char ch = t[i];
		bool rules;
		if (!ch)
			return found;
		if (ch == '"') {
			i = string_end(t, i, &line);
		} else if (ch == '(' || ch == '{' || ch == '[') {
			i = balanced(t, i, &line);
		} else if (name_char(ch) && (i = setting(t, i, &line, &rules)) != SIZE_MAX &&
			   rules) {
			if (found || !cut(t, i, &line, s))
				return false;
			found = true;
			i = s->close + 1;
		} else if (i != SIZE_MAX && !name_char(ch)) {
			i++;
		}
		if (i == SIZE_MAX)
			return false;
	}
}

bool fn_slices_find(const char *text, struct fn_slices *s)
{
	memset(s, 0, sizeof(*s));
	if (find(text, s))
		return true;
	fn_slices_free(s);
	return false;
}

void fn_slices_free(struct fn_slices *s)
{
	free(s->at);
	free(s->line);
	memset(s, 0, sizeof(*s));
}
