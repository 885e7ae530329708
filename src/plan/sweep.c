/* Budget sweeps: one planning problem per (runtime factor, budget), every
 * series planned and simulated on it. Each schedule passes the validator
 * inside poet_plan before it becomes a point. */
#include <math.h>
#include <string.h>

#include "poet/plan.h"

static poet_status sweep_point(const poet_problem *p, const poet_sweep_series *s, const poet_plan_options *base,
                               poet_sweep_point *pt, poet_err *err)
{
    poet_plan_options o = *base;
    o.no_paging = s->no_paging;
    o.no_remat = s->no_remat;
    o.no_budget_note = true; /* nothing shows a point's note */
    poet_plan_result r;
    poet_status st = poet_plan(s->planner, p, &o, &r, err);
    if (st) return st;
    pt->status = r.status;
    pt->lower_bound_j = r.lower_bound_j;
    pt->solve_seconds = r.solve_seconds;
    pt->energy_j = pt->time_with_paging_s = NAN;
    if (r.status == POET_PLAN_OPTIMAL || r.status == POET_PLAN_FEASIBLE) {
        poet_sim sim;
        st = poet_simulate(p, &r.schedule, &sim, NULL, err);
        if (!st) {
            pt->validated = true;
            pt->energy_j = sim.energy_j;
            pt->time_with_paging_s = sim.time_with_paging_s;
            pt->peak_ram_bytes = sim.peak_ram_bytes;
            pt->recomputations = sim.recomputations;
            pt->page_ins = sim.page_ins;
            pt->page_outs = sim.page_outs;
        }
    }
    poet_plan_result_free(&r);
    return st;
}

poet_status poet_sweep(const poet_instance *inst, const poet_sweep_series *series, int n_series,
                       const poet_sweep_grid *grid, const poet_plan_options *o, poet_sweep_point *out,
                       void (*progress)(void *ctx, const poet_sweep_point *pt), void *ctx, poet_err *err)
{
    for (int s = 0; s < n_series; s++)
        if (!poet_planner_find(series[s].planner))
            return poet_fail(err, POET_ERR_NOT_FOUND, "sweep: unknown planner '%s'", series[s].planner);
    poet_sweep_point *pt = out;
    for (int f = 0; f < grid->n_factors; f++)
        for (int b = 0; b < grid->n_budgets; b++) {
            poet_problem p;
            poet_status st = poet_problem_init(&p, inst, grid->budgets[b], grid->factors[f], err);
            if (st) return st;
            p.runtime_counts_paging = grid->runtime_counts_paging;
            for (int s = 0; s < n_series && !st; s++, pt++) {
                memset(pt, 0, sizeof *pt);
                pt->series = s;
                pt->budget_bytes = grid->budgets[b];
                pt->runtime_factor = grid->factors[f];
                st = sweep_point(&p, &series[s], o, pt, err);
                if (!st && progress) progress(ctx, pt);
            }
            poet_problem_free(&p);
            if (st) return st;
        }
    return POET_OK;
}
