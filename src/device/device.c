/* The device library (poet/device.h): checks a device image, carves its
 * memory from the block handed over, and runs the schedule's instruction
 * stream, the kernels and the optimizer. Freestanding: the host's
 * `poet train` runs this same code. */
#include "poet/device.h"

#include <string.h>

#include "../base/checked.h"
#include "dev.h"
#include "../base/hash.h"
#include "image.h"
#include "kernels.h"
#include "../base/mathf.h"
#include "../ops/ops.h"

enum { ALIGN = 8 };

/* ---- the image, checked field by field ---- */

static bool within(const img_header *h, uint64_t at, uint64_t count, uint64_t size)
{
    uint64_t end = h->image_bytes - 4; /* the CRC-32 */
    return at % ALIGN == 0 && at >= h->header_bytes && at <= end && count <= (end - at) / (size ? size : 1);
}

static poet_status check_header(const uint8_t *img, size_t len, poet_err *err)
{
    if ((uintptr_t)img % ALIGN)
        return poet_fail(err, POET_ERR_INVALID, "device image: must start at an 8-byte aligned address");
    if (len < sizeof(img_header) + 4 || memcmp(img, POET_IMAGE_MAGIC, 8) != 0)
        return poet_fail(err, POET_ERR_PARSE, "device image: not a poet device image");
    const img_header *h = (const img_header *)(const void *)img;
    if (h->version != POET_IMAGE_VERSION)
        return poet_fail(err, POET_ERR_UNSUPPORTED, "device image: format %u; this poet reads format %u",
                         (unsigned)h->version, (unsigned)POET_IMAGE_VERSION);
    if (h->header_bytes != sizeof(img_header) || h->image_bytes != len)
        return poet_fail(err, POET_ERR_PARSE, "device image: %zu bytes where its header says %llu (truncated?)", len,
                         (unsigned long long)h->image_bytes);
    if (crc32_update(0, img, len - 4) != le_get(img + len - 4, 4))
        return poet_fail(err, POET_ERR_PARSE, "device image: checksum mismatch (corrupted)");
    return POET_OK;
}

static bool valid_dims(const knode *n)
{
    uint64_t numel = 1;
    if (n->ndim < 1 || n->ndim > POET_MAX_DIMS) return false;
    for (int i = 0; i < n->ndim; i++) {
        if (n->dim[i] <= 0) return false;
        numel *= (uint64_t)n->dim[i];
        if (numel > (1u << 30)) return false;
    }
    return numel == n->numel;
}

/* The registry's shape inference (src/graph/ops.c, the same the host
 * builds graphs with) run again on the node and its inputs: the kernels index
 * by these shapes, so a node whose recorded shape, parameters or buffers
 * differ from what its op infers is refused. */
static void to_poet_node(const knode *k, poet_node *out)
{
    memset(out, 0, sizeof *out);
    memcpy(out->name, "image node", 11);
    out->op = (poet_op)k->op;
    out->attrs = k->attrs;
    out->shape.ndim = k->ndim;
    for (int i = 0; i < k->ndim; i++) out->shape.dim[i] = k->dim[i];
}

static bool forward_shapes_ok(const knode *nodes, const knode *n)
{
    const op_def *def = op_get((poet_op)n->op);
    if (!def || !def->infer || n->n_inputs < def->min_inputs || n->n_inputs > def->max_inputs) return false;
    poet_node view[1 + POET_MAX_INPUTS];
    for (int j = 0; j < n->n_inputs; j++) to_poet_node(&nodes[n->inputs[j]], &view[1 + j]);
    to_poet_node(n, &view[0]);
    view[0].n_inputs = n->n_inputs;
    for (int j = 0; j < n->n_inputs; j++) view[0].inputs[j] = 1 + j;
    view[0].shape = (poet_shape){0, {0}};
    poet_graph g = {.nodes = view, .n_nodes = 1 + n->n_inputs};
    if (def->infer(&g, &view[0], NULL)) return false;
    const poet_node *v = &view[0];
    bool same = v->shape.ndim == n->ndim && v->params == n->params && v->buffers == n->buffers &&
                memcmp(&v->attrs, &n->attrs, sizeof v->attrs) == 0;
    for (int i = 0; same && i < n->ndim; i++) same = v->shape.dim[i] == n->dim[i];
    return same;
}

uint32_t image_reads_of(const poet_node *fwd, int wrt)
{
    unsigned m = op_reads(fwd, wrt);
    return (op_get(fwd->op)->seeds_grad ? 0u : KR_DY) | (m & READ_IN0 ? KR_IN0 : 0u) | (m & READ_IN1 ? KR_IN1 : 0u) |
           (m & READ_OUT ? KR_OUT : 0u) | (m & READ_MASK ? KR_MASK : 0u);
}

static bool grad_shapes_ok(const knode *nodes, const knode *n, int v)
{
    if (n->op == POET_OP_GRAD_SUM) {
        for (int j = 0; j < n->n_inputs; j++)
            if (nodes[n->inputs[j]].numel != n->numel) return false;
        return n->n_inputs >= 2;
    }
    if (n->fwd < 0 || n->fwd >= v) return false;
    const knode *f = &nodes[n->fwd];
    if (f->op == POET_OP_GRAD || f->op == POET_OP_GRAD_SUM || f->op == POET_OP_INPUT) return false;
    if (n->wrt < -1 || n->wrt >= f->n_inputs || n->param_at != f->param_at || n->params != f->params ||
        n->buffer_at != f->buffer_at || n->buffers != f->buffers)
        return false;
    if (n->wrt >= 0 ? nodes[f->inputs[n->wrt]].numel != n->numel : f->params == 0) return false;
    /* the inputs are what the registry says the gradient reads, in its order */
    poet_node fv;
    to_poet_node(f, &fv);
    fv.n_inputs = f->n_inputs;
    if (n->reads != image_reads_of(&fv, n->wrt)) return false;
    int k = 0;
    const int32_t want[5] = {-2, f->inputs[0], f->n_inputs > 1 ? f->inputs[1] : -3, n->fwd, n->fwd + 1};
    poet_op next = (poet_op)nodes[n->fwd + 1].op;
    if ((n->reads & KR_MASK) && !((f->op == POET_OP_RELU && next == POET_OP_RELU_MASK) ||
                                  (f->op == POET_OP_MAXPOOL2D && next == POET_OP_POOL_INDEX) ||
                                  ((f->op == POET_OP_CONV2D || f->op == POET_OP_LINEAR) && next == POET_OP_CHANNEL_SELECT)))
        return false;
    for (int b = 0; b < 5; b++) {
        if (!(n->reads & (1u << b))) continue;
        if (k >= n->n_inputs) return false;
        int in = n->inputs[k++];
        if (b == 0 ? nodes[in].numel != f->numel : in != want[b]) return false;
    }
    return k == n->n_inputs && (f->op == POET_OP_SOFTMAX_CE) == !(n->reads & KR_DY);
}

/* What is wrong with node v, or NULL. */
static const char *node_problem(const img_header *h, const knode *nodes, uint32_t v)
{
    const knode *n = &nodes[v];
    if (n->op >= POET_OP_COUNT) return "unknown op";
    if (n->n_inputs > POET_MAX_INPUTS) return "too many inputs";
    bool params_only = n->op == POET_OP_GRAD && n->wrt == -1; /* writes parameter gradients only */
    if (params_only ? n->numel != 0 : !valid_dims(n)) return "shape";
    for (int j = 0; j < n->n_inputs; j++)
        if (n->inputs[j] < 0 || (uint32_t)n->inputs[j] >= v) return "an input is not an earlier node";
    if ((uint64_t)n->param_at + n->params > h->n_params || (uint64_t)n->buffer_at + n->buffers > h->n_state)
        return "parameters outside the image";
    bool backward = n->op == POET_OP_GRAD || n->op == POET_OP_GRAD_SUM;
    if (backward != (v >= h->n_forward)) return "out of place";
    /* one input, one loss: the batch and the labels are sized for them */
    if ((n->op == POET_OP_INPUT && v != h->input) || (n->op == POET_OP_SOFTMAX_CE && v != h->loss))
        return "a second input or loss";
    if (backward ? !grad_shapes_ok(nodes, n, (int)v) : !forward_shapes_ok(nodes, n)) return "shapes of its op";
    if (backward ? n->op == POET_OP_GRAD && n->grad_at != nodes[n->fwd].grad_at
                 : (uint64_t)n->grad_at + knode_trained(n) > h->n_trained)
        return "gradients outside the image";
    return NULL;
}

/* What is wrong with channel_select v (ratio:R), or NULL: it follows the
 * conv (not grouped) or linear layer whose weight gradient reads it, reads
 * that layer's input along its input-channel axis, and lists channels of
 * it in ascending order. */
static const char *select_problem(const knode *nodes, const uint32_t *list, uint32_t v)
{
    const knode *n = &nodes[v], *layer = &nodes[v - 1];
    bool conv = layer->op == POET_OP_CONV2D && layer->attrs.groups <= 1;
    if (!(conv || layer->op == POET_OP_LINEAR) || !(layer->attrs.flags & POET_ATTR_COMPACT_READ) ||
        n->inputs[0] != layer->inputs[0] || layer->attrs.end != n->attrs.features)
        return "not after the layer it selects for";
    const knode *x = &nodes[layer->inputs[0]];
    if (n->attrs.axis != (conv ? 1 : x->ndim - 1)) return "not the layer's channel axis";
    for (int32_t j = 0; j < n->attrs.features; j++) /* unsigned: an entry of 2^31 or more is no channel either */
        if (list[n->attrs.start + j] >= (uint32_t)x->dim[n->attrs.axis] ||
            (j && list[n->attrs.start + j] <= list[n->attrs.start + j - 1]))
            return "its channels";
    return NULL;
}

static poet_status check_channels(const uint8_t *img, const img_header *h, const knode *nodes, poet_err *err)
{
    uint64_t listed = knode_channels_listed(nodes, h->n_forward);
    if (listed ? !within(h, h->channels_at, listed, 4) : h->channels_at != 0)
        return poet_fail(err, POET_ERR_PARSE, "device image: malformed header (channel lists)");
    const uint32_t *list = (const uint32_t *)(const void *)(img + h->channels_at);
    for (uint32_t v = 0; v < h->n_forward; v++) {
        const knode *n = &nodes[v];
        bool partly = (n->op == POET_OP_CONV2D || n->op == POET_OP_LINEAR) && n->attrs.end; /* trains some channels */
        const char *why = v && n->op == POET_OP_CHANNEL_SELECT                      ? select_problem(nodes, list, v)
                          : partly && !knode_select_after(nodes, h->n_forward, v) ? "no channel_select after it"
                                                                                  : NULL;
        if (why) return poet_fail(err, POET_ERR_PARSE, "device image: node %u is malformed (%s)", (unsigned)v, why);
    }
    return POET_OK;
}

static poet_status check_nodes(const img_header *h, const knode *nodes, poet_err *err)
{
    for (uint32_t v = 0; v < h->n_nodes; v++) {
        const char *why = node_problem(h, nodes, v);
        if (why) return poet_fail(err, POET_ERR_PARSE, "device image: node %u is malformed (%s)", (unsigned)v, why);
    }
    const knode *in = &nodes[h->input], *loss = &nodes[h->loss], *logits = &nodes[loss->inputs[0]];
    if (in->op != POET_OP_INPUT || loss->op != POET_OP_SOFTMAX_CE || in->numel != h->batch_numel ||
        (int64_t)h->rows != logits->dim[0] || (int64_t)h->classes != logits->dim[1])
        return poet_fail(err, POET_ERR_PARSE, "device image: its input or loss node is malformed");
    return POET_OK;
}

static poet_status check_program(const uint8_t *img, const img_header *h, const kprogram *pg, const char *what,
                                 poet_err *err)
{
    if (!within(h, pg->instr_at, pg->n_instr, sizeof(kinstr)) || !within(h, pg->buffers_at, pg->n_buffers, sizeof(kbuffer)))
        return poet_fail(err, POET_ERR_PARSE, "device image: the %s program lies outside the image", what);
    const kinstr *code = (const kinstr *)(const void *)(img + pg->instr_at);
    const kbuffer *buf = (const kbuffer *)(const void *)(img + pg->buffers_at);
    const knode *nodes = (const knode *)(const void *)(img + h->nodes_at);
    for (uint32_t b = 0; b < pg->n_buffers; b++) /* floats: a Cortex-M faults on an unaligned one */
        if (buf[b].offset > pg->arena_bytes || buf[b].bytes > pg->arena_bytes - buf[b].offset || buf[b].offset % 4)
            return poet_fail(err, POET_ERR_PARSE, "device image: %s buffer %u lies outside the arena or is not "
                                                  "4-byte aligned", what, (unsigned)b);
    for (uint32_t k = 0; k < pg->n_instr; k++) {
        const kinstr *in = &code[k];
        if (in->op > KI_WAIT || (in->op != KI_WAIT && (in->node >= h->n_nodes || in->buffer >= pg->n_buffers ||
                                                               buf[in->buffer].bytes != 4ull * nodes[in->node].numel)))
            return poet_fail(err, POET_ERR_PARSE, "device image: %s instruction %u is malformed", what, (unsigned)k);
    }
    return POET_OK;
}

static poet_status check_body(const uint8_t *img, const img_header *h, poet_err *err)
{
    const char *bad = NULL;
    if (h->n_nodes < 2 || h->n_nodes > 65535 || h->n_forward > h->n_nodes || h->loss >= h->n_forward ||
        h->input >= h->n_forward)
        bad = "node counts";
    else if (h->n_trained > h->n_params)
        bad = "trained parameter count";
    else if (h->rows == 0 || h->classes == 0)
        bad = "batch shape";
    else if (h->optimizer > KOPT_ADAM || !(h->lr >= 0 && h->lr <= 10))
        bad = "optimizer";
    else if (h->eval.arena_bytes > h->train.arena_bytes)
        bad = "arena sizes";
    else if (!within(h, h->nodes_at, h->n_nodes, sizeof(knode)) || !within(h, h->slots_at, h->n_nodes, 8) ||
             !within(h, h->params_at, h->n_params, 4) || !within(h, h->state_at, h->n_state, 4) ||
             !within(h, h->schedule_at, h->schedule_bytes, 1))
        bad = "section bounds";
    if (bad) return poet_fail(err, POET_ERR_PARSE, "device image: malformed header (%s)", bad);
    const knode *nodes = (const knode *)(const void *)(img + h->nodes_at);
    const uint64_t *slots = (const uint64_t *)(const void *)(img + h->slots_at);
    poet_status st = check_nodes(h, nodes, err);
    if (!st) st = check_channels(img, h, nodes, err);
    for (uint32_t v = 0; !st && v < h->n_nodes; v++)
        if (slots[v] != UINT64_MAX && (slots[v] > h->storage_bytes || 4ull * nodes[v].numel > h->storage_bytes - slots[v]))
            st = poet_fail(err, POET_ERR_PARSE, "device image: the storage slot of node %u is malformed", (unsigned)v);
    for (uint32_t v = 0; !st && v < h->n_nodes; v++)
        if (4 * kernel_workspace_min(nodes, (int)v) > h->workspace_bytes)
            st = poet_fail(err, POET_ERR_PARSE, "device image: node %u needs more workspace than the image gives",
                           (unsigned)v);
    if (!st) st = check_program(img, h, &h->train, "training", err);
    if (!st) st = check_program(img, h, &h->eval, "inference", err);
    return st;
}

/* ---- memory ---- */

typedef struct layout {
    uint64_t dev, arena, params, grads, opt_m, opt_v, state, state_next, batch, labels, live, pending, work, end;
} layout;

/* Where each part of the device's memory lies; false when the sizes the
 * header states do not add up in 64 bits (a crafted image's way to make a
 * small total out of huge parts). */
static bool layout_of(const img_header *h, layout *L)
{
    uint64_t at = 0;
    uint32_t nb = h->train.n_buffers > h->eval.n_buffers ? h->train.n_buffers : h->eval.n_buffers;
    bool ok = true;
#define PLACE(field, count, size) (L->field = at, ok = ok && ck_place(&at, (count), (size), ALIGN))
    PLACE(dev, 1, sizeof(poet_dev));
    PLACE(arena, h->train.arena_bytes, 1);
    PLACE(params, h->n_params, 4);
    PLACE(grads, h->n_trained, 4);
    PLACE(opt_m, h->n_trained, 4);
    PLACE(opt_v, h->optimizer == KOPT_ADAM ? h->n_trained : 0, 4);
    PLACE(state, h->n_state, 4);
    PLACE(state_next, h->n_state, 4);
    PLACE(batch, h->batch_numel, 4);
    PLACE(labels, h->rows, 4);
    PLACE(live, h->n_nodes, 4);
    PLACE(pending, nb, sizeof(long));
    PLACE(work, h->workspace_bytes, 1);
#undef PLACE
    L->end = at;
    return ok;
}

uint64_t poet_dev_image_length(const void *image)
{
    const uint8_t *p = image;
    if (memcmp(p, POET_IMAGE_MAGIC, 8) != 0) return 0;
    return le_get(p + 16, 8); /* img_header.image_bytes */
}

poet_status poet_dev_inspect(const void *image, size_t image_bytes, poet_dev_memory *need, poet_err *err)
{
    const uint8_t *img = image;
    poet_status st = check_header(img, image_bytes, err);
    if (!st) st = check_body(img, (const img_header *)image, err);
    if (st) return st;
    const img_header *h = image;
    layout L;
    if (!layout_of(h, &L))
        return poet_fail(err, POET_ERR_PARSE, "device image: malformed header (its memory sizes overflow)");
    *need = (poet_dev_memory){.arena_bytes = h->train.arena_bytes,
                              .persistent_bytes = L.live - L.params,
                              .workspace_bytes = h->workspace_bytes,
                              .control_bytes = (L.arena - L.dev) + (L.work - L.live),
                              .total_bytes = L.end,
                              .storage_bytes = h->storage_bytes};
    return POET_OK;
}

static poet_status check_lifetimes(poet_dev *d, const kprogram *pg, poet_err *err);

poet_status poet_dev_open(poet_dev **out, const void *image, size_t image_bytes, void *memory, size_t memory_bytes,
                          const poet_dev_storage *storage, double (*clock)(void), poet_err *err)
{
    *out = NULL;
    poet_dev_memory need;
    poet_status st = poet_dev_inspect(image, image_bytes, &need, err);
    if (st) return st;
    if ((uintptr_t)memory % ALIGN)
        return poet_fail(err, POET_ERR_INVALID, "memory: must start at an 8-byte aligned address");
    if (memory_bytes < need.total_bytes)
        return poet_fail(err, POET_ERR_LIMIT,
                         "memory: the image needs %llu bytes (arena %llu, persistent %llu, workspace %llu, control "
                         "%llu); %zu were handed over",
                         (unsigned long long)need.total_bytes, (unsigned long long)need.arena_bytes,
                         (unsigned long long)need.persistent_bytes, (unsigned long long)need.workspace_bytes,
                         (unsigned long long)need.control_bytes, memory_bytes);
    if (need.storage_bytes && (!storage || storage->version != POET_DEV_STORAGE_VERSION))
        return poet_fail(err, POET_ERR_INVALID, "storage: the schedule pages %llu bytes and needs a storage back-end "
                                                "of version %d", (unsigned long long)need.storage_bytes,
                         POET_DEV_STORAGE_VERSION);
    if (need.storage_bytes && storage->capacity_bytes < need.storage_bytes)
        return poet_fail(err, POET_ERR_LIMIT, "storage: the schedule pages %llu bytes; the storage holds %llu",
                         (unsigned long long)need.storage_bytes, (unsigned long long)storage->capacity_bytes);
    const uint8_t *img = image;
    const img_header *h = image;
    layout L;
    layout_of(h, &L); /* inspect checked that it adds up */
    unsigned char *m = memory;
    poet_dev *d = (poet_dev *)(void *)m;
    memset(d, 0, sizeof *d);
    *d = (poet_dev){.image = img, .h = h, .nodes = (const knode *)(const void *)(img + h->nodes_at),
                    .slots = (const uint64_t *)(const void *)(img + h->slots_at), .storage = storage, .clock = clock,
                    .arena = m + L.arena, .params = (float *)(void *)(m + L.params),
                    .grads = (float *)(void *)(m + L.grads), .opt_m = (float *)(void *)(m + L.opt_m),
                    .opt_v = h->optimizer == KOPT_ADAM ? (float *)(void *)(m + L.opt_v) : NULL,
                    .state = (float *)(void *)(m + L.state), .state_next = (float *)(void *)(m + L.state_next),
                    .batch_x = (float *)(void *)(m + L.batch), .labels = (int32_t *)(void *)(m + L.labels),
                    .live = (int32_t *)(void *)(m + L.live), .pending = (long *)(void *)(m + L.pending),
                    .work = (float *)(void *)(m + L.work)};
    memcpy(d->params, img + h->params_at, 4 * h->n_params);
    memset(d->grads, 0, 4ull * h->n_trained);
    memset(d->opt_m, 0, 4ull * h->n_trained);
    if (d->opt_v) memset(d->opt_v, 0, 4ull * h->n_trained);
    memcpy(d->state, img + h->state_at, 4 * h->n_state);
    d->stats.arena_bytes = h->train.arena_bytes;
    if ((st = check_lifetimes(d, &h->train, err)) || (st = check_lifetimes(d, &h->eval, err))) return st;
    *out = d;
    return POET_OK;
}

/* ---- execution ---- */

static const kinstr *code_of(const poet_dev *d, const kprogram *pg)
{
    return (const kinstr *)(const void *)(d->image + pg->instr_at);
}

static const kbuffer *buffers_of(const poet_dev *d, const kprogram *pg)
{
    return (const kbuffer *)(const void *)(d->image + pg->buffers_at);
}

static float *tensor(const poet_dev *d, const kbuffer *bufs, int node)
{
    int b = d->live[node];
    return b < 0 ? NULL : (float *)(void *)(d->arena + bufs[b].offset);
}

static void touch(poet_dev *d, const kbuffer *b)
{
    if (b->bytes && b->offset + b->bytes > d->stats.arena_peak_bytes) d->stats.arena_peak_bytes = b->offset + b->bytes;
}

static const uint32_t *channel_lists(const poet_dev *d)
{
    return d->h->channels_at ? (const uint32_t *)(const void *)(d->image + d->h->channels_at) : NULL;
}

static double now(const poet_dev *d) { return d->clock ? d->clock() : 0.0; }

static poet_status compute(poet_dev *d, const kbuffer *bufs, const kinstr *in, bool training, poet_err *err)
{
    const knode *n = &d->nodes[in->node];
    bool first = training && (in->flags & KI_FIRST);
    kernel_ctx c = {.nodes = d->nodes, .n = n, .out = tensor(d, bufs, in->node), .params = d->params + n->param_at,
                    .running = d->state + n->buffer_at, .batch_x = d->batch_x, .labels = d->labels,
                    .dropout_seed = mix64(d->h->seed ^ mix64(d->step + 0x5eed)), .work = d->work,
                    .work_floats = (size_t)(d->h->workspace_bytes / 4), .training = training,
                    .channels = channel_lists(d)};
    /* side effects belong to a node's own stage, never to a recomputation */
    if (first && n->op == POET_OP_GRAD && n->params) {
        const knode *f = &d->nodes[n->fwd];
        uint64_t tw, tb;
        poet_param_trained_split((poet_op)f->op, &f->attrs, f->params, &tw, &tb);
        c.grad_w = tw ? d->grads + n->grad_at : NULL;
        c.grad_b = tb ? d->grads + n->grad_at + tw : NULL;
    }
    if (first && n->op == POET_OP_BATCHNORM2D) c.running_out = d->state_next + n->buffer_at;
    for (int j = 0; j < n->n_inputs; j++)
        if (!(c.in[j] = tensor(d, bufs, n->inputs[j])))
            return poet_fail(err, POET_ERR_INVALID, "device image: node %d reads node %d, which is not in RAM",
                             (int)in->node, (int)n->inputs[j]);
    double t0 = now(d);
    if (!kernel_run(&c)) return poet_fail(err, POET_ERR_UNSUPPORTED, "no kernel for node %d", (int)in->node);
    if (d->clock) {
        double dt = d->clock() - t0;
        d->stats.compute_s += dt;
        if (n->op == POET_OP_GRAD)
            d->stats.grad_op_s[d->nodes[n->fwd].op] += dt;
        else
            d->stats.op_s[n->op] += dt;
    }
    if (training && !(in->flags & KI_FIRST)) d->stats.recomputations++;
    return POET_OK;
}

static poet_status wait_for(poet_dev *d, long ticket, poet_err *err)
{
    double t0 = now(d);
    poet_status st = d->storage->wait(d->storage->ctx, ticket, err);
    if (d->clock) d->stats.wait_s += d->clock() - t0;
    return st;
}

static poet_status transfer(poet_dev *d, const kbuffer *bufs, const kinstr *in, poet_err *err)
{
    bool out = in->op == KI_PAGEOUT;
    uint64_t slot = d->slots[in->node];
    if (slot == UINT64_MAX || !d->storage || (out && d->live[in->node] != (int32_t)in->buffer))
        return poet_fail(err, POET_ERR_INVALID, "device image: node %d is paged %s without a slot or a buffer",
                         (int)in->node, out ? "out" : "in");
    const kbuffer *b = &bufs[in->buffer];
    long ticket = -1;
    poet_status st = d->storage->start(d->storage->ctx, out, slot, d->arena + b->offset, (size_t)b->bytes, &ticket, err);
    if (st) return st;
    if (out) {
        d->pending[in->buffer] = ticket;
        d->stats.page_outs++, d->stats.paged_out_bytes += b->bytes;
    } else {
        d->live[in->node] = (int32_t)in->buffer;
        touch(d, b);
        d->stats.page_ins++, d->stats.paged_in_bytes += b->bytes;
    }
    return POET_OK;
}

/* The node other than in->node whose live buffer shares bytes with
 * in->buffer, or -1. */
static int clash(const poet_dev *d, const kbuffer *bufs, const kinstr *in)
{
    const kbuffer *b = &bufs[in->buffer];
    for (uint32_t u = 0; b->bytes && u < d->h->n_nodes; u++) {
        if (u == in->node || d->live[u] < 0) continue;
        const kbuffer *o = &bufs[d->live[u]];
        if (o->bytes && o->offset < b->offset + b->bytes && b->offset < o->offset + o->bytes) return (int)u;
    }
    return -1;
}

/* Replays what pg's computes, page-ins and frees keep in RAM (d->live): a
 * tensor placed over another in RAM would make a kernel read what it
 * overwrites, or a page-in land on a live tensor. The image's check cannot
 * see it (inspect has no memory to replay with); lifetimes depend on the
 * instruction stream alone, so one replay at open covers every step. */
static poet_status check_lifetimes(poet_dev *d, const kprogram *pg, poet_err *err)
{
    const kinstr *code = code_of(d, pg);
    const kbuffer *bufs = buffers_of(d, pg);
    for (uint32_t v = 0; v < d->h->n_nodes; v++) d->live[v] = -1;
    for (uint32_t k = 0; k < pg->n_instr; k++) {
        const kinstr *in = &code[k];
        if (in->op == KI_FREE) d->live[in->node] = -1;
        if (in->op != KI_COMPUTE && in->op != KI_PAGEIN) continue;
        int other = clash(d, bufs, in);
        if (other >= 0)
            return poet_fail(err, POET_ERR_INVALID, "device image: node %d is placed over node %d, which is in RAM",
                             (int)in->node, other);
        d->live[in->node] = (int32_t)in->buffer;
    }
    return POET_OK;
}

static poet_status run_instr(poet_dev *d, const kbuffer *bufs, const kinstr *in, bool training, poet_err *err)
{
    switch (in->op) {
    case KI_PAGEOUT:
    case KI_PAGEIN: return transfer(d, bufs, in, err);
    case KI_COMPUTE:
        d->live[in->node] = (int32_t)in->buffer;
        touch(d, &bufs[in->buffer]);
        return compute(d, bufs, in, training, err);
    case KI_FREE: {
        poet_status st = POET_OK;
        if (d->pending[in->buffer] >= 0) st = wait_for(d, d->pending[in->buffer], err); /* its page-out reads it */
        d->pending[in->buffer] = -1;
        d->live[in->node] = -1;
        return st;
    }
    default: return d->storage ? wait_for(d, -1, err) : POET_OK; /* KI_WAIT */
    }
}

static poet_status run_program(poet_dev *d, const kprogram *pg, bool training, float *loss, poet_err *err)
{
    const kinstr *code = code_of(d, pg);
    const kbuffer *bufs = buffers_of(d, pg);
    for (uint32_t v = 0; v < d->h->n_nodes; v++) d->live[v] = -1;
    for (uint32_t b = 0; b < pg->n_buffers; b++) d->pending[b] = -1;
    poet_status st = POET_OK;
    for (uint32_t k = 0; k < pg->n_instr && !st; k++) {
        const kinstr *in = &code[k];
        st = run_instr(d, bufs, in, training, err);
        if (!st && loss && in->op == KI_COMPUTE && in->node == d->h->loss && (in->flags & KI_FIRST)) {
            const float *l = tensor(d, bufs, in->node);
            float s = 0.0f;
            for (uint32_t r = 0; r < d->h->rows; r++) s += l[r];
            *loss = s / (float)d->h->rows;
        }
    }
    return st;
}

static poet_status load_batch(poet_dev *d, const float *x, const int32_t *labels, poet_err *err)
{
    for (uint32_t r = 0; r < d->h->rows; r++)
        if (labels[r] < 0 || (uint32_t)labels[r] >= d->h->classes)
            return poet_fail(err, POET_ERR_INVALID, "label %ld of row %u is outside 0..%u", (long)labels[r],
                             (unsigned)r, (unsigned)d->h->classes - 1);
    if (x != d->batch_x) memcpy(d->batch_x, x, 4 * d->h->batch_numel);
    if (labels != d->labels) memcpy(d->labels, labels, 4ull * d->h->rows);
    return POET_OK;
}

/* b^e by squaring: the same bits on every platform, unlike pow(). */
static double pow_uint(double b, uint64_t e)
{
    double r = 1.0;
    for (; e; e >>= 1, b *= b)
        if (e & 1) r *= b;
    return r;
}

/* Parameter p, whose gradient and optimizer state are at g. */
static inline void optimizer_update_one(poet_dev *d, uint64_t p, uint64_t g, float lr, float c1, float c2)
{
    const img_header *h = d->h;
    float grad = d->grads[g] + h->weight_decay * d->params[p];
    if (h->optimizer == KOPT_SGD) {
        /* without momentum no state carries over, as in PyTorch: 0 x a non-finite old value would poison every
         * later step (the same bits otherwise: 0 x m + g is g) */
        d->opt_m[g] = h->momentum != 0 ? h->momentum * d->opt_m[g] + grad : grad;
        d->params[p] -= lr * d->opt_m[g];
    } else {
        d->opt_m[g] = h->beta1 * d->opt_m[g] + (1 - h->beta1) * grad;
        d->opt_v[g] = h->beta2 * d->opt_v[g] + (1 - h->beta2) * grad * grad;
        d->params[p] -= lr * (d->opt_m[g] / c1) / (poet_sqrtf(d->opt_v[g] / c2) + h->eps);
    }
}

/* Parameters outside the train mask keep their value and their optimizer
 * state. Without a mask the loop tests no bit: on a 32-bit core the test
 * costs more than the update. */
static void optimizer_update_range(poet_dev *d, uint64_t p, uint64_t g, uint64_t count, float lr, float c1,
                                   float c2)
{
    const uint8_t *mask = d->train_mask;
    if (!mask)
        for (uint64_t i = 0; i < count; i++) optimizer_update_one(d, p + i, g + i, lr, c1, c2);
    else
        for (uint64_t i = 0; i < count; i++)
            if (mask[(p + i) / 8] >> ((p + i) % 8) & 1) optimizer_update_one(d, p + i, g + i, lr, c1, c2);
}

/* A layer whose weight gradient reads a channel_select (ratio:R): only the
 * weights that read its channels train and have gradients and optimizer
 * state; the others keep their value, even under weight decay. */
static void optimizer_update_selected(poet_dev *d, const knode *n, const knode *sel, float lr, float c1, float c2)
{
    uint64_t rows = (uint64_t)n->attrs.features, cols = knode_weights(n) / rows;
    uint64_t block = poet_channel_block((poet_op)n->op, &n->attrs);
    const uint32_t *list = channel_lists(d) + sel->attrs.start;
    uint64_t kept = (uint64_t)sel->attrs.features;
    for (uint64_t f = 0; f < rows; f++)
        for (uint64_t j = 0; j < kept; j++) /* the gradients hold only these, row by row */
            optimizer_update_range(d, n->param_at + f * cols + list[j] * block, n->grad_at + (f * kept + j) * block,
                                   block, lr, c1, c2);
}

/* Frozen tensors have neither gradients nor optimizer state. */
static void optimizer_update(poet_dev *d)
{
    const img_header *h = d->h;
    float c1 = (float)(1.0 - pow_uint(h->beta1, d->step + 1)), c2 = (float)(1.0 - pow_uint(h->beta2, d->step + 1));
    for (uint32_t v = 0; v < h->n_forward; v++) {
        const knode *n = &d->nodes[v];
        uint64_t w, b, tw, tb;
        poet_param_split((poet_op)n->op, &n->attrs, n->params, &w, &b);
        poet_param_trained_split((poet_op)n->op, &n->attrs, n->params, &tw, &tb);
        float lw = d->rates ? d->rates[2 * v] : h->lr, lb = d->rates ? d->rates[2 * v + 1] : h->lr;
        const knode *sel = knode_select_after(d->nodes, h->n_forward, v);
        if (sel && tw)
            optimizer_update_selected(d, n, sel, lw, c1, c2);
        else
            optimizer_update_range(d, n->param_at, n->grad_at, tw, lw, c1, c2);
        optimizer_update_range(d, n->param_at + w, n->grad_at + tw, tb, lb, c1, c2);
    }
}

poet_status poet_dev_gradient(poet_dev *d, const float *x, const int32_t *labels, float *loss, poet_err *err)
{
    poet_status st = load_batch(d, x, labels, err);
    if (st) return st;
    memcpy(d->state_next, d->state, 4 * d->h->n_state);
    float l = 0.0f;
    st = run_program(d, &d->h->train, true, &l, err);
    if (!st && d->storage && d->stats.page_outs) st = d->storage->sync(d->storage->ctx, err);
    if (st) { /* the pass is void: drain the transfers, keep the statistics */
        if (d->storage) {
            d->storage->wait(d->storage->ctx, -1, NULL);
            d->storage->reset(d->storage->ctx);
        }
        return st;
    }
    memcpy(d->state, d->state_next, 4 * d->h->n_state);
    *loss = l;
    return POET_OK;
}

void poet_dev_update(poet_dev *d)
{
    optimizer_update(d);
    d->step++;
    d->stats.steps++;
}

poet_status poet_dev_step(poet_dev *d, const float *x, const int32_t *labels, float *loss, poet_err *err)
{
    poet_status st = poet_dev_gradient(d, x, labels, loss, err);
    if (!st) poet_dev_update(d);
    return st;
}

/* Inference in the same arena: the logits and the loss stay live to the end. */
static poet_status infer(poet_dev *d, const float *x, const int32_t *labels, const float **logits, const float **loss,
                         poet_err *err)
{
    poet_status st = load_batch(d, x, labels, err);
    if (!st) st = run_program(d, &d->h->eval, false, NULL, err);
    if (st) return st;
    const kbuffer *bufs = buffers_of(d, &d->h->eval);
    *logits = tensor(d, bufs, d->nodes[d->h->loss].inputs[0]), *loss = tensor(d, bufs, (int)d->h->loss);
    if (!*logits || !*loss) return poet_fail(err, POET_ERR_INVALID, "device image: inference frees the logits or the loss");
    return POET_OK;
}

poet_status poet_dev_eval(poet_dev *d, const float *x, const int32_t *labels, int rows, float *loss_sum, int *correct,
                          poet_err *err)
{
    const float *logits, *l;
    poet_status st = infer(d, x, labels, &logits, &l, err);
    if (st) return st;
    float s = 0.0f;
    int ok = 0, C = (int)d->h->classes;
    for (int r = 0; r < rows && r < (int)d->h->rows; r++) {
        const float *row = logits + (size_t)r * (size_t)C;
        int best = 0;
        for (int k = 1; k < C; k++)
            if (row[k] > row[best]) best = k;
        ok += best == labels[r];
        s += l[r];
    }
    *loss_sum = s;
    *correct = ok;
    return POET_OK;
}

poet_status poet_dev_predict(poet_dev *d, const float *x, float *out, poet_err *err)
{
    const float *logits, *l;
    memset(d->labels, 0, 4ull * d->h->rows); /* the loss is computed too; any class will do */
    poet_status st = infer(d, x, d->labels, &logits, &l, err);
    if (!st) memcpy(out, logits, 4ull * d->h->rows * d->h->classes);
    return st;
}

void poet_dev_batch_shape(const poet_dev *d, int *rows, uint64_t *numel_per_row, int *classes)
{
    *rows = (int)d->h->rows;
    *numel_per_row = d->h->batch_numel / d->h->rows;
    *classes = (int)d->h->classes;
}

void poet_dev_batch_buffers(poet_dev *d, float **x, int32_t **labels)
{
    *x = d->batch_x;
    *labels = d->labels;
}

const float *poet_dev_weights(const poet_dev *d, uint64_t *count)
{
    *count = d->h->n_params;
    return d->params;
}

const float *poet_dev_gradients(const poet_dev *d, uint64_t *count)
{
    *count = d->h->n_trained;
    return d->grads;
}

const float *poet_dev_state(const poet_dev *d, uint64_t *count)
{
    *count = d->h->n_state;
    return d->state;
}

void poet_dev_set_train_mask(poet_dev *d, const uint8_t *mask) { d->train_mask = mask; }

void poet_dev_set_rates(poet_dev *d, const float *rates) { d->rates = rates; }

uint32_t poet_dev_forward_nodes(const poet_dev *d) { return d->h->n_forward; }

poet_status poet_dev_step_attending(poet_dev *d, const float *x, const int32_t *labels, const uint32_t *rows_kept,
                                    uint32_t count, uint8_t *mask, float *loss, poet_err *err)
{
    poet_status st = poet_dev_gradient(d, x, labels, loss, err);
    for (uint32_t i = 0; i < count && !st; i++)
        st = poet_dev_keep_rows(d, (int)rows_kept[2 * i], rows_kept[2 * i + 1], mask, err);
    if (st) return st;
    poet_dev_set_train_mask(d, mask);
    poet_dev_update(d);
    return POET_OK;
}

static void put_bit(uint8_t *mask, uint64_t i, bool on)
{
    mask[i / 8] = (uint8_t)(on ? mask[i / 8] | 1u << (i % 8) : mask[i / 8] & ~(1u << (i % 8)));
}

static double row_norm(const float *g, uint64_t per)
{
    double s = 0;
    for (uint64_t i = 0; i < per; i++) s += (double)g[i] * g[i];
    return s;
}

poet_status poet_dev_keep_rows(poet_dev *d, int node, uint32_t keep, uint8_t *mask, poet_err *err)
{
    if (node < 0 || (uint32_t)node >= d->h->n_forward)
        return poet_fail(err, POET_ERR_INVALID, "keep rows: node %d is not a forward node", node);
    const knode *n = &d->nodes[node];
    uint64_t w, b, tw, tb, rows = n->attrs.features > 0 ? (uint64_t)n->attrs.features : 0;
    poet_param_split((poet_op)n->op, &n->attrs, n->params, &w, &b);
    poet_param_trained_split((poet_op)n->op, &n->attrs, n->params, &tw, &tb);
    if ((n->op != POET_OP_CONV2D && n->op != POET_OP_LINEAR) || !rows || !tw)
        return poet_fail(err, POET_ERR_INVALID, "keep rows: node %d has no trained rows of weights", node);
    uint64_t per = w / rows, trained = tw / rows; /* a row's weights, and those of them with gradients */
    const float *g = d->grads + n->grad_at;
    for (uint64_t r = 0; r < rows; r++) { /* a rank by counting: no scratch, rows are few on a device */
        double mine = row_norm(g + r * trained, trained);
        uint64_t above = 0;
        for (uint64_t u = 0; u < rows && above < keep; u++) {
            double other = u == r ? mine : row_norm(g + u * trained, trained);
            above += other > mine || (other == mine && u < r);
        }
        bool on = above < keep;
        for (uint64_t i = n->param_at + r * per; i < n->param_at + (r + 1) * per; i++) put_bit(mask, i, on);
        if (tb) put_bit(mask, n->param_at + w + r, on);
    }
    return POET_OK;
}

const poet_dev_stats *poet_dev_get_stats(const poet_dev *d) { return &d->stats; }
const void *poet_dev_arena(const poet_dev *d) { return d->arena; }
uint64_t poet_dev_seed(const poet_dev *d) { return d->h->seed; }
uint32_t poet_dev_graph_hash(const poet_dev *d) { return d->h->graph_hash; }

void poet_dev_weights_sha256(const poet_dev *d, char hex[65])
{
    sha256_hex(d->params, 4 * d->h->n_params, hex);
}

/* ---- state ---- */

size_t poet_dev_state_bytes(const poet_dev *d)
{
    return (size_t)(4 * (d->h->n_params + 2ull * d->h->n_trained + d->h->n_state) + 8);
}

void poet_dev_state_save(const poet_dev *d, void *dst)
{
    unsigned char *p = dst;
    size_t np = 4 * d->h->n_params, nt = 4 * (size_t)d->h->n_trained, ns = 4 * d->h->n_state;
    memcpy(p, d->params, np), p += np;
    memcpy(p, d->opt_m, nt), p += nt;
    if (d->opt_v)
        memcpy(p, d->opt_v, nt);
    else
        memset(p, 0, nt);
    p += nt;
    memcpy(p, d->state, ns), p += ns;
    le_put(p, d->step, 8);
}

poet_status poet_dev_state_load(poet_dev *d, const void *src, size_t len, poet_err *err)
{
    if (len != poet_dev_state_bytes(d))
        return poet_fail(err, POET_ERR_INVALID, "state holds %zu bytes; this model needs %zu", len, poet_dev_state_bytes(d));
    const unsigned char *p = src;
    size_t np = 4 * d->h->n_params, nt = 4 * (size_t)d->h->n_trained, ns = 4 * d->h->n_state;
    uint64_t step = le_get(p + np + 2 * nt + ns, 8);
    if (step >> 63) return poet_fail(err, POET_ERR_INVALID, "state has a negative step count");
    memcpy(d->params, p, np);
    memcpy(d->opt_m, p + np, nt);
    if (d->opt_v) memcpy(d->opt_v, p + np + nt, nt);
    memcpy(d->state, p + np + 2 * nt, ns);
    d->step = step;
    return POET_OK;
}

float *poet_dev_params(poet_dev *d, int node, bool gradient, uint64_t *count)
{
    if (node < 0 || (uint32_t)node >= d->h->n_forward) return NULL;
    const knode *n = &d->nodes[node];
    *count = gradient ? knode_trained(n) : n->params;
    if (!*count) return NULL;
    return gradient ? d->grads + n->grad_at : d->params + n->param_at;
}

float *poet_dev_buffers(poet_dev *d, int node, uint64_t *count)
{
    if (node < 0 || (uint32_t)node >= d->h->n_forward) return NULL;
    *count = d->nodes[node].buffers;
    return d->state + d->nodes[node].buffer_at;
}
