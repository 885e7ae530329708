/* Deep partial updating, the server side (poet/update.h); the patches it
 * sends are written by src/runtime/patch_write.c. One engine trains every
 * phase: loading a model into it (weights, buffers, zeroed optimizer state)
 * is what "fresh optimizer state" means. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "poet/update.h"

#include "../base/hash.h"

/* A weight (its index among the weights) and its score. */
typedef struct ranked {
    float score;
    uint64_t weight;
} ranked;

struct poet_update_server {
    poet_update_options o;
    poet_engine *e;
    poet_dev *dev;
    uint64_t P, I, S;    /* parameters, of them weights; buffers */
    uint8_t *is_weight;  /* per parameter */
    float *deployed, *deployed_state;
    float *start, *start_state; /* what a round starts from: the deployed model or a fresh initialization */
    float *best, *best_state, *local, *before;
    uint8_t *picked;     /* per weight */
    uint8_t *mask;       /* per parameter, a bit each: what fine-tuning trains */
    struct ranked *order; /* per weight */
    uint8_t *state_image;
    int round, reinit_at; /* examples at the last initialization */
    int rows;
    uint64_t per;
    float *x;
    int32_t *y;
    int *idx, *perm;
};

static const char *const METHOD_NAMES[POET_UPDATE_METHODS] = {"full", "dpu", "gcpu", "rpu", "prune"};

const char *poet_update_method_name(poet_update_method m)
{
    return m >= 0 && m < POET_UPDATE_METHODS ? METHOD_NAMES[m] : "?";
}

bool poet_update_method_parse(const char *name, poet_update_method *m)
{
    for (int i = 0; i < POET_UPDATE_METHODS; i++)
        if (name && strcmp(name, METHOD_NAMES[i]) == 0) return *m = (poet_update_method)i, true;
    return false;
}

/* ---- the model in the engine ---- */

/* Weights and buffers in, optimizer state zeroed, step 0: the state
 * image is the weights, the optimizer state, the buffers and the step. */
static poet_status load_model(poet_update_server *s, const float *w, const float *state, poet_err *err)
{
    size_t np = 4 * s->P, ns = 4 * s->S, len = poet_dev_state_bytes(poet_engine_device(s->e));
    memset(s->state_image, 0, len);
    memcpy(s->state_image, w, np);
    memcpy(s->state_image + len - 8 - ns, state, ns);
    return poet_dev_state_load(poet_engine_device(s->e), s->state_image, len, err);
}

static void save_model(const poet_update_server *s, float *w, float *state)
{
    uint64_t n;
    memcpy(w, poet_dev_weights(s->dev, &n), 4 * s->P);
    memcpy(state, poet_dev_state(s->dev, &n), 4 * s->S);
}

/* Loss and accuracy of a model on examples idx of x, y. */
static poet_status measure(poet_update_server *s, const float *w, const float *state, const float *x,
                           const int32_t *y, const int *idx, int n, double *loss, double *acc, poet_err *err)
{
    poet_status st = load_model(s, w, state, err);
    return st ? st : poet_evaluate(s->e, x, y, idx, n, loss, acc, err);
}

/* ... on validation examples of d's training set. */
static poet_status validate(poet_update_server *s, const float *w, const float *state, const poet_dataset *d,
                            const int *idx, int n, double *loss, double *acc, poet_err *err)
{
    return measure(s, w, state, d->train_x, d->train_y, idx, n, loss, acc, err);
}

/* ---- set-up ---- */

poet_status poet_update_server_new(const poet_engine_config *cfg,
                                   const poet_update_options *o, poet_update_server **out, poet_err *err)
{
    *out = NULL;
    if (!(o->k > 0 && o->k <= 1)) return poet_fail(err, POET_ERR_INVALID, "update: k must be in (0, 1], got %g", o->k);
    if (o->epochs < 1) return poet_fail(err, POET_ERR_INVALID, "update: epochs must be at least 1");
    if (o->method < 0 || o->method >= POET_UPDATE_METHODS) return poet_fail(err, POET_ERR_INVALID, "update: unknown method");
    if (!(o->global_share >= 0 && o->global_share <= 1))
        return poet_fail(err, POET_ERR_INVALID, "update: the global contribution's share must be in [0, 1], got %g",
                         o->global_share);
    poet_update_server *s = calloc(1, sizeof *s);
    if (!s) return poet_fail(err, POET_ERR_NOMEM, "out of memory");
    s->o = *o;
    poet_status st = poet_engine_new(cfg, &s->e, err);
    if (st) {
        free(s);
        return st;
    }
    s->dev = poet_engine_device(s->e);
    int classes;
    poet_dev_batch_shape(poet_engine_device(s->e), &s->rows, &s->per, &classes);
    uint64_t trained;
    poet_dev_weights(s->dev, &s->P);
    poet_dev_state(s->dev, &s->S);
    poet_dev_gradients(s->dev, &trained);
    uint64_t P = s->P, S = s->S + 1;
    s->is_weight = malloc(P);
    s->I = poet_dev_update_weights(s->dev, s->is_weight);
    s->deployed = malloc(4 * P), s->start = malloc(4 * P), s->best = malloc(4 * P);
    s->deployed_state = malloc(4 * S), s->start_state = malloc(4 * S), s->best_state = malloc(4 * S);
    s->local = malloc(4 * P), s->before = malloc(4 * P);
    s->picked = malloc(s->I + 1), s->mask = malloc(P / 8 + 1), s->order = malloc(sizeof *s->order * (s->I + 1));
    s->state_image = malloc(poet_dev_state_bytes(poet_engine_device(s->e)));
    s->x = malloc(4 * (size_t)s->rows * s->per), s->y = malloc(4 * (size_t)s->rows), s->idx = malloc(4 * (size_t)s->rows);
    if (!s->is_weight || !s->deployed || !s->start || !s->best || !s->deployed_state || !s->start_state ||
        !s->best_state || !s->local || !s->before || !s->picked || !s->mask || !s->order ||
        !s->state_image || !s->x || !s->y || !s->idx) {
        poet_update_server_free(s);
        return poet_fail(err, POET_ERR_NOMEM, "out of memory for the update server");
    }
    if (!s->I) {
        poet_update_server_free(s);
        return poet_fail(err, POET_ERR_INVALID, "update: the model has no convolution or linear weights to choose among");
    }
    if (trained != P) { /* the scores pair each weight with its gradient */
        poet_update_server_free(s);
        return poet_fail(err, POET_ERR_INVALID, "update: every parameter must train (the graph has frozen ones)");
    }
    save_model(s, s->deployed, s->deployed_state);
    *out = s;
    return POET_OK;
}

void poet_update_server_free(poet_update_server *s)
{
    if (!s) return;
    poet_engine_free(s->e);
    free(s->is_weight), free(s->deployed), free(s->start), free(s->best), free(s->deployed_state);
    free(s->start_state), free(s->best_state), free(s->local), free(s->before), free(s->picked);
    free(s->mask), free(s->order), free(s->state_image), free(s->x), free(s->y), free(s->idx), free(s->perm);
    free(s);
}

const float *poet_update_deployed(const poet_update_server *s, uint64_t *count)
{
    *count = s->P;
    return s->deployed;
}

const float *poet_update_deployed_state(const poet_update_server *s, uint64_t *count)
{
    *count = s->S;
    return s->deployed_state;
}

const uint8_t *poet_update_image(const poet_update_server *s, size_t *len) { return poet_engine_image(s->e, len); }

poet_status poet_update_accuracy(poet_update_server *s, const float *x, const int32_t *y, const int *idx, int n,
                                 double *accuracy, poet_err *err)
{
    double loss;
    return measure(s, s->deployed, s->deployed_state, x, y, idx, n, &loss, accuracy, err);
}

/* ---- training phases ---- */

static uint64_t round_seed(const poet_update_server *s, uint64_t what)
{
    return mix64(s->o.seed ^ mix64((uint64_t)s->round * 8 + what));
}

/* Epochs over train[0..n) from the model in the engine. With local, adds
 * each step's -(step applied) * (gradient) to it; with val, keeps in
 * best/best_state the model of the least validation loss (the starting one
 * included), and leaves the engine at the last. */
static poet_status train_epochs(poet_update_server *s, const poet_dataset *d, const int *train, int n, const int *val,
                                int n_val, uint64_t seed, float *local, poet_err *err)
{
    poet_status st = POET_OK;
    uint64_t count;
    double best = 0, acc;
    if (val) {
        save_model(s, s->best, s->best_state);
        if ((st = poet_evaluate(s->e, d->train_x, d->train_y, val, n_val, &best, &acc, err))) return st;
    }
    for (int ep = 0; ep < s->o.epochs && !st; ep++) {
        poet_train_order(seed, ep, n, s->perm);
        for (int b = 0; b + s->rows <= n && !st; b += s->rows) {
            for (int r = 0; r < s->rows; r++) s->idx[r] = train[s->perm[b + r]];
            poet_train_gather(s->x, s->y, s->rows, s->per, d->train_x, d->train_y, s->idx);
            if (local) memcpy(s->before, poet_dev_weights(s->dev, &count), 4 * s->P);
            double loss;
            if ((st = poet_engine_step(s->e, s->x, s->y, &loss, err))) break;
            if (local) {
                const float *w = poet_dev_weights(s->dev, &count), *g = poet_dev_gradients(s->dev, &count);
                for (uint64_t i = 0; i < s->P; i++) local[i] += -(w[i] - s->before[i]) * g[i];
            }
        }
        if (!st && val) {
            double loss;
            st = poet_evaluate(s->e, d->train_x, d->train_y, val, n_val, &loss, &acc, err);
            if (!st && loss < best) best = loss, save_model(s, s->best, s->best_state);
        }
    }
    return st;
}

/* ---- which weights ---- */

static int by_score(const void *a, const void *b)
{
    const ranked *x = a, *y = b;
    return x->score > y->score   ? -1
           : x->score < y->score ? 1
                                 : (x->weight > y->weight) - (x->weight < y->weight); /* ties: the lower index first */
}

/* Each weight's score under the round's method, in s->order. */
static void score_weights(poet_update_server *s, poet_update_method m, const float *final)
{
    double gsum = 0, lsum = 0;
    for (uint64_t i = 0; i < s->P; i++)
        if (s->is_weight[i]) {
            double g = (double)final[i] - s->start[i];
            gsum += g * g, lsum += fabs((double)s->local[i]);
        }
    for (uint64_t i = 0, w = 0; i < s->P; i++) {
        if (!s->is_weight[i]) continue;
        double g = (double)final[i] - s->start[i], G = gsum > 0 ? g * g / gsum : 0, L = lsum > 0 ? s->local[i] / lsum : 0;
        double a = s->o.global_share, score = m == POET_UPDATE_DPU      ? a * G + (1 - a) * L
                                              : m == POET_UPDATE_GLOBAL ? G
                                                                        : fabs((double)final[i]);
        s->order[w] = (ranked){(float)score, w};
        w++;
    }
}

/* Picks k*I weights into s->picked (every one under FULL). */
static uint64_t pick(poet_update_server *s, poet_update_method m, const float *final)
{
    uint64_t I = s->I, n = m == POET_UPDATE_FULL ? I : (uint64_t)llround(s->o.k * (double)I);
    if (n < 1) n = 1;
    if (n > I) n = I;
    memset(s->picked, 0, I);
    for (uint64_t i = 0; i < I; i++) s->order[i] = (ranked){0, i};
    if (n < I && m == POET_UPDATE_RANDOM) { /* the first n of a seeded shuffle */
        uint64_t r = round_seed(s, 3);
        for (uint64_t i = 0; i < n; i++) {
            r = mix64(r);
            uint64_t j = i + r % (I - i);
            ranked t = s->order[i];
            s->order[i] = s->order[j], s->order[j] = t;
        }
    } else if (n < I) {
        score_weights(s, m, final);
        qsort(s->order, I, sizeof *s->order, by_score);
    }
    for (uint64_t i = 0; i < n; i++) s->picked[s->order[i].weight] = 1;
    return n;
}

/* Unpicked weights go back to the round's start (zero when pruning); the
 * fine-tuning mask: picked weights and every parameter that is not a weight. */
static void rewind_unpicked(poet_update_server *s, poet_update_method m, float *w)
{
    memset(s->mask, 0, s->P / 8 + 1);
    for (uint64_t i = 0, k = 0; i < s->P; i++) {
        bool train = !s->is_weight[i] || s->picked[k];
        if (s->is_weight[i] && !s->picked[k++]) w[i] = m == POET_UPDATE_PRUNE ? 0.0f : s->start[i];
        if (train) s->mask[i / 8] |= (uint8_t)(1u << (i % 8));
    }
}

/* ---- a round ---- */

static void start_round(poet_update_server *s, int n_train, poet_update_report *r)
{
    r->reinit = s->round > 1 && s->o.reinit && n_train > 2 * s->reinit_at;
    if (s->round == 1 || r->reinit) s->reinit_at = n_train;
    if (!r->reinit) {
        memcpy(s->start, s->deployed, 4 * s->P), memcpy(s->start_state, s->deployed_state, 4 * s->S);
        return;
    }
    poet_patch_init_weights(s->dev, round_seed(s, 1), s->deployed, s->start);
    memcpy(s->start_state, s->deployed_state, 4 * s->S);
}

static poet_status send(poet_update_server *s, poet_update_method m, const float *w, const float *state,
                        poet_update_report *r, uint8_t **patch, size_t *len, poet_err *err)
{
    poet_patch_spec spec = {.round = (uint32_t)s->round,
                            .rest = m == POET_UPDATE_PRUNE ? POET_PATCH_REST_ZERO
                                    : r->reinit            ? POET_PATCH_REST_INIT
                                                           : POET_PATCH_REST_BASE,
                            .seed = r->reinit ? round_seed(s, 1) : 0,
                            .base = s->deployed,
                            .weights = w,
                            .changed = s->picked,
                            .state = state};
    poet_status st = poet_patch_make(s->dev, &spec, patch, len, err);
    if (st) return st;
    memcpy(s->deployed, w, 4 * s->P), memcpy(s->deployed_state, state, 4 * s->S);
    r->sent = true;
    r->patch_bytes = *len;
    return POET_OK;
}

poet_status poet_update_round(poet_update_server *s, const poet_dataset *d, const int *train, int n_train,
                              const int *val, int n_val, uint8_t **patch, size_t *patch_len, poet_update_report *r,
                              poet_err *err)
{
    *patch = NULL, *patch_len = 0;
    memset(r, 0, sizeof *r);
    if (n_train < s->rows || n_val < 1)
        return poet_fail(err, POET_ERR_INVALID, "update: a round needs at least a batch (%d) of training examples and "
                                                "one validation example", s->rows);
    free(s->perm);
    if (!(s->perm = malloc(sizeof *s->perm * (size_t)n_train))) return poet_fail(err, POET_ERR_NOMEM, "out of memory");
    r->round = ++s->round, r->examples = n_train, r->weights = s->I;
    poet_update_method m = s->round == 1 ? POET_UPDATE_FULL : s->o.method; /* the first model goes whole */
    poet_status st = validate(s, s->deployed, s->deployed_state, d, val, n_val, &r->base_loss, &r->base_accuracy, err);
    if (!st) start_round(s, n_train, r);
    /* retrain everything, tracking each weight's contribution */
    memset(s->local, 0, 4 * s->P);
    if (!st) st = load_model(s, s->start, s->start_state, err);
    if (!st) st = train_epochs(s, d, train, n_train, NULL, 0, round_seed(s, 2), s->local, err);
    if (!st) {
        save_model(s, s->best, s->best_state);
        r->changed = pick(s, m, s->best);
        rewind_unpicked(s, m, s->best);
        st = validate(s, s->best, s->best_state, d, val, n_val, &r->rewound_loss, &r->rewound_accuracy, err);
    }
    /* the paper's test: a rewound model worse than the deployed one is not worth fine-tuning */
    bool skip = !st && s->round > 1 && r->changed < s->I && !s->o.always_send &&
                r->rewound_accuracy < r->base_accuracy;
    if (!st && !skip) { /* fine-tune the picked weights alone, from fresh optimizer state */
        poet_dev_set_train_mask(s->dev, s->mask);
        st = train_epochs(s, d, train, n_train, val, n_val, round_seed(s, 4), NULL, err);
        poet_dev_set_train_mask(s->dev, NULL);
        if (!st) st = send(s, m, s->best, s->best_state, r, patch, patch_len, err);
    }
    if (skip) r->changed = 0;
    if (!st) st = validate(s, s->deployed, s->deployed_state, d, val, n_val, &r->loss, &r->accuracy, err);
    return st;
}

/* ---- the patch writer ---- */
