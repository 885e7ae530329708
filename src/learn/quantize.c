/* Training multi-bit weights: ALQ, and the STE and BWN baselines
 * (poet/quantize.h). */
#define _POSIX_C_SOURCE 200809L
#include "poet/quantize.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "poet/device.h"
#include "batches.h"

enum { T = POET_ALQ_MAX_TERMS };
static const float B1 = 0.9f, B2 = 0.999f, EPS = 1e-8f;

typedef struct moments {
    double m, v, vmax;
} moments;

typedef struct qlayer {
    int node;
    uint32_t rows, cols, group, per_row, n_groups;
    float *w;       /* the engine's weights: the quantized ones while training */
    float *latent;  /* STE, BWN: the full-precision weights */
    moments *mw;    /* per weight */
    uint8_t *terms; /* per group */
    double *alpha;  /* per group, T */
    moments *ma;    /* per group, T */
    int8_t *codes;  /* per group, group x T: weight j's signs at j x terms + i */
} qlayer;

struct poet_quant {
    poet_engine *e;
    poet_dev *dev;
    poet_quant_options o;
    int n_layers;
    qlayer *layers;
    uint8_t *train_mask;
    long step;
    double c1, c2; /* AMSGrad's bias corrections at this step */
    int basis_every; /* while training */
    float *scratch_f; /* a group's targets, then its curvatures */
    uint8_t *packed_terms, *packed_bits;
    float *packed_alpha;
};

static uint32_t len_of(const qlayer *l, uint64_t g)
{
    uint32_t k = (uint32_t)(g % l->per_row), start = k * l->group;
    return l->cols - start < l->group ? l->cols - start : l->group;
}

static uint64_t start_of(const qlayer *l, uint64_t g) { return g / l->per_row * l->cols + g % l->per_row * l->group; }

/* ---- set-up ---- */

static poet_status check_options(const poet_quant_options *o, poet_err *err)
{
    if (o->method < POET_QUANT_ALQ || o->method > POET_QUANT_BWN)
        return poet_fail(err, POET_ERR_INVALID, "quantize: unknown method");
    if (o->method != POET_QUANT_BWN && o->group < 1) return poet_fail(err, POET_ERR_INVALID, "quantize: group of 0 weights");
    if (o->method == POET_QUANT_ALQ && (o->init_terms < 1 || o->init_terms > T))
        return poet_fail(err, POET_ERR_INVALID, "quantize: ALQ starts with 1 to %d terms, got %u", T, o->init_terms);
    double most = o->method == POET_QUANT_ALQ ? o->init_terms : T;
    if (o->method != POET_QUANT_BWN && !(o->target_bits > 0 && o->target_bits <= most))
        return poet_fail(err, POET_ERR_INVALID, "quantize: target of %g bits, need more than 0 and at most %g",
                         o->target_bits, most);
    if (o->epochs < 0 || o->prune_epochs < 0 || o->prune_epochs > o->epochs)
        return poet_fail(err, POET_ERR_INVALID, "quantize: %d pruning epochs of %d", o->prune_epochs, o->epochs);
    if (o->method == POET_QUANT_ALQ && o->target_bits < o->init_terms && o->prune_epochs < 1)
        return poet_fail(err, POET_ERR_INVALID, "quantize: ALQ needs a pruning epoch to go from %u terms to %g bits",
                         o->init_terms, o->target_bits);
    if (!(o->lr > 0)) return poet_fail(err, POET_ERR_INVALID, "quantize: learning rate must be positive");
    return POET_OK;
}

static poet_status add_layer(poet_quant *q, const poet_graph *g, int v, poet_err *err)
{
    const poet_node *n = &g->nodes[v];
    qlayer *l = &q->layers[q->n_layers++];
    uint64_t count, rows = 0, cols = 0;
    poet_weight_rows(n, &rows, &cols);
    l->node = v, l->rows = (uint32_t)rows, l->cols = (uint32_t)cols;
    l->group = q->o.method == POET_QUANT_BWN ? l->cols : q->o.group;
    if (l->group > l->cols) l->group = l->cols;
    l->per_row = (l->cols + l->group - 1) / l->group, l->n_groups = l->rows * l->per_row;
    l->w = poet_dev_params(poet_engine_device(q->e), v, false, &count);
    uint64_t W = (uint64_t)l->rows * l->cols;
    l->latent = malloc(4 * W), l->mw = calloc(W, sizeof *l->mw), l->terms = calloc(l->n_groups, 1);
    l->alpha = calloc((size_t)l->n_groups * T, sizeof *l->alpha), l->ma = calloc((size_t)l->n_groups * T, sizeof *l->ma);
    l->codes = malloc((size_t)l->n_groups * l->group * T);
    if (!l->latent || !l->mw || !l->terms || !l->alpha || !l->ma || !l->codes)
        return poet_fail(err, POET_ERR_NOMEM, "out of memory for the quantizer");
    memcpy(l->latent, l->w, 4 * W);
    return POET_OK;
}

static poet_status find_layers(poet_quant *q, const poet_graph *g, poet_err *err)
{
    if (!(q->layers = calloc((size_t)g->n_forward, sizeof *q->layers)))
        return poet_fail(err, POET_ERR_NOMEM, "out of memory for the quantizer");
    uint32_t widest = 1;
    for (int v = 0; v < g->n_forward; v++) {
        const poet_node *n = &g->nodes[v];
        uint64_t count;
        if (!n->params) continue;
        if (!poet_dev_params(poet_engine_device(q->e), v, true, &count) || count != n->params)
            return poet_fail(err, POET_ERR_INVALID, "quantize: node %s has frozen parameters; every one must train",
                             n->name);
        uint64_t rows, cols;
        if (!poet_weight_rows(n, &rows, &cols)) continue;
        poet_status st = add_layer(q, g, v, err);
        if (st) return st;
        if (q->layers[q->n_layers - 1].group > widest) widest = q->layers[q->n_layers - 1].group;
    }
    if (!q->n_layers) return poet_fail(err, POET_ERR_INVALID, "quantize: %s has no convolution or linear layer", g->model);
    if (!(q->scratch_f = malloc(8ull * widest))) return poet_fail(err, POET_ERR_NOMEM, "out of memory for the quantizer");
    return POET_OK;
}

/* The engine's optimizer trains everything but the quantized weights. */
static poet_status mask_quantized(poet_quant *q, poet_err *err)
{
    uint64_t P;
    const float *base = poet_dev_weights(q->dev, &P);
    if (!(q->train_mask = malloc(P / 8 + 1))) return poet_fail(err, POET_ERR_NOMEM, "out of memory for the quantizer");
    memset(q->train_mask, 0xff, P / 8 + 1);
    for (int k = 0; k < q->n_layers; k++) {
        const qlayer *l = &q->layers[k];
        uint64_t at = (uint64_t)(l->w - base);
        for (uint64_t i = at; i < at + (uint64_t)l->rows * l->cols; i++) q->train_mask[i / 8] &= (uint8_t)~(1u << (i % 8));
    }
    poet_dev_set_train_mask(q->dev, q->train_mask);
    return POET_OK;
}

/* ---- groups ---- */

static void dequantize_group(qlayer *l, uint64_t g)
{
    uint32_t n = len_of(l, g), t = l->terms[g];
    const int8_t *c = l->codes + g * l->group * T;
    const double *a = l->alpha + g * T;
    float *w = l->w + start_of(l, g);
    for (uint32_t j = 0; j < n; j++) { /* as poet_alq_dequantize sums the packed float scales */
        float s = 0;
        for (uint32_t i = 0; i < t; i++) s += c[j * t + i] > 0 ? (float)a[i] : -(float)a[i];
        w[j] = s;
    }
}

/* Greedy terms for a group from the weights at from. */
static void init_group(qlayer *l, uint64_t g, const float *from, uint32_t terms)
{
    uint32_t n = len_of(l, g);
    l->terms[g] = terms ? (uint8_t)poet_alq_init_group(from + start_of(l, g), n, terms, l->codes + g * l->group * T,
                                                       l->alpha + g * T)
                        : 0;
    /* a group whose residual vanished early keeps fewer terms: its codes are
     * laid out for `terms` columns, so lay them out again for the ones used */
    if (l->terms[g] < terms) {
        int8_t *c = l->codes + g * l->group * T;
        for (uint32_t j = 0; j < n; j++)
            for (uint32_t i = 0; i < l->terms[g]; i++) c[j * l->terms[g] + i] = c[j * terms + i];
    }
    memset(l->ma + g * T, 0, T * sizeof *l->ma);
    dequantize_group(l, g);
}

/* Term i of group g (of t terms) negated: its scale back to positive, its
 * signs and its first moment with it; the group stands for the same weights. */
static void flip_term(qlayer *l, uint64_t g, uint32_t t, uint32_t i)
{
    int8_t *c = l->codes + g * l->group * T;
    l->alpha[g * T + i] = -l->alpha[g * T + i], l->ma[g * T + i].m = -l->ma[g * T + i].m;
    for (uint32_t j = 0; j < len_of(l, g); j++) c[j * t + i] = (int8_t)-c[j * t + i];
}

static void flip_negative(qlayer *l, uint64_t g)
{
    for (uint32_t i = 0; i < l->terms[g]; i++)
        if (l->alpha[g * T + i] < 0) flip_term(l, g, l->terms[g], i);
}

static double corrected_rate(const poet_quant *q, const moments *m, double *h)
{
    *h = (sqrt(m->vmax / q->c2) + EPS) / q->o.lr;
    return m->m / q->c1;
}

static void amsgrad(moments *m, double grad)
{
    m->m = B1 * m->m + (1 - B1) * grad;
    m->v = B2 * m->v + (1 - B2) * grad * grad;
    if (m->v > m->vmax) m->vmax = m->v;
}

/* AMSGrad on the group's scales with g_a = B^T g_w; a scale that turns
 * negative takes its term's signs with it. */
static void coordinate_step(poet_quant *q, qlayer *l, uint64_t g, const float *grad)
{
    uint32_t n = len_of(l, g), t = l->terms[g];
    int8_t *c = l->codes + g * l->group * T;
    for (uint32_t i = 0; i < t; i++) {
        double ga = 0, h;
        for (uint32_t j = 0; j < n; j++) ga += c[j * t + i] * grad[j];
        moments *m = &l->ma[g * T + i];
        amsgrad(m, ga);
        double d = corrected_rate(q, m, &h);
        l->alpha[g * T + i] -= d / h;
    }
    flip_negative(l, g);
}

/* For the group's weights, the quadratic model's curvatures into h and,
 * where target is not NULL, its minimizer w* = w_hat - d/h. */
static void model_target(const poet_quant *q, const qlayer *l, uint64_t g, float *target, float *h)
{
    uint32_t n = len_of(l, g);
    uint64_t s = start_of(l, g);
    for (uint32_t j = 0; j < n; j++) {
        double hj, d = corrected_rate(q, &l->mw[s + j], &hj);
        h[j] = (float)hj;
        if (target) target[j] = (float)(l->w[s + j] - d / hj);
    }
}

static void basis_step(poet_quant *q, qlayer *l, uint64_t g)
{
    uint32_t n = len_of(l, g), t = l->terms[g];
    if (!t) return;
    float *target = q->scratch_f, *h = q->scratch_f + l->group;
    double values[1 << T];
    uint8_t masks[1 << T];
    int8_t *c = l->codes + g * l->group * T;
    double *a = l->alpha + g * T;
    model_target(q, l, g, target, h);
    poet_alq_nearest_codes(a, t, target, n, c, values, masks);
    poet_alq_refit(c, n, t, target, h, a);
    flip_negative(l, g);
    dequantize_group(l, g);
}

/* Removes term i of group g and refits the others to the group's weights. */
static void remove_term(poet_quant *q, qlayer *l, uint64_t g, uint32_t i)
{
    uint32_t n = len_of(l, g), t = l->terms[g];
    int8_t *c = l->codes + g * l->group * T;
    double *a = l->alpha + g * T;
    moments *m = l->ma + g * T;
    for (uint32_t j = 0; j < n; j++)
        for (uint32_t k = 0, o = 0; k < t; k++)
            if (k != i) c[j * (t - 1) + o++] = c[j * t + k];
    for (uint32_t k = i; k + 1 < t; k++) a[k] = a[k + 1], m[k] = m[k + 1];
    l->terms[g] = (uint8_t)(t - 1);
    if (t - 1) { /* the others refit to what the group stood for */
        float *h = q->scratch_f + l->group;
        model_target(q, l, g, NULL, h);
        poet_alq_refit(c, n, t - 1, l->w + start_of(l, g), h, a);
        flip_negative(l, g);
    }
    dequantize_group(l, g);
}

/* ---- accounting ---- */

static uint64_t sign_bits(const poet_quant *q, uint64_t *weights)
{
    uint64_t bits = 0, w = 0;
    for (int k = 0; k < q->n_layers; k++) {
        const qlayer *l = &q->layers[k];
        for (uint64_t g = 0; g < l->n_groups; g++) bits += (uint64_t)l->terms[g] * len_of(l, g);
        w += (uint64_t)l->rows * l->cols;
    }
    if (weights) *weights = w;
    return bits;
}

double poet_quant_bits(const poet_quant *q)
{
    uint64_t w, b = sign_bits(q, &w);
    return (double)b / (double)w;
}

uint64_t poet_quant_bytes(const poet_quant *q)
{
    uint64_t bytes = 0;
    for (int k = 0; k < q->n_layers; k++) {
        const qlayer *l = &q->layers[k];
        bytes += poet_alq_layer_size(l->rows, l->cols, l->group, l->terms).bytes + 4ull * l->rows;
    }
    return bytes;
}

/* ---- pruning (ALQ) ---- */

/* Removes, pooled over every group of every layer, the terms with the
 * smallest modelled loss increase until the sign bits are at most `keep`. */
static poet_status prune_to(poet_quant *q, uint64_t keep, poet_err *err)
{
    uint64_t have = sign_bits(q, NULL), n = 0;
    if (have <= keep) return POET_OK;
    for (int k = 0; k < q->n_layers; k++)
        for (uint64_t g = 0; g < q->layers[k].n_groups; g++) n += q->layers[k].terms[g];
    double *dl = malloc(8 * n);
    uint64_t *order = malloc(8 * n), *where = malloc(8 * n);
    uint8_t *remove = malloc(n);
    if (!dl || !order || !where || !remove) {
        free(dl), free(order), free(where), free(remove);
        return poet_fail(err, POET_ERR_NOMEM, "out of memory for pruning");
    }
    uint64_t c = 0;
    for (int k = 0; k < q->n_layers; k++)
        for (uint64_t g = 0; g < q->layers[k].n_groups; g++)
            for (uint32_t i = 0; i < q->layers[k].terms[g]; i++, c++) {
                const qlayer *l = &q->layers[k];
                double h, d = corrected_rate(q, &l->ma[g * T + i], &h), a = l->alpha[g * T + i];
                dl[c] = -d * a + 0.5 * h * a * a;
                where[c] = (uint64_t)k << 48 | g << 3 | i;
            }
    poet_alq_pick_prune(dl, n, 0, remove, order); /* sorts order, marks none */
    for (uint64_t x = 0, removed = 0; x < n && have - removed > keep; x++) {
        uint64_t wc = where[order[x]];
        removed += len_of(&q->layers[wc >> 48], (wc >> 3) & ((1ull << 45) - 1));
        remove[order[x]] = 1;
    }
    /* highest term first within a group, so that the indices stay valid */
    for (uint64_t x = n; x-- > 0;)
        if (remove[x]) {
            uint64_t wc = where[x];
            remove_term(q, &q->layers[wc >> 48], (wc >> 3) & ((1ull << 45) - 1), (uint32_t)(wc & 7));
        }
    free(dl), free(order), free(where), free(remove);
    return POET_OK;
}

/* ---- STE ---- */

static int by_norm_desc(const void *a, const void *b)
{
    const double *x = a, *y = b;
    return (x[0] < y[0]) - (x[0] > y[0]);
}

/* The latent weights quantized: the same terms in every group, or below
 * one bit one term in the groups of largest norm. */
static poet_status quantize_latent(poet_quant *q, poet_err *err)
{
    double bits = q->o.method == POET_QUANT_BWN ? 1 : q->o.target_bits;
    uint32_t terms = (uint32_t)ceil(bits - 1e-9);
    if (bits >= 1) {
        for (int k = 0; k < q->n_layers; k++)
            for (uint64_t g = 0; g < q->layers[k].n_groups; g++) init_group(&q->layers[k], g, q->layers[k].latent, terms);
        return POET_OK;
    }
    uint64_t n = 0, weights, at = 0;
    for (int k = 0; k < q->n_layers; k++) n += q->layers[k].n_groups;
    double *norm = malloc(16 * n);
    if (!norm) return poet_fail(err, POET_ERR_NOMEM, "out of memory for the quantizer");
    for (int k = 0; k < q->n_layers; k++)
        for (uint64_t g = 0; g < q->layers[k].n_groups; g++, at++) {
            const qlayer *l = &q->layers[k];
            double s = 0;
            for (uint32_t j = 0; j < len_of(l, g); j++) s += (double)l->latent[start_of(l, g) + j] * l->latent[start_of(l, g) + j];
            norm[2 * at] = s, norm[2 * at + 1] = (double)((uint64_t)k << 40 | g);
        }
    qsort(norm, n, 16, by_norm_desc);
    sign_bits(q, &weights);
    double budget = bits * (double)weights;
    for (int k = 0; k < q->n_layers; k++) memset(q->layers[k].terms, 0, q->layers[k].n_groups);
    for (uint64_t x = 0; x < n; x++) {
        uint64_t id = (uint64_t)norm[2 * x + 1];
        qlayer *l = &q->layers[id >> 40];
        uint64_t g = id & ((1ull << 40) - 1);
        bool on = budget >= len_of(l, g);
        if (on) budget -= len_of(l, g);
        init_group(l, g, l->latent, on ? 1 : 0);
    }
    free(norm);
    return POET_OK;
}

/* ---- the steps ---- */

static poet_status step(void *ctx, const float *x, const int32_t *y, poet_err *err)
{
    poet_quant *q = ctx;
    bool basis = (q->step + 1) % q->basis_every == 0;
    float loss;
    poet_status st = poet_dev_gradient(q->dev, x, y, &loss, err);
    if (st) return st;
    q->step++;
    q->c1 = 1 - pow(B1, (double)q->step), q->c2 = 1 - pow(B2, (double)q->step);
    for (int k = 0; k < q->n_layers; k++) {
        qlayer *l = &q->layers[k];
        uint64_t count;
        const float *grad = poet_dev_params(poet_engine_device(q->e), l->node, true, &count);
        for (uint64_t i = 0; i < (uint64_t)l->rows * l->cols; i++) amsgrad(&l->mw[i], grad[i]);
        if (q->o.method != POET_QUANT_ALQ) { /* straight through to the latent weights */
            for (uint64_t i = 0; i < (uint64_t)l->rows * l->cols; i++) {
                double h, d = corrected_rate(q, &l->mw[i], &h);
                l->latent[i] -= (float)(d / h);
            }
            continue;
        }
        for (uint64_t g = 0; g < l->n_groups; g++) {
            coordinate_step(q, l, g, grad + start_of(l, g));
            if (basis) basis_step(q, l, g);
            else dequantize_group(l, g);
        }
    }
    poet_dev_update(q->dev); /* biases and everything not quantized */
    return q->o.method == POET_QUANT_ALQ ? POET_OK : quantize_latent(q, err);
}

poet_status poet_quant_new(poet_engine *e, const poet_graph *g, const poet_quant_options *o, poet_quant **out,
                           poet_err *err)
{
    *out = NULL;
    poet_status st = check_options(o, err);
    if (st) return st;
    poet_quant *q = calloc(1, sizeof *q);
    if (!q) return poet_fail(err, POET_ERR_NOMEM, "out of memory for the quantizer");
    q->e = e, q->dev = poet_engine_device(e), q->o = *o;
    if (!(st = find_layers(q, g, err))) st = mask_quantized(q, err);
    if (!st && o->method == POET_QUANT_ALQ)
        for (int k = 0; k < q->n_layers; k++)
            for (uint64_t gi = 0; gi < q->layers[k].n_groups; gi++) init_group(&q->layers[k], gi, q->layers[k].latent, o->init_terms);
    if (!st && o->method != POET_QUANT_ALQ) st = quantize_latent(q, err);
    if (st) {
        poet_quant_free(q);
        return st;
    }
    *out = q;
    return POET_OK;
}

void poet_quant_free(poet_quant *q)
{
    if (!q) return;
    if (q->train_mask) poet_dev_set_train_mask(q->dev, NULL);
    for (int k = 0; k < q->n_layers; k++) {
        qlayer *l = &q->layers[k];
        free(l->latent), free(l->mw), free(l->terms), free(l->alpha), free(l->ma), free(l->codes);
    }
    free(q->layers), free(q->train_mask), free(q->scratch_f);
    free(q->packed_terms), free(q->packed_bits), free(q->packed_alpha);
    free(q);
}

poet_status poet_quant_train(poet_quant *q, const poet_dataset *d, poet_err *err)
{
    learn_batches b;
    poet_status st = learn_batches_init(&b, q->e, d, "quantize", err);
    uint64_t weights, start_bits = sign_bits(q, &weights);
    q->basis_every = q->o.basis_every > 0 ? q->o.basis_every : 1 << 30;
    for (int ep = 0; ep < q->o.epochs && !st; ep++) {
        /* epochs 1 to P prune (the moments need an epoch first), the rest fine-tune */
        if (q->o.method == POET_QUANT_ALQ && ep >= 1 && ep <= q->o.prune_epochs) {
            double share = (double)ep / q->o.prune_epochs, goal = q->o.target_bits * (double)weights;
            st = prune_to(q, (uint64_t)((double)start_bits - share * ((double)start_bits - goal)), err);
        }
        if (!st) st = learn_batches_epoch(&b, q->o.seed, ep, step, q, err);
    }
    learn_batches_free(&b);
    if (!st && q->o.method == POET_QUANT_ALQ && q->o.prune_epochs > 0)
        st = prune_to(q, (uint64_t)(q->o.target_bits * (double)weights), err);
    return st;
}

bool poet_quant_layer(poet_quant *q, int k, poet_alq_layer *out)
{
    if (k < 0 || k >= q->n_layers) return false;
    qlayer *l = &q->layers[k];
    poet_alq_size s = poet_alq_layer_size(l->rows, l->cols, l->group, l->terms);
    free(q->packed_terms), free(q->packed_bits), free(q->packed_alpha);
    q->packed_terms = malloc(l->n_groups), q->packed_bits = calloc(s.bit_bytes + 1, 1);
    q->packed_alpha = malloc(4 * (s.alphas + 1));
    if (!q->packed_terms || !q->packed_bits || !q->packed_alpha) return false;
    uint8_t *bits = q->packed_bits;
    float *alpha = q->packed_alpha;
    for (uint64_t g = 0; g < l->n_groups; g++) {
        uint32_t n = len_of(l, g), t = l->terms[g];
        const int8_t *c = l->codes + g * l->group * T;
        q->packed_terms[g] = (uint8_t)t;
        for (uint32_t i = 0; i < t; i++, bits += (n + 7) / 8) {
            *alpha++ = (float)l->alpha[g * T + i];
            for (uint32_t j = 0; j < n; j++)
                if (c[j * t + i] > 0) bits[j / 8] |= (uint8_t)(1u << (j % 8));
        }
    }
    uint64_t count;
    const float *p = poet_dev_params(poet_engine_device(q->e), l->node, false, &count);
    *out = (poet_alq_layer){l->rows, l->cols, l->group, q->packed_terms, q->packed_alpha, q->packed_bits,
                            p + (uint64_t)l->rows * l->cols};
    return true;
}
