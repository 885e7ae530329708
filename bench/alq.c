/* Multi-bit weights on the 8x8 digits (issue 18): the MLP 64-256-256-10
 * trained in float, then quantized from it to average bit widths of 2, 1,
 * 0.75 and 0.5 by ALQ, by the fixed-bit-width STE baseline, and to 1 bit by
 * BWN (poet/quantize.h), each for the same epochs under the fast planner's
 * schedule at the smallest feasible budget on the m4 profile; the float
 * model trains those epochs too. Reports test accuracy, bits and bytes.
 *
 * usage: poet-alq [SEEDS] [EPOCHS] > report.json */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tests/rtutil.h"

enum { MAX_SEEDS = 16, WIDTHS = 4, ARMS = 3 };
static const double BITS[WIDTHS] = {2, 1, 0.75, 0.5};
static const char *const ARM_NAMES[ARMS] = {"alq", "ste", "bwn"};

static bool fail(const poet_err *err) { return fprintf(stderr, "alq: %s\n", err->msg), false; }

static bool start(rig *r, const poet_graph *g, const float *params, uint64_t seed)
{
    rig_start(r, g, "fast", 0.01, NULL, poet_optimizer_default(POET_OPT_ADAM), seed);
    if (r->ok && params) rt_put_params(r->e, g, params);
    return r->ok;
}

typedef struct cell {
    double acc, bits;
    uint64_t bytes;
    uint64_t groups_with[POET_ALQ_MAX_TERMS + 1]; /* groups of each number of terms, all layers */
    bool run;
} cell;

typedef struct result {
    double fp32;
    uint64_t fp32_bytes;
    cell c[ARMS][WIDTHS];
} result;

static bool dense_epochs(rig *r, const poet_dataset *d, int epochs, uint64_t seed)
{
    poet_err err = {0};
    float *x = malloc(4 * 32 * 64);
    int32_t y[32];
    int *order = malloc(sizeof(int) * (size_t)d->n_train);
    bool ok = true;
    for (int ep = 0; ep < epochs && ok; ep++) {
        poet_train_order(seed, ep, d->n_train, order);
        for (int b = 0; b + 32 <= d->n_train && ok; b += 32) {
            for (int k = 0; k < 32; k++) memcpy(x + k * 64, d->train_x + (size_t)order[b + k] * 64, 256), y[k] = d->train_y[order[b + k]];
            double loss;
            ok = !poet_engine_step(r->e, x, y, &loss, &err);
        }
    }
    free(x), free(order);
    return ok ? true : fail(&err);
}

static bool quantized(const poet_dataset *d, const poet_graph *g, const float *dense, uint64_t seed, int epochs,
                      int arm, double bits, cell *out)
{
    poet_err err = {0};
    rig r;
    poet_quant *q;
    poet_quant_options o = {arm == 0 ? POET_QUANT_ALQ : arm == 1 ? POET_QUANT_STE : POET_QUANT_BWN, 64, 3, bits,
                            epochs, epochs / 3, 10, 1e-3f, seed + 1};
    if (!start(&r, g, dense, seed)) return false;
    double loss;
    if (poet_quant_new(r.e, g, &o, &q, &err) || poet_quant_train(q, d, &err) ||
        poet_evaluate(r.e, d->test_x, d->test_y, NULL, d->n_test, &loss, &out->acc, &err))
        return fail(&err);
    out->bits = poet_quant_bits(q), out->bytes = poet_quant_bytes(q), out->run = true;
    poet_alq_layer l;
    for (int k = 0; poet_quant_layer(q, k, &l); k++)
        for (uint64_t gi = 0; gi < (uint64_t)l.rows * poet_alq_groups_per_row(&l); gi++) out->groups_with[l.terms[gi]]++;
    poet_quant_free(q), rig_free(&r);
    return true;
}

static bool run_seed(const poet_dataset *d, const poet_graph *g, uint64_t seed, int epochs, result *res)
{
    poet_err err = {0};
    rig r;
    uint64_t P = 0;
    for (int v = 0; v < g->n_forward; v++) P += g->nodes[v].params;
    float *dense = malloc(4 * P);
    if (!start(&r, g, NULL, seed) || !dense_epochs(&r, d, epochs, seed)) return false;
    rt_get_params(r.e, g, dense);
    double loss;
    if (!dense_epochs(&r, d, epochs, seed + 1) ||
        poet_evaluate(r.e, d->test_x, d->test_y, NULL, d->n_test, &loss, &res->fp32, &err))
        return fail(&err);
    res->fp32_bytes = 4 * P;
    rig_free(&r);
    for (int a = 0; a < ARMS; a++)
        for (int w = 0; w < WIDTHS; w++)
            if ((a < 2 || BITS[w] == 1) && !quantized(d, g, dense, seed, epochs, a, BITS[w], &res->c[a][w])) return false;
    free(dense);
    return true;
}

int main(int argc, char **argv)
{
    int seeds = argc > 1 ? atoi(argv[1]) : 5, epochs = argc > 2 ? atoi(argv[2]) : 30;
    if (seeds < 1 || seeds > MAX_SEEDS || epochs < 3)
        return fprintf(stderr, "usage: poet-alq [SEEDS 1-%d] [EPOCHS >= 3]\n", MAX_SEEDS), 2;
    poet_dataset d;
    poet_graph g;
    poet_err err = {0};
    if (poet_dataset_load("digits", NULL, &d, &err) || poet_zoo_build("mlp_digits_wide", 32, &g, &err))
        return fprintf(stderr, "alq: %s\n", err.msg), 1;
    static result res[MAX_SEEDS];
    for (int s = 0; s < seeds; s++) {
        fprintf(stderr, "alq: seed %d of %d\n", s + 1, seeds);
        if (!run_seed(&d, &g, 2000 + (uint64_t)s, epochs, &res[s])) return 1;
    }
    double fp = 0;
    for (int s = 0; s < seeds; s++) fp += res[s].fp32;
    printf("{\"model\": \"mlp_digits_wide\", \"seeds\": %d, \"first_seed\": 2000, \"epochs\": %d, \"group\": 64,\n", seeds, epochs);
    printf("  \"train\": %d, \"test\": %d, \"fp32\": {\"mean\": %.4f, \"bytes\": %llu},\n  \"arms\": [\n", d.n_train,
           d.n_test, fp / seeds, (unsigned long long)res[0].fp32_bytes);
    bool first = true;
    for (int a = 0; a < ARMS; a++)
        for (int w = 0; w < WIDTHS; w++) {
            if (!res[0].c[a][w].run) continue;
            double s = 0, lo = 1, hi = 0, bits = 0, bytes = 0;
            for (int k = 0; k < seeds; k++) {
                const cell *c = &res[k].c[a][w];
                s += c->acc, lo = c->acc < lo ? c->acc : lo, hi = c->acc > hi ? c->acc : hi;
                bits += c->bits, bytes += (double)c->bytes;
            }
            printf("%s    {\"arm\": \"%s\", \"target_bits\": %g, \"bits\": %.4f, \"bytes\": %.0f, \"mean\": %.4f, "
                   "\"min\": %.4f, \"max\": %.4f, \"groups_with_terms_seed0\": [",
                   first ? "" : ",\n", ARM_NAMES[a], a == 2 ? 1.0 : BITS[w], bits / seeds, bytes / seeds, s / seeds, lo, hi);
            for (int t = 0; t <= POET_ALQ_MAX_TERMS; t++)
                printf("%s%llu", t ? ", " : "", (unsigned long long)res[0].c[a][w].groups_with[t]);
            printf("]}");
            first = false;
        }
    printf("\n  ]}\n");
    poet_graph_free(&g);
    poet_dataset_free(&d);
    return 0;
}
