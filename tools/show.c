#include "show.h"

#include <string.h>

enum { WIDTH = 1200, PLOT_H = 260, MARGIN = 60 };

static const char *const COLOR_COMPUTE = "#1f4e9c", *const COLOR_RECOMPUTE = "#e07b00",
                         *const COLOR_RAM = "#9cc3ea", *const COLOR_STORAGE = "#b8b8b8",
                         *const COLOR_PAGEIN = "#2ca02c", *const COLOR_PAGEOUT = "#d62728";

static void text(FILE *f, double x, double y, int size, const char *anchor, const char *s)
{
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"%d\" text-anchor=\"%s\">", x, y, size, anchor);
    for (; *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else fputc(*s, f);
    }
    fputs("</text>\n", f);
}

static void memory_plot(FILE *f, const poet_problem *p, const poet_mem_trace *tr, double y0)
{
    double top = (double)(p->budget_bytes > p->keep_all_peak_bytes ? p->budget_bytes : p->keep_all_peak_bytes);
    for (int k = 0; k < tr->n; k++)
        if ((double)tr->p[k].bytes > top) top = (double)tr->p[k].bytes;
    top *= 1.08;
    double w = WIDTH - 2 * MARGIN, x0 = MARGIN;
#define X(k) (x0 + w * (double)(k) / (double)(tr->n > 1 ? tr->n - 1 : 1))
#define Y(b) (y0 + PLOT_H - PLOT_H * (double)(b) / top)
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" fill=\"none\" stroke=\"#444\"/>\n", x0, y0,
            w, PLOT_H);
    int fwd = 0;
    while (fwd < tr->n && !p->inst->nodes[tr->p[fwd].stage].is_backward) fwd++;
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" fill=\"#f3f3f3\"/>\n", X(fwd), y0,
            x0 + w - X(fwd), PLOT_H);
    text(f, X(fwd) + 4, y0 + 14, 11, "start", "backward");
    fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.2\" points=\"", COLOR_COMPUTE);
    for (int k = 0; k < tr->n; k++) fprintf(f, "%.1f,%.1f ", X(k), Y(tr->p[k].bytes));
    fputs("\"/>\n", f);
    char label[96];
    fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-dasharray=\"6 4\"/>\n", x0,
            x0 + w, Y(p->budget_bytes), Y(p->budget_bytes), COLOR_PAGEOUT);
    snprintf(label, sizeof label, "budget %llu B", (unsigned long long)p->budget_bytes);
    text(f, x0 + w - 4, Y(p->budget_bytes) - 4, 11, "end", label);
    fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#888\" stroke-dasharray=\"2 3\"/>\n",
            x0, x0 + w, Y(p->keep_all_peak_bytes), Y(p->keep_all_peak_bytes));
    snprintf(label, sizeof label, "keep-all peak %llu B", (unsigned long long)p->keep_all_peak_bytes);
    text(f, x0 + 4, Y(p->keep_all_peak_bytes) - 4, 11, "start", label);
    text(f, x0 + w / 2, y0 + PLOT_H + 18, 12, "middle", "computations in order (forward, then backward)");
    text(f, x0 - 8, y0 + 10, 11, "end", "bytes");
#undef X
#undef Y
}

static void cell(FILE *f, double x, double y, double size, const char *color)
{
    fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\"/>\n", x, y, size, size, color);
}

/* Rows are stages, columns nodes. */
static void matrix(FILE *f, const poet_schedule *s, const int *stored_from, bool storage, double x0, double y0,
                   double size)
{
    double side = size * s->T;
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"white\" stroke=\"#444\"/>\n", x0,
            y0, side, side);
    for (int t = 0; t < s->T; t++)
        for (int i = 0; i <= t; i++) {
            double x = x0 + size * i, y = y0 + size * t;
            if (!storage) {
                if (poet_sched_get(s, POET_R, t, i)) cell(f, x, y, size, i == t ? COLOR_COMPUTE : COLOR_RECOMPUTE);
                else if (poet_sched_get(s, POET_SRAM, t, i)) cell(f, x, y, size, COLOR_RAM);
            } else {
                if (poet_sched_get(s, POET_MIN, t, i)) cell(f, x, y, size, COLOR_PAGEIN);
                else if (poet_sched_get(s, POET_MOUT, t, i)) cell(f, x, y, size, COLOR_PAGEOUT);
                else if (stored_from[i] <= t) cell(f, x, y, size, COLOR_STORAGE);
            }
        }
    text(f, x0 + side / 2, y0 - 8, 13, "middle", storage ? "storage: on storage, paged in, paged out" :
                                                            "RAM: computed, recomputed, resident");
    text(f, x0 - 6, y0 + 10, 11, "end", "stage");
    text(f, x0 + side, y0 + side + 14, 11, "end", "node");
}

static void legend(FILE *f, double x, double y)
{
    const char *names[] = {"computed", "recomputed", "in RAM", "on storage", "paged in", "paged out"};
    const char *colors[] = {COLOR_COMPUTE, COLOR_RECOMPUTE, COLOR_RAM, COLOR_STORAGE, COLOR_PAGEIN, COLOR_PAGEOUT};
    for (int k = 0; k < 6; k++) {
        cell(f, x + 130 * k, y - 10, 12, colors[k]);
        text(f, x + 130 * k + 18, y, 12, "start", names[k]);
    }
}

void show_svg(FILE *f, const poet_problem *p, const poet_schedule *s, const poet_sim *sim,
              const poet_mem_trace *trace)
{
    double size = (WIDTH / 2.0 - 1.5 * MARGIN) / s->T;
    if (size > 8) size = 8;
    double mat_y = 60 + PLOT_H + 80, side = size * s->T;
    int height = (int)(mat_y + side + 70);
    int stored_from[POET_MAX_PLAN_NODES];
    for (int i = 0; i < s->T; i++) stored_from[i] = s->T;
    for (int t = s->T - 1; t >= 0; t--)
        for (int i = 0; i <= t; i++)
            if (poet_sched_get(s, POET_MOUT, t, i)) stored_from[i] = t + 1;
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"Helvetica, Arial, "
            "sans-serif\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            WIDTH, height);
    char title[320];
    snprintf(title, sizeof title,
             "%s on %s, planner %s: %.4g J (%.4fx full memory), peak %llu B of %llu B, %d recomputations, %d "
             "page-ins, %d page-outs",
             p->inst->model, p->inst->device.name, s->planner[0] ? s->planner : "?", sim->energy_j,
             sim->energy_j / p->full_memory_energy_j, (unsigned long long)sim->peak_ram_bytes,
             (unsigned long long)p->budget_bytes, sim->recomputations, sim->page_ins, sim->page_outs);
    text(f, WIDTH / 2.0, 28, 15, "middle", title);
    memory_plot(f, p, trace, 50);
    matrix(f, s, stored_from, false, MARGIN, mat_y, size);
    matrix(f, s, stored_from, true, WIDTH / 2.0 + MARGIN / 2.0, mat_y, size);
    legend(f, MARGIN, mat_y + side + 45);
    fputs("</svg>\n", f);
}
