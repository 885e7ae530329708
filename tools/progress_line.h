/* The progress line poet plan draws on stderr while a planner works, from
 * the planner's progress reports (poet_plan_options.progress). */
#ifndef POET_TOOLS_PROGRESS_LINE_H
#define POET_TOOLS_PROGRESS_LINE_H

#include <pthread.h>
#include <stdbool.h>

#include "poet/plan.h"

typedef struct progress_line {
    pthread_mutex_t lock; /* the state below, written by the planner, drawn by the ticker */
    char planner[32], phase[32];
    double energy_j, bound_j;
    double start;
    bool tty, done, ticking;
    pthread_t ticker;
} progress_line;

/* Starts the line: redrawn every half second on a terminal, every ten
 * seconds otherwise. Then pass progress_line_report and l as the plan
 * options' progress and progress_ctx. */
void progress_line_start(progress_line *l);
void progress_line_report(void *l, const poet_plan_progress *p);
/* Stops the ticker; a run long enough to have drawn ends with its final state. */
void progress_line_stop(progress_line *l);

#endif
