/* Multi-bit weights: ALQ's group arithmetic, the packed format
 * (poet/alq.h) and the trainers (poet/quantize.h). */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "rtutil.h"

static uint64_t seed_state;

static float uniform(void) { return rt_uniform(&seed_state); }

/* With as many terms as weights, greedy binarization with refits is exact. */
static void test_sketch_exact(void)
{
    double worst = 0;
    for (int trial = 0; trial < 200; trial++) {
        uint32_t n = 1 + (uint32_t)trial % POET_ALQ_MAX_TERMS;
        float w[POET_ALQ_MAX_TERMS];
        int8_t codes[POET_ALQ_MAX_TERMS * POET_ALQ_MAX_TERMS];
        double a[POET_ALQ_MAX_TERMS];
        for (uint32_t j = 0; j < n; j++) w[j] = uniform();
        uint32_t used = poet_alq_init_group(w, n, n, codes, a);
        for (uint32_t j = 0; j < n; j++) {
            double s = 0;
            for (uint32_t i = 0; i < used; i++) s += a[i] * codes[j * n + i];
            worst = fmax(worst, fabs(s - w[j]));
        }
        for (uint32_t i = 0; i < used; i++) CHECK(a[i] >= 0);
    }
    CHECK_MSG(worst < 1e-6, "I = n leaves an error of %g", worst);
    /* one term is the binary-weight sketch: alpha = mean |w|, b = sign(w) */
    float w[5] = {0.5f, -1.0f, 0.25f, -0.25f, 2.0f};
    int8_t c[5];
    double a;
    CHECK(poet_alq_init_group(w, 5, 1, c, &a) == 1);
    CHECK(fabs(a - 0.8) < 1e-12 && c[0] == 1 && c[1] == -1 && c[4] == 1 && c[3] == -1);
}

/* The weighted refit is a minimum: the gradient of its objective vanishes. */
static void test_refit(void)
{
    enum { N = 40, I = 3 };
    double worst = 0;
    for (int trial = 0; trial < 50; trial++) {
        int8_t codes[N * I];
        float t[N], h[N];
        double a[I];
        for (int j = 0; j < N; j++) {
            t[j] = uniform(), h[j] = 0.1f + (uniform() + 1);
            for (int i = 0; i < I; i++) codes[j * I + i] = uniform() < 0 ? -1 : 1;
        }
        CHECK(poet_alq_refit(codes, N, I, t, h, a));
        for (int i = 0; i < I; i++) {
            double grad = 0, scale = 0;
            for (int j = 0; j < N; j++) {
                double r = t[j];
                for (int k = 0; k < I; k++) r -= a[k] * codes[j * I + k];
                grad += h[j] * r * codes[j * I + i], scale += h[j] * fabs(t[j]);
            }
            worst = fmax(worst, fabs(grad) / scale);
        }
    }
    CHECK_MSG(worst < 1e-9, "weighted least squares leaves a relative gradient of %g", worst);
    /* a repeated term is singular: refused, its scale 0, the fit still exact where it can be */
    int8_t rep[4 * 2] = {1, 1, -1, -1, 1, 1, -1, -1};
    float t[4] = {1, -1, 1, -1};
    double a[2];
    CHECK(!poet_alq_refit(rep, 4, 2, t, NULL, a) && (a[0] == 0 || a[1] == 0) && fabs(a[0] + a[1] - 1) < 1e-12);
}

static double value(const double *a, uint32_t I, const int8_t *c)
{
    double s = 0;
    for (uint32_t i = 0; i < I; i++) s += c[i] > 0 ? a[i] : -a[i];
    return s;
}

static void test_nearest_codes(void)
{
    bool ok = true;
    for (int trial = 0; trial < 300; trial++) {
        uint32_t I = 1 + (uint32_t)trial % POET_ALQ_MAX_TERMS, n = 50;
        double a[POET_ALQ_MAX_TERMS], values[1 << POET_ALQ_MAX_TERMS];
        uint8_t masks[1 << POET_ALQ_MAX_TERMS];
        float t[50];
        int8_t codes[50 * POET_ALQ_MAX_TERMS];
        for (uint32_t i = 0; i < I; i++) a[i] = trial % 7 == 0 ? 0.5 : (uniform() + 1.01) / 2; /* equal ones tie */
        for (uint32_t j = 0; j < n; j++) t[j] = 3 * uniform();
        poet_alq_nearest_codes(a, I, t, n, codes, values, masks);
        for (uint32_t j = 0; j < n; j++) {
            double best = INFINITY;
            for (unsigned m = 0; m < 1u << I; m++) {
                int8_t c[POET_ALQ_MAX_TERMS];
                for (uint32_t i = 0; i < I; i++) c[i] = (m >> i & 1) ? 1 : -1;
                best = fmin(best, fabs(value(a, I, c) - t[j]));
            }
            if (fabs(value(a, I, codes + j * I) - t[j]) != best) ok = false;
        }
    }
    CHECK_MSG(ok, "the sorted search missed the nearest code somewhere");
}

static void test_pick_prune(void)
{
    enum { N = 500 };
    double dl[N];
    uint8_t remove[N];
    uint64_t order[N];
    for (int i = 0; i < N; i++) dl[i] = i % 5 == 0 ? 0.25 : uniform(); /* ties */
    for (uint64_t count = 0; count <= N + 3; count += 37) {
        uint64_t got = poet_alq_pick_prune(dl, N, count, remove, order), marked = 0;
        double worst_removed = -INFINITY, best_kept = INFINITY;
        int last_tied_removed = -1, first_tied_kept = N;
        for (int i = 0; i < N; i++) {
            marked += remove[i];
            if (remove[i]) worst_removed = fmax(worst_removed, dl[i]);
            else best_kept = fmin(best_kept, dl[i]);
            if (dl[i] == 0.25 && remove[i]) last_tied_removed = i;
            if (dl[i] == 0.25 && !remove[i] && first_tied_kept == N) first_tied_kept = i;
        }
        uint64_t want = count < N ? count : N;
        CHECK_MSG(got == want && marked == want, "asked %llu, marked %llu", (unsigned long long)count,
                  (unsigned long long)marked);
        CHECK(worst_removed <= best_kept);
        CHECK(last_tied_removed < first_tied_kept); /* ties go to the lower index */
    }
}

/* A hand-made layer: 2 rows of 10 weights in groups of 4 (4, 4, 2). */
static void test_accounting_and_forward(void)
{
    const uint8_t terms[6] = {2, 0, 1, 3, 1, 0};
    poet_alq_size s = poet_alq_layer_size(2, 10, 4, terms);
    /* scales: 2 + 1 + 3 + 1; one sign byte per term (groups of at most 8);
     * sign bits: 2x4 + 1x2 + 3x4 + 1x4; bytes: 6 counts + 4 x 7 + 7 */
    CHECK(s.alphas == 7 && s.bit_bytes == 7 && s.sign_bits == 26 && s.bytes == 41);
    const uint8_t big[1] = {3};
    s = poet_alq_layer_size(1, 20, 20, big); /* 20 weights: 3 bytes of signs a term */
    CHECK(s.alphas == 3 && s.bit_bytes == 9 && s.sign_bits == 60 && s.bytes == 1 + 12 + 9);

    const float alpha[7] = {0.5f, 0.25f, 2.0f, 1.0f, 0.5f, 0.125f, 4.0f};
    const uint8_t bits[7] = {0x5, 0xF, 0x1, 0x3, 0x0, 0xA, 0x9};
    float bias[2] = {0.5f, -1};
    poet_alq_layer l = {2, 10, 4, terms, alpha, bits, bias};
    poet_err err = {0};
    CHECK(poet_alq_check(&l, &err) == POET_OK);
    float w[20];
    poet_alq_dequantize(&l, w);
    /* row 0, group 0: 0.5 x (+ - + -) + 0.25 x (+ + + +) */
    CHECK(w[0] == 0.75f && w[1] == -0.25f && w[2] == 0.75f && w[3] == -0.25f);
    CHECK(w[4] == 0 && w[7] == 0);                    /* no terms */
    CHECK(w[8] == 2.0f && w[9] == -2.0f);              /* 2 x (+ -) */
    CHECK(w[10] == 1 - 0.5f - 0.125f && w[11] == 1 - 0.5f + 0.125f && w[12] == -1 - 0.5f - 0.125f &&
          w[13] == -1 - 0.5f + 0.125f);
    CHECK(w[14] == 4 && w[15] == -4 && w[16] == -4 && w[17] == 4);
    CHECK(w[18] == 0 && w[19] == 0);
    float x[2 * 10], y[2 * 2];
    for (int i = 0; i < 20; i++) x[i] = uniform();
    poet_alq_forward(&l, x, 2, y);
    double worst = 0;
    for (int b = 0; b < 2; b++)
        for (int r = 0; r < 2; r++) {
            double s2 = bias[r];
            for (int c = 0; c < 10; c++) s2 += (double)w[r * 10 + c] * x[b * 10 + c];
            worst = fmax(worst, fabs(s2 - y[b * 2 + r]));
        }
    CHECK_MSG(worst < 1e-5, "packed product off the dequantized one by %g", worst);
    const uint8_t too_many[6] = {7, 0, 0, 0, 0, 0};
    l.terms = too_many;
    CHECK(poet_alq_check(&l, &err) == POET_ERR_INVALID && strstr(err.msg, "7 terms"));
}

/* ---- the trainers ---- */

static poet_quant_options opts(poet_quant_method m, double bits, int epochs)
{
    return (poet_quant_options){m, 16, 3, bits, epochs, epochs / 2, 5, 1e-3f, 3};
}

/* The engine's weights are what the packed layers decode to, bit for bit. */
static bool engine_is_packed(poet_quant *q, poet_engine *e, const poet_graph *g, int *layers)
{
    poet_alq_layer l;
    bool same = true;
    int k = 0, v = 0;
    for (; poet_quant_layer(q, k, &l); k++) {
        while (g->nodes[v].op != POET_OP_LINEAR) v++;
        uint64_t count;
        const float *w = poet_dev_params(poet_engine_device(e), v++, false, &count);
        float *dq = malloc(4ull * l.rows * l.cols);
        poet_alq_dequantize(&l, dq);
        same = same && !memcmp(dq, w, 4ull * l.rows * l.cols);
        free(dq);
    }
    *layers = k;
    return same;
}

/* A quantized model as the frozen backbone of partial training: the
 * classifier trains in float, the backbone stays what the packed layer
 * decodes to, bit for bit. */
static void test_frozen_backbone(const poet_dataset *d, const poet_graph *g)
{
    poet_err err = {0};
    rig r;
    rig_start(&r, g, "keep-all", 0, NULL, poet_optimizer_default(POET_OPT_ADAM), 8);
    poet_quant *q;
    poet_quant_options o = opts(POET_QUANT_ALQ, 1, 2);
    CHECK(poet_quant_new(r.e, g, &o, &q, &err) == POET_OK && poet_quant_train(q, d, &err) == POET_OK);
    uint64_t P = 0;
    for (int v = 0; v < g->n_forward; v++) P += g->nodes[v].params;
    float *params = malloc(4 * P), *backbone = malloc(4 * 64 * 32);
    rt_get_params(r.e, g, params);
    poet_alq_layer l;
    CHECK(poet_quant_layer(q, 0, &l) && l.rows == 32 && l.cols == 64);
    poet_alq_dequantize(&l, backbone);
    poet_quant_free(q), rig_free(&r);

    poet_graph part;
    CHECK(poet_zoo_build("mlp_digits", 32, &part, &err) == POET_OK && poet_graph_set_trainable(&part, "last:1", &err) == POET_OK);
    rig_start(&r, &part, "keep-all", 0, NULL, poet_optimizer_default(POET_OPT_ADAM), 8);
    poet_engine_free(r.e);
    poet_engine_config cfg = {&part, &r.p, &r.plan.schedule, NULL, poet_optimizer_default(POET_OPT_ADAM), 8, 0, params, NULL, POET_FROZEN_IN_RAM, false};
    CHECK(poet_engine_new(&cfg, &r.e, &err) == POET_OK);
    poet_train_options to = {.epochs = 2};
    poet_train_report rep;
    CHECK_MSG(poet_train(r.e, d, &to, &rep, &err) == POET_OK, "%s", err.msg);
    uint64_t n;
    const float *w0 = poet_dev_params(poet_engine_device(r.e), 1, false, &n), *head = poet_dev_params(poet_engine_device(r.e), 3, false, &n);
    CHECK_MSG(!memcmp(w0, backbone, 4 * 64 * 32), "the frozen multi-bit backbone changed");
    CHECK_MSG(memcmp(head, params + 64 * 32 + 32, 4 * 32 * 10) != 0, "the classifier did not train");
    free(params), free(backbone);
    rig_free(&r);
    poet_graph_free(&part);
}

static void test_trainers(const poet_dataset *d)
{
    poet_graph g;
    poet_err err = {0};
    CHECK(poet_zoo_build("mlp_digits", 32, &g, &err) == POET_OK);
    const uint64_t W = 64 * 32 + 32 * 10;
    struct {
        poet_quant_method m;
        double bits;
    } cases[] = {{POET_QUANT_ALQ, 0.75}, {POET_QUANT_STE, 2}, {POET_QUANT_STE, 0.5}, {POET_QUANT_BWN, 1}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        rig r;
        rig_start(&r, &g, "fast", 0.01, NULL, poet_optimizer_default(POET_OPT_ADAM), 5);
        CHECK(r.ok);
        poet_quant *q;
        poet_quant_options o = opts(cases[c].m, cases[c].bits, 4);
        CHECK_MSG(poet_quant_new(r.e, &g, &o, &q, &err) == POET_OK, "%s", err.msg);
        CHECK_MSG(poet_quant_train(q, d, &err) == POET_OK, "%s", err.msg);
        double bits = poet_quant_bits(q);
        /* at most the target, and within one group (16 weights) of it */
        CHECK_MSG(bits <= cases[c].bits + 1e-12 && bits > cases[c].bits - 16.0 / W,
                  "case %zu: %.4f bits for a target of %g", c, bits, cases[c].bits);
        int layers;
        CHECK_MSG(engine_is_packed(q, r.e, &g, &layers) && layers == 2, "case %zu: engine weights != packed", c);
        double loss, acc;
        CHECK(poet_evaluate(r.e, d->test_x, d->test_y, NULL, d->n_test, &loss, &acc, &err) == POET_OK);
        CHECK_MSG(acc > 0.3, "case %zu: accuracy %.3f, chance 0.1", c, acc);
        if (cases[c].m == POET_QUANT_BWN) { /* one scale a row: every weight of a row has the same magnitude */
            uint64_t n;
            const float *w = poet_dev_params(poet_engine_device(r.e), 1, false, &n);
            bool rows = true;
            for (int row = 0; row < 32; row++)
                for (int j = 1; j < 64; j++) rows = rows && fabsf(w[row * 64 + j]) == fabsf(w[row * 64]);
            CHECK(rows);
        }
        poet_quant_free(q);
        rig_free(&r);
    }
    test_frozen_backbone(d, &g);
    /* convolutions quantize by rows: one term a row under BWN */
    poet_graph cnn;
    CHECK(poet_zoo_build("cnn_digits", 32, &cnn, &err) == POET_OK);
    rig rc;
    rig_start(&rc, &cnn, "keep-all", 0, NULL, poet_optimizer_default(POET_OPT_ADAM), 5);
    poet_quant *qc;
    poet_quant_options bwn = opts(POET_QUANT_BWN, 1, 1);
    CHECK(poet_quant_new(rc.e, &cnn, &bwn, &qc, &err) == POET_OK && poet_quant_train(qc, d, &err) == POET_OK);
    poet_alq_layer conv;
    CHECK(poet_quant_layer(qc, 1, &conv) && conv.rows == 8 && conv.cols == 72 && conv.group == 72);
    CHECK(fabs(poet_quant_bits(qc) - 1) < 1e-12);
    poet_quant_free(qc), rig_free(&rc);
    poet_graph_free(&cnn);
    rig r;
    rig_start(&r, &g, "keep-all", 0, NULL, poet_optimizer_default(POET_OPT_ADAM), 5);
    poet_quant *q = NULL;
    poet_quant_options bad = opts(POET_QUANT_ALQ, 4, 2); /* more than the 3 terms it starts with */
    CHECK(poet_quant_new(r.e, &g, &bad, &q, &err) == POET_ERR_INVALID && !q);
    bad = opts(POET_QUANT_ALQ, 1, 2), bad.init_terms = 7;
    CHECK(poet_quant_new(r.e, &g, &bad, &q, &err) == POET_ERR_INVALID && !q);
    bad = opts(POET_QUANT_ALQ, 1, 2), bad.prune_epochs = 0; /* 3 terms to 1 bit with no pruning */
    CHECK(poet_quant_new(r.e, &g, &bad, &q, &err) == POET_ERR_INVALID && !q && strstr(err.msg, "pruning epoch"));
    rig_free(&r);
    poet_graph_free(&g);
}

/* A multi-bit layer for the firmware (examples/firmware/main.c, --layer):
 * random groups of 0 to 6 terms, and the host's product and dequantized
 * weights, which the device must match bit for bit (tests/device.sh). */
static int write_device_case(const char *in_path, const char *want_path)
{
    enum { R = 24, C = 70, G = 16, PER_ROW = 5, B = 3 };
    static uint8_t terms[R * PER_ROW], bits[R * PER_ROW * POET_ALQ_MAX_TERMS * 2];
    static float alpha[R * PER_ROW * POET_ALQ_MAX_TERMS], bias[R], x[B * C], out[B * R + R * C], w[G];
    static int8_t codes[G * POET_ALQ_MAX_TERMS];
    uint32_t n_alpha = 0, n_bits = 0;
    for (int g = 0; g < R * PER_ROW; g++) {
        uint32_t n = g % PER_ROW == PER_ROW - 1 ? C - (PER_ROW - 1) * G : G, want = (uint32_t)g % 7;
        double a[POET_ALQ_MAX_TERMS];
        for (uint32_t j = 0; j < n; j++) w[j] = uniform();
        uint32_t t = want ? poet_alq_init_group(w, n, want, codes, a) : 0;
        terms[g] = (uint8_t)t;
        for (uint32_t i = 0; i < t; i++, n_bits += (n + 7) / 8) {
            alpha[n_alpha++] = (float)a[i];
            for (uint32_t j = 0; j < n; j++)
                if (codes[j * want + i] > 0) bits[n_bits + j / 8] |= (uint8_t)(1u << (j % 8));
        }
    }
    for (int i = 0; i < R; i++) bias[i] = uniform();
    for (int i = 0; i < B * C; i++) x[i] = uniform();
    poet_alq_layer l = {R, C, G, terms, alpha, bits, bias};
    poet_alq_size size = poet_alq_layer_size(R, C, G, terms);
    if (size.alphas != n_alpha || size.bit_bytes != n_bits) return fprintf(stderr, "test_alq: case accounting\n"), 2;
    poet_alq_forward(&l, x, B, out);
    poet_alq_dequantize(&l, out + B * R);
    uint32_t hdr[5] = {2, R, C, G, B};
    FILE *in = fopen(in_path, "wb"), *want = fopen(want_path, "wb");
    if (!in || !want) return perror("test_alq"), 2;
    fwrite(hdr, sizeof hdr, 1, in), fwrite(terms, sizeof terms, 1, in), fwrite(alpha, 4, n_alpha, in);
    fwrite(bits, 1, n_bits, in), fwrite(bias, sizeof bias, 1, in), fwrite(x, sizeof x, 1, in);
    fwrite(out, sizeof out, 1, want);
    return fclose(in) || fclose(want) ? 2 : 0;
}

int main(int argc, char **argv)
{
    seed_state = 20261204;
    if (argc == 4 && !strcmp(argv[1], "--device-case")) return write_device_case(argv[2], argv[3]);
    printf("test_alq: seed %llu\n", (unsigned long long)seed_state);
    test_sketch_exact();
    test_refit();
    test_nearest_codes();
    test_pick_prune();
    test_accounting_and_forward();
    poet_dataset d;
    rt_fake_digits(&d, 640, 200);
    test_trainers(&d);
    poet_dataset_free(&d);
    return check_report();
}
