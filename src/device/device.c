/* The device library (poet/device.h): carves a checked image's memory
 * (image_check.c checks it) from the block handed over, and runs the
 * schedule's instruction stream and the kernels; the optimizer step is
 * optimizer.c's. Freestanding: the host's `poet train` runs this same code. */
#include "poet/device.h"

#include <string.h>

#include "../base/checked.h"
#include "dev.h"
#include "../base/hash.h"
#include "image.h"
#include "kernels.h"

enum { ALIGN = 8 };

/* The executor's own state takes this much on every platform (it is
 * smaller on a 32-bit core), so that the host's figure for a schedule's
 * memory is the board's. */
enum { DEV_STATE_BYTES = 1024 };
_Static_assert(sizeof(poet_dev) <= DEV_STATE_BYTES, "poet_dev outgrew its reservation");

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
    bool ok = true;
#define PLACE(field, count, size) (L->field = at, ok = ok && ck_place(&at, (count), (size), ALIGN))
    PLACE(dev, 1, DEV_STATE_BYTES);
    PLACE(arena, h->train.arena_bytes, 1);
    PLACE(params, h->n_resident, 4);
    PLACE(grads, image_grad_floats(h), 4);
    PLACE(opt_m, h->n_trained, 4);
    PLACE(opt_v, h->optimizer == KOPT_ADAM ? h->n_trained : 0, 4);
    PLACE(state, h->n_state, 4);
    PLACE(state_next, h->n_state, 4);
    PLACE(batch, h->batch_numel, 4);
    PLACE(labels, h->rows, 4);
    PLACE(live, h->n_nodes, 4);
    PLACE(pending, h->n_nodes, sizeof(int64_t)); /* per node: the same on every platform */
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

bool image_memory(const img_header *h, poet_dev_memory *need)
{
    layout L;
    if (!layout_of(h, &L)) return false;
    *need = (poet_dev_memory){.arena_bytes = h->train.arena_bytes,
                              .persistent_bytes = L.live - L.params,
                              .workspace_bytes = h->workspace_bytes,
                              .control_bytes = (L.arena - L.dev) + (L.work - L.live),
                              .total_bytes = L.end,
                              .storage_bytes = h->storage_bytes,
                              .flash_bytes = 4 * (h->n_params - h->n_resident)};
    return true;
}

poet_status poet_dev_inspect(const void *image, size_t image_bytes, poet_dev_memory *need, poet_err *err)
{
    poet_status st = image_check(image, image_bytes, err);
    if (st) return st;
    if (!image_memory(image, need))
        return poet_fail(err, POET_ERR_PARSE, "device image: malformed header (its memory sizes overflow)");
    return POET_OK;
}

static poet_status check_lifetimes(poet_dev *d, const kprogram *pg, poet_err *err);
static poet_status check_updates(poet_dev *d, poet_err *err);

poet_status poet_dev_open(const void *image, size_t image_bytes, void *memory, size_t memory_bytes,
                          const poet_dev_storage *storage, double (*clock)(void), poet_dev **out, poet_err *err)
{
    *out = NULL;
    poet_dev_memory need = {0};
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
                    .live = (int32_t *)(void *)(m + L.live), .pending = (int64_t *)(void *)(m + L.pending),
                    .work = (float *)(void *)(m + L.work)};
    DEV_FOR_EACH_PART(d, v, part, at, count) /* a home in flash is read where it lies */
        if (d->nodes[v].home[part] != KHOME_FLASH)
            memcpy(dev_part_ram(d, &d->nodes[v], part), img + h->params_at + 4 * at, 4 * count);
    memset(d->grads, 0, 4 * image_grad_floats(h));
    memset(d->opt_m, 0, 4ull * h->n_trained);
    if (d->opt_v) memset(d->opt_v, 0, 4ull * h->n_trained);
    memcpy(d->state, img + h->state_at, 4 * h->n_state);
    d->stats.arena_bytes = h->train.arena_bytes;
    dev_begin_step(d);
    if ((st = check_lifetimes(d, &h->train, err)) || (st = check_lifetimes(d, &h->eval, err)) ||
        (st = check_updates(d, err)))
        return st;
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

static double now(const poet_dev *d) { return d->clock ? d->clock() : 0.0; }

static poet_status compute(poet_dev *d, const kbuffer *bufs, const kinstr *in, bool training, poet_err *err)
{
    const knode *n = &d->nodes[in->node];
    bool first = training && (in->flags & KI_FIRST);
    kernel_ctx c = {.nodes = d->nodes, .n = n, .out = tensor(d, bufs, in->node), .params = dev_part(d, n, 0), .bias = dev_part(d, n, 1),
                    .running = d->state + n->buffer_at, .batch_x = d->batch_x, .labels = d->labels,
                    .dropout_seed = mix64(d->h->seed ^ mix64(d->step + 0x5eed)), .work = d->work,
                    .work_floats = (size_t)(d->h->workspace_bytes / 4), .training = training,
                    .channels = channel_lists(d)};
    /* side effects belong to a node's own stage, never to a recomputation */
    if (first && n->op == POET_OP_GRAD && n->params) {
        const knode *f = &d->nodes[n->fwd];
        uint64_t tw, tb;
        poet_param_trained_split((poet_op)f->op, &f->attrs, f->params, &tw, &tb);
        float *g = dev_grads_of(d, n);
        c.grad_w = tw ? g : NULL;
        c.grad_b = tb ? g + tw : NULL;
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
        if (d->node_compute_s) d->node_compute_s[in->node] += dt;
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
    double t0 = now(d);
    poet_status st = d->storage->start(d->storage->ctx, out, slot, d->arena + b->offset, (size_t)b->bytes, &ticket, err);
    if (st) return st;
    if (d->clock) {
        double dt = d->clock() - t0;
        d->stats.transfer_s += dt;
        if (d->node_transfer_s) d->node_transfer_s[in->node] += dt;
    }
    if (out) {
        d->pending[in->node] = ticket;
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

/* A fused update changes a node's parameters once, after the last
 * instruction that reads them; every trained node's is there. One replay
 * (d->live marks what was updated); image_check saw the fields. */
static poet_status check_updates(poet_dev *d, poet_err *err)
{
    const kinstr *code = code_of(d, &d->h->train);
    uint32_t updated = 0, trained = 0;
    for (uint32_t v = 0; v < d->h->n_nodes; v++) d->live[v] = 0;
    for (uint32_t k = 0; k < d->h->train.n_instr; k++) {
        const kinstr *in = &code[k];
        int64_t v = in->op == KI_COMPUTE ? knode_params_read(d->nodes, d->h->n_forward, in->node) : -1;
        if ((v >= 0 && d->live[v]) || (in->op == KI_UPDATE && d->live[in->node]))
            return poet_fail(err, POET_ERR_INVALID, "device image: training instruction %u %s node %d's parameters "
                                                    "after their update", (unsigned)k,
                             in->op == KI_UPDATE ? "updates again" : "reads", v >= 0 ? (int)v : (int)in->node);
        if (in->op == KI_UPDATE) d->live[in->node] = 1, updated++;
    }
    for (uint32_t v = 0; v < d->h->n_forward; v++) trained += knode_trained(&d->nodes[v]) > 0;
    if (d->h->fused_grad_floats && updated != trained)
        return poet_fail(err, POET_ERR_INVALID, "device image: the fused update leaves %u trained nodes out",
                         (unsigned)(trained - updated));
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
    case KI_UPDATE: dev_update_timed(d, in->node); return POET_OK;
    case KI_FREE: {
        poet_status st = POET_OK;
        if (d->pending[in->node] >= 0) st = wait_for(d, (long)d->pending[in->node], err); /* its page-out reads it */
        d->pending[in->node] = -1;
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
    for (uint32_t v = 0; v < d->h->n_nodes; v++) d->pending[v] = -1;
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

poet_status poet_dev_gradient(poet_dev *d, const float *x, const int32_t *labels, float *loss, poet_err *err)
{
    if (d->h->fused_grad_floats)
        return poet_fail(err, POET_ERR_UNSUPPORTED, "this image fuses the optimizer step into the backward pass: "
                                                    "no whole gradient is left for a separate update (poet_dev_step)");
    return dev_pass(d, x, labels, loss, err);
}

poet_status dev_pass(poet_dev *d, const float *x, const int32_t *labels, float *loss, poet_err *err)
{
    poet_status st = load_batch(d, x, labels, err);
    if (st) return st;
    dev_begin_step(d);
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
    return d->h->n_resident == d->h->n_params ? d->params : NULL;
}

void poet_dev_weights_copy(const poet_dev *d, float *dst)
{
    DEV_FOR_EACH_PART(d, v, part, at, count) memcpy(dst + at, dev_part(d, &d->nodes[v], part), 4 * count);
}

int dev_flash_changed(const poet_dev *d, const float *vector)
{
    DEV_FOR_EACH_PART(d, v, part, at, count)
        if (d->nodes[v].home[part] == KHOME_FLASH && memcmp(vector + at, dev_part(d, &d->nodes[v], part), 4 * count))
            return (int)v;
    return -1;
}

uint64_t poet_dev_flash_params(const poet_dev *d) { return d->h->n_params - d->h->n_resident; }

const float *poet_dev_gradients(const poet_dev *d, uint64_t *count)
{
    *count = d->h->fused_grad_floats ? 0 : d->h->n_trained;
    return d->h->fused_grad_floats ? NULL : d->grads;
}

const float *poet_dev_state(const poet_dev *d, uint64_t *count)
{
    *count = d->h->n_state;
    return d->state;
}

const poet_dev_stats *poet_dev_get_stats(const poet_dev *d) { return &d->stats; }

void poet_dev_set_node_timers(poet_dev *d, double *compute_s, double *transfer_s)
{
    d->node_compute_s = compute_s, d->node_transfer_s = transfer_s;
}

uint32_t poet_dev_nodes(const poet_dev *d) { return d->h->n_nodes; }

void dev_update_timed(poet_dev *d, uint32_t v)
{
    double t0 = now(d);
    dev_update_node(d, v);
    if (d->clock) d->stats.update_s += d->clock() - t0;
}
const void *poet_dev_arena(const poet_dev *d) { return d->arena; }
uint64_t poet_dev_seed(const poet_dev *d) { return d->h->seed; }
uint32_t poet_dev_graph_hash(const poet_dev *d) { return d->h->graph_hash; }

void dev_weights_digest(const poet_dev *d, uint8_t digest[32])
{
    sha256_ctx c;
    sha256_init(&c);
    DEV_FOR_EACH_PART(d, v, part, at, count) sha256_update_floats(&c, dev_part(d, &d->nodes[v], part), count);
    sha256_final(&c, digest);
}

void poet_dev_weights_sha256(const poet_dev *d, char hex[65])
{
    uint8_t digest[32];
    dev_weights_digest(d, digest);
    sha256_digest_hex(digest, hex);
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
    poet_dev_weights_copy(d, (float *)(void *)p), p += np;
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
    int changed = dev_flash_changed(d, (const float *)(const void *)p);
    if (changed >= 0)
        return poet_fail(err, POET_ERR_INVALID, "state: it changes the frozen parameters of node %d, which this image "
                                                "reads from flash", changed);
    DEV_FOR_EACH_PART(d, v, part, at, count)
        if (d->nodes[v].home[part] != KHOME_FLASH) memcpy(dev_part_ram(d, &d->nodes[v], part), p + 4 * at, 4 * count);
    memcpy(d->opt_m, p + np, nt);
    if (d->opt_v) memcpy(d->opt_v, p + np + nt, nt);
    memcpy(d->state, p + np + 2 * nt, ns);
    d->step = step;
    dev_begin_step(d);
    return POET_OK;
}

float *poet_dev_params(poet_dev *d, int node, bool gradient, uint64_t *count)
{
    if (node < 0 || (uint32_t)node >= d->h->n_forward) return NULL;
    const knode *n = &d->nodes[node];
    *count = gradient ? knode_trained(n) : n->params;
    if (!*count) return NULL;
    if (gradient) return d->h->fused_grad_floats ? NULL : d->grads + n->grad_at;
    /* homes in RAM follow one another: the weights and the bias are adjacent when both are there */
    return n->home[0] != KHOME_FLASH && n->home[1] != KHOME_FLASH ? d->params + n->home[0] : NULL;
}

const float *poet_dev_params_read(const poet_dev *d, int node, int part, uint64_t *count)
{
    uint64_t at;
    if (node < 0 || (uint32_t)node >= d->h->n_forward || part < 0 || part > 1) return NULL;
    knode_part(&d->nodes[node], part, &at, count);
    return *count ? dev_part(d, &d->nodes[node], part) : NULL;
}

float *poet_dev_buffers(poet_dev *d, int node, uint64_t *count)
{
    if (node < 0 || (uint32_t)node >= d->h->n_forward) return NULL;
    *count = d->nodes[node].buffers;
    return d->state + d->nodes[node].buffer_at;
}
