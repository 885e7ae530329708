/* A device image checked field by field (src/device/image.h): what
 * poet_dev_inspect refuses before anything is run, the CRC first, then
 * every count, offset and shape, the op registry's shape inference run
 * again on each node. Freestanding. */
#include <string.h>

#include "../base/hash.h"
#include "../ops/ops.h"
#include "dev.h"
#include "image.h"
#include "kernels.h"

static bool within(const img_header *h, uint64_t at, uint64_t count, uint64_t size)
{
    uint64_t end = h->image_bytes - 4; /* the CRC-32 */
    return at % POET_IMAGE_ALIGN == 0 && at >= h->header_bytes && at <= end && count <= (end - at) / (size ? size : 1);
}

static poet_status check_header(const uint8_t *img, size_t len, poet_err *err)
{
    if ((uintptr_t)img % POET_IMAGE_ALIGN)
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

/* The registry's shape inference (src/ops/ops.c, the same the host
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
    if (n->op == POET_OP_GRAD && memcmp(n->home, nodes[n->fwd].home, sizeof n->home) != 0) return "parameter homes";
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

/* Homes in RAM follow one another in node order, weights before bias, so
 * that they cover [0, n_resident) once; a home in flash is frozen. */
static poet_status check_homes(const img_header *h, const knode *nodes, poet_err *err)
{
    uint64_t resident = 0;
    for (uint32_t v = 0; v < h->n_forward; v++)
        for (int part = 0; part < 2; part++) {
            uint64_t at, count;
            knode_part(&nodes[v], part, &at, &count);
            uint32_t home = nodes[v].home[part];
            bool ok = home == KHOME_FLASH ? count && !knode_part_trained(&nodes[v], part) : home == resident;
            if (!ok)
                return poet_fail(err, POET_ERR_PARSE, "device image: node %u is malformed (%s)", (unsigned)v,
                                 home == KHOME_FLASH ? "a trained tensor homed in flash" : "parameter homes");
            if (home != KHOME_FLASH) resident += count;
        }
    if (resident != h->n_resident)
        return poet_fail(err, POET_ERR_PARSE, "device image: malformed header (resident parameter count)");
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
    return check_homes(h, nodes, err);
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
        bool update = in->op == KI_UPDATE && pg == &h->train; /* checked with the fused update below */
        if (!update && (in->op > KI_WAIT || (in->op != KI_WAIT && (in->node >= h->n_nodes || in->buffer >= pg->n_buffers ||
                                                                   buf[in->buffer].bytes != 4ull * nodes[in->node].numel))))
            return poet_fail(err, POET_ERR_PARSE, "device image: %s instruction %u is malformed", what, (unsigned)k);
    }
    return POET_OK;
}

/* A fused update (KI_UPDATE, training only) names a trained forward node;
 * its gradient buffer is the largest node's. The order (each once, after
 * every instruction that reads its parameters) needs a replay, which
 * poet_dev_open does. */
static poet_status check_update_fields(const uint8_t *img, const img_header *h, poet_err *err)
{
    const knode *nodes = (const knode *)(const void *)(img + h->nodes_at);
    const kinstr *code = (const kinstr *)(const void *)(img + h->train.instr_at);
    uint64_t largest = 0;
    for (uint32_t v = 0; v < h->n_forward; v++)
        if (knode_trained(&nodes[v]) > largest) largest = knode_trained(&nodes[v]);
    bool fused = h->fused_grad_floats != 0;
    if (fused && h->fused_grad_floats != largest)
        return poet_fail(err, POET_ERR_PARSE, "device image: malformed header (fused gradient buffer)");
    for (uint32_t k = 0; k < h->train.n_instr; k++) {
        const kinstr *in = &code[k];
        if (in->op == KI_UPDATE &&
            !(fused && in->node < h->n_forward && in->buffer == 0 && knode_trained(&nodes[in->node])))
            return poet_fail(err, POET_ERR_PARSE, "device image: training instruction %u is malformed (update)",
                             (unsigned)k);
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
    if (!st) st = check_update_fields(img, h, err);
    return st;
}

poet_status image_check(const uint8_t *img, size_t len, poet_err *err)
{
    poet_status st = check_header(img, len, err);
    return st ? st : check_body(img, (const img_header *)(const void *)img, err);
}
