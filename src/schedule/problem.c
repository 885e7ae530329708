/* A planning problem: adjacency without repeated edges, and the budgets. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "poet/schedule.h"

void poet_problem_free(poet_problem *p)
{
    if (!p) return;
    free(p->in_start);
    free(p->in);
    free(p->out_start);
    free(p->out);
    free(p->last_use);
    memset(p, 0, sizeof *p);
}

/* Fills CSR lists keyed by `key` side of each edge, skipping repeats. */
static void fill_csr(const poet_instance *inst, bool by_dst, int *start, int *list, int *mark, int *fill)
{
    int T = inst->T;
    for (int v = 0; v <= T; v++) start[v] = 0;
    for (int v = 0; v < T; v++) mark[v] = -1;
    /* count distinct pairs: edges of one key are not adjacent in general, so
     * first bucket, then dedupe inside each bucket */
    for (int e = 0; e < inst->n_edges; e++) start[(by_dst ? inst->edges[e].dst : inst->edges[e].src) + 1]++;
    for (int v = 0; v < T; v++) start[v + 1] += start[v];
    memcpy(fill, start, (size_t)(T + 1) * sizeof *fill);
    for (int e = 0; e < inst->n_edges; e++) {
        int key = by_dst ? inst->edges[e].dst : inst->edges[e].src;
        list[fill[key]++] = by_dst ? inst->edges[e].src : inst->edges[e].dst;
    }
    /* dedupe and sort each bucket (insertion sort: buckets are small) */
    int w = 0;
    for (int v = 0; v < T; v++) {
        int from = start[v], to = start[v + 1];
        start[v] = w;
        for (int k = from; k < to; k++) {
            int x = list[k];
            if (mark[x] == v) continue;
            mark[x] = v;
            int j = w++;
            while (j > start[v] && list[j - 1] > x) {
                list[j] = list[j - 1];
                j--;
            }
            list[j] = x;
        }
    }
    start[T] = w;
}

poet_status poet_problem_init(poet_problem *p, const poet_instance *inst, uint64_t budget_bytes,
                              double runtime_factor, poet_err *err)
{
    memset(p, 0, sizeof *p);
    poet_status st = poet_instance_validate(inst, err);
    if (st) return st;
    if (inst->T > POET_MAX_PLAN_NODES)
        return poet_fail(err, POET_ERR_LIMIT, "graph '%s' has %d nodes; poet plans at most %d", inst->model, inst->T,
                         POET_MAX_PLAN_NODES);
    if (!(runtime_factor >= 1.0 && runtime_factor <= 1e6))
        return poet_fail(err, POET_ERR_INVALID, "runtime factor must be between 1 and 1e6, got %g", runtime_factor);
    int T = inst->T;
    p->inst = inst;
    p->T = T;
    p->budget_bytes = budget_bytes;
    p->runtime_factor = runtime_factor;
    p->in_start = malloc((size_t)(T + 1) * sizeof(int));
    p->out_start = malloc((size_t)(T + 1) * sizeof(int));
    p->in = malloc((size_t)(inst->n_edges + 1) * sizeof(int));
    p->out = malloc((size_t)(inst->n_edges + 1) * sizeof(int));
    p->last_use = malloc((size_t)T * sizeof(int));
    int *mark = malloc((size_t)T * sizeof(int)), *fill = malloc((size_t)(T + 1) * sizeof(int));
    poet_instance_stats stats;
    if (!p->in_start || !p->out_start || !p->in || !p->out || !p->last_use || !mark || !fill ||
        poet_instance_stats_compute(inst, &stats, err)) {
        free(mark);
        free(fill);
        poet_problem_free(p);
        return poet_fail(err, POET_ERR_NOMEM, "out of memory preparing '%s' for planning", inst->model);
    }
    fill_csr(inst, true, p->in_start, p->in, mark, fill);
    fill_csr(inst, false, p->out_start, p->out, mark, fill);
    free(mark);
    free(fill);
    for (int v = 0; v < T; v++) {
        int n = p->out_start[v + 1] - p->out_start[v];
        p->last_use[v] = n ? p->out[p->out_start[v + 1] - 1] : v;
    }
    p->keep_all_peak_bytes = stats.keep_all_peak_bytes;
    p->min_budget_bytes = stats.min_budget_bytes, p->min_budget_node = stats.min_budget_node;
    p->full_memory_energy_j = stats.full_memory_energy_j;
    p->full_memory_time_s = stats.full_memory_time_s;
    p->runtime_budget_s = runtime_factor * stats.full_memory_time_s;
    return POET_OK;
}
