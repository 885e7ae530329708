/* Internal: the fast planner, the default (fast.c). */
#ifndef POET_SRC_PLAN_FAST_H
#define POET_SRC_PLAN_FAST_H

#include "poet/plan.h"

poet_status fast_plan(const poet_problem *p, const poet_plan_options *o, poet_plan_result *r, poet_err *err);

#endif
