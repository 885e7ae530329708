/* Saved schedules: simulate, show, encode and decode read one. */
#ifndef POET_TOOLS_SAVED_H
#define POET_TOOLS_SAVED_H

#include "cli.h"

typedef struct loaded {
    poet_schedule s;
    poet_instance graph; /* T == 0 when neither embedded nor given */
} loaded;

void loaded_free(loaded *l);
/* Reads a schedule, JSON or binary, and the graph it runs on: the one the
 * file embeds, or the one the graph options name (which wins);
 * need_graph: fail when there is none. 0 or an exit code. */
int load_schedule(const char *cmd, const char *path, const graph_src *src, bool need_graph, loaded *l);
/* Validates a loaded schedule against its graph and simulates it. */
int check_and_simulate(loaded *l, poet_problem *p, poet_sim *sim, poet_mem_trace *trace);

#endif
