/* The validator: independent of every planner, and the only gate before a
 * schedule is reported or executed. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"

#if defined(__GNUC__)
__attribute__((format(printf, 5, 6)))
#endif
static poet_status violation(poet_err *err, int t, int i, const char *rule, const char *fmt, ...)
{
    char detail[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    return poet_fail(err, POET_ERR_INVALID, "stage %d, node %d: %s: %s", t, i, rule, detail);
}

#define VIOLATION(t, i, rule, ...) violation(err, t, i, rule, __VA_ARGS__)

/* First stage at which each node is on storage (after its first page-out),
 * or T when never. */
static void storage_from(const poet_schedule *s, int *from)
{
    for (int i = 0; i < s->T; i++) from[i] = s->T;
    for (int t = s->T - 1; t >= 0; t--) FOR_EACH_BIT(sched_row(s, POET_MOUT, t), s->words, i) from[i] = t + 1;
}

static poet_status check_triangle(const poet_schedule *s, int t, poet_err *err)
{
    static const char *names[] = {"compute", "resident", "page-in", "page-out"};
    for (int m = 0; m < POET_N_MATRICES; m++) {
        int limit = m == POET_SRAM ? t : t + 1; /* nothing is resident before it exists */
        FOR_EACH_BIT(sched_row(s, m, t), s->words, i)
        if (i >= limit) return VIOLATION(t, i, "triangle", "%s of a node not yet computed", names[m]);
    }
    if (!poet_sched_get(s, POET_R, t, t)) return VIOLATION(t, t, "stage-computes-its-node", "stage %d must compute node %d", t, t);
    return POET_OK;
}

static poet_status check_computes(const poet_problem *p, const poet_schedule *s, int t, poet_err *err)
{
    const uint64_t *R = sched_row(s, POET_R, t), *S = sched_row(s, POET_SRAM, t);
    FOR_EACH_BIT(R, s->words, k)
    {
        if (bit_get(S, k)) return VIOLATION(t, k, "redundant-compute", "recomputes a tensor already in RAM");
        for (int c = p->in_start[k]; c < p->in_start[k + 1]; c++) {
            int i = p->in[c];
            if (!bit_get(S, i) && !(bit_get(R, i) && i < k))
                return VIOLATION(t, k, "input-resident", "input %d is neither in RAM nor computed earlier in the stage", i);
        }
    }
    return POET_OK;
}

static poet_status check_paging(const poet_schedule *s, int t, const int *on_storage_from, poet_err *err)
{
    const uint64_t *S = sched_row(s, POET_SRAM, t), *R = sched_row(s, POET_R, t);
    FOR_EACH_BIT(sched_row(s, POET_MOUT, t), s->words, i)
    {
        if (!bit_get(S, i)) return VIOLATION(t, i, "page-out-source", "pages out a tensor not in RAM at the stage start");
        if (on_storage_from[i] <= t) return VIOLATION(t, i, "redundant-page-out", "the tensor is already on storage");
    }
    FOR_EACH_BIT(sched_row(s, POET_MIN, t), s->words, i)
    {
        if (on_storage_from[i] > t) return VIOLATION(t, i, "page-in-source", "pages in a tensor that is not on storage");
        if (bit_get(S, i) || bit_get(R, i)) return VIOLATION(t, i, "redundant-page-in", "the tensor is already in RAM");
    }
    if (t + 1 < s->T) {
        const uint64_t *next = sched_row(s, POET_SRAM, t + 1), *in = sched_row(s, POET_MIN, t);
        FOR_EACH_BIT(next, s->words, i)
        if (!bit_get(S, i) && !bit_get(R, i) && !bit_get(in, i))
            return VIOLATION(t + 1, i, "resident-source", "resident without being kept, computed or paged in");
    }
    return POET_OK;
}

static poet_status check_budgets(const poet_problem *p, const poet_schedule *s, poet_err *err)
{
    double compute_s = 0, transfer_s = 0;
    for (int t = 0; t < s->T; t++) {
        const uint64_t *K = t + 1 < s->T ? sched_row(s, POET_SRAM, t + 1) : NULL;
        int node = t;
        uint64_t peak = stage_memory(p, t, sched_row(s, POET_SRAM, t), sched_row(s, POET_R, t), K, &node, NULL);
        if (peak > p->budget_bytes)
            return VIOLATION(t, node, "memory-budget", "%llu bytes in use, budget %llu", (unsigned long long)peak,
                             (unsigned long long)p->budget_bytes);
        FOR_EACH_BIT(sched_row(s, POET_R, t), s->words, i) compute_s += p->inst->nodes[i].time_s;
        FOR_EACH_BIT(sched_row(s, POET_MIN, t), s->words, i) transfer_s += poet_transfer_counted_s(p, p->inst->nodes[i].pagein_s);
        FOR_EACH_BIT(sched_row(s, POET_MOUT, t), s->words, i)
        transfer_s += poet_transfer_counted_s(p, p->inst->nodes[i].pageout_s);
    }
    if (compute_s + transfer_s > p->runtime_budget_s * (1 + 1e-9))
        return p->runtime_counts_paging
                   ? poet_fail(err, POET_ERR_INVALID, "runtime-budget: %.9g s of compute and %.9g s of transfers, "
                                                      "budget %.9g s", compute_s, transfer_s, p->runtime_budget_s)
                   : poet_fail(err, POET_ERR_INVALID, "runtime-budget: %.9g s of compute, budget %.9g s", compute_s,
                               p->runtime_budget_s);
    return POET_OK;
}

static poet_status check_placement(const poet_problem *p, const poet_schedule *s, poet_err *err)
{
    poet_program prog;
    poet_status st = poet_program_build(p, s, &prog, err);
    if (st) return st;
    if (!(st = poet_program_place(&prog, err)) && !(st = poet_program_check_placement(&prog, err)) &&
        prog.arena_bytes > p->budget_bytes)
        st = poet_fail(err, POET_ERR_INVALID, "placement-budget: the arena needs %llu bytes, budget %llu",
                       (unsigned long long)prog.arena_bytes, (unsigned long long)p->budget_bytes);
    poet_program_free(&prog);
    return st;
}

poet_status poet_schedule_validate(const poet_problem *p, const poet_schedule *s, poet_err *err)
{
    if (s->graph_hash && s->graph_hash != poet_instance_hash(p->inst))
        return poet_fail(err, POET_ERR_INVALID, "graph: the schedule was planned for a different graph");
    if (s->T != p->T)
        return poet_fail(err, POET_ERR_INVALID, "graph: the schedule covers %d nodes, the graph has %d", s->T, p->T);
    int *from = malloc((size_t)s->T * sizeof *from);
    if (!from) return poet_fail(err, POET_ERR_NOMEM, "out of memory validating");
    storage_from(s, from);
    poet_status st = POET_OK;
    for (int t = 0; t < s->T && !st; t++) st = check_triangle(s, t, err);
    for (int t = 0; t < s->T && !st; t++)
        if (!(st = check_computes(p, s, t, err))) st = check_paging(s, t, from, err);
    free(from);
    if (!st) st = check_budgets(p, s, err);
    if (!st) st = check_placement(p, s, err);
    return st;
}
