/* The host engine: writes the device image of a graph and schedule, and
 * runs it with the device library (src/device/device.c), the same code a
 * microcontroller runs, in memory from malloc, with transfers on the DMA
 * worker thread. Adds what only a host has: the device profile's costs,
 * host timing, checkpoints. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "../base/hash.h"
#include "dma.h"
#include "poet/runtime.h"
#include "../host/clock.h"

struct poet_engine {
    const poet_graph *g;
    const poet_problem *p;
    uint8_t *image;
    size_t image_bytes;
    void *memory;
    poet_dev *dev;
    poet_storage storage;
    dma dma;
    poet_dev_storage transfers; /* the DMA worker, as the device library sees it */
    poet_optimizer optimizer;
    double step_energy_j, step_compute_s, step_transfer_s;
    poet_engine_stats stats;
};

poet_optimizer poet_optimizer_default(poet_optimizer_kind kind)
{
    if (kind == POET_OPT_ADAM) return (poet_optimizer){POET_OPT_ADAM, 1e-3f, 0, 0.9f, 0.999f, 1e-8f, 0};
    return (poet_optimizer){POET_OPT_SGD, 0.05f, 0.9f, 0, 0, 0, 0};
}

int poet_optimizer_slots(poet_optimizer_kind kind) { return kind == POET_OPT_ADAM ? 2 : 1; }

/* ---- set-up ---- */

/* What one step costs on the device profile: the costs of the
 * instructions the training program runs. */
static poet_status price_program(poet_engine *e, const poet_schedule *s, long *transfers, poet_err *err)
{
    poet_program q;
    poet_status st = poet_program_build(e->p, s, &q, err);
    if (st) return st;
    *transfers = 0;
    for (int k = 0; k < q.n; k++) {
        const poet_instr *in = &q.code[k];
        const poet_cnode *c = in->node >= 0 ? &e->p->inst->nodes[in->node] : NULL;
        if (in->op == POET_I_COMPUTE) e->step_energy_j += c->compute_j, e->step_compute_s += c->time_s;
        if (in->op == POET_I_PAGEOUT) e->step_energy_j += c->pageout_j, e->step_transfer_s += c->pageout_s;
        if (in->op == POET_I_PAGEIN) e->step_energy_j += c->pagein_j, e->step_transfer_s += c->pagein_s;
        *transfers += in->op == POET_I_PAGEOUT || in->op == POET_I_PAGEIN;
    }
    poet_program_free(&q);
    return POET_OK;
}

static poet_status open_storage(poet_engine *e, const poet_engine_config *cfg, uint64_t need, long transfers,
                                poet_err *err)
{
    poet_status st;
    if (cfg->storage) {
        if (cfg->storage->io.version != POET_DEV_STORAGE_VERSION)
            return poet_fail(err, POET_ERR_UNSUPPORTED, "runtime: storage interface version %u, expected %d",
                             (unsigned)cfg->storage->io.version, POET_DEV_STORAGE_VERSION);
        if (cfg->storage->io.capacity_bytes < need)
            return poet_fail(err, POET_ERR_LIMIT, "runtime: the schedule pages %llu bytes; storage holds %llu",
                             (unsigned long long)need, (unsigned long long)cfg->storage->io.capacity_bytes);
        e->storage = *cfg->storage;
        memset(cfg->storage, 0, sizeof *cfg->storage);
    } else if ((st = poet_storage_open_memory(need, &e->storage, err))) {
        return st;
    }
    if ((st = dma_start(&e->dma, &e->storage.io, transfers + 1, err))) return st;
    e->transfers = dma_io(&e->dma);
    return POET_OK;
}

static poet_status setup(poet_engine *e, const poet_engine_config *cfg, poet_err *err)
{
    poet_export_options o = {cfg->optimizer, cfg->seed, cfg->chunk_positions, cfg->params, cfg->buffers, cfg->frozen,
                             cfg->fused_update};
    poet_dev_memory need;
    long transfers = 0;
    poet_status st;
    if ((st = poet_export_image(cfg->graph, cfg->problem, cfg->schedule, &o, &e->image, &e->image_bytes, err)) ||
        (st = poet_dev_inspect(e->image, e->image_bytes, &need, err)) ||
        (st = price_program(e, cfg->schedule, &transfers, err)) ||
        (st = open_storage(e, cfg, need.storage_bytes, transfers, err)))
        return st;
    if (need.total_bytes > ((uint64_t)1 << 40)) return poet_fail(err, POET_ERR_LIMIT, "runtime: the model is too large");
    e->memory = aligned_alloc(8, (size_t)need.total_bytes);
    if (!e->memory)
        return poet_fail(err, POET_ERR_NOMEM, "out of memory for %llu bytes of arena, weights and state",
                         (unsigned long long)need.total_bytes);
    if ((st = poet_dev_open(e->image, e->image_bytes, e->memory, (size_t)need.total_bytes, &e->transfers,
                            host_now_s, &e->dev, err)))
        return st;
    e->stats.arena_bytes = need.arena_bytes;
    e->stats.persistent_bytes = need.persistent_bytes;
    e->stats.workspace_bytes = need.workspace_bytes;
    e->stats.storage_bytes = need.storage_bytes;
    return POET_OK;
}

poet_status poet_engine_new(const poet_engine_config *cfg, poet_engine **out, poet_err *err)
{
    *out = NULL;
    poet_engine *e = calloc(1, sizeof *e);
    if (!e) return poet_fail(err, POET_ERR_NOMEM, "out of memory for the engine");
    e->g = cfg->graph;
    e->p = cfg->problem;
    e->optimizer = cfg->optimizer;
    poet_status st = setup(e, cfg, err);
    if (st) {
        poet_engine_free(e);
        return st;
    }
    *out = e;
    return POET_OK;
}

void poet_engine_free(poet_engine *e)
{
    if (!e) return;
    if (e->dma.started) dma_stop(&e->dma);
    poet_storage_close(&e->storage);
    free(e->memory);
    free(e->image);
    free(e);
}

/* ---- steps ---- */

poet_status poet_engine_step(poet_engine *e, const float *x, const int32_t *labels, double *loss, poet_err *err)
{
    float l;
    poet_status st = poet_dev_step(e->dev, x, labels, &l, err);
    if (!st) *loss = l;
    return st;
}

poet_status poet_engine_eval(poet_engine *e, const float *x, const int32_t *labels, int rows, double *loss_sum,
                             int *correct, poet_err *err)
{
    float s;
    poet_status st = poet_dev_eval(e->dev, x, labels, rows, &s, correct, err);
    if (!st) *loss_sum = s;
    return st;
}

const poet_engine_stats *poet_engine_get_stats(poet_engine *e)
{
    const poet_dev_stats *d = poet_dev_get_stats(e->dev);
    poet_engine_stats *s = &e->stats;
    s->arena_peak_bytes = d->arena_peak_bytes;
    s->paged_out_bytes = d->paged_out_bytes, s->paged_in_bytes = d->paged_in_bytes;
    s->recomputations = d->recomputations, s->page_outs = d->page_outs, s->page_ins = d->page_ins;
    s->steps = d->steps;
    s->device_energy_j = (double)d->steps * e->step_energy_j;
    s->device_compute_s = (double)d->steps * e->step_compute_s;
    s->device_transfer_s = (double)d->steps * e->step_transfer_s;
    s->host_compute_s = d->compute_s, s->host_wait_s = d->wait_s;
    for (int k = 0; k < POET_OP_COUNT; k++) s->host_op_s[k] = d->op_s[k] + d->grad_op_s[k];
    return s;
}

poet_dev *poet_engine_device(const poet_engine *e) { return e->dev; }

const uint8_t *poet_engine_image(const poet_engine *e, size_t *len)
{
    *len = e->image_bytes;
    return e->image;
}

poet_optimizer poet_engine_optimizer(const poet_engine *e) { return e->optimizer; }

void poet_sha256_hex(const void *data, size_t len, char hex[65])
{
    sha256_hex(data, len, hex);
}
