/* poet: planners. Every planner sits behind one interface, and every
 * schedule a planner returns has passed poet_schedule_validate. */
#ifndef POET_PLAN_H
#define POET_PLAN_H

#include <stdbool.h>

#include "poet/schedule.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum poet_plan_status {
    POET_PLAN_OPTIMAL,    /* proven optimal */
    POET_PLAN_FEASIBLE,   /* a valid schedule, optimality not proven */
    POET_PLAN_INFEASIBLE, /* proven: no schedule meets the budgets */
    POET_PLAN_UNKNOWN     /* no schedule found, infeasibility not proven ("no schedule found") */
} poet_plan_status;

const char *poet_plan_status_str(poet_plan_status s);

/* How far a planner run has come: the planner, what it does now, the
 * least energy of a schedule it holds and the largest lower bound it has
 * proven (INFINITY and -INFINITY while it has none), and the seconds since
 * it started; done on the last report. */
typedef struct poet_plan_progress {
    const char *planner, *phase;
    double energy_j, bound_j, seconds;
    bool done;
} poet_plan_progress;

typedef struct poet_plan_options {
    double time_limit_s;   /* wall clock; <= 0 means the planner's default */
    int threads;           /* <= 0: one */
    /* called on the planning thread when the run starts, whenever its
     * phase, best energy or bound changes, and when it ends (NULL: never);
     * poet itself prints nothing */
    void (*progress)(void *ctx, const poet_plan_progress *p);
    void *progress_ctx;
    bool deterministic;    /* fixed seeds, so that a run can be repeated */
    bool no_paging;        /* remat only (planners with variants) */
    bool no_remat;         /* paging only (planners with variants) */
    const char *write_mps; /* MILP planners: write the model here (".mps" is added) */
    /* stop once the certified gap, (energy - lower bound) / lower bound, is
     * at most this; 0: POET_PLAN_DEFAULT_GAP; below 1e-6: prove optimality */
    double gap;
    /* fast, where it finds nothing and proves nothing: no search for a
     * budget that would do, for the note (a sweep's points show that) */
    bool no_budget_note;
} poet_plan_options;

#define POET_PLAN_DEFAULT_GAP 1e-3

typedef struct poet_plan_result {
    poet_plan_status status;
    poet_schedule schedule; /* when optimal or feasible; T == 0 otherwise */
    double lower_bound_j;   /* a true lower bound on the optimal energy, or NAN */
    double solve_seconds;
    /* seconds from the start until the planner had the schedule it returns,
     * NAN without one (a planner stores the plan_wall_s() clock of that
     * moment here, or nothing for its end, and poet_plan turns it into
     * seconds) */
    double found_seconds;
    char note[512];         /* why no schedule, or what bounds the answer */
} poet_plan_result;

typedef struct poet_planner_def {
    const char *name;
    const char *summary;
    bool variants; /* takes no_paging and no_remat */
    poet_status (*plan)(const poet_problem *p, const poet_plan_options *o, poet_plan_result *r, poet_err *err);
} poet_planner_def;

int poet_planner_count(void);
const poet_planner_def *poet_planner_info(int i);
const poet_planner_def *poet_planner_find(const char *name);
const char *poet_planner_default(void);

/* Runs a planner and validates what it returns: a schedule that fails the
 * validator is an internal error, never a result. The milp planner silences
 * file descriptor 1 while CBC runs (docs/milp.md). */
poet_status poet_plan(const char *planner, const poet_problem *p, const poet_plan_options *o, poet_plan_result *r,
                      poet_err *err);
void poet_plan_result_free(poet_plan_result *r);

/* ---- budget sweeps: the energy-versus-memory frontier ---- */
typedef struct poet_sweep_series {
    const char *label;   /* e.g. "joint", "remat-only" */
    const char *planner; /* a registered planner */
    bool no_paging, no_remat;
} poet_sweep_series;

typedef struct poet_sweep_point {
    int series;
    uint64_t budget_bytes;
    double runtime_factor;
    poet_plan_status status;
    bool validated;         /* a schedule that passed the validator */
    double energy_j;        /* NAN without a schedule */
    double lower_bound_j;   /* NAN when the planner has none */
    double time_with_paging_s, solve_seconds;
    uint64_t peak_ram_bytes;
    int recomputations, page_ins, page_outs;
} poet_sweep_point;

/* The budgets and runtime factors a sweep plans at, and how their problems
 * count the runtime (poet_problem.runtime_counts_paging). */
typedef struct poet_sweep_grid {
    const uint64_t *budgets;
    int n_budgets;
    const double *factors;
    int n_factors;
    bool runtime_counts_paging;
} poet_sweep_grid;

/* Plans inst with every series at every budget and runtime factor (in that
 * nesting: factor, budget, series) and simulates each schedule; out holds
 * n_factors * n_budgets * n_series points. progress (may be NULL) is called
 * after each point. */
poet_status poet_sweep(const poet_instance *inst, const poet_sweep_series *series, int n_series,
                       const poet_sweep_grid *grid, const poet_plan_options *o, poet_sweep_point *out,
                       void (*progress)(void *ctx, const poet_sweep_point *pt), void *ctx, poet_err *err);

#ifdef __cplusplus
}
#endif
#endif
