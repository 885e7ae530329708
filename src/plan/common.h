/* Internal: what every planner of the plan module shares. */
#ifndef POET_SRC_PLAN_COMMON_H
#define POET_SRC_PLAN_COMMON_H

#include "poet/plan.h"

/* The certified gap at which a planner stops (o->gap, or the default). */
double plan_gap(const poet_plan_options *o);

/* A schedule within this of a lower bound is optimal (the bounds keep 1e-7
 * of margin for their solvers' tolerances, so they never quite meet it). */
#define OPTIMAL_GAP 1e-6

/* The certificate of a schedule of this energy against a lower bound: the
 * bound (never above the energy) and optimality when the two meet within
 * OPTIMAL_GAP, or when already proven. */
void plan_certify(poet_plan_result *r, double energy, double bound);

/* Each baseline that respects the variant, in turn; the valid one with the
 * least energy into *best (status FEASIBLE, or UNKNOWN with a note where
 * none met the budgets). An error only where a baseline could not be
 * planned (out of memory); *best is then empty. */
poet_status plan_baselines(const poet_problem *p, bool paging, bool remat, poet_plan_result *best, poet_err *err);

/* The schedule of plan_baselines, or false where there is none. */
bool plan_best_baseline(const poet_problem *p, bool paging, bool remat, poet_schedule *best);

#endif
