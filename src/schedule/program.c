/* The flat instruction stream of a schedule, and arena placement.
 *
 * Stage t runs: page-outs of tensors resident at its start; computations in
 * index order, each followed by the release of the inputs POET's accounting
 * frees; the release of everything not kept for stage t+1; page-ins (landing
 * for t+1); a wait. Buffers live from the instruction that creates them to
 * the one that frees them, so the largest sum of live buffers equals the
 * stage accounting's peak. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

void poet_program_free(poet_program *prog)
{
    if (!prog) return;
    free(prog->code);
    free(prog->buffers);
    memset(prog, 0, sizeof *prog);
}

static bool emit(poet_program *prog, poet_instr_op op, int stage, int node, int buffer)
{
    if (prog->n == prog->cap) {
        int cap = prog->cap ? 2 * prog->cap : 1024;
        poet_instr *c = realloc(prog->code, (size_t)cap * sizeof *c);
        if (!c) return false;
        prog->code = c;
        prog->cap = cap;
    }
    prog->code[prog->n++] = (poet_instr){(uint8_t)op, stage, node, buffer};
    return true;
}

static int new_buffer(poet_program *prog, int node, uint64_t bytes)
{
    if (prog->n_buffers == prog->cap_buffers) {
        int cap = prog->cap_buffers ? 2 * prog->cap_buffers : 1024;
        poet_buffer *b = realloc(prog->buffers, (size_t)cap * sizeof *b);
        if (!b) return -1;
        prog->buffers = b;
        prog->cap_buffers = cap;
    }
    prog->buffers[prog->n_buffers] = (poet_buffer){node, prog->n, -1, bytes, 0};
    return prog->n_buffers++;
}

typedef struct builder {
    poet_program *prog;
    int *live;       /* node -> its buffer in RAM, or -1 */
    uint64_t in_use; /* bytes of live buffers */
} builder;

static bool release(builder *b, int stage, int node)
{
    int buf = b->live[node];
    if (!emit(b->prog, POET_I_FREE, stage, node, buf)) return false;
    b->prog->buffers[buf].free_instr = b->prog->n - 1;
    b->in_use -= b->prog->buffers[buf].bytes;
    b->live[node] = -1;
    return true;
}

static bool create(builder *b, poet_instr_op op, int stage, int node, uint64_t bytes)
{
    int buf = new_buffer(b->prog, node, bytes);
    if (buf < 0 || !emit(b->prog, op, stage, node, buf)) return false;
    b->live[node] = buf;
    b->in_use += bytes;
    if (b->in_use > b->prog->live_peak_bytes) b->prog->live_peak_bytes = b->in_use;
    return true;
}

static bool build_stage(builder *b, const poet_problem *p, const poet_schedule *s, int t)
{
    const poet_cnode *n = p->inst->nodes;
    const uint64_t *R = sched_row(s, POET_R, t);
    const uint64_t *K = t + 1 < s->T ? sched_row(s, POET_SRAM, t + 1) : NULL;
    bool ok = true;
    FOR_EACH_BIT(sched_row(s, POET_MOUT, t), s->words, i) ok = ok && emit(b->prog, POET_I_PAGEOUT, t, i, b->live[i]);
    FOR_EACH_BIT(R, s->words, k)
    {
        ok = ok && create(b, POET_I_COMPUTE, t, k, n[k].bytes);
        for (int c = p->in_start[k]; ok && c < p->in_start[k + 1]; c++) {
            int i = p->in[c];
            if (b->live[i] >= 0 && !(K && bit_get(K, i)) && !later_reader(p, R, i, k)) ok = release(b, t, i);
        }
    }
    for (int i = 0; ok && i <= t; i++)
        if (b->live[i] >= 0 && !(K && bit_get(K, i))) ok = release(b, t, i);
    FOR_EACH_BIT(sched_row(s, POET_MIN, t), s->words, i) ok = ok && create(b, POET_I_PAGEIN, t, i, n[i].bytes);
    return ok && emit(b->prog, POET_I_WAIT, t, -1, -1);
}

poet_status poet_program_build(const poet_problem *p, const poet_schedule *s, poet_program *out, poet_err *err)
{
    memset(out, 0, sizeof *out);
    builder b = {out, malloc((size_t)s->T * sizeof(int)), 0};
    bool ok = b.live != NULL;
    for (int i = 0; ok && i < s->T; i++) b.live[i] = -1;
    for (int t = 0; ok && t < s->T; t++) ok = build_stage(&b, p, s, t);
    free(b.live);
    if (!ok) {
        poet_program_free(out);
        return poet_fail(err, POET_ERR_NOMEM, "out of memory building the instruction stream");
    }
    for (int k = 0; k < out->n_buffers; k++)
        if (out->buffers[k].free_instr < 0) out->buffers[k].free_instr = out->n; /* never freed */
    return POET_OK;
}

/* ---- placement ---- */

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

poet_status poet_program_to_schedule(const poet_program *prog, int T, poet_schedule *out, poet_err *err)
{
    poet_status st = poet_schedule_init(out, T, err);
    if (st) return st;
    bool *live = calloc((size_t)T, sizeof *live);
    if (!live) {
        poet_schedule_free(out);
        return poet_fail(err, POET_ERR_NOMEM, "out of memory");
    }
    for (int k = 0; k < prog->n && !st; k++) {
        const poet_instr *in = &prog->code[k];
        if (in->stage < 0 || in->stage >= T || (in->op != POET_I_WAIT && (in->node < 0 || in->node >= T))) {
            st = poet_fail(err, POET_ERR_INVALID, "instruction %d refers to a stage or node out of range", k);
            break;
        }
        switch (in->op) {
        case POET_I_COMPUTE: poet_sched_set(out, POET_R, in->stage, in->node, true), live[in->node] = true; break;
        case POET_I_PAGEIN: poet_sched_set(out, POET_MIN, in->stage, in->node, true), live[in->node] = true; break;
        case POET_I_PAGEOUT: poet_sched_set(out, POET_MOUT, in->stage, in->node, true); break;
        case POET_I_FREE: live[in->node] = false; break;
        case POET_I_WAIT: /* what is live at a stage's end is resident at the next one's start */
            for (int i = 0; i < T && in->stage + 1 < T; i++)
                if (live[i]) poet_sched_set(out, POET_SRAM, in->stage + 1, i, true);
            break;
        default: st = poet_fail(err, POET_ERR_INVALID, "instruction %d has an unknown operation", k);
        }
    }
    free(live);
    if (st) poet_schedule_free(out);
    return st;
}

uint64_t placed_arena_bytes(const poet_problem *p, const poet_schedule *s)
{
    poet_program prog;
    uint64_t arena = 0;
    if (!poet_program_build(p, s, &prog, NULL) && !poet_program_place(&prog, NULL)) arena = prog.arena_bytes;
    poet_program_free(&prog);
    return arena;
}
