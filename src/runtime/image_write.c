/* Writes the device image (src/device/image.h): the one artefact that a
 * device, or the host's own runtime, trains from. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "../base/hash.h"
#include "../device/image.h"
#include "../device/kernels.h"
#include "poet/runtime.h"

_Static_assert((int)KI_PAGEOUT == (int)POET_I_PAGEOUT && (int)KI_COMPUTE == (int)POET_I_COMPUTE &&
                   (int)KI_FREE == (int)POET_I_FREE && (int)KI_PAGEIN == (int)POET_I_PAGEIN &&
                   (int)KI_WAIT == (int)POET_I_WAIT,
               "the device image's instructions are poet_instr_op");
_Static_assert((int)KOPT_SGD == (int)POET_OPT_SGD && (int)KOPT_ADAM == (int)POET_OPT_ADAM,
               "the device image's optimizers");

enum { WORKSPACE_CAP_BYTES = 16 << 20 }; /* whole images of im2col, up to this */

static poet_status check_graph(const poet_graph *g, const poet_problem *p, poet_err *err)
{
    if (g->loss < 0 || g->n_nodes != p->T)
        return poet_fail(err, POET_ERR_INVALID, "runtime: graph '%s' does not match the planned problem", g->model);
    if (g->n_nodes > 65535)
        return poet_fail(err, POET_ERR_LIMIT, "runtime: graph '%s' has %d nodes; the runtime runs up to 65535",
                         g->model, g->n_nodes);
    int inputs = 0;
    for (int v = 0; v < g->n_nodes; v++) {
        const poet_node *n = &g->nodes[v];
        if (n->bytes != p->inst->nodes[v].bytes)
            return poet_fail(err, POET_ERR_INVALID, "runtime: node %d of '%s' differs from the planned graph", v,
                             g->model);
        if (n->bytes > (1ull << 32))
            return poet_fail(err, POET_ERR_LIMIT, "runtime: node '%s' has a tensor over 4 GiB", n->name);
        if (v < g->n_forward && n->op == POET_OP_INPUT) inputs++;
        if (n->op == POET_OP_SOFTMAX_CE && v != g->loss)
            return poet_fail(err, POET_ERR_UNSUPPORTED, "runtime: '%s' has a second loss, '%s'", g->model, n->name);
    }
    if (g->nodes[g->nodes[g->loss].inputs[0]].shape.ndim != 2)
        return poet_fail(err, POET_ERR_UNSUPPORTED, "runtime: the loss of '%s' needs 2-d logits", g->model);
    if (inputs != 1) return poet_fail(err, POET_ERR_UNSUPPORTED, "runtime: '%s' needs exactly one input", g->model);
    return POET_OK;
}

typedef struct parts {
    poet_program train, eval;
    knode *nodes;
    uint64_t *slots;
    float *params, *state;
    uint32_t *channels; /* the channel_select nodes' lists */
    uint64_t n_channels;
    uint8_t *schedule;
    size_t schedule_bytes;
    uint64_t n_params, n_trained, n_state, n_resident, storage_bytes, workspace_bytes;
} parts;

/* A frozen part of a node's parameters (none of it trains) is homed in
 * flash when asked; every other part in RAM, one after another. */
static void place_homes(knode *o, poet_frozen_home frozen, uint64_t *resident)
{
    for (int part = 0; part < 2; part++) {
        uint64_t at, count;
        knode_part(o, part, &at, &count);
        bool flash = frozen == POET_FROZEN_IN_FLASH && count && !knode_part_trained(o, part);
        o->home[part] = flash ? KHOME_FLASH : (uint32_t)*resident;
        if (!flash) *resident += count;
    }
}

/* The nodes' records into x->nodes (allocated) and the counts into x. */
static void to_knodes(const poet_graph *g, poet_frozen_home frozen, parts *x)
{
    knode *k = x->nodes;
    uint64_t np = 0, nt = 0, ns = 0, nr = 0;
    for (int v = 0; v < g->n_nodes; v++) {
        const poet_node *n = &g->nodes[v];
        knode *o = &k[v];
        memset(o, 0, sizeof *o);
        o->op = (uint8_t)n->op;
        o->n_inputs = (uint8_t)n->n_inputs;
        o->ndim = (uint8_t)n->shape.ndim;
        o->wrt = (int8_t)(n->op == POET_OP_GRAD ? n->wrt : 0);
        o->fwd = n->fwd;
        for (int j = 0; j < n->n_inputs; j++) o->inputs[j] = n->inputs[j];
        for (int j = 0; j < n->shape.ndim; j++) o->dim[j] = (int32_t)n->shape.dim[j];
        o->attrs = n->attrs;
        o->numel = (uint32_t)(n->bytes / 4);
        o->reads = n->op == POET_OP_GRAD ? image_reads_of(&g->nodes[n->fwd], n->wrt) : 0;
        if (n->op == POET_OP_GRAD) continue; /* takes its forward node's blocks below */
        o->param_at = (uint32_t)np, o->params = (uint32_t)n->params, o->grad_at = (uint32_t)nt;
        o->buffer_at = (uint32_t)ns, o->buffers = (uint32_t)n->buffers;
        np += n->params, ns += n->buffers, nt += poet_param_trained(n->op, &n->attrs, n->params);
        place_homes(o, frozen, &nr);
    }
    for (int v = 0; v < g->n_nodes; v++)
        if (k[v].op == POET_OP_GRAD) {
            const knode *f = &k[k[v].fwd];
            k[v].param_at = f->param_at, k[v].params = f->params, k[v].buffer_at = f->buffer_at, k[v].buffers = f->buffers;
            k[v].grad_at = f->grad_at;
            memcpy(k[v].home, f->home, sizeof f->home);
        }
    x->n_params = np, x->n_trained = nt, x->n_state = ns, x->n_resident = nr;
}

double image_init_bound(const knode *nodes, int v) { return 1.0 / sqrt((double)knode_fan_in(nodes, &nodes[v])); }

/* PyTorch's defaults: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weights and
 * biases; gamma 1, beta 0; running mean 0, variance 1. */
static void init_params(const poet_graph *g, const knode *k, uint64_t seed, float *params, float *state)
{
    for (int v = 0; v < g->n_forward; v++) {
        const poet_node *n = &g->nodes[v];
        float *w = params + k[v].param_at, *s = state + k[v].buffer_at;
        if (n->op == POET_OP_BATCHNORM2D || n->op == POET_OP_LAYERNORM) {
            uint64_t c = n->params / 2;
            for (uint64_t i = 0; i < c; i++) w[i] = 1.0f, w[c + i] = 0.0f;
            for (uint64_t i = 0; i < n->buffers / 2; i++) s[i] = 0.0f, s[n->buffers / 2 + i] = 1.0f;
            continue;
        }
        double bound = image_init_bound(k, v);
        uint64_t rng = kernel_init_stream(seed, v);
        for (uint64_t i = 0; i < n->params; i++) w[i] = kernel_init_next(&rng, bound);
    }
}

/* Forward nodes only, each freed after its last forward reader; the logits
 * and the loss stay to the end. */
static poet_status build_eval_program(const poet_graph *g, uint64_t train_arena, poet_program *q, poet_err *err)
{
    memset(q, 0, sizeof *q);
    int F = g->n_forward, *last = malloc((size_t)F * sizeof *last);
    q->buffers = calloc((size_t)F, sizeof *q->buffers);
    q->code = calloc((size_t)F * (POET_MAX_INPUTS + 1), sizeof *q->code);
    if (!last || !q->buffers || !q->code) {
        free(last);
        return poet_fail(err, POET_ERR_NOMEM, "out of memory planning inference");
    }
    for (int v = 0; v < F; v++) last[v] = -1;
    int logits = g->nodes[g->loss].inputs[0];
    last[logits] = last[g->loss] = F; /* read after the program */
    /* a reader that inference does not compute (it has no reader itself) keeps nothing alive */
    for (int u = F - 1; u >= 0; u--)
        for (int j = 0; last[u] >= 0 && j < g->nodes[u].n_inputs; j++)
            if (last[g->nodes[u].inputs[j]] < u) last[g->nodes[u].inputs[j]] = u;
    q->n_buffers = q->cap_buffers = F;
    for (int v = 0; v < F; v++) {
        /* what only the backward pass reads (a relu mask, a channel select) inference does not compute */
        bool dead = last[v] < 0;
        q->buffers[v] = (poet_buffer){v, q->n, last[v] == F ? INT32_MAX : q->n, dead ? 0 : g->nodes[v].bytes, 0};
        if (dead) continue;
        q->code[q->n++] = (poet_instr){POET_I_COMPUTE, v, v, v};
        for (int j = 0; j < g->nodes[v].n_inputs; j++) {
            int i = g->nodes[v].inputs[j];
            bool seen = false; /* a node may read one tensor twice */
            for (int k = 0; k < j; k++) seen = seen || g->nodes[v].inputs[k] == i;
            if (last[i] != v || seen) continue;
            q->buffers[i].free_instr = q->n;
            q->code[q->n++] = (poet_instr){POET_I_FREE, v, i, i};
        }
    }
    free(last);
    poet_status st = poet_program_place(q, err);
    if (!st) st = poet_program_check_placement(q, err);
    if (!st && q->arena_bytes > train_arena)
        st = poet_fail(err, POET_ERR_UNSUPPORTED,
                       "runtime: inference needs an arena of %llu bytes, more than the schedule's %llu",
                       (unsigned long long)q->arena_bytes, (unsigned long long)train_arena);
    return st;
}

/* ---- writing ---- */

typedef struct writer {
    uint8_t *p;
    size_t n;
} writer;

/* Appends bytes at the next 8-byte boundary; returns their offset. */
static uint32_t put(writer *w, const void *src, size_t bytes)
{
    size_t at = (w->n + POET_IMAGE_ALIGN - 1) / POET_IMAGE_ALIGN * POET_IMAGE_ALIGN;
    memset(w->p + w->n, 0, at - w->n);
    if (bytes) memcpy(w->p + at, src, bytes);
    w->n = at + bytes;
    return (uint32_t)at;
}

static size_t padded(size_t bytes) { return bytes + POET_IMAGE_ALIGN; }

/* The forward node whose parameters instruction `in` reads, if they
 * train; else -1. */
static int trained_params_read(const knode *k, int n_forward, const poet_instr *in)
{
    int64_t v = in->op == POET_I_COMPUTE ? knode_params_read(k, (uint32_t)n_forward, (uint32_t)in->node) : -1;
    return v >= 0 && knode_trained(&k[v]) ? (int)v : -1;
}

/* The program as the device's instructions; with fused updates (k not
 * NULL), each trained node's KI_UPDATE right after the last instruction
 * that reads its parameters: from then on its gradient is not needed. */
static void put_program(writer *w, const poet_program *q, const knode *k, int n_forward, kprogram *out)
{
    kinstr *code = calloc((size_t)q->n + (size_t)n_forward + 1, sizeof *code);
    kbuffer *buf = calloc((size_t)q->n_buffers + 1, sizeof *buf);
    int *last = calloc((size_t)n_forward + 1, sizeof *last), n = 0;
    for (int j = 0; k && last && j < q->n; j++) {
        int v = trained_params_read(k, n_forward, &q->code[j]);
        if (v >= 0) last[v] = j + 1;
    }
    for (int j = 0; code && last && j < q->n; j++) {
        const poet_instr *in = &q->code[j];
        code[n++] = (kinstr){in->op, (uint8_t)(in->stage == in->node ? KI_FIRST : 0),
                             (uint16_t)(in->node < 0 ? 0 : in->node), (uint32_t)(in->buffer < 0 ? 0 : in->buffer)};
        int v = k ? trained_params_read(k, n_forward, in) : -1;
        if (v >= 0 && last[v] == j + 1) code[n++] = (kinstr){KI_UPDATE, 0, (uint16_t)v, 0};
    }
    for (int b = 0; buf && b < q->n_buffers; b++) buf[b] = (kbuffer){q->buffers[b].offset, q->buffers[b].bytes};
    *out = (kprogram){(uint32_t)n, (uint32_t)q->n_buffers, 0, 0, q->arena_bytes};
    free(last);
    if (code && buf && last) {
        out->instr_at = put(w, code, (size_t)n * sizeof *code);
        out->buffers_at = put(w, buf, (size_t)q->n_buffers * sizeof *buf);
    }
    free(code);
    free(buf);
}


static void parts_free(parts *s)
{
    poet_program_free(&s->train);
    poet_program_free(&s->eval);
    free(s->nodes), free(s->slots), free(s->params), free(s->state), free(s->channels), free(s->schedule);
}

/* Storage slots for the tensors the schedule pages out. */
static uint64_t assign_slots(const poet_graph *g, const poet_program *q, uint64_t *slot)
{
    uint64_t at = 0;
    for (int v = 0; v < g->n_nodes; v++) slot[v] = UINT64_MAX;
    for (int k = 0; k < q->n; k++) {
        const poet_instr *in = &q->code[k];
        if (in->op == POET_I_PAGEOUT && slot[in->node] == UINT64_MAX) {
            slot[in->node] = at;
            at += g->nodes[in->node].bytes;
        }
    }
    return at;
}

static uint64_t workspace_bytes(const knode *k, int T, uint32_t positions)
{
    uint64_t min = 0, want = 0;
    for (int v = 0; v < T; v++) {
        uint64_t a = 4 * kernel_workspace_min(k, v), b = 4 * kernel_workspace_for(k, v, positions);
        min = a > min ? a : min;
        want = b > want ? b : want;
    }
    if (want > WORKSPACE_CAP_BYTES) want = WORKSPACE_CAP_BYTES;
    return want < min ? min : want;
}

typedef struct channel_norm {
    double sq; /* the squared norm of the weights that read the channel */
    uint32_t c;
} channel_norm;

static int by_norm_then_index(const void *a, const void *b)
{
    const channel_norm *x = a, *y = b;
    if (x->sq != y->sq) return x->sq > y->sq ? -1 : 1;
    return x->c < y->c ? -1 : x->c > y->c;
}

static int ascending(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* For each channel_select (ratio:R), the input channels of the layer before
 * it whose weights have the largest norms (ties: the lower channel), in
 * ascending order: which channels train, fixed for the image's life. */
static poet_status choose_channels(const poet_graph *g, const knode *k, const float *params, parts *out,
                                   poet_err *err)
{
    out->n_channels = knode_channels_listed(k, (uint32_t)g->n_forward);
    if (!out->n_channels) return POET_OK;
    out->channels = calloc((size_t)out->n_channels, sizeof *out->channels);
    int64_t most = 0;
    for (int v = 1; v < g->n_forward; v++) {
        const poet_node *sel = &g->nodes[v];
        int64_t C = sel->op == POET_OP_CHANNEL_SELECT ? g->nodes[sel->inputs[0]].shape.dim[sel->attrs.axis] : 0;
        most = C > most ? C : most;
    }
    channel_norm *norms = calloc((size_t)most + 1, sizeof *norms);
    if (!out->channels || !norms) {
        free(norms);
        return poet_fail(err, POET_ERR_NOMEM, "out of memory choosing channels");
    }
    for (int v = 1; v < g->n_forward; v++) {
        const poet_node *sel = &g->nodes[v], *layer = &g->nodes[v - 1];
        if (sel->op != POET_OP_CHANNEL_SELECT) continue;
        uint64_t rows = 0, cols = 0;
        poet_weight_rows(layer, &rows, &cols); /* a conv or linear layer: trainable.c puts selects there */
        uint32_t C = (uint32_t)g->nodes[sel->inputs[0]].shape.dim[sel->attrs.axis];
        uint64_t block = poet_channel_block(layer->op, &layer->attrs);
        const float *w = params + k[v - 1].param_at;
        for (uint32_t c = 0; c < C; c++) norms[c] = (channel_norm){0, c};
        for (uint64_t i = 0; i < rows * cols; i++) {
            double x = w[i];
            norms[(i % cols) / block].sq += x * x;
        }
        qsort(norms, C, sizeof *norms, by_norm_then_index);
        uint32_t *list = out->channels + sel->attrs.start;
        for (int j = 0; j < sel->attrs.features; j++) list[j] = norms[j].c;
        qsort(list, (size_t)sel->attrs.features, sizeof *list, ascending);
    }
    free(norms);
    return POET_OK;
}

static poet_status gather(const poet_graph *g, const poet_problem *p, const poet_schedule *s,
                          const poet_export_options *o, parts *out, poet_err *err)
{
    poet_status st;
    if ((st = check_graph(g, p, err)) || (st = poet_schedule_validate(p, s, err)) ||
        (st = poet_program_build(p, s, &out->train, err)) || (st = poet_program_place(&out->train, err)) ||
        (st = poet_program_check_placement(&out->train, err)) ||
        (st = build_eval_program(g, out->train.arena_bytes, &out->eval, err)) ||
        (st = poet_schedule_encode(s, &out->schedule, &out->schedule_bytes, err)))
        return st;
    int T = g->n_nodes;
    out->nodes = calloc((size_t)T, sizeof *out->nodes);
    out->slots = calloc((size_t)T, sizeof *out->slots);
    if (!out->nodes || !out->slots) return poet_fail(err, POET_ERR_NOMEM, "out of memory writing a device image");
    to_knodes(g, o->frozen, out);
    out->params = calloc((size_t)out->n_params + 1, sizeof(float));
    out->state = calloc((size_t)out->n_state + 1, sizeof(float));
    if (!out->params || !out->state) return poet_fail(err, POET_ERR_NOMEM, "out of memory for the initial weights");
    if (!o->params || !o->buffers) init_params(g, out->nodes, o->seed, out->params, out->state);
    if (o->params) memcpy(out->params, o->params, (size_t)out->n_params * sizeof(float));
    if (o->buffers) memcpy(out->state, o->buffers, (size_t)out->n_state * sizeof(float));
    if ((st = choose_channels(g, out->nodes, out->params, out, err))) return st;
    out->storage_bytes = assign_slots(g, &out->train, out->slots);
    out->workspace_bytes = workspace_bytes(out->nodes, T, o->chunk_positions);
    return POET_OK;
}

/* What the device's memory depends on: the graph's sizes, the optimizer and
 * the workspace (the arena and storage come from the schedule). */
static void fill_sizes(img_header *h, const poet_graph *g, const poet_export_options *o, const parts *x)
{
    h->n_nodes = (uint32_t)g->n_nodes, h->n_forward = (uint32_t)g->n_forward, h->loss = (uint32_t)g->loss;
    for (int v = 0; v < g->n_forward; v++)
        if (g->nodes[v].op == POET_OP_INPUT) h->input = (uint32_t)v, h->batch_numel = g->nodes[v].bytes / 4;
    const poet_node *logits = &g->nodes[g->nodes[g->loss].inputs[0]];
    h->rows = (uint32_t)logits->shape.dim[0], h->classes = (uint32_t)logits->shape.dim[1];
    h->optimizer = o->optimizer.kind;
    h->n_params = x->n_params, h->n_state = x->n_state, h->n_trained = (uint32_t)x->n_trained;
    h->n_resident = x->n_resident;
    for (int v = 0; o->fused_update && v < g->n_forward; v++) /* one node's gradients at a time */
        if (knode_trained(&x->nodes[v]) > h->fused_grad_floats) h->fused_grad_floats = knode_trained(&x->nodes[v]);
    h->workspace_bytes = x->workspace_bytes;
}

static void fill_header(img_header *h, const poet_graph *g, const poet_problem *p, const poet_schedule *s,
                        const poet_export_options *o, const parts *x)
{
    memset(h, 0, sizeof *h);
    memcpy(h->magic, POET_IMAGE_MAGIC, 8);
    h->version = POET_IMAGE_VERSION;
    h->header_bytes = sizeof *h;
    h->graph_hash = poet_instance_hash(p->inst);
    fill_sizes(h, g, o, x);
    h->schedule_bytes = (uint32_t)x->schedule_bytes;
    h->lr = o->optimizer.lr, h->momentum = o->optimizer.momentum, h->beta1 = o->optimizer.beta1;
    h->beta2 = o->optimizer.beta2, h->eps = o->optimizer.eps, h->weight_decay = o->optimizer.weight_decay;
    h->seed = o->seed;
    h->storage_bytes = x->storage_bytes;
    h->budget_bytes = s->budget_bytes ? s->budget_bytes : p->budget_bytes;
    snprintf(h->model, sizeof h->model, "%.31s", g->model);
    snprintf(h->planner, sizeof h->planner, "%.31s", s->planner);
}

poet_status poet_export_memory(const poet_graph *g, const poet_export_options *o, uint64_t arena_bytes,
                               poet_dev_memory *need, poet_err *err)
{
    if (g->loss < 0 || g->nodes[g->nodes[g->loss].inputs[0]].shape.ndim != 2)
        return poet_fail(err, POET_ERR_UNSUPPORTED, "runtime: the loss of '%s' needs 2-d logits", g->model);
    parts x;
    memset(&x, 0, sizeof x);
    if (!(x.nodes = calloc((size_t)g->n_nodes, sizeof *x.nodes)))
        return poet_fail(err, POET_ERR_NOMEM, "out of memory sizing the device's memory");
    to_knodes(g, o->frozen, &x);
    x.workspace_bytes = workspace_bytes(x.nodes, g->n_nodes, o->chunk_positions);
    img_header h;
    memset(&h, 0, sizeof h);
    fill_sizes(&h, g, o, &x);
    h.train.arena_bytes = arena_bytes;
    bool ok = image_memory(&h, need);
    parts_free(&x);
    return ok ? POET_OK : poet_fail(err, POET_ERR_LIMIT, "runtime: '%s' needs more memory than 64 bits count", g->model);
}

poet_status poet_export_image(const poet_graph *g, const poet_problem *p, const poet_schedule *s,
                              const poet_export_options *o, uint8_t **data, size_t *len, poet_err *err)
{
    parts x;
    memset(&x, 0, sizeof x);
    poet_status st = gather(g, p, s, o, &x, err);
    if (st) {
        parts_free(&x);
        return st;
    }
    size_t T = (size_t)g->n_nodes;
    size_t cap = padded(sizeof(img_header)) + padded(T * sizeof(knode)) + padded(T * 8) +
                 padded(4 * (size_t)x.n_params) + padded(4 * (size_t)x.n_state) + padded(4 * (size_t)x.n_channels) +
                 padded(x.schedule_bytes) +
                 padded(((size_t)x.train.n + (size_t)g->n_forward) * sizeof(kinstr)) + padded((size_t)x.train.n_buffers * sizeof(kbuffer)) +
                 padded((size_t)x.eval.n * sizeof(kinstr)) + padded((size_t)x.eval.n_buffers * sizeof(kbuffer)) + 8;
    writer w = {calloc(1, cap), 0};
    if (!w.p) {
        parts_free(&x);
        return poet_fail(err, POET_ERR_NOMEM, "out of memory writing a device image");
    }
    img_header h;
    fill_header(&h, g, p, s, o, &x);
    put(&w, &h, sizeof h);
    h.nodes_at = put(&w, x.nodes, T * sizeof(knode));
    h.slots_at = put(&w, x.slots, T * 8);
    h.params_at = put(&w, x.params, 4 * (size_t)x.n_params);
    h.state_at = put(&w, x.state, 4 * (size_t)x.n_state);
    if (x.n_channels) h.channels_at = put(&w, x.channels, 4 * (size_t)x.n_channels);
    h.schedule_at = put(&w, x.schedule, x.schedule_bytes);
    put_program(&w, &x.train, o->fused_update ? x.nodes : NULL, g->n_forward, &h.train);
    put_program(&w, &x.eval, NULL, 0, &h.eval);
    bool ok = h.train.instr_at && h.eval.instr_at;
    put(&w, NULL, 0); /* the CRC-32 starts aligned */
    h.image_bytes = w.n + 4;
    memcpy(w.p, &h, sizeof h);
    le_put(w.p + w.n, crc32_update(0, w.p, w.n), 4);
    w.n += 4;
    parts_free(&x);
    if (!ok) {
        free(w.p);
        return poet_fail(err, POET_ERR_NOMEM, "out of memory writing a device image");
    }
    *data = w.p;
    *len = w.n;
    return POET_OK;
}
