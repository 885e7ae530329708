/* Internal: POET's MILP (tests/data/reference/README.md) as an lp, and
 * the schedule in its columns.
 *
 * Differences from the original formulation, none of which changes its
 * integer solutions:
 * - variables outside the lower triangle do not exist (rather than one
 *   aggregated equality row per matrix), and R[t,t] is fixed by its bounds;
 * - SSd and Free_E are continuous: with binary MOut and MIn, SSd is pinned
 *   where it matters, and freeing more only lowers memory, so Free_E needs
 *   only its upper bounds (computed, not kept, no later reader);
 * - the objective is scaled by the full-memory energy, memory rows by the
 *   budget and the runtime row by the full-memory time, so that CBC's
 *   tolerances (1e-6 and so on) mean something;
 * - repeated edges count once. */
#ifndef POET_SRC_PLAN_FORMULATION_H
#define POET_SRC_PLAN_FORMULATION_H

#include "poet/plan.h"
#include "cbc.h"

typedef struct model {
    const poet_problem *p;
    bool paging, remat;
    bool min_budget; /* objective: the smallest budget (a column) instead of energy */
    int T;
    int *R, *S, *D, *I, *O, *U; /* column of each matrix entry [t*T+i], or -1 */
    int *F;                     /* column of Free for (stage t, input slot c) [t*E+c], or -1 */
    int M;                      /* the budget column when min_budget */
    double mem_scale, obj_scale, time_scale;
    lp lp;
} model;

/* POET's MILP for p (remat-only, paging-only or both); with min_budget,
 * the objective is the smallest budget (a column) instead of energy. */
poet_status form_build(model *m, const poet_problem *p, bool paging, bool remat, bool min_budget, poet_err *err);
void form_free(model *m);

/* Calls fn for each decision column (R, SRam, MIn, MOut) with the matrix
 * of the schedule it stands for. */
void form_each_decision(const model *m, void (*fn)(int col, int matrix, int t, int i, void *ctx), void *ctx);
/* A MIP start for CBC: the integer columns' values for a schedule. */
mip_start form_start_from(const model *m, const poet_schedule *s);
/* The schedule of solution x. */
void form_extract(const model *m, const double *x, poet_schedule *s);
/* Removes what an optimal solution may carry at no cost but the validator
 * refuses: recomputing or paging in what is in RAM, paging out twice. */
void form_normalize(poet_schedule *s);

#endif
