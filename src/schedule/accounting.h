/* The schedule module's contract with the planners: schedules as rows of
 * bits, and POET's stage accounting (stages.c), which the simulator, the
 * validator and every planner share, so that all of them count memory the
 * same way; and the placed arena of a schedule (placement.c). */
#ifndef POET_SRC_SCHEDULE_ACCOUNTING_H
#define POET_SRC_SCHEDULE_ACCOUNTING_H

#include "poet/schedule.h"

static inline bool bit_get(const uint64_t *row, int i) { return (row[i >> 6] >> (i & 63)) & 1u; }
static inline void bit_set(uint64_t *row, int i) { row[i >> 6] |= (uint64_t)1 << (i & 63); }
static inline void bit_clear(uint64_t *row, int i) { row[i >> 6] &= ~((uint64_t)1 << (i & 63)); }

static inline const uint64_t *sched_row(const poet_schedule *s, int m, int t)
{
    return s->m[m] + (size_t)t * (size_t)s->words;
}

static inline uint64_t *sched_row_mut(poet_schedule *s, int m, int t)
{
    return s->m[m] + (size_t)t * (size_t)s->words;
}

/* Calls fn(i, ctx) for each set bit i of row below limit, ascending. */
#define FOR_EACH_BIT(row, words, i)                                              \
    for (int _w = 0; _w < (words); _w++)                                         \
        for (uint64_t _b = (row)[_w]; _b; _b &= _b - 1)                          \
            for (int i = _w * 64 + __builtin_ctzll(_b), _once = 1; _once; _once = 0)

/* POET's memory accounting of one stage (reference README, constraints
 * 8-9): resident set S at the start, computations R in index order, each
 * adding its output, then releasing each input that is neither kept (K, the
 * next stage's resident set; NULL for the last stage) nor read by a later
 * computation of the stage. Returns the peak; *peak_node gets the node
 * computed at the peak. trace may be NULL. */
uint64_t stage_memory(const poet_problem *p, int t, const uint64_t *S, const uint64_t *R, const uint64_t *K,
                      int *peak_node, poet_mem_trace *trace);

/* true if some j > k in R reads i */
bool later_reader(const poet_problem *p, const uint64_t *R, int i, int k);

/* The arena a schedule's placement needs, or 0 when out of memory. */
uint64_t placed_arena_bytes(const poet_problem *p, const poet_schedule *s);

#endif
