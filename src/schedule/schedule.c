/* Schedule storage: four T x T bit matrices. */
#include <stdlib.h>
#include <string.h>

#include "../base/hash.h"
#include "internal.h"

poet_status poet_schedule_init(poet_schedule *s, int T, poet_err *err)
{
    memset(s, 0, sizeof *s);
    if (T < 1 || T > POET_MAX_PLAN_NODES)
        return poet_fail(err, POET_ERR_LIMIT, "a schedule covers 1 to %d nodes, not %d", POET_MAX_PLAN_NODES, T);
    s->T = T;
    s->words = (T + 63) / 64;
    s->runtime_factor = 1.0;
    for (int m = 0; m < POET_N_MATRICES; m++) {
        s->m[m] = calloc((size_t)T * (size_t)s->words, sizeof(uint64_t));
        if (!s->m[m]) {
            poet_schedule_free(s);
            return poet_fail(err, POET_ERR_NOMEM, "out of memory for a schedule of %d nodes", T);
        }
    }
    return POET_OK;
}

void poet_schedule_free(poet_schedule *s)
{
    if (!s) return;
    for (int m = 0; m < POET_N_MATRICES; m++) free(s->m[m]);
    memset(s, 0, sizeof *s);
}

poet_status poet_schedule_copy(poet_schedule *dst, const poet_schedule *src, poet_err *err)
{
    poet_status st = poet_schedule_init(dst, src->T, err);
    if (st) return st;
    size_t n = (size_t)src->T * (size_t)src->words * sizeof(uint64_t);
    for (int m = 0; m < POET_N_MATRICES; m++) memcpy(dst->m[m], src->m[m], n);
    memcpy(dst->planner, src->planner, sizeof dst->planner);
    dst->budget_bytes = src->budget_bytes;
    dst->runtime_factor = src->runtime_factor;
    dst->runtime_counts_paging = src->runtime_counts_paging;
    dst->graph_hash = src->graph_hash;
    return POET_OK;
}

bool poet_schedule_equal(const poet_schedule *a, const poet_schedule *b)
{
    if (a->T != b->T) return false;
    size_t n = (size_t)a->T * (size_t)a->words * sizeof(uint64_t);
    for (int m = 0; m < POET_N_MATRICES; m++)
        if (memcmp(a->m[m], b->m[m], n) != 0) return false;
    return a->budget_bytes == b->budget_bytes && a->runtime_factor == b->runtime_factor &&
           a->runtime_counts_paging == b->runtime_counts_paging &&
           a->graph_hash == b->graph_hash && strcmp(a->planner, b->planner) == 0;
}

/* x's eight bytes, least significant first, into h. */
static uint32_t fnv(uint32_t h, uint64_t x)
{
    for (int i = 0; i < 8; i++, x >>= 8) h = fnv1a_byte(h, (uint8_t)x);
    return h;
}

uint32_t poet_instance_hash(const poet_instance *inst)
{
    uint32_t h = fnv(FNV1A_START, (uint64_t)inst->T);
    for (int i = 0; i < inst->T; i++) h = fnv(h, inst->nodes[i].bytes);
    for (int e = 0; e < inst->n_edges; e++)
        h = fnv(h, ((uint64_t)(uint32_t)inst->edges[e].src << 32) | (uint32_t)inst->edges[e].dst);
    return h;
}
