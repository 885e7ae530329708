#define _POSIX_C_SOURCE 200809L
/* poet sweep: the energy-versus-memory frontier of one model, for the fast
 * certified planner, its remat-only and paging-only variants, and the
 * baselines. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char SWEEP_HELP[] =
    "usage: poet sweep ((--model NAME | --onnx FILE) --device DEV [--batch N] | --instance FILE)\n"
    "                  [--from BYTES|PCT%] [--to BYTES|PCT%] [--points N]\n"
    "                  [--runtime-factor F[,F...]] [--runtime-model serial|compute]\n"
    "                  [--series LIST] [--time-limit S]\n"
    "                  [--train SPEC] [--svg FILE] [--json] [--quiet]\n"
    "Plans the model at N budgets evenly spaced from --from (default: the floor,\n"
    "the largest stage) to --to (default 100% of the keep-all peak), for each\n"
    "runtime factor (default 1.5), with every series; validates and simulates\n"
    "each schedule, prints energy relative to full-memory training, and draws\n"
    "the frontier (--svg). Series: joint, remat-only, paging-only (the fast\n"
    "certified planner, and the same with paging or rematerialization switched\n"
    "off), or any planner name; default joint,remat-only,paging-only,chen-sqrt,\n"
    "remat-dtr,paging,hybrid.\n"
    "  --points N        2 to 100 (default 8)\n"
    "  --train SPEC      what trains: all (default), biases, last:N, ratio:R or mask:FILE\n"
    "                    (+frozen-bn, +masks, +ratio:R)\n"
    "  --time-limit S    per point for fast and milp, default 10 s\n"
RUNTIME_MODEL_HELP;

enum { MAX_SERIES = 16, MAX_FACTORS = 8 };

static const char *const COLORS[] = {"#1f4e9c", "#e07b00", "#2ca02c", "#7f7f7f", "#9467bd",
                                     "#d62728", "#8c564b", "#17becf", "#bcbd22", "#e377c2"};

/* Series names to planners: the exact planner's variants, or a planner. */
static int parse_series(const char *list, poet_sweep_series *out, char *store, size_t cap)
{
    snprintf(store, cap, "%s", list);
    int n = 0;
    for (char *tok = strtok(store, ","); tok; tok = strtok(NULL, ",")) {
        if (n == MAX_SERIES) return -1;
        poet_sweep_series s = {tok, tok, false, false};
        if (strcmp(tok, "joint") == 0) s.planner = "fast";
        else if (strcmp(tok, "remat-only") == 0) s.planner = "fast", s.no_paging = true;
        else if (strcmp(tok, "paging-only") == 0) s.planner = "fast", s.no_remat = true;
        else if (!poet_planner_find(tok)) return -2 - n;
        out[n++] = s;
    }
    return n;
}

static int parse_factors(const char *list, double *out)
{
    int n = 0;
    const char *p = list;
    while (*p) {
        char *end;
        double f = strtod(p, &end);
        if (end == p || !(f >= 1 && f <= 1e6) || n == MAX_FACTORS || (*end && *end != ',')) return -1;
        out[n++] = f;
        p = *end ? end + 1 : end;
    }
    return n;
}

typedef struct frontier {
    const poet_problem *p0;
    const poet_sweep_series *series;
    int n_series, n_budgets, n_factors;
    const uint64_t *budgets;
    const double *factors;
    const poet_sweep_point *pts;
} frontier;

static const poet_sweep_point *point(const frontier *fr, int f, int b, int s)
{
    return &fr->pts[((size_t)f * (size_t)fr->n_budgets + (size_t)b) * (size_t)fr->n_series + (size_t)s];
}

static double pct(const frontier *fr, uint64_t budget)
{
    return 100.0 * (double)budget / (double)fr->p0->keep_all_peak_bytes;
}

/* One panel per runtime factor: energy / full-memory energy over the budget. */
static void draw(FILE *f, const frontier *fr)
{
    enum { W = 900, H = 420, M = 70 };
    double lo = 1, hi = 1;
    for (int k = 0; k < fr->n_factors * fr->n_budgets * fr->n_series; k++)
        if (fr->pts[k].validated) {
            double r = fr->pts[k].energy_j / fr->p0->full_memory_energy_j;
            lo = r < lo ? r : lo, hi = r > hi ? r : hi;
        }
    hi = hi + 0.05 * (hi - lo + 0.01);
    double x0 = pct(fr, fr->budgets[0]), x1 = pct(fr, fr->budgets[fr->n_budgets - 1]);
    if (x1 <= x0) x1 = x0 + 1;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\">\n", W,
            H * fr->n_factors);
    for (int fi = 0; fi < fr->n_factors; fi++) {
        double top = H * fi + 40, ph = H - 110, pw = W - 2 * M - 140;
#define PX(v) (M + pw * ((v) - x0) / (x1 - x0))
#define PY(r) (top + ph - ph * ((r) - lo) / (hi - lo))
        fprintf(f, "<text x=\"%d\" y=\"%.0f\" font-size=\"15\">%s on %s: energy per iteration vs RAM budget, "
                   "runtime factor %g</text>\n", M, top - 14, fr->p0->inst->model, fr->p0->inst->device.name,
                fr->factors[fi]);
        fprintf(f, "<rect x=\"%d\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" stroke=\"#444\"/>\n", M, top,
                pw, ph);
        for (int t = 0; t <= 4; t++) {
            double r = lo + (hi - lo) * t / 4, x = x0 + (x1 - x0) * t / 4;
            fprintf(f, "<text x=\"%d\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%.3fx</text>\n", M - 6,
                    PY(r) + 4, r);
            fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" font-size=\"11\" text-anchor=\"middle\">%.0f%%</text>\n", PX(x),
                    top + ph + 16, x);
        }
        fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" font-size=\"12\" text-anchor=\"middle\">RAM budget, %% of the keep-all "
                   "peak (%llu B)</text>\n", M + pw / 2, top + ph + 36, (unsigned long long)fr->p0->keep_all_peak_bytes);
        for (int s = 0; s < fr->n_series; s++) {
            const char *c = COLORS[s % (int)(sizeof COLORS / sizeof *COLORS)];
            /* planners with variants solid, baselines dashed */
            fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.8\"%s points=\"", c,
                    poet_planner_find(fr->series[s].planner)->variants ? "" : " stroke-dasharray=\"6 3\"");
            for (int b = 0; b < fr->n_budgets; b++) {
                const poet_sweep_point *pt = point(fr, fi, b, s);
                if (pt->validated)
                    fprintf(f, "%.1f,%.1f ", PX(pct(fr, pt->budget_bytes)),
                            PY(pt->energy_j / fr->p0->full_memory_energy_j));
            }
            fputs("\"/>\n", f);
            for (int b = 0; b < fr->n_budgets; b++) {
                const poet_sweep_point *pt = point(fr, fi, b, s);
                if (pt->validated)
                    fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", PX(pct(fr, pt->budget_bytes)),
                            PY(pt->energy_j / fr->p0->full_memory_energy_j), c);
            }
            fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"14\" height=\"4\" fill=\"%s\"/>\n", M + pw + 16,
                    top + 10 + 18 * s, c);
            fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" font-size=\"12\">%s</text>\n", M + pw + 36, top + 16 + 18 * s,
                    fr->series[s].label);
        }
#undef PX
#undef PY
    }
    fputs("</svg>\n", f);
}

static int write_svg(const char *path, const frontier *fr)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    if (!mem) return lib_error(&(poet_err){POET_ERR_NOMEM, "out of memory drawing the frontier"});
    draw(mem, fr);
    fclose(mem);
    poet_err err = {0};
    int rc = poet_write_file_atomic(path, buf, len, &err) ? lib_error(&err) : 0;
    free(buf);
    return rc;
}

static void print_table(const frontier *fr)
{
    printf("%s on %s: energy per iteration / full-memory energy (%.6g J); keep-all peak %llu B\n",
           fr->p0->inst->model, fr->p0->inst->device.name, fr->p0->full_memory_energy_j,
           (unsigned long long)fr->p0->keep_all_peak_bytes);
    for (int fi = 0; fi < fr->n_factors; fi++) {
        printf("runtime factor %g\n%12s %6s", fr->factors[fi], "budget B", "%");
        for (int s = 0; s < fr->n_series; s++) printf(" %12s", fr->series[s].label);
        printf("\n");
        for (int b = 0; b < fr->n_budgets; b++) {
            printf("%12llu %5.1f%%", (unsigned long long)fr->budgets[b], pct(fr, fr->budgets[b]));
            for (int s = 0; s < fr->n_series; s++) {
                const poet_sweep_point *pt = point(fr, fi, b, s);
                if (pt->validated)
                    printf(" %11.4fx%s", pt->energy_j / fr->p0->full_memory_energy_j,
                           pt->status == POET_PLAN_OPTIMAL ? "*" : " ");
                else
                    printf(" %12s", pt->status == POET_PLAN_INFEASIBLE ? "infeasible" : "-");
            }
            printf("\n");
        }
    }
    printf("* proven optimal; - no schedule found within the budgets\n");
}

static int print_points(const frontier *fr)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "model", fr->p0->inst->model);
    cJSON_AddStringToObject(o, "device", fr->p0->inst->device.name);
    cJSON_AddNumberToObject(o, "keep_all_peak_bytes", (double)fr->p0->keep_all_peak_bytes);
    cJSON_AddNumberToObject(o, "min_budget_bytes", (double)fr->p0->min_budget_bytes);
    cJSON_AddNumberToObject(o, "full_memory_energy_j", fr->p0->full_memory_energy_j);
    cJSON *arr = cJSON_AddArrayToObject(o, "points");
    for (int k = 0; k < fr->n_factors * fr->n_budgets * fr->n_series; k++) {
        const poet_sweep_point *pt = &fr->pts[k];
        cJSON *q = cJSON_CreateObject();
        cJSON_AddStringToObject(q, "series", fr->series[pt->series].label);
        cJSON_AddNumberToObject(q, "budget_bytes", (double)pt->budget_bytes);
        cJSON_AddNumberToObject(q, "runtime_factor", pt->runtime_factor);
        cJSON_AddStringToObject(q, "status", poet_plan_status_str(pt->status));
        cJSON_AddBoolToObject(q, "validated", pt->validated);
        if (pt->validated) {
            cJSON_AddNumberToObject(q, "energy_j", pt->energy_j);
            cJSON_AddNumberToObject(q, "time_with_paging_s", pt->time_with_paging_s);
            cJSON_AddNumberToObject(q, "peak_ram_bytes", (double)pt->peak_ram_bytes);
            cJSON_AddNumberToObject(q, "recomputations", pt->recomputations);
            cJSON_AddNumberToObject(q, "page_ins", pt->page_ins);
            cJSON_AddNumberToObject(q, "page_outs", pt->page_outs);
        }
        if (!isnan(pt->lower_bound_j)) cJSON_AddNumberToObject(q, "lower_bound_j", pt->lower_bound_j);
        cJSON_AddNumberToObject(q, "solve_seconds", pt->solve_seconds);
        cJSON_AddItemToArray(arr, q);
    }
    return print_json(o);
}

/* The series by their labels (planner names), as the table and the JSON name them. */
static void on_point(void *ctx, const poet_sweep_point *pt)
{
    const poet_sweep_series *series = ctx;
    fprintf(stderr, "sweep: budget %llu B, factor %g, %s: %s\n", (unsigned long long)pt->budget_bytes,
            pt->runtime_factor, series[pt->series].label, poet_plan_status_str(pt->status));
}

typedef struct sweep_args {
    graph_src src;
    const char *from, *to, *points, *factors, *series, *limit, *svg, *runtime_model;
    bool json, quiet;
} sweep_args;

static int run_sweep(const sweep_args *a, poet_instance *inst)
{
    const char *cmd = "sweep";
    poet_sweep_series series[MAX_SERIES];
    char store[512];
    int n_series = parse_series(a->series ? a->series : "joint,remat-only,paging-only,chen-sqrt,remat-dtr,paging,hybrid",
                                series, store, sizeof store);
    if (n_series < 0) return usage_error(cmd, "--series: unknown planner or too many series in", a->series);
    double factors[MAX_FACTORS];
    int n_factors = parse_factors(a->factors ? a->factors : "1.5", factors);
    if (n_factors <= 0) return usage_error(cmd, "--runtime-factor takes up to 8 numbers from 1 to 1e6, got", a->factors);
    int n_budgets = 8;
    if (a->points && !parse_int(a->points, 2, 100, &n_budgets)) return usage_error(cmd, "--points must be 2 to 100, got", a->points);
    bool counts_paging;
    if (!parse_runtime_model(a->runtime_model, &counts_paging))
        return usage_error(cmd, "--runtime-model must be serial or compute, got", a->runtime_model);
    double seconds = 10;
    if (a->limit && !parse_time_limit(a->limit, &seconds))
        return usage_error(cmd, "--time-limit must be seconds in (0, 86400], got", a->limit);
    poet_err err = {0};
    poet_problem p0;
    if (poet_problem_init(&p0, inst, 0, factors[0], &err)) return lib_error(&err);
    uint64_t lo = p0.min_budget_bytes, hi = p0.keep_all_peak_bytes;
    int rc = 0;
    if ((a->from && !parse_budget(a->from, p0.keep_all_peak_bytes, &lo)) || (a->to && !parse_budget(a->to, p0.keep_all_peak_bytes, &hi)))
        rc = usage_error(cmd, "--from and --to take bytes or a percentage like 50%", NULL);
    else if (hi < lo)
        rc = usage_error(cmd, "--to lies below --from (or below the floor, the largest stage)", NULL);
    uint64_t *budgets = rc ? NULL : malloc((size_t)n_budgets * sizeof *budgets);
    poet_sweep_point *pts = rc ? NULL : calloc((size_t)(n_budgets * n_series * n_factors), sizeof *pts);
    if (!rc && (!budgets || !pts)) rc = lib_error(&(poet_err){POET_ERR_NOMEM, "out of memory"});
    if (!rc) {
        for (int b = 0; b < n_budgets; b++)
            budgets[b] = lo + (uint64_t)((double)(hi - lo) * b / (n_budgets - 1));
        poet_plan_options o = {.time_limit_s = seconds, .threads = 1, .deterministic = true};
        bool quiet = a->quiet || a->json;
        poet_sweep_grid grid = {budgets, n_budgets, factors, n_factors, counts_paging};
        if (poet_sweep(inst, series, n_series, &grid, &o, pts, quiet ? NULL : on_point, series, &err))
            rc = lib_error(&err);
    }
    if (!rc) {
        frontier fr = {&p0, series, n_series, n_budgets, n_factors, budgets, factors, pts};
        if (a->svg) rc = write_svg(a->svg, &fr);
        if (!rc) {
            if (a->json) rc = print_points(&fr);
            else print_table(&fr);
        }
    }
    free(budgets);
    free(pts);
    poet_problem_free(&p0);
    return rc;
}

int cmd_sweep(int argc, char **argv)
{
    sweep_args a = {0};
    bool help = false;
    opt opts[] = {GRAPH_SRC_OPTS(a.src),
                  {"--from", true, &a.from, NULL},       {"--to", true, &a.to, NULL},
                  {"--points", true, &a.points, NULL},   {"--runtime-factor", true, &a.factors, NULL},
                  {"--series", true, &a.series, NULL},   {"--time-limit", true, &a.limit, NULL},
                  {"--runtime-model", true, &a.runtime_model, NULL},
                  OUTPUT_OPT("--svg", a.svg),         {"--json", false, NULL, &a.json},
                  {"--quiet", false, NULL, &a.quiet},    {NULL, false, NULL, NULL}};
    int rc = parse_opts("sweep", argc, argv, opts, &help);
    if (rc || help) return help ? (fputs(SWEEP_HELP, stdout), 0) : rc;
    poet_instance inst;
    if ((rc = load_instance("sweep", &a.src, &inst))) return rc;
    rc = run_sweep(&a, &inst);
    poet_instance_free(&inst);
    return rc;
}
