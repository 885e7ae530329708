/* Internal: POET's MILP on CBC (milp.c), its covering bound (cover.c) and
 * the exact MILP over windows (windows.c). */
#ifndef POET_SRC_PLAN_MILP_H
#define POET_SRC_PLAN_MILP_H

#include "poet/plan.h"
#include "common.h"

typedef struct milp_options {
    bool paging, remat;
    const poet_schedule *start; /* a MIP start besides the best baseline, or NULL */
} milp_options;

poet_status milp_plan(const poet_problem *p, const milp_options *mo, const poet_plan_options *o,
                      poet_plan_result *r, poet_err *err);

/* The optimum of the LP relaxation, less a margin for its tolerances: a
 * lower bound on the energy of every schedule; NAN when not solved within
 * seconds or out of memory. */
double milp_lp_bound(const poet_problem *p, const milp_options *mo, double seconds);

/* The covering models, from the loosest and quickest: aggregate returns;
 * returns placed in stages (remat only), a tensor let go or held by part;
 * and staged with whole let-go and held columns. */
typedef enum cover_kind { COVER_AGGREGATE, COVER_STAGED, COVER_STAGED_WHOLE } cover_kind;

/* A lower bound on the energy of every schedule from a covering model with
 * whole returns (milp.c says why it holds): where the LP relaxation pays for
 * fractions of tensors, this pays for whole ones. NAN where a staged model
 * is too large, or when not solved within seconds; INFINITY where the model
 * has no solution, which proves that no schedule meets both budgets. Where
 * target_j > 0, a bound of target_j is all that is asked: the search gives
 * up every branch that cannot go below it, and the bound may be just
 * target_j. */
double milp_cover_bound(const poet_problem *p, const milp_options *mo, cover_kind kind, double seconds,
                        double target_j);

/* Marks r infeasible, with a note that says the smallest feasible budget
 * (or a range for it) found within seconds, for the same runtime budget. */
void milp_explain_infeasible(const poet_problem *p, const milp_options *mo, double seconds, poet_plan_result *r);

/* Lowers the energy of the valid schedule s by re-solving the MILP over
 * windows of tensors with the rest of s fixed, for at most seconds or until
 * its energy is at most target_j; s stays valid, placement included.
 * Returns whether s improved, and *found_at is then the host_now_s() of
 * the last improvement. */
bool milp_improve(const poet_problem *p, const milp_options *mo, double seconds, double target_j, poet_schedule *s,
                  double *found_at);

#endif
