/* svg.c - report.svg: one timeline a person reads at a glance.
 * Steps are shaded bands over the whole picture, each probe is a row of
 * green (healthy) and red (unhealthy) segments, the rules' attempts and
 * faults per second are plotted below (and, with a request log, the
 * requests per second by outcome below that), and the measured times to
 * notice and to recover are marked with labelled lines. Every part carries a
 * class (and data- attributes), so that tests can find it in the picture. */
#include <stdio.h>
#include <string.h>

#include "ctl/scenario/scenario.h"

#define W 1000
#define X0 170
#define X1 970
#define ROW 46 /* a line for the marks, then the probe's bar */
#define BAR 18
#define PLOT 140

static const char *const step_colors[] = {"#3b6fd8", "#e08a00", "#8a4fd8", "#2aa3a3"};
static const char *const line_colors[] = {"#1f3b73", "#b5179e", "#0b7a75", "#7a4b00"};

struct geo {
	double span;			   /* ms the x axis covers */
	int top, rows, plot, reqs, bottom; /* reqs: the requests' plot, or 0 */
};

static double xt(const struct geo *g, int64_t ms)
{
	if (ms < 0)
		ms = 0;
	return X0 + (X1 - X0) * (double)ms / g->span;
}

static void text(FILE *f, double x, double y, const char *anchor, int size, const char *fill,
		 const char *cls, const char *s)
{
	fprintf(f,
		"<text class=\"%s\" x=\"%.1f\" y=\"%.1f\" font-size=\"%d\" fill=\"%s\" "
		"text-anchor=\"%s\" font-family=\"sans-serif\">",
		cls, x, y, size, fill, anchor);
	for (; *s; s++) {
		if (*s == '<')
			fputs("&lt;", f);
		else if (*s == '&')
			fputs("&amp;", f);
		else
			fputc(*s, f);
	}
	fputs("</text>\n", f);
}

static void axis(FILE *f, const struct geo *g)
{
	int step = g->span <= 15000    ? 1000
		   : g->span <= 60000  ? 5000
		   : g->span <= 300000 ? 30000
				       : 60000;
	for (int64_t t = 0; t <= (int64_t)g->span; t += step) {
		char label[32];
		snprintf(label, sizeof(label), "%llds", (long long)(t / 1000));
		fprintf(f,
			"<line class=\"tick\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" "
			"stroke=\"#dddddd\"/>\n",
			xt(g, t), g->top, xt(g, t), g->bottom);
		text(f, xt(g, t), g->top - 4, "middle", 11, "#555555", "tick-label", label);
	}
}

static void bands(FILE *f, const struct scenario *s, const struct geo *g)
{
	for (int i = 0; i < s->nsteps; i++) {
		const struct sc_step *st = &s->steps[i];
		if (st->actual_ms < 0)
			continue;
		int64_t end = st->undo_actual_ms >= 0 ? st->undo_actual_ms : s->ended_ms;
		const char *c = step_colors[i % 4];
		fprintf(f,
			"<rect class=\"step\" data-step=\"%s\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" "
			"height=\"%d\" fill=\"%s\" fill-opacity=\"0.16\"/>\n",
			st->name, xt(g, st->actual_ms), g->top,
			xt(g, end) - xt(g, st->actual_ms) + 0.5, g->bottom - g->top, c);
		char label[SC_NAME * 2 + 16];
		snprintf(label, sizeof(label), "%s: %s %s", st->name, sc_verb_name(st->verb),
			 st->verb == SV_ADD ? st->rule : st->arg);
		text(f, xt(g, st->actual_ms) + 3, g->top + 12 + 13 * (i % 3), "start", 11, c,
		     "step-label", label);
	}
}

static void probe_rows(FILE *f, const struct scenario *s, const struct geo *g)
{
	for (int i = 0; i < s->nprobes; i++) {
		const struct sc_probe *p = &s->probes[i];
		int y = g->rows + i * ROW + BAR;
		text(f, 10, y + 15, "start", 13, "#222222", "probe-label", p->name);
		for (size_t k = 0; k < p->n; k++) {
			int64_t a = p->samples[k].t_ms;
			int64_t b = k + 1 < p->n ? p->samples[k + 1].t_ms : a + p->interval_ms;
			fprintf(f,
				"<rect class=\"sample %s\" data-probe=\"%s\" data-t=\"%lld\" "
				"x=\"%.1f\" "
				"y=\"%d\" width=\"%.1f\" height=\"20\" fill=\"%s\"/>\n",
				p->samples[k].ok ? "healthy" : "unhealthy", p->name, (long long)a,
				xt(g, a), y, xt(g, b) - xt(g, a) + 0.3,
				p->samples[k].ok ? "#2e9d48" : "#d0342c");
		}
	}
}

static uint64_t per_second(const uint64_t *v, int i)
{
	return i == 0 ? v[0] : v[i] >= v[i - 1] ? v[i] - v[i - 1] : 0;
}

static void series(FILE *f, const struct geo *g, const uint64_t *v, int n, double top,
		   const char *color, const char *cls, const char *rule, bool dashed)
{
	fprintf(f,
		"<polyline class=\"%s\" data-rule=\"%s\" fill=\"none\" stroke=\"%s\" "
		"stroke-width=\"2\"%s points=\"",
		cls, rule, color, dashed ? " stroke-dasharray=\"6 4\"" : "");
	for (int i = 0; i < n; i++)
		fprintf(f, "%.1f,%.1f ", xt(g, (int64_t)i * 1000),
			g->plot + PLOT - PLOT * (double)per_second(v, i) / top);
	fputs("\"/>\n", f);
}

static void plot(FILE *f, const struct scenario *s, const struct geo *g)
{
	double top = 1;
	for (int r = 0; r < s->nrates; r++)
		for (int i = 0; i < s->rates[r].len; i++)
			if ((double)per_second(s->rates[r].attempts, i) > top)
				top = (double)per_second(s->rates[r].attempts, i);
	char label[64];
	snprintf(label, sizeof(label), "per second (max %.0f)", top);
	text(f, 10, g->plot + 12, "start", 12, "#222222", "plot-label", "attempts (solid)");
	text(f, 10, g->plot + 27, "start", 12, "#222222", "plot-label", "faults (dashed)");
	text(f, 10, g->plot + 42, "start", 11, "#555555", "plot-label", label);
	fprintf(f,
		"<rect class=\"plot\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
		"stroke=\"#bbbbbb\"/>\n",
		X0, g->plot, X1 - X0, PLOT);
	for (int r = 0; r < s->nrates; r++) {
		const struct sc_rate *rt = &s->rates[r];
		const char *c = line_colors[r % 4];
		series(f, g, rt->attempts, rt->len, top, c, "attempts", rt->rule, false);
		series(f, g, rt->faults, rt->len, top, c, "faults", rt->rule, true);
		text(f, X1 - 4, g->plot + 14 + 14 * r, "end", 12, c, "rule-label", rt->rule);
	}
}

/* The request log's requests per second: answered by a fault (red),
 * by the server (green), or not at all (grey). */
static void requests_plot(FILE *f, const struct scenario *s, const struct geo *g)
{
	static const char *const names[] = {"fault", "server", "failed"};
	static const char *const colors[] = {"#d0342c", "#2e9d48", "#777777"};
	double top = 1;
	for (int k = 0; k < 3; k++)
		for (int i = 0; i < s->rq_secs; i++)
			top = (double)s->rq_per[k][i] > top ? (double)s->rq_per[k][i] : top;
	char label[64];
	snprintf(label, sizeof(label), "per second (max %.0f)", top);
	text(f, 10, g->reqs + 12, "start", 12, "#222222", "requests-label", "requests:");
	for (int k = 0; k < 3; k++)
		text(f, 10, g->reqs + 27 + 14 * k, "start", 12, colors[k], "requests-label",
		     k == 0   ? "by a fault"
		     : k == 1 ? "by the server"
			      : "no answer");
	text(f, 10, g->reqs + 72, "start", 11, "#555555", "requests-label", label);
	fprintf(f,
		"<rect class=\"plot\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
		"stroke=\"#bbbbbb\"/>\n",
		X0, g->reqs, X1 - X0, PLOT);
	for (int k = 0; k < 3; k++) {
		fprintf(f,
			"<polyline class=\"requests\" data-outcome=\"%s\" fill=\"none\" "
			"stroke=\"%s\" stroke-width=\"2\" points=\"",
			names[k], colors[k]);
		/* Each second's count at its end, as the rules' rates are. */
		for (int i = 0; i < s->rq_secs; i++)
			fprintf(f, "%.1f,%.1f ", xt(g, (int64_t)(i + 1) * 1000),
				g->reqs + PLOT - PLOT * (double)s->rq_per[k][i] / top);
		fputs("\"/>\n", f);
	}
}

static void markers(FILE *f, const struct scenario *s, const struct geo *g)
{
	for (int i = 0; i < s->nexpects; i++) {
		const struct sc_expect *e = &s->expects[i];
		if ((e->kind != EX_HEALTHY_WITHIN && e->kind != EX_UNHEALTHY_WITHIN) ||
		    e->measured < 0 || e->after < 0)
			continue;
		const struct sc_step *st = &s->steps[e->after];
		int64_t at = (e->from_end ? st->undo_actual_ms : st->actual_ms) + e->measured;
		bool notice = e->kind == EX_UNHEALTHY_WITHIN;
		const char *c = notice ? "#d0342c" : "#2e9d48";
		int y = g->rows + e->probe * ROW + BAR;
		fprintf(f,
			"<line class=\"marker %s\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" "
			"stroke=\"%s\" stroke-width=\"3\"/>\n",
			notice ? "noticed" : "recovered", xt(g, at), y - 14, xt(g, at), y + 22,
			"#111111");
		char label[64];
		snprintf(label, sizeof(label), "%s %.1f s",
			 notice ? "noticed after" : "recovered after", (double)e->measured / 1000);
		text(f, xt(g, at) + 4, y - 5, "start", 12, c, "marker-label", label);
	}
}

static void key(FILE *f, const struct geo *g)
{
	int y = g->bottom + 22;
	fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"14\" fill=\"#2e9d48\"/>\n", X0,
		y - 11);
	text(f, X0 + 20, y, "start", 12, "#222222", "key", "probe healthy");
	fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"14\" fill=\"#d0342c\"/>\n",
		X0 + 140, y - 11);
	text(f, X0 + 160, y, "start", 12, "#222222", "key", "probe unhealthy");
	fprintf(f,
		"<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"14\" fill=\"#3b6fd8\" "
		"fill-opacity=\"0.3\"/>\n",
		X0 + 290, y - 11);
	text(f, X0 + 310, y, "start", 12, "#222222", "key", "step in force");
	text(f, X0 + 430, y, "start", 12, "#222222", "key", "| black line: time measured");
}

void sc_svg(FILE *f, const struct scenario *s)
{
	struct geo g;
	g.span = (double)(s->ended_ms > s->duration_ms ? s->ended_ms : s->duration_ms);
	if (g.span < 1000)
		g.span = 1000;
	g.top = 76;
	g.rows = g.top + 42;
	g.plot = g.rows + s->nprobes * ROW + 16;
	g.reqs = s->rq_secs ? g.plot + PLOT + 16 : 0;
	g.bottom = (g.reqs ? g.reqs : g.plot) + PLOT;
	int h = g.bottom + 40;
	fprintf(f,
		"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
		"viewBox=\"0 0 %d %d\">\n<rect width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n",
		W, h, W, h, W, h);
	char title[PATH_MAX + 64];
	snprintf(title, sizeof(title), "faultnet scenario %s", s->file);
	text(f, 10, 24, "start", 16, "#111111", "title", title);
	int held = 0;
	for (int i = 0; i < s->nexpects; i++)
		held += s->expects[i].held;
	snprintf(title, sizeof(title), "%s; %d of %d expectations held; group %s", s->end_reason,
		 held, s->nexpects, s->group);
	text(f, 10, 44, "start", 13, held == s->nexpects ? "#2e7d32" : "#c62828", "result", title);
	axis(f, &g);
	bands(f, s, &g);
	probe_rows(f, s, &g);
	plot(f, s, &g);
	if (g.reqs)
		requests_plot(f, s, &g);
	markers(f, s, &g);
	key(f, &g);
	fputs("</svg>\n", f);
}
