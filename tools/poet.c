#define _POSIX_C_SOURCE 200809L
/* poet: the command-line tool, a thin layer over the library. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "poet/poet.h"
#include "cli.h"
#include "show.h"

/* The options of the listing commands: --json and --help. Returns -1 when
 * the command should go on, else the exit code. */
static int list_opts(const char *cmd, const char *help_text, int argc, char **argv, bool *json)
{
    bool help = false;
    opt opts[] = {{"--json", false, NULL, json}, {NULL, false, NULL, NULL}};
    int rc = parse_opts(cmd, argc, argv, opts, &help);
    if (rc) return rc;
    if (help) return fputs(help_text, stdout), 0;
    return -1;
}

/* ---- poet models ---- */
static const char MODELS_HELP[] =
    "usage: poet models [--json]\n"
    "Lists the built-in models. `trainable` says whether the runtime can train\n"
    "it; `reference` whether POET's reference instances include it.\n";

static int cmd_models(int argc, char **argv)
{
    bool json = false;
    int rc = list_opts("models", MODELS_HELP, argc, argv, &json);
    if (rc >= 0) return rc;
    if (!json) {
        printf("%-15s %-6s %-9s %-9s %s\n", "model", "batch", "trainable", "reference", "description");
        for (int i = 0; i < poet_zoo_count(); i++) {
            const poet_model_info *m = poet_zoo_info(i);
            printf("%-15s %-6d %-9s %-9s %s\n", m->name, m->default_batch, m->trainable ? "yes" : "no",
                   m->reference ? "yes" : "no", m->description);
        }
        return 0;
    }
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; arr && i < poet_zoo_count(); i++) {
        const poet_model_info *m = poet_zoo_info(i);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToArray(arr, o);
        cJSON_AddStringToObject(o, "name", m->name);
        cJSON_AddStringToObject(o, "description", m->description);
        if (m->dataset)
            cJSON_AddStringToObject(o, "dataset", m->dataset);
        else
            cJSON_AddNullToObject(o, "dataset");
        cJSON_AddNumberToObject(o, "default_batch", m->default_batch);
        cJSON_AddBoolToObject(o, "trainable", m->trainable);
        cJSON_AddBoolToObject(o, "reference", m->reference);
    }
    return print_json(arr);
}

/* ---- poet devices ---- */
static const char DEVICES_HELP[] =
    "usage: poet devices [--json]\n"
    "Lists the built-in device profiles. A profile of your own is a JSON file\n"
    "(docs/devices.md) that any --device option accepts as a path.\n";

static int cmd_devices(int argc, char **argv)
{
    bool json = false;
    int rc = list_opts("devices", DEVICES_HELP, argc, argv, &json);
    if (rc >= 0) return rc;
    if (!json) {
        printf("%-11s %12s %12s %10s %10s  %s\n", "device", "MFLOP/s", "MFLOP/J", "in MB/s", "out MB/s",
               "description");
        for (int i = 0; i < poet_device_count(); i++) {
            const poet_device *d = poet_device_builtin(i);
            printf("%-11s %12.3f %12.3f %10.3f %10.3f  %s\n", d->name, d->flops_per_s / 1e6, d->flops_per_j / 1e6,
                   d->pagein_bytes_per_s / 1e6, d->pageout_bytes_per_s / 1e6, d->description);
        }
        return 0;
    }
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; arr && i < poet_device_count(); i++) {
        const poet_device *d = poet_device_builtin(i);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToArray(arr, o);
        cJSON_AddStringToObject(o, "name", d->name);
        cJSON_AddStringToObject(o, "description", d->description);
        cJSON_AddNumberToObject(o, "flops_per_s", d->flops_per_s);
        cJSON_AddNumberToObject(o, "flops_per_j", d->flops_per_j);
        cJSON_AddNumberToObject(o, "pagein_latency_s", d->pagein_latency_s);
        cJSON_AddNumberToObject(o, "pagein_bytes_per_s", d->pagein_bytes_per_s);
        cJSON_AddNumberToObject(o, "pageout_latency_s", d->pageout_latency_s);
        cJSON_AddNumberToObject(o, "pageout_bytes_per_s", d->pageout_bytes_per_s);
        cJSON_AddNumberToObject(o, "memory_power_w", d->memory_power_w);
        cJSON_AddNumberToObject(o, "power_w", d->power_w);
        cJSON_AddNumberToObject(o, "bytes_per_element", d->bytes_per_element);
    }
    return print_json(arr);
}

/* ---- poet graph ---- */
static const char GRAPH_HELP[] =
    "usage: poet graph (--model NAME | --onnx FILE) --device DEV [--batch N] | --instance FILE\n"
    "                  [--train SPEC] [--json] [--dot FILE] [--out FILE] [--nodes FILE]\n"
    "Builds the training graph (forward, loss and backward) of a zoo model or an\n"
    "ONNX model priced on a device, or reads a graph file (POET's reference format\n"
    "or poet's own),\n"
    "and reports its size, the keep-all peak under POET's stage accounting, the\n"
    "smallest budget any schedule could meet, and full-memory energy and time.\n"
    "  --device DEV   a built-in device (poet devices) or a .json profile\n"
    "  --train SPEC   what trains: all (default), biases, last:N, ratio:R or mask:FILE\n"
    "                    (+frozen-bn, +masks, +ratio:R)\n"
    "                 (docs/partial.md); the backward pass follows it\n"
    "  --dot FILE     write the graph for Graphviz\n"
    "  --out FILE     write the costed graph in poet's own format\n"
    "  --nodes FILE   write the forward nodes (op, shape, bytes, FLOPs, parameters)\n"
    "                 as JSON (--model or --onnx)\n";

static void print_bytes(const char *label, double bytes)
{
    const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = bytes;
    int u = 0;
    while (v >= 1024 && u < 4) v /= 1024, u++;
    printf("  %-26s %.0f B (%.2f %s)\n", label, bytes, v, unit[u]);
}

static int report_graph(const poet_instance *inst, const poet_instance_stats *s, bool json)
{
    if (!json) {
        printf("%s on %s, batch %d\n", inst->model, inst->device.name, inst->batch);
        printf("  %-26s %d (%d forward, %d backward)\n", "nodes", s->nodes, s->forward_nodes,
               s->nodes - s->forward_nodes);
        printf("  %-26s %d\n", "edges", s->edges);
        print_bytes("forward activations (sum)", (double)s->forward_activation_bytes);
        print_bytes("keep-all peak", (double)s->keep_all_peak_bytes);
        print_bytes("floor (largest stage)", (double)s->min_budget_bytes);
        printf("  %-26s %.6g J\n", "full-memory energy", s->full_memory_energy_j);
        printf("  %-26s %.6g s\n", "full-memory compute time", s->full_memory_time_s);
        print_bytes("parameters", s->parameter_bytes);
        print_bytes("of those, trained", s->gradient_bytes);
        print_bytes("persistent state (SGD)", (double)poet_instance_persistent_bytes(inst, 1));
        return 0;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "model", inst->model);
    cJSON_AddStringToObject(o, "device", inst->device.name);
    cJSON_AddNumberToObject(o, "batch", inst->batch);
    cJSON_AddNumberToObject(o, "nodes", s->nodes);
    cJSON_AddNumberToObject(o, "forward_nodes", s->forward_nodes);
    cJSON_AddNumberToObject(o, "edges", s->edges);
    cJSON_AddNumberToObject(o, "forward_activation_bytes", (double)s->forward_activation_bytes);
    cJSON_AddNumberToObject(o, "keep_all_peak_bytes", (double)s->keep_all_peak_bytes);
    cJSON_AddNumberToObject(o, "min_budget_bytes", (double)s->min_budget_bytes);
    cJSON_AddNumberToObject(o, "full_memory_energy_j", s->full_memory_energy_j);
    cJSON_AddNumberToObject(o, "full_memory_time_s", s->full_memory_time_s);
    cJSON_AddNumberToObject(o, "parameter_bytes", s->parameter_bytes);
    cJSON_AddNumberToObject(o, "gradient_bytes", s->gradient_bytes);
    cJSON_AddNumberToObject(o, "persistent_bytes", (double)poet_instance_persistent_bytes(inst, 1));
    return print_json(o);
}

/* The forward nodes of a zoo or ONNX model as JSON, for comparing graphs. */
static int write_nodes(const graph_src *src, const char *path)
{
    int b = 0;
    if (src->instance) return usage_error("graph", "--nodes needs --model or --onnx", NULL);
    if (src->batch && !parse_int(src->batch, 1, 65536, &b)) return usage_error("graph", "--batch must be 1 to 65536, got", src->batch);
    poet_graph zoo;
    poet_onnx_model *m = NULL;
    const poet_graph *g = NULL;
    int rc = load_graph("graph", src->model, src->onnx, src->train, b, &zoo, &m, &g);
    if (rc) return rc;
    cJSON *arr = cJSON_CreateArray();
    for (int v = 0; arr && v < g->n_forward; v++) {
        const poet_node *n = &g->nodes[v];
        cJSON *o = cJSON_CreateObject(), *shape = cJSON_AddArrayToObject(o, "shape");
        cJSON_AddStringToObject(o, "name", n->name);
        cJSON_AddStringToObject(o, "op", poet_op_name(n->op));
        for (int k = 0; k < n->shape.ndim; k++) cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)n->shape.dim[k]));
        cJSON_AddNumberToObject(o, "bytes", (double)n->bytes);
        cJSON_AddNumberToObject(o, "flops", n->flops);
        cJSON_AddNumberToObject(o, "params", (double)n->params);
        cJSON_AddItemToArray(arr, o);
    }
    char *text = arr ? cJSON_Print(arr) : NULL;
    cJSON_Delete(arr);
    poet_err err = {0};
    if (!text) rc = lib_error(&(poet_err){POET_ERR_NOMEM, "out of memory"});
    else if (poet_write_file_atomic(path, text, strlen(text), &err)) rc = lib_error(&err);
    free(text);
    if (m) poet_onnx_free(m);
    else poet_graph_free(&zoo);
    return rc;
}

static int cmd_graph(int argc, char **argv)
{
    graph_src src = {0};
    const char *dot = NULL, *out = NULL, *nodes = NULL;
    bool json = false, help = false;
    opt opts[] = {GRAPH_SRC_OPTS(src),                 OUTPUT_OPT("--dot", dot),
                  OUTPUT_OPT("--out", out),         {"--json", false, NULL, &json},
                  {"--nodes", true, &nodes, NULL},
                  {NULL, false, NULL, NULL}};
    int rc = parse_opts("graph", argc, argv, opts, &help);
    if (rc || help) return help ? (fputs(GRAPH_HELP, stdout), 0) : rc;
    if (nodes && (rc = write_nodes(&src, nodes))) return rc;
    poet_instance inst;
    if ((rc = load_instance("graph", &src, &inst))) return rc;
    poet_err err = {0};
    poet_instance_stats s;
    if (poet_instance_stats_compute(&inst, &s, &err) || (dot && poet_instance_write_dot(&inst, dot, &err)) ||
        (out && poet_instance_write_file(&inst, out, &err)))
        rc = lib_error(&err);
    else
        rc = report_graph(&inst, &s, json);
    poet_instance_free(&inst);
    return rc;
}

/* ---- poet planners ---- */
static const char PLANNERS_HELP[] =
    "usage: poet planners [--json]\n"
    "Lists every planner by name with what it does.\n";

static int cmd_planners(int argc, char **argv)
{
    bool json = false;
    int rc = list_opts("planners", PLANNERS_HELP, argc, argv, &json);
    if (rc >= 0) return rc;
    cJSON *arr = json ? cJSON_CreateArray() : NULL;
    for (int i = 0; i < poet_planner_count(); i++) {
        const poet_planner_def *d = poet_planner_info(i);
        bool dflt = strcmp(d->name, poet_planner_default()) == 0;
        if (!json) {
            printf("%-10s %s%s\n", d->name, d->summary, dflt ? " (default)" : "");
            continue;
        }
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToArray(arr, o);
        cJSON_AddStringToObject(o, "name", d->name);
        cJSON_AddStringToObject(o, "summary", d->summary);
        cJSON_AddBoolToObject(o, "default", dflt);
    }
    return json ? print_json(arr) : 0;
}

/* ---- reports shared by plan and simulate ---- */

static void add_num_or_null(cJSON *o, const char *key, bool have, double v)
{
    if (have)
        cJSON_AddNumberToObject(o, key, v);
    else
        cJSON_AddNullToObject(o, key);
}

typedef struct report {
    const poet_problem *p;
    const char *planner, *status, *note;
    const poet_sim *sim; /* NULL when there is no schedule */
    double lower_bound_j, solve_seconds, found_seconds; /* < 0 or NAN: not planned here */
    bool validated;
    int n_levels; /* DRESS-style sparsity levels the schedule is costed at (plan --sparse-levels) */
    const uint32_t *sparsity_bp;
    const poet_sim *level_sim;
    const double *level_parameter_bytes;
} report;

static cJSON *levels_json(const report *r)
{
    cJSON *a = cJSON_CreateArray();
    for (int k = 0; k < r->n_levels; k++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "sparsity", r->sparsity_bp[k] / 1e4);
        cJSON_AddNumberToObject(o, "parameter_bytes", r->level_parameter_bytes[k]);
        cJSON_AddNumberToObject(o, "energy_j", r->level_sim[k].energy_j);
        cJSON_AddNumberToObject(o, "compute_j", r->level_sim[k].compute_j);
        cJSON_AddNumberToObject(o, "compute_time_s", r->level_sim[k].compute_time_s);
        cJSON_AddNumberToObject(o, "time_with_paging_s", r->level_sim[k].time_with_paging_s);
        cJSON_AddItemToArray(a, o);
    }
    return a;
}

static void print_levels(const report *r)
{
    if (!r->n_levels) return;
    printf("  the same schedule at each DRESS-style sparsity level (convolution and linear rows sorted):\n");
    printf("  %8s %14s %14s %14s %16s\n", "sparsity", "energy J", "compute s", "with paging s", "parameters B");
    for (int k = 0; k < r->n_levels; k++)
        printf("  %7.2f%% %14.6g %14.6g %14.6g %16.0f\n", r->sparsity_bp[k] / 100.0, r->level_sim[k].energy_j,
               r->level_sim[k].compute_time_s, r->level_sim[k].time_with_paging_s, r->level_parameter_bytes[k]);
}

static int print_report(const report *r, bool json)
{
    const poet_problem *p = r->p;
    const poet_sim *m = r->sim;
    double gap = m && !isnan(r->lower_bound_j) && r->lower_bound_j > 0
                     ? (m->energy_j - r->lower_bound_j) / r->lower_bound_j
                     : NAN;
    if (json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "model", p->inst->model);
        cJSON_AddStringToObject(o, "device", p->inst->device.name);
        cJSON_AddStringToObject(o, "planner", r->planner);
        cJSON_AddStringToObject(o, "status", r->status);
        cJSON_AddNumberToObject(o, "budget_bytes", (double)p->budget_bytes);
        cJSON_AddNumberToObject(o, "runtime_factor", p->runtime_factor);
        cJSON_AddNumberToObject(o, "runtime_budget_s", p->runtime_budget_s);
        cJSON_AddNumberToObject(o, "keep_all_peak_bytes", (double)p->keep_all_peak_bytes);
        cJSON_AddNumberToObject(o, "min_budget_bytes", (double)p->min_budget_bytes);
        cJSON_AddNumberToObject(o, "full_memory_energy_j", p->full_memory_energy_j);
        cJSON_AddNumberToObject(o, "parameter_bytes", p->inst->parameter_bytes);
        add_num_or_null(o, "energy_j", m, m ? m->energy_j : 0);
        add_num_or_null(o, "compute_j", m, m ? m->compute_j : 0);
        add_num_or_null(o, "pagein_j", m, m ? m->pagein_j : 0);
        add_num_or_null(o, "pageout_j", m, m ? m->pageout_j : 0);
        add_num_or_null(o, "lower_bound_j", !isnan(r->lower_bound_j), r->lower_bound_j);
        add_num_or_null(o, "gap", !isnan(gap), gap);
        add_num_or_null(o, "peak_ram_bytes", m, m ? (double)m->peak_ram_bytes : 0);
        add_num_or_null(o, "placed_peak_bytes", m, m ? (double)m->placed_peak_bytes : 0);
        add_num_or_null(o, "compute_time_s", m, m ? m->compute_time_s : 0);
        add_num_or_null(o, "time_with_paging_s", m, m ? m->time_with_paging_s : 0);
        add_num_or_null(o, "recomputations", m, m ? m->recomputations : 0);
        add_num_or_null(o, "page_ins", m, m ? m->page_ins : 0);
        add_num_or_null(o, "page_outs", m, m ? m->page_outs : 0);
        add_num_or_null(o, "solve_seconds", r->solve_seconds >= 0, r->solve_seconds);
        add_num_or_null(o, "found_seconds", r->found_seconds >= 0, r->found_seconds);
        cJSON_AddBoolToObject(o, "validated", r->validated);
        if (r->note && *r->note) cJSON_AddStringToObject(o, "note", r->note);
        if (r->n_levels) cJSON_AddItemToObject(o, "sparse_levels", levels_json(r));
        return print_json(o);
    }
    printf("%s on %s: budget %llu B (%.1f%% of the keep-all peak %llu B), runtime factor %g\n", p->inst->model,
           p->inst->device.name, (unsigned long long)p->budget_bytes,
           100.0 * (double)p->budget_bytes / (double)(p->keep_all_peak_bytes ? p->keep_all_peak_bytes : 1),
           (unsigned long long)p->keep_all_peak_bytes, p->runtime_factor);
    printf("planner %s: %s%s", r->planner, r->status, r->validated ? ", validated" : "");
    if (r->solve_seconds >= 0) printf(", %.3f s", r->solve_seconds);
    if (r->found_seconds >= 0) printf(" (this schedule found at %.3f s)", r->found_seconds);
    printf("\n");
    if (r->note && *r->note) printf("  %s\n", r->note);
    if (!m) return 0;
    printf("  %-15s %.6g J = compute %.6g + page-in %.6g + page-out %.6g (%.4fx full-memory)\n", "energy",
           m->energy_j, m->compute_j, m->pagein_j, m->pageout_j, m->energy_j / p->full_memory_energy_j);
    if (!isnan(gap)) printf("  %-15s %.6g J, gap %.3f%%\n", "lower bound", r->lower_bound_j, 100 * gap);
    printf("  %-15s %llu B (stage accounting, stage %d), arena %llu B (placed)\n", "peak RAM",
           (unsigned long long)m->peak_ram_bytes, m->peak_stage, (unsigned long long)m->placed_peak_bytes);
    printf("  %-15s %.6g s compute (POET's accounting), %.6g s with paging (one DMA channel)\n", "time",
           m->compute_time_s, m->time_with_paging_s);
    printf("  %-15s %d recomputations, %d page-ins, %d page-outs\n", "operations", m->recomputations, m->page_ins,
           m->page_outs);
    printf("  %-15s %.0f B of weights and buffers (outside the budget)\n", "parameters", p->inst->parameter_bytes);
    print_levels(r);
    return 0;
}

/* ---- poet plan ---- */
static const char PLAN_HELP[] =
    "usage: poet plan (--model NAME --device DEV [--batch N] [--train SPEC] | --instance FILE)\n"
    "                 --budget BYTES|PCT%|ram [--runtime-factor F] [--planner NAME]\n"
    "                 [--time-limit S] [--gap TOL] [--out FILE] [--json] [--allow-infeasible]\n"
    "                 [--no-paging | --no-remat] [--threads N] [--deterministic]\n"
    "                 [--quiet] [--write-mps FILE] [--sparse-levels LIST]\n"
    "                 [--weight-bits B [--weight-group N]]\n"
    "Plans one training iteration under a RAM budget for the activations and a\n"
    "runtime budget (F times the full-memory compute time, default 1.5),\n"
    "validates the schedule and reports its energy, memory and time. --out saves\n"
    "the schedule with its graph for simulate, show and train --schedule.\n"
    "  --budget          bytes (200000, 64KiB, 256k, 1.5MB: " BUDGET_UNITS "),\n"
    "                    a percentage of the keep-all peak (45%), or ram: the\n"
    "                    device's RAM less weights, gradients and SGD momentum\n"
    "  --planner NAME    see poet planners (default: fast)\n"
    "  --time-limit S    wall-clock limit of the planner (fast: 60 s, milp: 300 s)\n"
    "  --gap TOL         stop once the certified gap is at most TOL (0.1% by\n"
    "                    default; 0 asks for a proof of optimality)\n"
    "  --no-paging       remat only; --no-remat: paging only (fast, milp)\n"
    "  --train SPEC      what trains: all (default), biases, last:N, ratio:R or mask:FILE\n"
    "                    (+frozen-bn, +masks, +ratio:R)\n"
    "                    (docs/partial.md); the graph and the plan follow it\n"
    "  --threads N       solver threads; --deterministic: fixed seeds\n"
    "  --quiet           no progress line on stderr\n"
    "  --write-mps FILE  milp: write the model (FILE.mps.gz) for other solvers\n"
    "  --sparse-levels LIST  sparsities in % (0,50,75,90): the schedule's\n"
    "                    energy and time, and the parameter bytes, with the\n"
    "                    convolution and linear layers DRESS-style sparse at\n"
    "                    each (docs/sparse.md)\n"
    "  --weight-bits B   count convolution and linear weights as multi-bit at B bits on\n"
    "                    average, in groups of N (default 64) (docs/alq.md)\n"
    "No schedule (an infeasible budget, with the smallest that would work, or\n"
    "none found in time) is reported and exits with 3, or 0 with\n"
    "--allow-infeasible.\n";


/* The schedule planned for p, simulated on the same graph with other costs. */
static int simulate_on(const poet_instance *inst, const poet_problem *p, const poet_schedule *s, poet_sim *out)
{
    poet_err err = {0};
    poet_problem q;
    if (poet_problem_init(&q, inst, p->budget_bytes, p->runtime_factor, &err)) return lib_error(&err);
    poet_status st = poet_simulate(&q, s, out, NULL, &err);
    poet_problem_free(&q);
    return st ? lib_error(&err) : 0;
}

static int cmd_plan(int argc, char **argv)
{
    graph_src src = {0};
    const char *budget = NULL, *factor = NULL;
    const char *planner = NULL, *limit = NULL, *out = NULL, *threads = NULL, *mps = NULL, *gap_text = NULL;
    bool json = false, help = false, quiet = false, deterministic = false, no_paging = false, no_remat = false;
    bool allow_infeasible = false;
    const char *levels_text = NULL, *bits_text = NULL, *group_text = NULL;
    opt opts[] = {GRAPH_SRC_OPTS(src),                     {"--sparse-levels", true, &levels_text, NULL},
                  {"--weight-bits", true, &bits_text, NULL}, {"--weight-group", true, &group_text, NULL},
                  {"--budget", true, &budget, NULL},       {"--runtime-factor", true, &factor, NULL},
                  {"--planner", true, &planner, NULL},     {"--time-limit", true, &limit, NULL},
                  OUTPUT_OPT("--out", out),             {"--json", false, NULL, &json},
                  {"--threads", true, &threads, NULL},     OUTPUT_OPT("--write-mps", mps),
                  {"--quiet", false, NULL, &quiet},        {"--deterministic", false, NULL, &deterministic},
                  {"--no-paging", false, NULL, &no_paging}, {"--no-remat", false, NULL, &no_remat},
                  {"--gap", true, &gap_text, NULL},        {"--allow-infeasible", false, NULL, &allow_infeasible},
                  {NULL, false, NULL, NULL}};
    int rc = parse_opts("plan", argc, argv, opts, &help);
    if (rc || help) return help ? (fputs(PLAN_HELP, stdout), 0) : rc;
    if (!budget) return usage_error("plan", "--budget is required", NULL);
    double rho = 1.5, seconds = 0;
    if (factor && !(parse_real(factor, &rho) && rho >= 1 && rho <= 1e6))
        return usage_error("plan", "--runtime-factor must be a number from 1 to 1e6, got", factor);
    if (limit && !parse_time_limit(limit, &seconds))
        return usage_error("plan", "--time-limit must be seconds in (0, 86400], got", limit);
    double gap = 0;
    if (gap_text && !parse_gap(gap_text, &gap))
        return usage_error("plan", "--gap must be a fraction from 0 to 1 or a percentage like 0.5%, got", gap_text);
    int n_threads = 1;
    if (threads && !parse_int(threads, 1, 256, &n_threads))
        return usage_error("plan", "--threads must be 1 to 256, got", threads);
    const char *name = planner ? planner : poet_planner_default();
    if (!poet_planner_find(name)) return usage_error("plan", "unknown planner (see poet planners):", name);
    poet_instance inst, level_inst[POET_SPARSE_MAX_LEVELS];
    weight_format wf = {.levels = level_inst, .group = 64};
    if (levels_text && !parse_sparsity_levels(levels_text, wf.sparsity_bp, &wf.n_levels))
        return usage_error("plan", "--sparse-levels must be increasing percentages below 100 (at most 8, 0.01% steps), got",
                           levels_text);
    if (bits_text && !(parse_real(bits_text, &wf.bits) && wf.bits > 0 && wf.bits <= 6))
        return usage_error("plan", "--weight-bits must be more than 0 and at most 6, got", bits_text);
    int group = 64;
    if (group_text && !parse_int(group_text, 1, 65536, &group))
        return usage_error("plan", "--weight-group must be 1 to 65536, got", group_text);
    wf.group = (uint32_t)group;
    int n_levels = wf.n_levels;
    const uint32_t *sparsity_bp = wf.sparsity_bp;
    if ((rc = load_instances("plan", &src, &inst, &wf))) return rc;
    poet_err err = {0};
    poet_problem p;
    uint64_t bytes = 0;
    if (poet_problem_init(&p, &inst, 0, rho, &err)) {
        poet_instance_free(&inst);
        return lib_error(&err);
    }
    if (!(rc = resolve_budget("plan", budget, &p, poet_optimizer_slots(POET_OPT_SGD), &bytes))) {
        p.budget_bytes = bytes;
        poet_plan_options o = {.time_limit_s = seconds, .threads = n_threads, .quiet = quiet,
                               .deterministic = deterministic, .no_paging = no_paging, .no_remat = no_remat,
                               .write_mps = mps, .gap = gap};
        poet_plan_result r;
        poet_sim sim;
        bool have = false;
        if (poet_plan(name, &p, &o, &r, &err)) {
            rc = lib_error(&err);
        } else {
            have = r.status == POET_PLAN_OPTIMAL || r.status == POET_PLAN_FEASIBLE;
            if (have && poet_simulate(&p, &r.schedule, &sim, NULL, &err)) rc = lib_error(&err);
            if (!rc && !have && out) fprintf(stderr, "poet: no schedule to save, so %s was not written\n", out);
            if (!rc && have && out) {
                char *text = poet_schedule_to_json(&r.schedule, &inst);
                if (!text) rc = lib_error(&(poet_err){POET_ERR_NOMEM, "out of memory"});
                else {
                    poet_err werr = {0};
                    if (poet_write_file_atomic(out, text, strlen(text), &werr)) rc = lib_error(&werr);
                    free(text);
                }
            }
            poet_sim level_sim[POET_SPARSE_MAX_LEVELS];
            double level_params[POET_SPARSE_MAX_LEVELS];
            for (int k = 0; k < n_levels && have && !rc; k++) {
                level_params[k] = level_inst[k].parameter_bytes;
                rc = simulate_on(&level_inst[k], &p, &r.schedule, &level_sim[k]);
            }
            if (!rc) {
                report rep = {&p, name, poet_plan_status_str(r.status), r.note, have ? &sim : NULL,
                              r.lower_bound_j, r.solve_seconds, r.found_seconds, have,
                              have ? n_levels : 0, sparsity_bp, level_sim, level_params};
                rc = print_report(&rep, json);
                if (have) warn_ram(&p, &sim, poet_optimizer_slots(POET_OPT_SGD));
                if (!rc && !have && !allow_infeasible) rc = EXIT_NO_SCHEDULE;
            }
            poet_plan_result_free(&r);
        }
    }
    poet_problem_free(&p);
    poet_instance_free(&inst);
    for (int k = 0; k < n_levels; k++) poet_instance_free(&level_inst[k]);
    return rc;
}

/* ---- saved schedules: simulate, show, encode, decode ---- */

typedef struct loaded {
    poet_schedule s;
    poet_instance graph; /* T == 0 when neither embedded nor given */
} loaded;

static void loaded_free(loaded *l)
{
    poet_schedule_free(&l->s);
    poet_instance_free(&l->graph);
}

/* Reads a schedule, JSON or binary, and the graph it runs on: the one the
 * file embeds, or the one the graph options name (which wins). */
static int load_schedule(const char *cmd, const char *path, const graph_src *src, bool need_graph, loaded *l)
{
    memset(l, 0, sizeof *l);
    int rc = read_schedule(path, &l->s, &l->graph);
    if (rc) return rc;
    if (src->model || src->onnx || src->instance) {
        poet_instance_free(&l->graph);
        rc = load_instance(cmd, src, &l->graph);
    } else if (src->device || src->batch) {
        rc = usage_error(cmd, "--device and --batch apply to --model only", NULL);
    } else if (need_graph && l->graph.T == 0) {
        fprintf(stderr, "poet: %s holds no graph: give --instance FILE or --model NAME --device DEV\n", path);
        rc = 1;
    }
    if (rc) loaded_free(l);
    return rc;
}

/* Validates a loaded schedule against its graph and simulates it. */
static int check_and_simulate(loaded *l, poet_problem *p, poet_sim *sim, poet_mem_trace *trace)
{
    poet_err err = {0};
    if (poet_problem_init(p, &l->graph, l->s.budget_bytes, l->s.runtime_factor, &err)) return lib_error(&err);
    if (poet_schedule_validate(p, &l->s, &err)) {
        fprintf(stderr, "poet: invalid schedule: %s\n", err.msg);
        poet_problem_free(p);
        return 1;
    }
    if (poet_simulate(p, &l->s, sim, trace, &err)) {
        poet_problem_free(p);
        return lib_error(&err);
    }
    return 0;
}

static const char SIMULATE_HELP[] =
    "usage: poet simulate FILE [--instance FILE | --model NAME --device DEV [--batch N]] [--json]\n"
    "Validates a saved schedule (JSON or binary) and re-derives every figure\n"
    "that poet plan printed: energy, peak RAM, placed arena, time with and\n"
    "without paging. The graph comes from the file or from the options.\n";

static int cmd_simulate(int argc, char **argv)
{
    graph_src src = {0};
    const char *file = NULL;
    bool json = false, help = false;
    if (argc > 0 && argv[0][0] != '-') file = argv[0], argc--, argv++;
    opt opts[] = {GRAPH_SRC_OPTS(src), {"--json", false, NULL, &json}, {NULL, false, NULL, NULL}};
    int rc = parse_opts("simulate", argc, argv, opts, &help);
    if (rc || help) return help ? (fputs(SIMULATE_HELP, stdout), 0) : rc;
    if (!file) return usage_error("simulate", "give the schedule file first", NULL);
    loaded l;
    if ((rc = load_schedule("simulate", file, &src, true, &l))) return rc;
    poet_problem p;
    poet_sim sim;
    if (!(rc = check_and_simulate(&l, &p, &sim, NULL))) {
        report rep = {&p, l.s.planner, "valid", NULL, &sim, p.full_memory_energy_j, -1, -1, true, 0, NULL, NULL, NULL};
        rc = print_report(&rep, json);
        poet_problem_free(&p);
    }
    loaded_free(&l);
    return rc;
}

static const char SHOW_HELP[] =
    "usage: poet show FILE [--svg OUT] [--png OUT] [--instance FILE | --model NAME --device DEV]\n"
    "Draws a saved schedule: memory in use against the budget over the\n"
    "iteration, and the schedule matrices (computed, in RAM, on storage, paged\n"
    "in or out at each stage). Writes OUT.svg (default: FILE.svg); --png also\n"
    "converts it when rsvg-convert or ImageMagick's convert is installed.\n";

static int write_svg(const char *path, const poet_problem *p, const poet_schedule *s, const poet_sim *sim,
                     const poet_mem_trace *trace)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    if (!mem) return lib_error(&(poet_err){POET_ERR_NOMEM, "out of memory drawing"});
    show_svg(mem, p, s, sim, trace);
    fclose(mem);
    poet_err err = {0};
    int rc = poet_write_file_atomic(path, buf, len, &err) ? lib_error(&err) : 0;
    free(buf);
    return rc;
}

/* PNG through whichever converter is installed, read from its standard
 * output and written under the output rule like every other file. */
static int convert_png(const char *svg, const char *png)
{
    static const char *const how[] = {
        "command -v rsvg-convert >/dev/null && rsvg-convert '%s' 2>/dev/null",
        "command -v convert >/dev/null && convert '%s' png:- 2>/dev/null",
    };
    char cmd[4200];
    if (strchr(svg, '\'')) return usage_error("show", "paths with quotes are not supported", NULL);
    for (size_t k = 0; k < sizeof how / sizeof *how; k++) {
        snprintf(cmd, sizeof cmd, how[k], svg);
        FILE *f = popen(cmd, "r");
        char *buf = NULL;
        size_t len = 0;
        FILE *mem = f ? open_memstream(&buf, &len) : NULL;
        char chunk[65536];
        for (size_t n; mem && (n = fread(chunk, 1, sizeof chunk, f)) > 0;) fwrite(chunk, 1, n, mem);
        if (mem) fclose(mem);
        bool made = f && pclose(f) == 0 && len > 0;
        poet_err err = {0};
        int rc = made ? (poet_write_file_atomic(png, buf, len, &err) ? lib_error(&err) : 0) : -1;
        free(buf);
        if (rc >= 0) return rc;
    }
    fprintf(stderr, "poet: cannot write '%s': no SVG converter (apt-get install librsvg2-bin)\n", png);
    return 1;
}

static int cmd_show(int argc, char **argv)
{
    graph_src src = {0};
    const char *file = NULL, *svg = NULL,
               *png = NULL;
    bool help = false;
    if (argc > 0 && argv[0][0] != '-') file = argv[0], argc--, argv++;
    opt opts[] = {GRAPH_SRC_OPTS(src), OUTPUT_OPT("--svg", svg),
                  OUTPUT_OPT("--png", png), {NULL, false, NULL, NULL}};
    int rc = parse_opts("show", argc, argv, opts, &help);
    if (rc || help) return help ? (fputs(SHOW_HELP, stdout), 0) : rc;
    if (!file) return usage_error("show", "give the schedule file first", NULL);
    char default_svg[4096];
    if (!svg) {
        snprintf(default_svg, sizeof default_svg, "%s.svg", file);
        svg = default_svg;
    }
    loaded l;
    if ((rc = load_schedule("show", file, &src, true, &l))) return rc;
    poet_problem p;
    poet_sim sim;
    poet_mem_trace trace = {0};
    if (!(rc = check_and_simulate(&l, &p, &sim, &trace))) {
        rc = write_svg(svg, &p, &l.s, &sim, &trace);
        if (!rc && png) rc = convert_png(svg, png);
        if (!rc) printf("wrote %s%s%s\n", svg, png ? " and " : "", png ? png : "");
        poet_problem_free(&p);
    }
    poet_mem_trace_free(&trace);
    loaded_free(&l);
    return rc;
}

static const char ENCODE_HELP[] =
    "usage: poet encode FILE --out BIN\n"
    "Writes a saved schedule in poet's compact binary form for devices.\n";

static int cmd_encode(int argc, char **argv)
{
    const char *file = NULL, *out = NULL;
    bool help = false;
    if (argc > 0 && argv[0][0] != '-') file = argv[0], argc--, argv++;
    opt opts[] = {OUTPUT_OPT("--out", out), {NULL, false, NULL, NULL}};
    int rc = parse_opts("encode", argc, argv, opts, &help);
    if (rc || help) return help ? (fputs(ENCODE_HELP, stdout), 0) : rc;
    if (!file || !out) return usage_error("encode", "give the schedule file and --out BIN", NULL);
    loaded l;
    if ((rc = load_schedule("encode", file, &(graph_src){0}, false, &l))) return rc;
    uint8_t *data = NULL;
    size_t len = 0;
    poet_err err = {0};
    if (poet_schedule_encode(&l.s, &data, &len, &err) || poet_write_file_atomic(out, data, len, &err))
        rc = lib_error(&err);
    else
        printf("wrote %s: %zu bytes\n", out, len);
    free(data);
    loaded_free(&l);
    return rc;
}

static const char DECODE_HELP[] =
    "usage: poet decode BIN --out FILE [--instance FILE | --model NAME --device DEV [--batch N]]\n"
    "Writes a binary schedule as JSON; with a graph, the JSON embeds it so that\n"
    "simulate and show need nothing else.\n";

static int cmd_decode(int argc, char **argv)
{
    graph_src src = {0};
    const char *file = NULL, *out = NULL;
    bool help = false;
    if (argc > 0 && argv[0][0] != '-') file = argv[0], argc--, argv++;
    opt opts[] = {GRAPH_SRC_OPTS(src), OUTPUT_OPT("--out", out), {NULL, false, NULL, NULL}};
    int rc = parse_opts("decode", argc, argv, opts, &help);
    if (rc || help) return help ? (fputs(DECODE_HELP, stdout), 0) : rc;
    if (!file || !out) return usage_error("decode", "give the binary file and --out FILE", NULL);
    loaded l;
    if ((rc = load_schedule("decode", file, &src, false, &l))) return rc;
    poet_err err = {0};
    if (l.graph.T && l.s.graph_hash && poet_instance_hash(&l.graph) != l.s.graph_hash) {
        fprintf(stderr, "poet: %s was planned for a different graph than the one given\n", file);
        rc = 1;
    } else {
        char *text = poet_schedule_to_json(&l.s, l.graph.T ? &l.graph : NULL);
        if (!text) rc = lib_error(&(poet_err){POET_ERR_NOMEM, "out of memory"});
        else if (poet_write_file_atomic(out, text, strlen(text), &err)) rc = lib_error(&err);
        free(text);
    }
    loaded_free(&l);
    return rc;
}

/* ---- dispatch ---- */
typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static const command COMMANDS[] = {
    {"models", cmd_models, "list the built-in models"},
    {"devices", cmd_devices, "list the built-in device profiles"},
    {"graph", cmd_graph, "build or read a training graph and report its memory and energy"},
    {"planners", cmd_planners, "list the planners"},
    {"plan", cmd_plan, "plan a training iteration under RAM and runtime budgets"},
    {"simulate", cmd_simulate, "validate a saved schedule and re-derive its figures"},
    {"show", cmd_show, "draw a saved schedule (SVG, PNG)"},
    {"encode", cmd_encode, "write a schedule in the compact binary form for devices"},
    {"decode", cmd_decode, "write a binary schedule as JSON"},
    {"sweep", cmd_sweep, "plan one model over a range of budgets and draw the energy-memory frontier"},
    {"train", cmd_train, "plan a schedule for a budget and train a model under it on real data"},
    {"import", cmd_import, "read an ONNX model with its weights and report its training graph"},
    {"export", cmd_export, "write the device image a microcontroller trains from"},
    {"emulate", cmd_emulate, "train on an emulated Cortex-M4F board (QEMU) and compare with the host"},
    {"update", cmd_update, "keep deployed devices current by sending a few percent of the weights (partial updating)"},
};

static void print_help(FILE *f)
{
    fprintf(f,
            "poet %s: plan memory-limited training on small devices (POET, ICML 2022)\n"
            "usage: poet COMMAND [OPTIONS]   (poet COMMAND --help for its options)\n\n",
            POET_VERSION);
    for (size_t i = 0; i < sizeof COMMANDS / sizeof *COMMANDS; i++)
        fprintf(f, "  %-10s %s\n", COMMANDS[i].name, COMMANDS[i].summary);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "poet: missing command (see poet --help)\n");
        return EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        print_help(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("poet %s\n", POET_VERSION);
        return 0;
    }
    /* a write past `ulimit -f` fails with EFBIG, which poet reports, instead of killing poet without a word */
    signal(SIGXFSZ, SIG_IGN);
    for (size_t i = 0; i < sizeof COMMANDS / sizeof *COMMANDS; i++)
        if (strcmp(argv[1], COMMANDS[i].name) == 0) return COMMANDS[i].run(argc - 2, argv + 2);
    fprintf(stderr, "poet: unknown command '%s' (see poet --help)\n", argv[1]);
    return EXIT_USAGE;
}
