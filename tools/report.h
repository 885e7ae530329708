/* The report plan and simulate print: energy, memory, time, operations,
 * as text or JSON. */
#ifndef POET_TOOLS_REPORT_H
#define POET_TOOLS_REPORT_H

#include "cli.h"

typedef struct report {
    const poet_problem *p;
    const char *planner, *status, *note;
    const poet_sim *sim; /* NULL when there is no schedule */
    double lower_bound_j, solve_seconds, found_seconds; /* < 0 or NAN: not planned here */
    bool validated;
    int n_levels; /* DRESS-style sparsity levels the schedule is costed at (plan --sparse-levels) */
    const uint32_t *sparsity_bp;
    const poet_sim *level_sim;
    const double *level_parameter_bytes;
    const ram_use *ram; /* what training keeps in the device's RAM beside the arena, or NULL */
} report;

int print_report(const report *r, bool json);

#endif
