/* The engine: runs a schedule's instruction stream over one arena, with
 * transfers on the DMA worker, then applies the optimizer. All memory is
 * taken in poet_engine_init. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>

#include "../graph/ops.h"
#include "dma.h"
#include "kernels.h"
#include "util.h"

struct poet_engine {
    const poet_graph *g;
    const poet_problem *p;
    poet_program prog; /* training: the schedule's instruction stream */
    poet_program eval; /* inference: forward nodes, freed after their last use */
    unsigned char *arena;
    void *persist; /* one block: everything below */
    float *params, *grads, *buffers, *running_next, *opt_m, *opt_v, *batch_x;
    int32_t *labels;
    uint64_t *param_at, *buffer_at; /* per node: first float in params / buffers */
    uint64_t n_params, n_buffers, batch_numel;
    int rows, classes;
    int *live;     /* node -> buffer in RAM, or -1 */
    long *pending; /* buffer -> ticket of its page-out, or -1 */
    uint64_t *slot; /* node -> offset on storage */
    poet_storage storage;
    dma dma;
    poet_optimizer opt;
    uint64_t seed;
    long step;
    poet_engine_stats stats;
};

poet_optimizer poet_optimizer_default(poet_optimizer_kind kind)
{
    if (kind == POET_OPT_ADAM) return (poet_optimizer){POET_OPT_ADAM, 1e-3f, 0, 0.9f, 0.999f, 1e-8f, 0};
    return (poet_optimizer){POET_OPT_SGD, 0.05f, 0.9f, 0, 0, 0, 0};
}

/* ---- set-up ---- */

static poet_status check_graph(const poet_graph *g, const poet_problem *p, poet_err *err)
{
    if (g->loss < 0 || g->n_nodes != p->T)
        return poet_fail(err, POET_ERR_INVALID, "runtime: graph '%s' does not match the planned problem", g->model);
    for (int v = 0; v < g->n_nodes; v++)
        if (g->nodes[v].bytes != p->inst->nodes[v].bytes)
            return poet_fail(err, POET_ERR_INVALID, "runtime: node %d of '%s' differs from the planned graph", v,
                             g->model);
    int inputs = 0;
    for (int v = 0; v < g->n_forward; v++) {
        poet_op op = g->nodes[v].op;
        if (op == POET_OP_INPUT) inputs++;
        if (op == POET_OP_SOFTMAX_CE && g->nodes[g->nodes[v].inputs[0]].shape.ndim != 2)
            return poet_fail(err, POET_ERR_UNSUPPORTED, "runtime: the loss of '%s' needs 2-d logits", g->model);
    }
    if (inputs != 1) return poet_fail(err, POET_ERR_UNSUPPORTED, "runtime: '%s' needs exactly one input", g->model);
    return POET_OK;
}

/* Forward nodes only, each freed after its last forward reader. */
static poet_status build_eval_program(poet_engine *e, poet_err *err)
{
    const poet_graph *g = e->g;
    poet_program *q = &e->eval;
    memset(q, 0, sizeof *q);
    q->buffers = calloc((size_t)g->n_forward, sizeof *q->buffers);
    if (!q->buffers) return poet_fail(err, POET_ERR_NOMEM, "out of memory planning inference");
    q->n_buffers = q->cap_buffers = g->n_forward;
    for (int v = 0; v < g->n_forward; v++) q->buffers[v] = (poet_buffer){v, v, v, g->nodes[v].bytes, 0};
    for (int v = 0; v < g->n_forward; v++)
        for (int j = 0; j < g->nodes[v].n_inputs; j++) q->buffers[g->nodes[v].inputs[j]].free_instr = v;
    poet_status st = poet_program_place(q, err);
    if (!st && q->arena_bytes > e->prog.arena_bytes)
        st = poet_fail(err, POET_ERR_UNSUPPORTED,
                       "runtime: inference needs an arena of %llu bytes, more than the schedule's %llu",
                       (unsigned long long)q->arena_bytes, (unsigned long long)e->prog.arena_bytes);
    return st;
}

static void init_params(poet_engine *e)
{
    const poet_graph *g = e->g;
    for (int v = 0; v < g->n_forward; v++) {
        const poet_node *n = &g->nodes[v];
        float *w = e->params + e->param_at[v];
        uint64_t rng = rt_mix64(e->seed ^ rt_mix64((uint64_t)v + 1));
        if (n->op == POET_OP_BATCHNORM2D || n->op == POET_OP_LAYERNORM) {
            uint64_t c = n->params / 2; /* gamma 1, beta 0; running mean 0, variance 1 */
            for (uint64_t i = 0; i < c; i++) w[i] = 1.0f, w[c + i] = 0.0f;
            for (uint64_t i = 0; i < n->buffers / 2; i++)
                e->buffers[e->buffer_at[v] + i] = 0.0f, e->buffers[e->buffer_at[v] + n->buffers / 2 + i] = 1.0f;
            continue;
        }
        /* PyTorch's default: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weights and bias */
        double bound = 1.0 / sqrt((double)kernel_fan_in(g, n));
        for (uint64_t i = 0; i < n->params; i++) {
            rng = rt_mix64(rng);
            w[i] = (float)(bound * (2.0 * (double)(rng >> 11) / 9007199254740992.0 - 1.0));
        }
    }
}

static poet_status alloc_persistent(poet_engine *e, poet_err *err)
{
    const poet_graph *g = e->g;
    e->param_at = calloc((size_t)g->n_nodes, sizeof *e->param_at);
    e->buffer_at = calloc((size_t)g->n_nodes, sizeof *e->buffer_at);
    if (!e->param_at || !e->buffer_at) return poet_fail(err, POET_ERR_NOMEM, "out of memory for the model");
    for (int v = 0; v < g->n_forward; v++) {
        const poet_node *n = &g->nodes[v];
        e->param_at[v] = e->n_params;
        e->buffer_at[v] = e->n_buffers;
        e->n_params += n->params;
        e->n_buffers += n->buffers;
        if (n->op == POET_OP_INPUT) e->batch_numel = poet_shape_numel(&n->shape);
        if (n->op == POET_OP_SOFTMAX_CE) {
            const poet_node *x = &g->nodes[n->inputs[0]];
            e->rows = (int)x->shape.dim[0];
            e->classes = (int)x->shape.dim[1];
        }
    }
    uint64_t floats = 4 * e->n_params + 2 * e->n_buffers + e->batch_numel;
    uint64_t bytes = floats * sizeof(float) + (uint64_t)e->rows * sizeof(int32_t);
    if (bytes > ((uint64_t)1 << 40)) return poet_fail(err, POET_ERR_LIMIT, "runtime: the model is too large");
    e->persist = calloc(1, (size_t)bytes);
    if (!e->persist) return poet_fail(err, POET_ERR_NOMEM, "out of memory for %llu bytes of weights and state",
                                      (unsigned long long)bytes);
    float *f = e->persist;
    e->params = f, f += e->n_params;
    e->grads = f, f += e->n_params;
    e->opt_m = f, f += e->n_params;
    e->opt_v = f, f += e->n_params;
    e->buffers = f, f += e->n_buffers;
    e->running_next = f, f += e->n_buffers;
    e->batch_x = f, f += e->batch_numel;
    e->labels = (int32_t *)f;
    e->stats.persistent_bytes = bytes;
    return POET_OK;
}

/* Storage slots for the tensors the schedule pages out. */
static uint64_t assign_slots(poet_engine *e, long *transfers)
{
    uint64_t at = 0;
    *transfers = 0;
    for (int v = 0; v < e->g->n_nodes; v++) e->slot[v] = UINT64_MAX;
    for (int k = 0; k < e->prog.n; k++) {
        const poet_instr *in = &e->prog.code[k];
        if (in->op != POET_I_PAGEOUT && in->op != POET_I_PAGEIN) continue;
        (*transfers)++;
        if (in->op == POET_I_PAGEOUT && e->slot[in->node] == UINT64_MAX) {
            e->slot[in->node] = at;
            at += e->g->nodes[in->node].bytes;
        }
    }
    return at;
}

static poet_status setup(poet_engine *e, const poet_engine_config *cfg, poet_err *err)
{
    poet_status st;
    if ((st = check_graph(cfg->graph, cfg->problem, err))) return st;
    if ((st = poet_schedule_validate(cfg->problem, cfg->schedule, err))) return st;
    if ((st = poet_program_build(cfg->problem, cfg->schedule, &e->prog, err))) return st;
    if ((st = poet_program_place(&e->prog, err))) return st;
    if ((st = poet_program_check_placement(&e->prog, err))) return st;
    if ((st = build_eval_program(e, err))) return st;
    if ((st = alloc_persistent(e, err))) return st;
    size_t nb = (size_t)e->prog.n_buffers + 1, nn = (size_t)e->g->n_nodes;
    e->arena = malloc((size_t)e->prog.arena_bytes + 1);
    e->live = malloc(nn * sizeof *e->live);
    e->pending = malloc(nb * sizeof *e->pending);
    e->slot = malloc(nn * sizeof *e->slot);
    if (!e->arena || !e->live || !e->pending || !e->slot)
        return poet_fail(err, POET_ERR_NOMEM, "out of memory for an arena of %llu bytes",
                         (unsigned long long)e->prog.arena_bytes);
    long transfers;
    uint64_t need = assign_slots(e, &transfers);
    e->stats.arena_bytes = e->prog.arena_bytes;
    e->stats.storage_bytes = need;
    if (cfg->storage) {
        if (cfg->storage->version != POET_STORAGE_VERSION)
            return poet_fail(err, POET_ERR_UNSUPPORTED, "runtime: storage interface version %d, expected %d",
                             cfg->storage->version, POET_STORAGE_VERSION);
        if (cfg->storage->capacity_bytes < need)
            return poet_fail(err, POET_ERR_LIMIT, "runtime: the schedule pages %llu bytes; storage holds %llu",
                             (unsigned long long)need, (unsigned long long)cfg->storage->capacity_bytes);
        e->storage = *cfg->storage;
        memset(cfg->storage, 0, sizeof *cfg->storage);
    } else if ((st = poet_storage_open_memory(need, &e->storage, err))) {
        return st;
    }
    if ((st = dma_start(&e->dma, &e->storage, transfers + 1, err))) return st;
    init_params(e);
    return POET_OK;
}

poet_status poet_engine_init(poet_engine **out, const poet_engine_config *cfg, poet_err *err)
{
    *out = NULL;
    poet_engine *e = calloc(1, sizeof *e);
    if (!e) return poet_fail(err, POET_ERR_NOMEM, "out of memory for the engine");
    e->g = cfg->graph;
    e->p = cfg->problem;
    e->opt = cfg->optimizer;
    e->seed = cfg->seed;
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
    poet_program_free(&e->prog);
    poet_program_free(&e->eval);
    free(e->arena);
    free(e->persist);
    free(e->param_at);
    free(e->buffer_at);
    free(e->live);
    free(e->pending);
    free(e->slot);
    free(e);
}

/* ---- execution ---- */

static float *tensor(poet_engine *e, const poet_program *q, int node)
{
    int b = e->live[node];
    return b < 0 ? NULL : (float *)(void *)(e->arena + q->buffers[b].offset);
}

static void touch(poet_engine *e, const poet_buffer *b)
{
    if (b->bytes && b->offset + b->bytes > e->stats.arena_peak_bytes) e->stats.arena_peak_bytes = b->offset + b->bytes;
}

static bool compute(poet_engine *e, const poet_program *q, int node, bool first, bool training)
{
    const poet_node *n = &e->g->nodes[node];
    int owner = n->op == POET_OP_GRAD ? n->fwd : node;
    kernel_ctx c = {.g = e->g, .n = n, .out = tensor(e, q, node), .params = e->params + e->param_at[owner],
                    .running = e->buffers + e->buffer_at[owner], .batch_x = e->batch_x, .labels = e->labels,
                    .dropout_seed = rt_mix64(e->seed ^ rt_mix64((uint64_t)e->step + 0x5eed)), .training = training};
    /* side effects belong to a node's own stage, never to a recomputation */
    if (first && training && n->op == POET_OP_GRAD) c.grads = e->grads + e->param_at[owner];
    if (first && training && n->op == POET_OP_BATCHNORM2D) c.running_out = e->running_next + e->buffer_at[owner];
    for (int j = 0; j < n->n_inputs; j++) c.in[j] = tensor(e, q, n->inputs[j]);
    double t0 = rt_now_s();
    bool ok = kernel_run(&c);
    double dt = rt_now_s() - t0;
    e->stats.host_compute_s += dt;
    e->stats.host_op_s[e->g->nodes[owner].op] += dt;
    return ok;
}

static poet_status transfer(poet_engine *e, const poet_instr *in, poet_err *err)
{
    const poet_buffer *b = &e->prog.buffers[in->buffer];
    const poet_cnode *c = &e->p->inst->nodes[in->node];
    bool out = in->op == POET_I_PAGEOUT;
    if (e->slot[in->node] == UINT64_MAX)
        return poet_fail(err, POET_ERR_INVALID, "runtime: node %d is paged in but never out", in->node);
    dma_job job = {out, e->arena + b->offset, e->slot[in->node], (size_t)b->bytes};
    long ticket = dma_submit(&e->dma, job);
    if (out) {
        e->pending[in->buffer] = ticket;
        e->stats.page_outs++, e->stats.paged_out_bytes += b->bytes, e->stats.device_energy_j += c->pageout_j;
        e->stats.device_transfer_s += c->pageout_s;
    } else {
        e->live[in->node] = in->buffer;
        touch(e, b);
        e->stats.page_ins++, e->stats.paged_in_bytes += b->bytes, e->stats.device_energy_j += c->pagein_j;
        e->stats.device_transfer_s += c->pagein_s;
    }
    return POET_OK;
}

static poet_status run_instr(poet_engine *e, const poet_instr *in, poet_err *err)
{
    switch (in->op) {
    case POET_I_PAGEOUT:
    case POET_I_PAGEIN: return transfer(e, in, err);
    case POET_I_COMPUTE:
        e->live[in->node] = in->buffer;
        touch(e, &e->prog.buffers[in->buffer]);
        if (!compute(e, &e->prog, in->node, in->stage == in->node, true))
            return poet_fail(err, POET_ERR_UNSUPPORTED, "runtime: no kernel for node '%s'", e->g->nodes[in->node].name);
        if (in->stage != in->node) e->stats.recomputations++;
        e->stats.device_energy_j += e->p->inst->nodes[in->node].compute_j;
        e->stats.device_compute_s += e->p->inst->nodes[in->node].time_s;
        return POET_OK;
    case POET_I_FREE: {
        poet_status st = POET_OK;
        if (e->pending[in->buffer] >= 0) { /* its page-out still reads it */
            double t0 = rt_now_s();
            st = dma_wait(&e->dma, e->pending[in->buffer], err);
            e->stats.host_wait_s += rt_now_s() - t0;
            e->pending[in->buffer] = -1;
        }
        e->live[in->node] = -1;
        return st;
    }
    case POET_I_WAIT: {
        double t0 = rt_now_s();
        poet_status st = dma_wait_all(&e->dma, err);
        e->stats.host_wait_s += rt_now_s() - t0;
        return st;
    }
    default: return poet_fail(err, POET_ERR_INVALID, "runtime: unknown instruction %d", in->op);
    }
}

static poet_status check_labels(const poet_engine *e, const int32_t *labels, poet_err *err)
{
    for (int r = 0; r < e->rows; r++)
        if (labels[r] < 0 || labels[r] >= e->classes)
            return poet_fail(err, POET_ERR_INVALID, "label %d of row %d is outside 0..%d", (int)labels[r], r,
                             e->classes - 1);
    return POET_OK;
}

static void load_batch(poet_engine *e, const float *x, const int32_t *labels)
{
    memcpy(e->batch_x, x, (size_t)e->batch_numel * sizeof(float));
    memcpy(e->labels, labels, (size_t)e->rows * sizeof(int32_t));
}

static void optimizer_update(poet_engine *e)
{
    const poet_optimizer *o = &e->opt;
    double t = (double)(e->step + 1);
    float c1 = (float)(1.0 - pow(o->beta1, t)), c2 = (float)(1.0 - pow(o->beta2, t));
    for (uint64_t i = 0; i < e->n_params; i++) {
        float g = e->grads[i] + o->weight_decay * e->params[i];
        if (o->kind == POET_OPT_SGD) {
            e->opt_m[i] = o->momentum * e->opt_m[i] + g;
            e->params[i] -= o->lr * e->opt_m[i];
        } else {
            e->opt_m[i] = o->beta1 * e->opt_m[i] + (1 - o->beta1) * g;
            e->opt_v[i] = o->beta2 * e->opt_v[i] + (1 - o->beta2) * g * g;
            e->params[i] -= o->lr * (e->opt_m[i] / c1) / (sqrtf(e->opt_v[i] / c2) + o->eps);
        }
    }
}

static double mean_loss(poet_engine *e)
{
    double s = 0;
    const float *l = tensor(e, &e->prog, e->g->loss);
    for (int r = 0; r < e->rows; r++) s += l[r];
    return s / e->rows;
}

poet_status poet_engine_step(poet_engine *e, const float *x, const int32_t *labels, double *loss, poet_err *err)
{
    poet_status st = check_labels(e, labels, err);
    if (st) return st;
    load_batch(e, x, labels);
    memcpy(e->running_next, e->buffers, (size_t)e->n_buffers * sizeof(float));
    for (int v = 0; v < e->g->n_nodes; v++) e->live[v] = -1;
    for (int b = 0; b < e->prog.n_buffers; b++) e->pending[b] = -1;
    double l = NAN;
    for (int k = 0; k < e->prog.n && !st; k++) {
        const poet_instr *in = &e->prog.code[k];
        st = run_instr(e, in, err);
        if (!st && in->op == POET_I_COMPUTE && in->node == e->g->loss && in->stage == in->node) l = mean_loss(e);
    }
    if (!st && e->stats.page_outs) st = e->storage.sync(e->storage.ctx, err);
    if (st) { /* the step is void: drain the transfers, keep the weights */
        dma_wait_all(&e->dma, NULL);
        dma_reset(&e->dma);
        return st;
    }
    memcpy(e->buffers, e->running_next, (size_t)e->n_buffers * sizeof(float));
    optimizer_update(e);
    e->step++;
    e->stats.steps++;
    *loss = l;
    return POET_OK;
}

poet_status poet_engine_eval(poet_engine *e, const float *x, const int32_t *labels, int rows, double *loss_sum,
                             int *correct, poet_err *err)
{
    poet_status st = check_labels(e, labels, err);
    if (st) return st;
    load_batch(e, x, labels);
    const poet_graph *g = e->g;
    for (int v = 0; v < g->n_forward; v++) {
        e->live[v] = v;
        touch(e, &e->eval.buffers[v]);
        if (!compute(e, &e->eval, v, false, false))
            return poet_fail(err, POET_ERR_UNSUPPORTED, "runtime: no kernel for node '%s'", g->nodes[v].name);
    }
    const float *logits = tensor(e, &e->eval, g->nodes[g->loss].inputs[0]), *l = tensor(e, &e->eval, g->loss);
    double s = 0;
    int ok = 0;
    for (int r = 0; r < rows && r < e->rows; r++) {
        const float *row = logits + (size_t)r * (size_t)e->classes;
        int best = 0;
        for (int k = 1; k < e->classes; k++)
            if (row[k] > row[best]) best = k;
        ok += best == labels[r];
        s += l[r];
    }
    *loss_sum = s;
    *correct = ok;
    return POET_OK;
}

const poet_engine_stats *poet_engine_get_stats(const poet_engine *e) { return &e->stats; }

void poet_engine_batch_shape(const poet_engine *e, int *rows, uint64_t *numel_per_row, int *classes)
{
    *rows = e->rows;
    *numel_per_row = e->rows ? e->batch_numel / (uint64_t)e->rows : 0;
    *classes = e->classes;
}

uint64_t poet_engine_seed(const poet_engine *e) { return e->seed; }

uint32_t poet_engine_graph_hash(const poet_engine *e) { return poet_instance_hash(e->p->inst); }

float *poet_engine_params(poet_engine *e, int node, bool gradient, uint64_t *count)
{
    if (node < 0 || node >= e->g->n_forward) return NULL;
    *count = e->g->nodes[node].params;
    return (gradient ? e->grads : e->params) + e->param_at[node];
}

float *poet_engine_buffers(poet_engine *e, int node, uint64_t *count)
{
    if (node < 0 || node >= e->g->n_forward) return NULL;
    *count = e->g->nodes[node].buffers;
    return e->buffers + e->buffer_at[node];
}

/* ---- state ---- */

size_t poet_engine_state_bytes(const poet_engine *e)
{
    return (size_t)(3 * e->n_params + e->n_buffers) * sizeof(float) + sizeof(int64_t);
}

void poet_engine_state_save(const poet_engine *e, void *dst)
{
    unsigned char *p = dst;
    size_t np = (size_t)e->n_params * sizeof(float), nb = (size_t)e->n_buffers * sizeof(float);
    memcpy(p, e->params, np), p += np;
    memcpy(p, e->opt_m, np), p += np;
    memcpy(p, e->opt_v, np), p += np;
    memcpy(p, e->buffers, nb), p += nb;
    int64_t step = e->step;
    memcpy(p, &step, sizeof step);
}

poet_status poet_engine_state_load(poet_engine *e, const void *src, size_t len, poet_err *err)
{
    if (len != poet_engine_state_bytes(e))
        return poet_fail(err, POET_ERR_INVALID, "checkpoint holds %zu bytes of state; this model needs %zu", len,
                         poet_engine_state_bytes(e));
    const unsigned char *p = src;
    size_t np = (size_t)e->n_params * sizeof(float), nb = (size_t)e->n_buffers * sizeof(float);
    int64_t step;
    memcpy(&step, p + 3 * np + nb, sizeof step);
    if (step < 0) return poet_fail(err, POET_ERR_INVALID, "checkpoint has a negative step count");
    memcpy(e->params, p, np), p += np;
    memcpy(e->opt_m, p, np), p += np;
    memcpy(e->opt_v, p, np), p += np;
    memcpy(e->buffers, p, nb);
    e->step = (long)step;
    return POET_OK;
}

void poet_sha256_hex(const void *data, size_t len, char hex[65])
{
    unsigned char md[32];
    unsigned int n = 0;
    EVP_Digest(data, len, md, &n, EVP_sha256(), NULL);
    for (int i = 0; i < 32; i++) {
        static const char digits[] = "0123456789abcdef";
        hex[2 * i] = digits[md[i] >> 4];
        hex[2 * i + 1] = digits[md[i] & 15];
    }
    hex[64] = 0;
}

void poet_engine_weights_sha256(const poet_engine *e, char hex[65])
{
    poet_sha256_hex(e->params, (size_t)e->n_params * sizeof(float), hex);
}
