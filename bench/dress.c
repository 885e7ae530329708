/* DRESS-style nested sparse subnets on the 8x8 digits (issue 18): the MLP
 * 64-256-256-10 trained dense, then at the sparsity levels 0/50/75/90%
 * three ways, each from the same dense model and for the same epochs:
 *   - one-shot: the dense model pruned per row by magnitude, not retrained;
 *   - per level: pruned to the level and fine-tuned alone (one model each);
 *   - DRESS-style: all levels trained jointly, one backbone (poet/dress.h).
 * Every model trains under the fast planner's schedule at the smallest
 * feasible budget on the m4 profile. The DRESS-style backbone is then packed
 * row-sorted (poet/sparse.h) and its accuracy measured again through the
 * packed layers; the level switch is timed against loading a separate model
 * of the level (its packed rows read from a file).
 *
 * usage: poet-dress [SEEDS] [EPOCHS] > report.json */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../tests/rtutil.h"

enum { LEVELS = 4, LAYERS = 3, MAX_SEEDS = 16 };
static const uint16_t SPARSITY[LEVELS] = {0, 5000, 7500, 9000};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, by_value);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static poet_dress_options levels(uint32_t first, uint32_t n, int epochs, uint64_t seed)
{
    poet_dress_options o = {.n_levels = n, .epochs = epochs, .seed = seed};
    for (uint32_t k = 0; k < n; k++) o.sparsity_bp[k] = SPARSITY[first + k];
    return o;
}

static bool fail(const poet_err *err) { return fprintf(stderr, "dress: %s\n", err->msg), false; }

/* An engine under the fast planner's schedule at the smallest budget,
 * starting from params (NULL: the seed's initialization). */
static bool start(rig *r, const poet_graph *g, const float *params, uint64_t seed)
{
    rig_start(r, g, "fast", 0.01, NULL, poet_optimizer_default(POET_OPT_ADAM), seed);
    if (r->ok && params) rt_put_params(r->e, g, params);
    return r->ok;
}

typedef struct packed {
    poet_sparse_layer l[LAYERS];
    float *values[LAYERS];
    uint16_t *columns[LAYERS];
    uint64_t bytes, dense_bytes, weights;
} packed;

static bool pack(packed *pk, poet_engine *e, const poet_graph *g, const int *nodes)
{
    poet_err err = {0};
    pk->bytes = pk->dense_bytes = pk->weights = 0;
    for (int i = 0; i < LAYERS; i++) {
        const poet_node *n = &g->nodes[nodes[i]];
        uint64_t count;
        const float *w = poet_dev_params(poet_engine_device(e), nodes[i], false, &count);
        uint32_t rows = (uint32_t)n->attrs.features, cols = (uint32_t)(count / rows - 1); /* with the bias */
        pk->values[i] = malloc(4ull * rows * cols), pk->columns[i] = malloc(2ull * rows * cols);
        if (poet_sparse_pack(w, w + (uint64_t)rows * cols, rows, cols, SPARSITY, LEVELS, pk->values[i],
                             pk->columns[i], &pk->l[i], &err))
            return fail(&err);
        pk->bytes += poet_sparse_bytes(rows, cols) + 4ull * rows;
        pk->dense_bytes += 4ull * rows * cols + 4ull * rows;
        pk->weights += (uint64_t)rows * cols;
    }
    return true;
}

static void unpack(packed *pk)
{
    for (int i = 0; i < LAYERS; i++) free(pk->values[i]), free(pk->columns[i]);
}

static void switch_to(packed *pk, uint32_t level)
{
    for (int i = 0; i < LAYERS; i++) poet_sparse_set_level(&pk->l[i], level, NULL);
}

/* Test accuracy through the packed layers (ReLU between them). */
static double packed_accuracy(const packed *pk, const poet_dataset *d)
{
    float h1[256], h2[256], out[16];
    int ok = 0;
    for (int i = 0; i < d->n_test; i++) {
        poet_sparse_forward(&pk->l[0], d->test_x + (size_t)i * 64, 1, h1);
        for (uint32_t j = 0; j < pk->l[0].rows; j++) h1[j] = h1[j] > 0 ? h1[j] : 0;
        poet_sparse_forward(&pk->l[1], h1, 1, h2);
        for (uint32_t j = 0; j < pk->l[1].rows; j++) h2[j] = h2[j] > 0 ? h2[j] : 0;
        poet_sparse_forward(&pk->l[2], h2, 1, out);
        int best = 0;
        for (int c = 1; c < 10; c++)
            if (out[c] > out[best]) best = c;
        ok += best == d->test_y[i];
    }
    return (double)ok / d->n_test;
}

/* Median seconds to switch every layer's level, and to read a separate
 * model of level k (its rows' kept values and columns) from a file. */
static void time_switch(packed *pk, double *switch_s, double *load_s, uint64_t *separate_bytes)
{
    enum { SWITCHES = 20001, LOADS = 201 };
    static double t[SWITCHES];
    for (int i = 0; i < SWITCHES; i++) {
        double t0 = now_s();
        switch_to(pk, (uint32_t)(i % LEVELS));
        t[i] = now_s() - t0;
    }
    *switch_s = median(t, SWITCHES);
    char path[] = "/tmp/poet-dress-XXXXXX";
    int fd = mkstemp(path);
    uint64_t level_bytes[LEVELS] = {0};
    for (int k = 0; k < LEVELS; k++)
        for (int i = 0; i < LAYERS; i++) {
            const poet_sparse_layer *l = &pk->l[i];
            for (uint32_t r = 0; r < l->rows; r++) {
                uint64_t o = (uint64_t)r * l->cols;
                level_bytes[k] += (uint64_t)write(fd, l->values + o, 4ull * l->keep[k]);
                level_bytes[k] += (uint64_t)write(fd, l->columns + o, 2ull * l->keep[k]);
            }
            level_bytes[k] += (uint64_t)write(fd, l->bias, 4ull * l->rows);
        }
    *separate_bytes = 0;
    for (int k = 0; k < LEVELS; k++) *separate_bytes += level_bytes[k];
    char *buf = malloc(level_bytes[0]);
    for (int i = 0; i < LOADS; i++) {
        int k = i % LEVELS;
        uint64_t off = 0;
        for (int j = 0; j < k; j++) off += level_bytes[j];
        double t0 = now_s();
        ssize_t got = pread(fd, buf, level_bytes[k], (off_t)off);
        t[i] = now_s() - t0;
        if (got != (ssize_t)level_bytes[k]) t[i] = -1;
    }
    *load_s = median(t, LOADS);
    free(buf);
    close(fd);
    unlink(path);
}

typedef struct result {
    double dense, oneshot[LEVELS], per_level[LEVELS], dress[LEVELS], packed[LEVELS];
} result;

static bool accuracies(poet_dress *t, const poet_dataset *d, double *acc)
{
    poet_err err = {0};
    for (uint32_t k = 0; k < LEVELS; k++) {
        double loss;
        if (poet_dress_evaluate(t, d, k, &loss, &acc[k], &err)) return fail(&err);
    }
    return true;
}

/* One seed: the dense model, then the three ways to its levels. */
static bool run_seed(const poet_dataset *d, const poet_graph *g, uint64_t seed, int epochs, result *res,
                     packed *pk)
{
    poet_err err = {0};
    rig r;
    poet_dress *t;
    uint64_t P = 0;
    for (int v = 0; v < g->n_forward; v++) P += g->nodes[v].params;
    float *dense = malloc(4 * P);
    poet_dress_options o = levels(0, 1, epochs, seed);
    if (!start(&r, g, NULL, seed) || poet_dress_new(r.e, g, &o, &t, &err) || poet_dress_train(t, d, &err) ||
        poet_dress_evaluate(t, d, 0, &(double){0}, &res->dense, &err))
        return fail(&err);
    rt_get_params(r.e, g, dense);
    poet_dress_free(t), rig_free(&r);

    o = levels(0, LEVELS, epochs, seed + 1);
    if (!start(&r, g, dense, seed) || poet_dress_new(r.e, g, &o, &t, &err)) return fail(&err);
    if (!accuracies(t, d, res->oneshot)) return false;
    if (poet_dress_train(t, d, &err)) return fail(&err);
    if (!accuracies(t, d, res->dress)) return false;
    int nodes[LAYERS];
    if (poet_dress_layers(t, nodes, LAYERS) != LAYERS || !pack(pk, r.e, g, nodes)) return false;
    for (uint32_t k = 0; k < LEVELS; k++) switch_to(pk, k), res->packed[k] = packed_accuracy(pk, d);
    poet_dress_free(t), rig_free(&r);

    for (uint32_t k = 0; k < LEVELS; k++) {
        o = levels(k, 1, epochs, seed + 1);
        if (!start(&r, g, dense, seed) || poet_dress_new(r.e, g, &o, &t, &err) || poet_dress_prune(t, 0, &err) ||
            poet_dress_train(t, d, &err) || poet_dress_evaluate(t, d, 0, &(double){0}, &res->per_level[k], &err))
            return fail(&err);
        poet_dress_free(t), rig_free(&r);
    }
    free(dense);
    return true;
}

static void print_stats(const char *name, const result *res, int n, size_t field, bool last)
{
    printf("    \"%s\": [", name);
    for (int k = 0; k < LEVELS; k++) {
        double s = 0, lo = 1, hi = 0;
        for (int i = 0; i < n; i++) {
            double a = ((const double *)((const char *)&res[i] + field))[k];
            s += a, lo = a < lo ? a : lo, hi = a > hi ? a : hi;
        }
        printf("%s{\"mean\": %.4f, \"min\": %.4f, \"max\": %.4f}", k ? ", " : "", s / n, lo, hi);
    }
    printf("]%s\n", last ? "" : ",");
}

int main(int argc, char **argv)
{
    int seeds = argc > 1 ? atoi(argv[1]) : 5, epochs = argc > 2 ? atoi(argv[2]) : 30;
    if (seeds < 1 || seeds > MAX_SEEDS || epochs < 1)
        return fprintf(stderr, "usage: poet-dress [SEEDS 1-%d] [EPOCHS >= 1]\n", MAX_SEEDS), 2;
    poet_dataset d;
    poet_graph g;
    poet_err err = {0};
    if (poet_dataset_load("digits", NULL, &d, &err) || poet_zoo_build("mlp_digits_wide", 32, &g, &err))
        return fprintf(stderr, "dress: %s\n", err.msg), 1;
    static result res[MAX_SEEDS];
    packed pk = {0};
    double switch_s = 0, load_s = 0;
    uint64_t separate = 0;
    for (int s = 0; s < seeds; s++) {
        fprintf(stderr, "dress: seed %d of %d\n", s + 1, seeds);
        if (!run_seed(&d, &g, 1000 + (uint64_t)s, epochs, &res[s], &pk)) return 1;
        if (s == 0) time_switch(&pk, &switch_s, &load_s, &separate);
        if (s + 1 < seeds) unpack(&pk);
    }
    printf("{\"model\": \"mlp_digits_wide\", \"seeds\": %d, \"first_seed\": 1000, \"epochs\": %d, \"levels\": [0, 50, 75, 90],\n",
           seeds, epochs);
    printf("  \"train\": %d, \"test\": %d,\n  \"accuracy\": {\n", d.n_train, d.n_test);
    double dense = 0;
    for (int s = 0; s < seeds; s++) dense += res[s].dense;
    printf("    \"dense\": %.4f,\n", dense / seeds);
    print_stats("one-shot", res, seeds, offsetof(result, oneshot), false);
    print_stats("per-level", res, seeds, offsetof(result, per_level), false);
    print_stats("dress", res, seeds, offsetof(result, dress), false);
    print_stats("dress-packed", res, seeds, offsetof(result, packed), true);
    printf("  },\n  \"switch_s\": %.3e, \"load_separate_s\": %.3e,\n", switch_s, load_s);
    printf("  \"packed_bytes\": %llu, \"dense_bytes\": %llu, \"sparse_weights\": %llu, \"separate_models_bytes\": %llu}\n",
           (unsigned long long)pk.bytes, (unsigned long long)pk.dense_bytes, (unsigned long long)pk.weights,
           (unsigned long long)separate);
    unpack(&pk);
    poet_graph_free(&g);
    poet_dataset_free(&d);
    return 0;
}
