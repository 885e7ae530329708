/* POET's stage accounting (reference README, constraints 8-9), which the
 * simulator, the validator, the instruction stream and the planners share,
 * so that all of them count memory the same way; and the memory trace. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

bool later_reader(const poet_problem *p, const uint64_t *R, int i, int k)
{
    for (int c = p->out_start[i + 1] - 1; c >= p->out_start[i] && p->out[c] > k; c--)
        if (bit_get(R, p->out[c])) return true;
    return false;
}

poet_status mem_trace_push(poet_mem_trace *tr, int stage, int node, uint64_t bytes)
{
    if (tr->n == tr->cap) {
        int cap = tr->cap ? 2 * tr->cap : 256;
        poet_mem_point *q = realloc(tr->p, (size_t)cap * sizeof *q);
        if (!q) {
            tr->oom = true;
            return POET_ERR_NOMEM;
        }
        tr->p = q;
        tr->cap = cap;
    }
    tr->p[tr->n++] = (poet_mem_point){stage, node, bytes};
    return POET_OK;
}

void poet_mem_trace_free(poet_mem_trace *tr)
{
    if (!tr) return;
    free(tr->p);
    memset(tr, 0, sizeof *tr);
}

uint64_t stage_memory(const poet_problem *p, int t, const uint64_t *S, const uint64_t *R, const uint64_t *K,
                      int *peak_node, poet_mem_trace *trace)
{
    const poet_cnode *n = p->inst->nodes;
    int words = (p->T + 63) / 64;
    uint64_t cur = 0, peak = 0;
    FOR_EACH_BIT(S, words, i) cur += n[i].bytes;
    peak = cur;
    if (peak_node) *peak_node = t;
    FOR_EACH_BIT(R, words, k)
    {
        if (k > t) continue; /* never in a valid schedule */
        cur += n[k].bytes;
        if (cur > peak) {
            peak = cur;
            if (peak_node) *peak_node = k;
        }
        if (trace) mem_trace_push(trace, t, k, cur);
        for (int c = p->in_start[k]; c < p->in_start[k + 1]; c++) {
            int i = p->in[c];
            bool present = bit_get(S, i) || bit_get(R, i);
            if (present && !(K && bit_get(K, i)) && !later_reader(p, R, i, k)) cur -= n[i].bytes;
        }
    }
    return peak;
}

