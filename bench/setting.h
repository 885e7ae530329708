/* The setting the single-instance bench tools take:
 * TOOL INSTANCE.json BUDGET_BYTES RUNTIME_FACTOR [SECONDS]. */
#ifndef POET_BENCH_SETTING_H
#define POET_BENCH_SETTING_H

#include "poet/poet.h"

/* Reads the instance and makes the problem; on too few arguments or bad
 * input prints one line (the usage, or tool: the error) and returns the exit
 * code (2, 1); else 0, with inst and p for the caller to free. */
int bench_setting(int argc, char **argv, const char *tool, poet_instance *inst, poet_problem *p);

#endif
