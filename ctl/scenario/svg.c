/* svg.c - report.svg: one timeline a person reads at a glance. Steps are
 * shaded bands over the whole picture, each probe is a row of green
 * (healthy) and red (unhealthy) segments, the rules' attempts (a line) and
 * faults (a shaded area under it) per second are plotted below on an axis
 * with values (and, with a request log, the requests per second by outcome
 * below that), and the measured times to notice and to recover are marked
 * with labelled lines, the app's own marks with dashed ones. Labels that
 * would overlap another or cross a marker's line are moved to another side
 * or lane (label widths are estimated on the generous side: tests check the
 * result on the boxes a browser lays out). Every part carries a class (and
 * data- attributes), so that tests can find it in the picture. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/scenario/scenario.h"

#define W 1000
#define X0 170
#define X1 970
#define LANE 14 /* a line of marker labels above a probe's bar */
#define BAR 20
#define GAP 8
#define PLOT 140
#define STEP_LANE 13
#define MAX_LANES 8
#define MAX_BOXES 256

static const char *const step_colors[] = {"#3b6fd8", "#e08a00", "#8a4fd8", "#2aa3a3"};
static const char *const line_colors[] = {"#1f3b73", "#b5179e", "#0b7a75", "#7a4b00"};

/* A text's box, as estimated; y0 above y1. */
struct box {
	double x0, y0, x1, y1;
};

/* The labels placed so far, that a new one must not overlap. */
struct placed {
	struct box b[MAX_BOXES];
	int n;
};

struct geo {
	double span;			   /* ms the x axis covers */
	int top, rows, plot, reqs, bottom; /* reqs: the requests' plot, or 0 */
	int *row_y, *row_lanes;		   /* per probe: its bar's top, its lanes of labels */
};

static double xt(const struct geo *g, int64_t ms)
{
	if (ms < 0)
		ms = 0;
	return X0 + (X1 - X0) * (double)ms / g->span;
}

/* A generous width for sans-serif text: DejaVu Sans and Liberation Sans
 * stay under 0.64 em for digits and lower case, 0.8 em for capitals. */
static double text_width(const char *t, int size)
{
	double w = 0;
	for (; *t; t++)
		w += strchr(" .:,;|!il'()[]", *t)			  ? 0.36
		     : (*t >= 'A' && *t <= 'Z') || *t == 'm' || *t == 'w' ? 0.9
									  : 0.66;
	return w * size;
}

static struct box box_of(double x, double y, bool end, int size, const char *t)
{
	double w = text_width(t, size);
	double x0 = end ? x - w : x;
	return (struct box){x0 - 1, y - size - 1, x0 + w + 1, y + size * 0.3 + 1};
}

static bool overlaps(const struct placed *p, struct box b)
{
	for (int i = 0; i < p->n; i++)
		if (b.x0 < p->b[i].x1 && p->b[i].x0 < b.x1 && b.y0 < p->b[i].y1 &&
		    p->b[i].y0 < b.y1)
			return true;
	return false;
}

static void keep(struct placed *p, struct box b)
{
	if (p->n < MAX_BOXES)
		p->b[p->n++] = b;
}

/* A vertical line at x from y0 to y1 that no label may cross. */
static void keep_line(struct placed *p, double x, double y0, double y1)
{
	keep(p, (struct box){x - 2, y0, x + 2, y1});
}

/* A duration as a person reads it: ms under 10 s ("34 ms", not "0.0 s"). */
static void duration(char *buf, size_t len, int64_t ms)
{
	if (ms < 10000)
		snprintf(buf, len, "%lld ms", (long long)ms);
	else
		snprintf(buf, len, "%.1f s", (double)ms / 1000);
}

/* Text as XML character data or an attribute's value. */
static void esc(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '<')
			fputs("&lt;", f);
		else if (*s == '&')
			fputs("&amp;", f);
		else if (*s == '"')
			fputs("&quot;", f);
		else
			fputc(*s, f);
	}
}

static void text(FILE *f, double x, double y, const char *anchor, int size, const char *fill,
		 const char *cls, const char *s)
{
	fprintf(f,
		"<text class=\"%s\" x=\"%.1f\" y=\"%.1f\" font-size=\"%d\" fill=\"%s\" "
		"text-anchor=\"%s\" font-family=\"sans-serif\">",
		cls, x, y, size, fill, anchor);
	esc(f, s);
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

/* Where a label may go: lanes from y (lane k at y - dy * k: dy > 0 goes
 * up the page), in the coordinates of the boxes placed so far; drawn at
 * draw_y (the same lane in the picture) when f is given. */
struct spot {
	double x, y, dy, draw_y;
};

/* Places a label in the first lane (from 0) where it overlaps nothing
 * placed: right of x, or left of it where the right runs out of room or
 * is taken. The last lane takes it whatever it meets. The lane used. */
static int place(FILE *f, struct placed *used, struct spot at, int size, const char *fill,
		 const char *cls, const char *t)
{
	for (int k = 0;; k++) {
		for (int side = 0; side < 2; side++) {
			bool end = side == 1;
			double x = end ? at.x - 4 : at.x + 4;
			struct box b = box_of(x, at.y - at.dy * k, end, size, t);
			if ((!end && b.x1 > W) || (k < MAX_LANES - 1 && overlaps(used, b)))
				continue;
			keep(used, b);
			if (f)
				text(f, x, at.draw_y - at.dy * k, end ? "end" : "start", size, fill,
				     cls, t);
			return k;
		}
	}
}

static void step_label(const struct sc_step *st, char *label, size_t len)
{
	snprintf(label, len, "%s: %s %s", st->name, sc_verb_name(st->verb),
		 st->verb == SV_ADD ? st->rule : st->arg);
}

/* The steps' labels and then the app's marks', each in the first free
 * lane under the time axis: drawn when f is given; the lanes used. */
static int step_labels(FILE *f, const struct scenario *s, const struct geo *g)
{
	struct placed used = {.n = 0};
	int lanes = 1;
	for (int i = 0; i < s->nmarks; i++) /* the marks' dashed lines */
		keep_line(&used, xt(g, s->marks[i].t_ms), g->top,
			  g->top + 16 + STEP_LANE * MAX_LANES);
	for (int i = 0; i < s->nsteps; i++) {
		const struct sc_step *st = &s->steps[i];
		if (st->actual_ms < 0)
			continue;
		char label[SC_NAME * 2 + 16];
		step_label(st, label, sizeof(label));
		struct spot at = {xt(g, st->actual_ms), g->top + 12, -STEP_LANE, g->top + 12};
		int k = place(f, &used, at, 11, step_colors[i % 4], "step-label", label);
		lanes = k + 1 > lanes ? k + 1 : lanes;
	}
	for (int i = 0; i < s->nmarks; i++) {
		const struct sc_mark *m = &s->marks[i];
		struct spot at = {xt(g, m->t_ms), g->top + 12, -STEP_LANE, g->top + 12};
		int k = place(f, &used, at, 11, "#444444", "mark-label", m->name);
		lanes = k + 1 > lanes ? k + 1 : lanes;
	}
	return lanes;
}

static void bands(FILE *f, const struct scenario *s, const struct geo *g)
{
	for (int i = 0; i < s->nsteps; i++) {
		const struct sc_step *st = &s->steps[i];
		if (st->actual_ms < 0)
			continue;
		int64_t end = st->undo_actual_ms >= 0 ? st->undo_actual_ms : s->ended_ms;
		fprintf(f,
			"<rect class=\"step\" data-step=\"%s\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" "
			"height=\"%d\" fill=\"%s\" fill-opacity=\"0.16\"/>\n",
			st->name, xt(g, st->actual_ms), g->top,
			xt(g, end) - xt(g, st->actual_ms) + 0.5, g->bottom - g->top,
			step_colors[i % 4]);
	}
	for (int i = 0; i < s->nmarks; i++) { /* the app's moments: dashed */
		fputs("<line class=\"mark\" data-mark=\"", f);
		esc(f, s->marks[i].name);
		fprintf(f,
			"\" data-t=\"%lld\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" "
			"stroke=\"#444444\" stroke-dasharray=\"3 3\"/>\n",
			(long long)s->marks[i].t_ms, xt(g, s->marks[i].t_ms), g->top,
			xt(g, s->marks[i].t_ms), g->bottom);
	}
	step_labels(f, s, g);
}

static void probe_rows(FILE *f, const struct scenario *s, const struct geo *g)
{
	for (int i = 0; i < s->nprobes; i++) {
		const struct sc_probe *p = &s->probes[i];
		int y = g->row_y[i];
		text(f, 10, y + 15, "start", 13, "#222222", "probe-label", p->name);
		for (size_t k = 0; k < p->n; k++) {
			int64_t a = p->samples[k].t_ms;
			int64_t b = k + 1 < p->n ? p->samples[k + 1].t_ms : a + p->interval_ms;
			fprintf(f,
				"<rect class=\"sample %s\" data-probe=\"%s\" data-t=\"%lld\" "
				"x=\"%.1f\" "
				"y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\"/>\n",
				p->samples[k].ok ? "healthy" : "unhealthy", p->name, (long long)a,
				xt(g, a), y, xt(g, b) - xt(g, a) + 0.3, BAR,
				p->samples[k].ok ? "#2e9d48" : "#d0342c");
		}
	}
}

static uint64_t per_second(const uint64_t *v, int i)
{
	return i == 0 ? v[0] : v[i] >= v[i - 1] ? v[i] - v[i - 1] : 0;
}

static double plot_y(const struct geo *g, double v, double top)
{
	return g->plot + PLOT - PLOT * v / top;
}

/* Attempts: a line. Faults: the area under their own line, shaded, so
 * that attempts that all met the fault still show as a line on top. */
static void series(FILE *f, const struct geo *g, const uint64_t *v, int n, double top,
		   const char *color, const char *cls, const char *rule, bool area)
{
	if (area)
		fprintf(f,
			"<polygon class=\"%s\" data-rule=\"%s\" fill=\"%s\" fill-opacity=\"0.3\" "
			"stroke=\"none\" points=\"%.1f,%d ",
			cls, rule, color, xt(g, 0), g->plot + PLOT);
	else
		fprintf(f,
			"<polyline class=\"%s\" data-rule=\"%s\" fill=\"none\" stroke=\"%s\" "
			"stroke-width=\"2\" points=\"",
			cls, rule, color);
	for (int i = 0; i < n; i++)
		fprintf(f, "%.1f,%.1f ", xt(g, (int64_t)i * 1000),
			plot_y(g, (double)per_second(v, i), top));
	if (area && n > 0)
		fprintf(f, "%.1f,%d", xt(g, (int64_t)(n - 1) * 1000), g->plot + PLOT);
	fputs("\"/>\n", f);
}

/* The smallest 1, 2 or 5 times a power of ten at or above v. */
static double round_up(double v)
{
	double p = 1;
	while (p * 10 < v)
		p *= 10;
	return v <= p ? p : v <= 2 * p ? 2 * p : v <= 5 * p ? 5 * p : 10 * p;
}

/* The rate axis: 0, half and the top, with grid lines. */
static void rate_axis(FILE *f, const struct geo *g, double top)
{
	for (int k = 0; k <= 2; k++) {
		double v = top * k / 2, y = plot_y(g, v, top);
		char label[32];
		snprintf(label, sizeof(label), "%g", v);
		fprintf(f,
			"<line class=\"rate-grid\" x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" "
			"stroke=\"#eeeeee\"/>\n",
			X0, y, X1, y);
		fprintf(f,
			"<text class=\"rate-tick\" data-value=\"%g\" x=\"%d\" y=\"%.1f\" "
			"font-size=\"11\" fill=\"#555555\" text-anchor=\"end\" "
			"font-family=\"sans-serif\">%s</text>\n",
			v, X0 - 5, y + 4, label);
	}
}

/* What a rule's line shows: a request rule's requests, any other rule's
 * attempts (connects); a rule counts one or the other. */
static const uint64_t *looked_at(const struct sc_rate *rt, const char **what)
{
	bool req = rt->total[3] && !rt->total[0];
	*what = req ? "requests" : "attempts";
	return req ? rt->requests : rt->attempts;
}

static void plot(FILE *f, const struct scenario *s, const struct geo *g)
{
	double max = 0;
	const char *what;
	int nreq = 0;
	for (int r = 0; r < s->nrates; r++) {
		const uint64_t *v = looked_at(&s->rates[r], &what);
		nreq += what[0] == 'r';
		for (int i = 0; i < s->rates[r].len; i++)
			if ((double)per_second(v, i) > max)
				max = (double)per_second(v, i);
	}
	double top = round_up(max < 1 ? 1 : max);
	char label[64];
	snprintf(label, sizeof(label), "per second (max %.0f)", max);
	/* The line's word, as the rules count: short enough to clear the rate
	 * axis's values (smaller when both words are needed). */
	bool mixed = nreq && nreq < s->nrates;
	text(f, 10, g->plot + 12, "start", mixed ? 10 : 12, "#222222", "plot-label",
	     mixed  ? "attempts/requests (line)"
	     : nreq ? "requests (line)"
		    : "attempts (line)");
	text(f, 10, g->plot + 27, "start", 12, "#222222", "plot-label", "faults (shaded)");
	text(f, 10, g->plot + 42, "start", 11, "#555555", "plot-label", label);
	rate_axis(f, g, top);
	fprintf(f,
		"<rect class=\"plot\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
		"stroke=\"#bbbbbb\"/>\n",
		X0, g->plot, X1 - X0, PLOT);
	for (int r = 0; r < s->nrates; r++) {
		const struct sc_rate *rt = &s->rates[r];
		const char *c = line_colors[r % 4];
		series(f, g, rt->faults, rt->len, top, c, "faults", rt->rule, true);
		const uint64_t *v = looked_at(rt, &what);
		/* A request rule's line has a class of its own: "requests" is
		 * the request log's plot. */
		series(f, g, v, rt->len, top, c, what[0] == 'r' ? "rule-requests" : "attempts",
		       rt->rule, false);
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

static void marker_label(const struct sc_expect *e, char *label, size_t len)
{
	char d[32];
	duration(d, sizeof(d), e->measured);
	snprintf(label, len, "%s %s",
		 e->kind == EX_UNHEALTHY_WITHIN ? "noticed after" : "recovered after", d);
}

static bool has_marker(const struct scenario *s, const struct sc_expect *e)
{
	return (e->kind == EX_HEALTHY_WITHIN || e->kind == EX_UNHEALTHY_WITHIN) &&
	       e->measured >= 0 && e->after >= 0 && s->steps[e->after].actual_ms >= 0;
}

static int64_t marker_at(const struct scenario *s, const struct sc_expect *e)
{
	const struct sc_step *st = &s->steps[e->after];
	return (e->from_end ? st->undo_actual_ms : st->actual_ms) + e->measured;
}

/* The measured times' labels, each in the first free lane above its
 * probe's bar; drawn when f is given. Counts the lanes of each row. */
static void marker_labels(FILE *f, const struct scenario *s, struct geo *g)
{
	struct placed used = {.n = 0};
	/* No label crosses a marker's line (of its row) or a mark's (of all). */
	for (int i = 0; i < s->nexpects; i++)
		if (has_marker(s, &s->expects[i]))
			keep_line(&used, xt(g, marker_at(s, &s->expects[i])),
				  -1000.0 * s->expects[i].probe - 25 - LANE * MAX_LANES,
				  -1000.0 * s->expects[i].probe + 30);
	for (int p = 0; p < s->nprobes; p++)
		for (int i = 0; i < s->nmarks; i++)
			keep_line(&used, xt(g, s->marks[i].t_ms),
				  -1000.0 * p - 25 - LANE * MAX_LANES, -1000.0 * p + 30);
	for (int i = 0; i < s->nexpects; i++) {
		const struct sc_expect *e = &s->expects[i];
		if (!has_marker(s, e))
			continue;
		char label[64];
		marker_label(e, label, sizeof(label));
		/* Rows are far apart in the placing coordinates: row p at -1000 p. */
		struct spot at = {xt(g, marker_at(s, e)), -1000.0 * e->probe - 5, LANE,
				  f ? g->row_y[e->probe] - 5 : 0};
		int k =
		    place(f, &used, at, 12, e->kind == EX_UNHEALTHY_WITHIN ? "#d0342c" : "#2e9d48",
			  "marker-label", label);
		if (k + 1 > g->row_lanes[e->probe])
			g->row_lanes[e->probe] = k + 1;
		if (f) /* up to its own label's lane, no further */
			fprintf(f,
				"<line class=\"marker %s\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" "
				"y2=\"%d\" stroke=\"#111111\" stroke-width=\"3\"/>\n",
				e->kind == EX_UNHEALTHY_WITHIN ? "noticed" : "recovered", at.x,
				g->row_y[e->probe] - LANE * (k + 1), at.x,
				g->row_y[e->probe] + BAR + 2);
	}
}

static void markers(FILE *f, const struct scenario *s, struct geo *g)
{
	marker_labels(f, s, g);
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
	text(f, X0 + 620, y, "start", 12, "#222222", "key", "dashed line: the app's mark");
}

/* Where everything goes: the lanes the labels need decide the rows. */
static bool layout(const struct scenario *s, struct geo *g)
{
	g->span = (double)(s->ended_ms > s->duration_ms ? s->ended_ms : s->duration_ms);
	if (g->span < 1000)
		g->span = 1000;
	g->top = 76;
	g->row_y = calloc((size_t)s->nprobes + 1, sizeof(int));
	g->row_lanes = calloc((size_t)s->nprobes + 1, sizeof(int));
	if (!g->row_y || !g->row_lanes)
		return false;
	g->rows = g->top + 16 + STEP_LANE * step_labels(NULL, s, g);
	marker_labels(NULL, s, g);
	int y = g->rows;
	for (int i = 0; i < s->nprobes; i++) {
		if (g->row_lanes[i] < 1)
			g->row_lanes[i] = 1;
		g->row_y[i] = y + LANE * g->row_lanes[i] + 4;
		y = g->row_y[i] + BAR + GAP;
	}
	g->plot = y + 16;
	g->reqs = s->rq_secs ? g->plot + PLOT + 16 : 0;
	g->bottom = (g->reqs ? g->reqs : g->plot) + PLOT;
	return true;
}

void sc_svg(FILE *f, const struct scenario *s)
{
	struct geo g;
	if (!layout(s, &g)) {
		fputs("<svg xmlns=\"http://www.w3.org/2000/svg\"><text y=\"20\">out of memory"
		      "</text></svg>\n",
		      f);
		free(g.row_y);
		free(g.row_lanes);
		return;
	}
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
	free(g.row_y);
	free(g.row_lanes);
}
