/* DRESS-style joint training of nested sparse subnets (poet/dress.h). */
#define _POSIX_C_SOURCE 200809L
#include "poet/dress.h"

#include <stdlib.h>
#include <string.h>

#include "poet/device.h"
#include "batches.h"

typedef struct layer {
    int node;
    uint32_t rows, cols;
    float *w;       /* the engine's weights */
    float *dense;   /* their dense values while a level runs */
    uint16_t *rank; /* of each weight in its row's magnitude order */
} layer;

typedef struct grad {
    float *g, *acc; /* a node's gradients in the engine, and their sum over the levels */
    uint64_t n;
    int layer; /* the sparse layer whose weights lead this node's parameters, or -1 */
} grad;

struct poet_dress {
    poet_engine *e;
    poet_dev *dev;
    poet_dress_options o;
    double weight[POET_SPARSE_MAX_LEVELS]; /* of each level's gradient, summing to 1 */
    int n_layers, n_grads;
    layer *layers;
    grad *grads;
    bool fixed;            /* the ranks are held, not re-derived from the weights */
    uint8_t *train_mask;   /* then: the engine's, which keeps pruned weights and their optimizer state */
    uint16_t *order;
};

static poet_status check_options(const poet_dress_options *o, poet_err *err)
{
    if (!o->n_levels || o->n_levels > POET_SPARSE_MAX_LEVELS)
        return poet_fail(err, POET_ERR_INVALID, "dress: %u levels, need 1 to %d", o->n_levels, POET_SPARSE_MAX_LEVELS);
    for (uint32_t k = 0; k < o->n_levels; k++) {
        if (o->sparsity_bp[k] >= 10000 || (k && o->sparsity_bp[k] <= o->sparsity_bp[k - 1]))
            return poet_fail(err, POET_ERR_INVALID, "dress: sparsities must increase and stay below 100%% (level %u)", k);
        if (!(o->loss_weight[k] >= 0))
            return poet_fail(err, POET_ERR_INVALID, "dress: level %u's loss weight is negative", k);
    }
    if (o->epochs < 0) return poet_fail(err, POET_ERR_INVALID, "dress: %d epochs", o->epochs);
    return POET_OK;
}

static void set_weights(poet_dress *t, const poet_dress_options *o)
{
    double sum = 0;
    for (uint32_t k = 0; k < o->n_levels; k++) sum += o->loss_weight[k];
    for (uint32_t k = 0; k < o->n_levels; k++) t->weight[k] = sum > 0 ? o->loss_weight[k] / sum : 1.0 / o->n_levels;
}

static poet_status find_layers(poet_dress *t, const poet_graph *g, poet_err *err)
{
    t->layers = calloc((size_t)g->n_forward, sizeof *t->layers);
    t->grads = calloc((size_t)g->n_forward, sizeof *t->grads);
    if (!t->layers || !t->grads) return poet_fail(err, POET_ERR_NOMEM, "out of memory for the dress trainer");
    uint32_t widest = 1;
    for (int v = 0; v < g->n_forward; v++) {
        const poet_node *n = &g->nodes[v];
        if (!n->params) continue;
        grad *gr = &t->grads[t->n_grads++];
        gr->g = poet_dev_params(poet_engine_device(t->e), v, true, &gr->n), gr->layer = -1;
        if (!gr->g || gr->n != n->params)
            return poet_fail(err, POET_ERR_INVALID, "dress: node %s has frozen parameters; every one must train",
                             n->name);
        if (!(gr->acc = malloc(4 * gr->n))) return poet_fail(err, POET_ERR_NOMEM, "out of memory for the dress trainer");
        uint64_t rows64, cols64;
        if (!poet_weight_rows(n, &rows64, &cols64)) continue;
        if (cols64 > POET_SPARSE_MAX_COLS)
            return poet_fail(err, POET_ERR_LIMIT, "dress: %s has %llu weights a row, at most %u (16-bit columns)",
                             n->name, (unsigned long long)cols64, POET_SPARSE_MAX_COLS);
        uint32_t rows = (uint32_t)rows64, cols = (uint32_t)cols64;
        layer *l = &t->layers[t->n_layers];
        gr->layer = t->n_layers++;
        uint64_t count;
        *l = (layer){v, rows, cols, poet_dev_params(poet_engine_device(t->e), v, false, &count), NULL, NULL};
        l->dense = malloc(4ull * rows * cols), l->rank = malloc(2ull * rows * cols);
        if (!l->dense || !l->rank) return poet_fail(err, POET_ERR_NOMEM, "out of memory for the dress trainer");
        if (cols > widest) widest = cols;
    }
    if (!t->n_layers) return poet_fail(err, POET_ERR_INVALID, "dress: %s has no convolution or linear layer to make sparse", g->model);
    if (!(t->order = malloc(2ull * widest))) return poet_fail(err, POET_ERR_NOMEM, "out of memory for the dress trainer");
    return POET_OK;
}

poet_status poet_dress_new(poet_engine *e, const poet_graph *g, const poet_dress_options *o, poet_dress **out,
                           poet_err *err)
{
    *out = NULL;
    poet_status st = check_options(o, err);
    if (st) return st;
    poet_dress *t = calloc(1, sizeof *t);
    if (!t) return poet_fail(err, POET_ERR_NOMEM, "out of memory for the dress trainer");
    t->e = e, t->dev = poet_engine_device(e), t->o = *o;
    set_weights(t, o);
    st = find_layers(t, g, err);
    if (st) {
        poet_dress_free(t);
        return st;
    }
    *out = t;
    return POET_OK;
}

void poet_dress_free(poet_dress *t)
{
    if (!t) return;
    if (t->train_mask) poet_dev_set_train_mask(t->dev, NULL);
    free(t->train_mask);
    for (int i = 0; i < t->n_layers; i++) free(t->layers[i].dense), free(t->layers[i].rank);
    for (int i = 0; i < t->n_grads; i++) free(t->grads[i].acc);
    free(t->layers), free(t->grads), free(t->order);
    free(t);
}

int poet_dress_layers(const poet_dress *t, int *nodes, int max)
{
    int n = 0;
    for (; n < t->n_layers && n < max; n++) nodes[n] = t->layers[n].node;
    return n;
}

/* Each weight's place in its row's magnitude order, from the weights now. */
static void rank_weights(poet_dress *t)
{
    if (t->fixed) return;
    for (int i = 0; i < t->n_layers; i++) {
        layer *l = &t->layers[i];
        for (uint32_t r = 0; r < l->rows; r++) {
            poet_sparse_row_order(l->w + (uint64_t)r * l->cols, l->cols, t->order);
            for (uint32_t j = 0; j < l->cols; j++) l->rank[(uint64_t)r * l->cols + t->order[j]] = (uint16_t)j;
        }
    }
}

/* The engine's weights become level k's subnet; the dense ones wait aside. */
static void enter_level(poet_dress *t, uint32_t k)
{
    for (int i = 0; i < t->n_layers; i++) {
        layer *l = &t->layers[i];
        uint32_t keep = poet_sparse_keep(l->cols, t->o.sparsity_bp[k]);
        for (uint64_t w = 0; w < (uint64_t)l->rows * l->cols; w++) {
            l->dense[w] = l->w[w];
            if (l->rank[w] >= keep) l->w[w] = 0;
        }
    }
}

static void leave_level(poet_dress *t)
{
    for (int i = 0; i < t->n_layers; i++) {
        layer *l = &t->layers[i];
        memcpy(l->w, l->dense, 4ull * l->rows * l->cols);
    }
}

/* acc += weight x level k's gradient, zero outside the level's weights. */
static void accumulate(poet_dress *t, uint32_t k)
{
    float wk = (float)t->weight[k];
    for (int i = 0; i < t->n_grads; i++) {
        grad *gr = &t->grads[i];
        const layer *l = gr->layer >= 0 ? &t->layers[gr->layer] : NULL;
        uint64_t sparse = l ? (uint64_t)l->rows * l->cols : 0;
        uint32_t keep = l ? poet_sparse_keep(l->cols, t->o.sparsity_bp[k]) : 0;
        for (uint64_t j = 0; j < gr->n; j++) {
            bool kept = j >= sparse || l->rank[j] < keep;
            gr->acc[j] += kept ? wk * gr->g[j] : 0.0f;
        }
    }
}

static poet_status joint_step(void *ctx, const float *x, const int32_t *y, poet_err *err)
{
    poet_dress *t = ctx;
    rank_weights(t);
    for (int i = 0; i < t->n_grads; i++) memset(t->grads[i].acc, 0, 4 * t->grads[i].n);
    for (uint32_t k = 0; k < t->o.n_levels; k++) {
        float loss;
        enter_level(t, k);
        poet_status st = poet_dev_gradient(t->dev, x, y, &loss, err);
        leave_level(t);
        if (st) return st;
        accumulate(t, k);
    }
    for (int i = 0; i < t->n_grads; i++) memcpy(t->grads[i].g, t->grads[i].acc, 4 * t->grads[i].n);
    poet_dev_update(t->dev);
    return POET_OK;
}

poet_status poet_dress_train(poet_dress *t, const poet_dataset *d, poet_err *err)
{
    learn_batches b;
    poet_status st = learn_batches_init(&b, t->e, d, "dress", err);
    for (int ep = 0; ep < t->o.epochs && !st; ep++) st = learn_batches_epoch(&b, t->o.seed, ep, joint_step, t, err);
    learn_batches_free(&b);
    return st;
}

/* The engine trains only what the held ranks keep at level k (everything
 * that is not a sparse layer's weight, and those of its weights). */
static poet_status hold_mask(poet_dress *t, uint32_t level, poet_err *err)
{
    uint64_t P;
    const float *base = poet_dev_weights(t->dev, &P);
    if (!t->train_mask && !(t->train_mask = malloc(P / 8 + 1)))
        return poet_fail(err, POET_ERR_NOMEM, "out of memory for the dress trainer");
    memset(t->train_mask, 0xff, P / 8 + 1);
    for (int i = 0; i < t->n_layers; i++) {
        const layer *l = &t->layers[i];
        uint64_t at = (uint64_t)(l->w - base);
        uint32_t keep = poet_sparse_keep(l->cols, t->o.sparsity_bp[level]);
        for (uint64_t w = 0; w < (uint64_t)l->rows * l->cols; w++)
            if (l->rank[w] >= keep) t->train_mask[(at + w) / 8] &= (uint8_t)~(1u << ((at + w) % 8));
    }
    poet_dev_set_train_mask(t->dev, t->train_mask);
    return POET_OK;
}

poet_status poet_dress_prune(poet_dress *t, uint32_t level, poet_err *err)
{
    if (level >= t->o.n_levels) return poet_fail(err, POET_ERR_INVALID, "dress: level %u of %u", level, t->o.n_levels);
    rank_weights(t);
    poet_status st = hold_mask(t, level, err);
    if (st) return st;
    enter_level(t, level);
    /* the pruned model: its kept weights rank first, and stay first */
    for (int i = 0; i < t->n_layers; i++) {
        layer *l = &t->layers[i];
        uint32_t keep = poet_sparse_keep(l->cols, t->o.sparsity_bp[level]);
        for (uint64_t w = 0; w < (uint64_t)l->rows * l->cols; w++)
            if (l->rank[w] >= keep) l->rank[w] = (uint16_t)(l->cols - 1);
    }
    t->fixed = true;
    return POET_OK;
}

poet_status poet_dress_evaluate(poet_dress *t, const poet_dataset *d, uint32_t level, double *loss,
                                double *accuracy, poet_err *err)
{
    if (level >= t->o.n_levels) return poet_fail(err, POET_ERR_INVALID, "dress: level %u of %u", level, t->o.n_levels);
    rank_weights(t);
    enter_level(t, level);
    poet_status st = poet_evaluate(t->e, d->test_x, d->test_y, NULL, d->n_test, loss, accuracy, err);
    leave_level(t);
    return st;
}
