/* The pictures of `poet show`. */
#ifndef POET_TOOLS_SHOW_H
#define POET_TOOLS_SHOW_H

#include <stdio.h>

#include "poet/poet.h"

/* Writes an SVG: memory in use over the iteration against the budget, and
 * the schedule matrices (computed, in RAM, on storage, paged in or out at
 * each stage), the figures of the POET paper. */
void show_svg(FILE *f, const poet_problem *p, const poet_schedule *s, const poet_sim *sim,
              const poet_mem_trace *trace);

#endif
