#define _POSIX_C_SOURCE 200809L
/* Saved schedules and the graphs they run on, for simulate, show, encode
 * and decode. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "saved.h"
void loaded_free(loaded *l)
{
    poet_schedule_free(&l->s);
    poet_instance_free(&l->graph);
}

/* Reads a schedule, JSON or binary, and the graph it runs on: the one the
 * file embeds, or the one the graph options name (which wins). */
int load_schedule(const char *cmd, const char *path, const graph_src *src, bool need_graph, loaded *l)
{
    memset(l, 0, sizeof *l);
    int rc = read_schedule(path, &l->s, &l->graph);
    if (rc) return rc;
    if (src->model || src->onnx || src->instance) {
        poet_instance_free(&l->graph);
        rc = load_instance(cmd, src, &l->graph);
    } else if (src->device || src->batch) {
        rc = usage_error(cmd, "--device and --batch apply to --model only", NULL);
    } else if (need_graph && l->graph.T == 0) {
        fprintf(stderr, "poet: %s holds no graph: give --instance FILE or --model NAME --device DEV\n", path);
        rc = 1;
    }
    if (rc) loaded_free(l);
    return rc;
}

/* Validates a loaded schedule against its graph and simulates it. */
int check_and_simulate(loaded *l, poet_problem *p, poet_sim *sim, poet_mem_trace *trace)
{
    poet_err err = {0};
    if (poet_problem_init(p, &l->graph, l->s.budget_bytes, l->s.runtime_factor, &err)) return lib_error(&err);
    p->runtime_counts_paging = l->s.runtime_counts_paging;
    if (poet_schedule_validate(p, &l->s, &err)) {
        fprintf(stderr, "poet: invalid schedule: %s\n", err.msg);
        poet_problem_free(p);
        return 1;
    }
    if (poet_simulate(p, &l->s, sim, trace, &err)) {
        poet_problem_free(p);
        return lib_error(&err);
    }
    return 0;
}
