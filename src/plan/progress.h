/* Internal: a planner run's progress, told to the caller's callback
 * (poet_plan_options.progress): poet_plan starts and ends the run, and
 * the planners report into it from the planning thread. */
#ifndef POET_SRC_PLAN_PROGRESS_H
#define POET_SRC_PLAN_PROGRESS_H

#include "poet/plan.h"

/* Starts a run of planner on this thread (nothing without a callback). */
void progress_begin(const char *planner, const poet_plan_options *o);
/* Tells the final state, done. */
void progress_end(void);
/* What the planner does now (NULL: the same), a schedule's energy it holds
 * and a lower bound it has proven (NAN: none new). The run keeps the least
 * energy and the largest bound reported, so any phase may report either;
 * the callback hears of every change. */
void progress_report(const char *phase, double energy_j, double bound_j);

#endif
