/* See common.h. */
#include "common.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "greedy.h"

double plan_gap(const poet_plan_options *o)
{
    double gap = o->gap > 0 ? o->gap : POET_PLAN_DEFAULT_GAP;
    return gap > 1e-9 ? gap : 1e-9;
}

void plan_certify(poet_plan_result *r, double energy, double bound)
{
    r->lower_bound_j = bound < energy ? bound : energy;
    if (energy <= r->lower_bound_j * (1 + OPTIMAL_GAP)) r->status = POET_PLAN_OPTIMAL;
    else if (r->status != POET_PLAN_OPTIMAL) r->status = POET_PLAN_FEASIBLE;
}

void poet_plan_result_free(poet_plan_result *r)
{
    if (!r) return;
    poet_schedule_free(&r->schedule);
}

poet_status plan_baselines(const poet_problem *p, bool paging, bool remat, poet_plan_result *best, poet_err *err)
{
    static const greedy_mode modes[] = {GREEDY_KEEP, GREEDY_REMAT, GREEDY_PAGING, GREEDY_HYBRID, GREEDY_CHEN};
    double best_j = INFINITY;
    memset(best, 0, sizeof *best);
    best->status = POET_PLAN_UNKNOWN;
    best->lower_bound_j = best->found_seconds = NAN;
    for (size_t k = 0; k < sizeof modes / sizeof *modes; k++) {
        bool uses_remat = modes[k] == GREEDY_REMAT || modes[k] == GREEDY_HYBRID || modes[k] == GREEDY_CHEN;
        bool uses_paging = modes[k] == GREEDY_PAGING || modes[k] == GREEDY_HYBRID;
        if ((uses_remat && !remat) || (uses_paging && !paging)) continue;
        poet_plan_result one;
        memset(&one, 0, sizeof one);
        one.lower_bound_j = NAN;
        poet_sim sim;
        poet_status st = greedy_plan(p, modes[k], &one, err);
        if (!st && one.status == POET_PLAN_FEASIBLE) st = poet_simulate(p, &one.schedule, &sim, NULL, err);
        if (st) {
            poet_plan_result_free(&one);
            poet_plan_result_free(best);
            memset(best, 0, sizeof *best);
            return st;
        }
        if (one.status == POET_PLAN_FEASIBLE && sim.energy_j < best_j) {
            best_j = sim.energy_j;
            poet_plan_result_free(best);
            *best = one;
        } else {
            poet_plan_result_free(&one);
        }
    }
    if (best->status != POET_PLAN_FEASIBLE) snprintf(best->note, sizeof best->note, "no baseline met the budgets");
    return POET_OK;
}

bool plan_best_baseline(const poet_problem *p, bool paging, bool remat, poet_schedule *best)
{
    poet_plan_result r;
    if (plan_baselines(p, paging, remat, &r, NULL) || r.status != POET_PLAN_FEASIBLE) {
        poet_plan_result_free(&r);
        return false;
    }
    *best = r.schedule;
    return true;
}
