/* Internal: the fast planner's retention model (src/plan/retain.c). */
#ifndef POET_SRC_PLAN_RETAIN_H
#define POET_SRC_PLAN_RETAIN_H

#include "poet/plan.h"

/* A schedule in which each forward tensor is kept, recomputed once for the
 * backward pass, or paged out and in once, chosen by a small MILP; *found
 * says whether one that passes the validator was found within seconds. */
poet_status retain_plan(const poet_problem *p, bool remat, bool paging, double seconds, poet_schedule *out,
                        bool *found, poet_err *err);

#endif
