/* Arena placement of a program's buffers (what the "where" is, apart from
 * the planner's "what and when"): offsets from lifetimes, lowest fit over
 * several orders, the best kept; and its check. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

enum { PLACE_ATTEMPTS = 64 };

static bool overlap_in_time(const poet_buffer *a, const poet_buffer *b)
{
    return a->alloc_instr <= b->free_instr && b->alloc_instr <= a->free_instr;
}

typedef struct placed {
    uint64_t lo, hi;
} placed;

static int cmp_placed(const void *x, const void *y)
{
    const placed *a = x, *b = y;
    return a->lo < b->lo ? -1 : a->lo > b->lo;
}

/* Lowest offset where buffer k fits among already-placed buffers that live
 * at the same time (TensorFlow Lite Micro's greedy planner). */
static uint64_t lowest_fit(const poet_program *prog, const bool *done, int k, placed *scratch)
{
    const poet_buffer *b = &prog->buffers[k];
    int n = 0;
    for (int j = 0; j < prog->n_buffers; j++)
        if (done[j] && prog->buffers[j].bytes && overlap_in_time(b, &prog->buffers[j]))
            scratch[n++] = (placed){prog->buffers[j].offset, prog->buffers[j].offset + prog->buffers[j].bytes};
    qsort(scratch, (size_t)n, sizeof *scratch, cmp_placed);
    uint64_t at = 0;
    for (int j = 0; j < n; j++) {
        if (scratch[j].lo >= at + b->bytes) break;
        if (scratch[j].hi > at) at = scratch[j].hi;
    }
    return at;
}

typedef enum { ORDER_SIZE, ORDER_START, ORDER_AREA, ORDER_JITTER, N_ORDERS } place_order;

/* qsort has no context argument: the keys are computed first. */
static const double *sort_keys;

static double order_key(const poet_buffer *b, place_order o, unsigned *rng)
{
    switch (o) {
    case ORDER_SIZE: return (double)b->bytes;
    case ORDER_START: return -(double)b->alloc_instr;
    case ORDER_AREA: return (double)b->bytes * (double)(b->free_instr - b->alloc_instr + 1);
    case ORDER_JITTER: /* size, perturbed by up to 50 %: a deterministic random restart */
        *rng = *rng * 1103515245u + 12345u;
        return (double)b->bytes * (1.0 + 0.5 * (double)((*rng >> 8) & 0xffff) / 65536.0);
    default: return 0;
    }
}

static int cmp_order(const void *x, const void *y)
{
    double ka = sort_keys[*(const int *)x], kb = sort_keys[*(const int *)y];
    if (ka != kb) return ka > kb ? -1 : 1;
    return *(const int *)x - *(const int *)y;
}

static uint64_t place_in_order(poet_program *prog, const int *order, bool *done, placed *scratch)
{
    uint64_t arena = 0;
    memset(done, 0, (size_t)prog->n_buffers * sizeof *done);
    for (int r = 0; r < prog->n_buffers; r++) {
        int k = order[r];
        prog->buffers[k].offset = prog->buffers[k].bytes ? lowest_fit(prog, done, k, scratch) : 0;
        done[k] = true;
        uint64_t end = prog->buffers[k].offset + prog->buffers[k].bytes;
        if (end > arena) arena = end;
    }
    return arena;
}

poet_status poet_program_place(poet_program *prog, poet_err *err)
{
    int nb = prog->n_buffers;
    int *order = malloc((size_t)(nb + 1) * sizeof *order);
    bool *done = malloc((size_t)(nb + 1) * sizeof *done);
    placed *scratch = malloc((size_t)(nb + 1) * sizeof *scratch);
    uint64_t *best = malloc((size_t)(nb + 1) * sizeof *best);
    if (!order || !done || !scratch || !best) {
        free(order), free(done), free(scratch), free(best);
        return poet_fail(err, POET_ERR_NOMEM, "out of memory placing %d buffers", nb);
    }
    uint64_t best_arena = UINT64_MAX;
    double *keys = malloc((size_t)(nb + 1) * sizeof *keys);
    unsigned rng = 1;
    /* three orders, then random restarts while fragmentation remains */
    for (int attempt = 0; keys && attempt < PLACE_ATTEMPTS && best_arena > prog->live_peak_bytes; attempt++) {
        place_order o = attempt < ORDER_JITTER ? (place_order)attempt : ORDER_JITTER;
        for (int k = 0; k < nb; k++) order[k] = k, keys[k] = order_key(&prog->buffers[k], o, &rng);
        sort_keys = keys;
        qsort(order, (size_t)nb, sizeof *order, cmp_order);
        uint64_t arena = place_in_order(prog, order, done, scratch);
        if (arena < best_arena) {
            best_arena = arena;
            for (int k = 0; k < nb; k++) best[k] = prog->buffers[k].offset;
        }
    }
    if (!keys) {
        free(order), free(done), free(scratch), free(best);
        return poet_fail(err, POET_ERR_NOMEM, "out of memory placing %d buffers", nb);
    }
    for (int k = 0; k < nb; k++) prog->buffers[k].offset = best[k];
    prog->arena_bytes = nb ? best_arena : 0;
    free(order), free(done), free(scratch), free(best), free(keys);
    return POET_OK;
}

poet_status poet_program_check_placement(const poet_program *prog, poet_err *err)
{
    for (int a = 0; a < prog->n_buffers; a++) {
        const poet_buffer *x = &prog->buffers[a];
        if (x->offset + x->bytes > prog->arena_bytes)
            return poet_fail(err, POET_ERR_INVALID, "placement: buffer of node %d ends beyond the arena", x->node);
        for (int b = a + 1; b < prog->n_buffers; b++) {
            const poet_buffer *y = &prog->buffers[b];
            if (x->bytes && y->bytes && overlap_in_time(x, y) && x->offset < y->offset + y->bytes &&
                y->offset < x->offset + x->bytes)
                return poet_fail(err, POET_ERR_INVALID,
                                 "placement: tensors of nodes %d and %d are live together and overlap in the arena",
                                 x->node, y->node);
        }
    }
    return POET_OK;
}

uint64_t placed_arena_bytes(const poet_problem *p, const poet_schedule *s)
{
    poet_program prog;
    uint64_t arena = 0;
    if (!poet_program_build(p, s, &prog, NULL) && !poet_program_place(&prog, NULL)) arena = prog.arena_bytes;
    poet_program_free(&prog);
    return arena;
}
