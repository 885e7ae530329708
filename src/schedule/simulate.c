/* A schedule's energy, time and peak memory (the stage accounting itself:
 * stages.c). */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Energy, POET's time and the stage-accounting peak. */
static void account(const poet_problem *p, const poet_schedule *s, poet_sim *out, poet_mem_trace *trace)
{
    const poet_cnode *n = p->inst->nodes;
    for (int t = 0; t < s->T; t++) {
        const uint64_t *R = sched_row(s, POET_R, t), *S = sched_row(s, POET_SRAM, t);
        const uint64_t *K = t + 1 < s->T ? sched_row(s, POET_SRAM, t + 1) : NULL;
        FOR_EACH_BIT(R, s->words, i)
        {
            out->compute_j += n[i].compute_j;
            out->compute_time_s += n[i].time_s;
            out->recomputations += i != t;
        }
        FOR_EACH_BIT(sched_row(s, POET_MIN, t), s->words, i)
        {
            out->pagein_j += n[i].pagein_j;
            out->page_ins++;
            out->paged_in_bytes += n[i].bytes;
            out->transfer_time_s += n[i].pagein_s;
        }
        FOR_EACH_BIT(sched_row(s, POET_MOUT, t), s->words, i)
        {
            out->pageout_j += n[i].pageout_j;
            out->page_outs++;
            out->paged_out_bytes += n[i].bytes;
            out->transfer_time_s += n[i].pageout_s;
        }
        int node = t;
        uint64_t peak = stage_memory(p, t, S, R, K, &node, trace);
        if (peak > out->peak_ram_bytes || t == 0) {
            out->peak_ram_bytes = peak;
            out->peak_stage = t;
            out->peak_node = node;
        }
    }
    out->energy_j = out->compute_j + out->pagein_j + out->pageout_j;
}

/* Time on one CPU and one DMA channel, executing the instruction stream:
 * transfers queue on the channel; FREE waits for its buffer's page-out;
 * WAIT ends a stage when every transfer is done. */
static double honest_time(const poet_problem *p, const poet_program *prog)
{
    const poet_cnode *n = p->inst->nodes;
    double cpu = 0, dma = 0;
    double *done = calloc((size_t)(prog->n_buffers + 1), sizeof *done);
    if (!done) return -1;
    for (int k = 0; k < prog->n; k++) {
        const poet_instr *in = &prog->code[k];
        switch (in->op) {
        case POET_I_COMPUTE: cpu += n[in->node].time_s; break;
        case POET_I_PAGEOUT:
            dma = (dma > cpu ? dma : cpu) + n[in->node].pageout_s;
            done[in->buffer] = dma;
            break;
        case POET_I_PAGEIN:
            dma = (dma > cpu ? dma : cpu) + n[in->node].pagein_s;
            break;
        case POET_I_FREE:
            if (done[in->buffer] > cpu) cpu = done[in->buffer];
            break;
        case POET_I_WAIT:
            if (dma > cpu) cpu = dma;
            break;
        }
    }
    free(done);
    return cpu;
}

poet_status poet_simulate(const poet_problem *p, const poet_schedule *s, poet_sim *out, poet_mem_trace *trace,
                          poet_err *err)
{
    if (s->T != p->T) return poet_fail(err, POET_ERR_INVALID, "schedule covers %d nodes, graph has %d", s->T, p->T);
    memset(out, 0, sizeof *out);
    account(p, s, out, trace);
    if (trace && trace->oom) return poet_fail(err, POET_ERR_NOMEM, "out of memory recording the memory trace");
    poet_program prog;
    poet_status st = poet_program_build(p, s, &prog, err);
    if (st) return st;
    if (!(st = poet_program_place(&prog, err))) {
        out->placed_peak_bytes = prog.arena_bytes;
        out->time_with_paging_s = honest_time(p, &prog);
        if (out->time_with_paging_s < 0) st = poet_fail(err, POET_ERR_NOMEM, "out of memory simulating");
    }
    poet_program_free(&prog);
    return st;
}
