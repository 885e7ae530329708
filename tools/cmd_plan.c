#define _POSIX_C_SOURCE 200809L
/* poet plan: one training iteration under RAM and runtime budgets. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "advice.h"
#include "progress_line.h"
#include "report.h"
static const char PLAN_HELP[] =
    "usage: poet plan ((--model NAME | --onnx FILE) --device DEV [--batch N] [--train SPEC] | --instance FILE)\n"
    "                 --budget BYTES|PCT%|ram [--runtime-factor F] [--runtime-model M]\n"
    "                 [--frozen flash|ram] [--fused-update] (what --budget ram leaves)\n"
    "                 [--planner NAME]\n"
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
    "                    largest arena with which training's whole RAM (firmware,\n"
    "                    weights, gradients, SGD momentum, batch, workspace,\n"
    "                    control) fits the device's (see poet fit)\n"
RUNTIME_MODEL_HELP
FROZEN_HELP
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
    q.runtime_counts_paging = p->runtime_counts_paging;
    poet_status st = poet_simulate(&q, s, out, NULL, &err);
    poet_problem_free(&q);
    return st ? lib_error(&err) : 0;
}

/* poet_plan with the progress line drawn on stderr, unless quiet. */
static poet_status plan_drawn(const char *name, const poet_problem *p, const poet_plan_options *o, bool quiet,
                              poet_plan_result *r, poet_err *err)
{
    if (quiet) return poet_plan(name, p, o, r, err);
    progress_line line;
    progress_line_start(&line);
    poet_plan_options drawn = *o;
    drawn.progress = progress_line_report, drawn.progress_ctx = &line;
    poet_status st = poet_plan(name, p, &drawn, r, err);
    progress_line_stop(&line);
    return st;
}

int cmd_plan(int argc, char **argv)
{
    graph_src src = {0};
    const char *budget = NULL, *factor = NULL, *runtime_model = NULL, *frozen = NULL;
    const char *planner = NULL, *limit = NULL, *out = NULL, *threads = NULL, *mps = NULL, *gap_text = NULL;
    bool json = false, help = false, quiet = false, deterministic = false, no_paging = false, no_remat = false;
    bool allow_infeasible = false, fused = false;
    const char *levels_text = NULL, *bits_text = NULL, *group_text = NULL;
    opt opts[] = {GRAPH_SRC_OPTS(src),                     {"--sparse-levels", true, &levels_text, NULL},
                  {"--weight-bits", true, &bits_text, NULL}, {"--weight-group", true, &group_text, NULL},
                  {"--budget", true, &budget, NULL},       {"--runtime-factor", true, &factor, NULL},
                  {"--runtime-model", true, &runtime_model, NULL}, {"--frozen", true, &frozen, NULL},
                  {"--fused-update", false, NULL, &fused},
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
    bool counts_paging;
    if (!parse_runtime_model(runtime_model, &counts_paging))
        return usage_error("plan", "--runtime-model must be serial or compute, got", runtime_model);
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
    device_layout layout = DEVICE_LAYOUT_DEFAULT;
    layout.fused_update = fused;
    if (!parse_frozen(frozen, &layout.frozen)) return usage_error("plan", "--frozen must be flash or ram, got", frozen);
    ram_use ram;
    if ((rc = load_instance_ram("plan", &src, &inst, &wf, &layout, &ram))) return rc;
    poet_err err = {0};
    poet_problem p;
    uint64_t bytes = 0;
    if (poet_problem_init(&p, &inst, 0, rho, &err)) {
        poet_instance_free(&inst);
        return lib_error(&err);
    }
    p.runtime_counts_paging = counts_paging;
    if (!(rc = resolve_budget("plan", budget, &p, &ram, &bytes))) {
        p.budget_bytes = bytes;
        poet_plan_options o = {.time_limit_s = seconds, .threads = n_threads, .deterministic = deterministic, .no_paging = no_paging, .no_remat = no_remat,
                               .write_mps = mps, .gap = gap};
        poet_plan_result r;
        poet_sim sim;
        bool have = false;
        if (plan_drawn(name, &p, &o, quiet, &r, &err)) {
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
                              have ? n_levels : 0, sparsity_bp, level_sim, level_params, &ram};
                rc = print_report(&rep, json);
                if (have) warn_ram(&p, &sim, &ram);
                if (!rc && !have && !src.instance && p.budget_bytes < p.min_budget_bytes) {
                    fix_question q = {src.model, src.onnx, src.train, inst.batch, &inst.device, p.budget_bytes,
                                      strcmp(budget, "ram") == 0, layout, UINT64_MAX};
                    if (q.whole_ram) explain_ram(&inst.device, &ram, p.budget_bytes, p.min_budget_bytes);
                    suggest_fix(&q);
                }
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
