/* Internal: the fast planner's fate search (src/plan/fates.c). */
#ifndef POET_SRC_PLAN_FATES_H
#define POET_SRC_PLAN_FATES_H

#include "poet/plan.h"

/* A schedule in which each forward tensor is kept, recomputed (in chains,
 * as often as the backward pass needs it) or paged out once and in before
 * its uses (a backward reader or a recomputation that reads it), and each
 * gradient kept or paged, found
 * by a local search measured with POET's own accounting, until it meets
 * target_j (a lower bound on the energy) or has done `seconds` of work at
 * a fixed nominal rate: the same inputs give the same schedule on any
 * machine under any load, unless the wall clock's safety stop (four times
 * the seconds) ends it first. *found_at is
 * the host_now_s() when the search first met the fates of *out, or 0 where
 * it found none that passes the validator. */
poet_status fates_plan(const poet_problem *p, bool remat, bool paging, double seconds, double target_j,
                       poet_schedule *out, double *found_at, poet_err *err);

#endif
