/* The flat instruction stream of a schedule (placement: placement.c).
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
