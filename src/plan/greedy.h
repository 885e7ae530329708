/* Internal: the stage-by-stage engine behind the baseline planners. */
#ifndef POET_SRC_PLAN_GREEDY_H
#define POET_SRC_PLAN_GREEDY_H

#include "poet/plan.h"

typedef enum greedy_mode {
    GREEDY_KEEP,   /* keep every tensor until its last reader */
    GREEDY_CHEN,   /* sqrt(n) checkpoints, recompute segments (Chen et al. 2016) */
    GREEDY_REMAT,  /* evict by DTR's rule, recompute on demand */
    GREEDY_PAGING, /* page out, page in just before the next reader */
    GREEDY_HYBRID  /* page where the transfer hides behind compute, else recompute (Capuchin) */
} greedy_mode;

/* Builds a schedule for p->budget_bytes; on success r->schedule holds it
 * (not yet validated) and r->status is FEASIBLE; otherwise r->status is
 * UNKNOWN and r->note says where it failed. */
poet_status greedy_plan(const poet_problem *p, greedy_mode mode, poet_plan_result *r, poet_err *err);

#endif
