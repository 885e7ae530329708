/* The optimizer half of a training step (SGD with momentum, Adam) over the
 * parameters that train, node by node (step.c runs it after the pass, or
 * device.c at a fused update's KI_UPDATE), and what a partial update
 * chooses trains: the train mask, learning rates per tensor, and the rows
 * of a layer whose gradient is largest. Freestanding. */
#include <string.h>

#include "../base/mathf.h"
#include "dev.h"
#include "image.h"

/* b^e by squaring: the same bits on every platform, unlike pow(). */
static double pow_uint(double b, uint64_t e)
{
    double r = 1.0;
    for (; e; e >>= 1, b *= b)
        if (e & 1) r *= b;
    return r;
}

/* The parameter at param with gradient g_in, whose optimizer state is at g. */
static inline void optimizer_update_one(poet_dev *d, float *param, float g_in, uint64_t g, float lr, float c1, float c2)
{
    const img_header *h = d->h;
    float grad = g_in + h->weight_decay * *param;
    if (h->optimizer == KOPT_SGD) {
        /* without momentum no state carries over, as in PyTorch: 0 x a non-finite old value would poison every
         * later step (the same bits otherwise: 0 x m + g is g) */
        d->opt_m[g] = h->momentum != 0 ? h->momentum * d->opt_m[g] + grad : grad;
        *param -= lr * d->opt_m[g];
    } else {
        d->opt_m[g] = h->beta1 * d->opt_m[g] + (1 - h->beta1) * grad;
        d->opt_v[g] = h->beta2 * d->opt_v[g] + (1 - h->beta2) * grad * grad;
        *param -= lr * (d->opt_m[g] / c1) / (poet_sqrtf(d->opt_v[g] / c2) + h->eps);
    }
}

/* A run of count parameters: from param on (p: the first one's index in
 * the parameter vector), their gradients from grad on, their optimizer
 * state from index g on. Parameters outside the train mask keep their
 * value and their optimizer state. Without a mask the loop tests no bit: on
 * a 32-bit core the test costs more than the update. */
typedef struct param_run {
    float *param;
    const float *grad;
    uint64_t p, g, count;
} param_run;

static void optimizer_update_range(poet_dev *d, param_run r, float lr, float c1, float c2)
{
    const uint8_t *mask = d->train_mask;
    if (!mask)
        for (uint64_t i = 0; i < r.count; i++) optimizer_update_one(d, r.param + i, r.grad[i], r.g + i, lr, c1, c2);
    else
        for (uint64_t i = 0; i < r.count; i++)
            if (mask[(r.p + i) / 8] >> ((r.p + i) % 8) & 1)
                optimizer_update_one(d, r.param + i, r.grad[i], r.g + i, lr, c1, c2);
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
    float *w = dev_part_ram(d, n, 0); /* trained, so in RAM */
    const float *grad = dev_grads_of(d, n);
    for (uint64_t f = 0; f < rows; f++)
        for (uint64_t j = 0; j < kept; j++) { /* the gradients hold only these, row by row */
            uint64_t at = f * cols + list[j] * block, g = (f * kept + j) * block;
            optimizer_update_range(d, (param_run){w + at, grad + g, n->param_at + at, n->grad_at + g, block}, lr, c1, c2);
        }
}

void dev_begin_step(poet_dev *d)
{
    d->adam_c1 = (float)(1.0 - pow_uint(d->h->beta1, d->step + 1));
    d->adam_c2 = (float)(1.0 - pow_uint(d->h->beta2, d->step + 1));
}

/* Frozen tensors have neither gradients nor optimizer state. */
void dev_update_node(poet_dev *d, uint32_t v)
{
    const img_header *h = d->h;
    float c1 = d->adam_c1, c2 = d->adam_c2;
    const knode *n = &d->nodes[v];
    uint64_t w, b, tw, tb;
    poet_param_split((poet_op)n->op, &n->attrs, n->params, &w, &b);
    poet_param_trained_split((poet_op)n->op, &n->attrs, n->params, &tw, &tb);
    float lw = d->rates ? d->rates[2 * v] : h->lr, lb = d->rates ? d->rates[2 * v + 1] : h->lr;
    const knode *sel = knode_select_after(d->nodes, h->n_forward, v);
    const float *grad = dev_grads_of(d, n);
    if (sel && tw)
        optimizer_update_selected(d, n, sel, lw, c1, c2);
    else if (tw)
        optimizer_update_range(d, (param_run){dev_part_ram(d, n, 0), grad, n->param_at, n->grad_at, tw}, lw, c1, c2);
    if (tb)
        optimizer_update_range(d, (param_run){dev_part_ram(d, n, 1), grad + tw, n->param_at + w, n->grad_at + tw, tb},
                               lb, c1, c2);
}

void poet_dev_set_train_mask(poet_dev *d, const uint8_t *mask) { d->train_mask = mask; }

void poet_dev_set_rates(poet_dev *d, const float *rates) { d->rates = rates; }

uint32_t poet_dev_forward_nodes(const poet_dev *d) { return d->h->n_forward; }

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

