/* Internal: POET's MILP on CBC. */
#ifndef POET_SRC_PLAN_MILP_H
#define POET_SRC_PLAN_MILP_H

#include "poet/plan.h"

typedef struct milp_options {
    bool paging, remat;
} milp_options;

/* Monotonic wall-clock seconds, for every planner's timing. */
double plan_wall_s(void);

poet_status milp_plan(const poet_problem *p, const milp_options *mo, const poet_plan_options *o,
                      poet_plan_result *r, poet_err *err);

#endif
