/* Internal: the one progress line every planner shows on stderr while it
 * works (poet_plan starts and ends it; planners report into it). */
#ifndef POET_SRC_PLAN_PROGRESS_H
#define POET_SRC_PLAN_PROGRESS_H

#include "poet/plan.h"

/* Starts the line for a planner run on this thread: redrawn every half
 * second on a terminal, every ten seconds otherwise, nothing when quiet. */
void progress_begin(const char *planner, const poet_plan_options *o);
/* Draws the final state (and ends the line on a terminal). */
void progress_end(void);
/* What the planner does now, a schedule's energy it holds and a lower bound
 * it has proven (NAN: none new). The line shows the least energy and the
 * largest bound reported, so any phase may report either. */
void progress_report(const char *phase, double energy_j, double bound_j);

#endif
