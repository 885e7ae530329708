#define _POSIX_C_SOURCE 200809L
/* The report of plan and simulate. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"
static void add_num_or_null(cJSON *o, const char *key, bool have, double v)
{
    if (have)
        cJSON_AddNumberToObject(o, key, v);
    else
        cJSON_AddNullToObject(o, key);
}

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

int print_report(const report *r, bool json)
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
        cJSON_AddStringToObject(o, "runtime_model", p->runtime_counts_paging ? "serial" : "compute");
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
        add_num_or_null(o, "transfer_time_s", m, m ? m->transfer_time_s : 0);
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
    if (r->ram) {
        char t[32], f[32], b[32], a[32], d[32];
        printf("  %-15s %s in all%s: firmware %s + beside the arena %s + arena %s%s%s\n", "device RAM",
               format_bytes(ram_total(r->ram, m->placed_peak_bytes), t), r->ram->exact ? "" : " (estimated)",
               format_bytes(r->ram->fixed_bytes, f), format_bytes(ram_total(r->ram, 0) - r->ram->fixed_bytes, b),
               format_bytes(m->placed_peak_bytes, a), p->inst->device.ram_bytes ? " of " : "",
               p->inst->device.ram_bytes ? format_bytes(p->inst->device.ram_bytes, d) : "");
    }
    printf("  %-15s %.6g s compute + %.6g s transfers, %.6g s with them overlapped (one DMA channel); the limit, "
           "%.6g s, bounds %s\n", "time", m->compute_time_s, m->transfer_time_s, m->time_with_paging_s,
           p->runtime_budget_s, p->runtime_counts_paging ? "both (--runtime-model serial)" : "compute alone (POET's)");
    printf("  %-15s %d recomputations, %d page-ins, %d page-outs\n", "operations", m->recomputations, m->page_ins,
           m->page_outs);
    printf("  %-15s %.0f B of weights and buffers (outside the budget)\n", "parameters", p->inst->parameter_bytes);
    print_levels(r);
    return 0;
}
