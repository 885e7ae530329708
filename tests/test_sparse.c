/* DRESS-style nested sparse subnets: the packed format (poet/sparse.h) and
 * the joint trainer (poet/dress.h). */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "rtutil.h"

static const uint16_t LEVELS[] = {0, 5000, 7500, 9000};
enum { N_LEVELS = 4 };

static uint64_t seed_state;

static float uniform(void) { return rt_uniform(&seed_state); }

/* Row r of w with about a third of its magnitudes repeated, so ties count. */
static void random_matrix(float *w, uint32_t rows, uint32_t cols)
{
    for (uint64_t i = 0; i < (uint64_t)rows * cols; i++) {
        w[i] = uniform();
        if (i % cols && uniform() < -0.33f) w[i] = uniform() < 0 ? -w[i - 1] : w[i - 1];
    }
}

static const float *sort_row;

static int by_magnitude(const void *a, const void *b)
{
    uint16_t x = *(const uint16_t *)a, y = *(const uint16_t *)b;
    float mx = fabsf(sort_row[x]), my = fabsf(sort_row[y]);
    if (mx != my) return mx > my ? -1 : 1;
    return x < y ? -1 : x > y;
}

static void test_keep(void)
{
    bool ok = true;
    for (uint32_t cols = 1; cols <= 700; cols++)
        for (uint32_t s = 0; s < 10000; s += 125) {
            /* ceil((1 - s) n) in exact rational arithmetic */
            uint64_t num = (uint64_t)(10000 - s) * cols;
            uint32_t want = (uint32_t)((num + 9999) / 10000);
            if (poet_sparse_keep(cols, s) != want) ok = false;
        }
    CHECK(ok);
    CHECK(poet_sparse_keep(256, 9000) == 26);
    CHECK(poet_sparse_keep(64, 7500) == 16);
    CHECK(poet_sparse_bytes(256, 64) == 256 * 64 * 6);
}

/* The heap sort's order equals qsort's under the same rule. */
static void test_order(void)
{
    bool ok = true;
    for (int trial = 0; trial < 200; trial++) {
        uint32_t cols = 1 + (uint32_t)((uniform() + 1) * 149.5f);
        float row[300];
        uint16_t got[300], want[300];
        random_matrix(row, 1, cols);
        poet_sparse_row_order(row, cols, got);
        for (uint32_t c = 0; c < cols; c++) want[c] = (uint16_t)c;
        sort_row = row;
        qsort(want, cols, sizeof *want, by_magnitude);
        if (memcmp(got, want, 2 * cols)) ok = false;
    }
    CHECK_MSG(ok, "heap sort order differs from qsort's");
}

static void test_masks(void)
{
    enum { R = 37, C = 91 };
    float w[R * C];
    uint8_t mask[N_LEVELS][R * C];
    uint16_t order[C];
    random_matrix(w, R, C);
    for (int k = 0; k < N_LEVELS; k++) poet_sparse_mask(w, R, C, poet_sparse_keep(C, LEVELS[k]), mask[k], order);
    bool counts = true, nested = true, largest = true;
    for (int k = 0; k < N_LEVELS; k++)
        for (int r = 0; r < R; r++) {
            uint32_t n = 0;
            float smallest_kept = INFINITY, largest_dropped = 0;
            for (int c = 0; c < C; c++) {
                float m = fabsf(w[r * C + c]);
                n += mask[k][r * C + c];
                if (mask[k][r * C + c]) smallest_kept = fminf(smallest_kept, m);
                else largest_dropped = fmaxf(largest_dropped, m);
                if (k && mask[k][r * C + c] && !mask[k - 1][r * C + c]) nested = false;
            }
            if (n != poet_sparse_keep(C, LEVELS[k])) counts = false;
            if (largest_dropped > smallest_kept) largest = false;
        }
    CHECK_MSG(counts, "a row of some level does not keep exactly its count");
    CHECK_MSG(nested, "a sparser level keeps a weight a denser one drops");
    CHECK_MSG(largest, "a dropped weight is larger than a kept one");
}

static uint32_t checksum(const void *p, size_t n)
{
    const uint8_t *b = p;
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 16777619u;
    return h;
}

/* Sorted-row inference at each level against the dense product with the
 * masked weights (in double), and a switch that leaves the weights alone. */
static void test_forward(void)
{
    enum { R = 48, C = 130, B = 5 };
    float w[R * C], bias[R], x[B * C], y[B * R], values[R * C];
    uint16_t columns[R * C], order[C];
    uint8_t mask[R * C];
    random_matrix(w, R, C);
    for (int i = 0; i < R; i++) bias[i] = uniform();
    for (int i = 0; i < B * C; i++) x[i] = uniform();
    poet_sparse_layer l;
    poet_err err = {0};
    CHECK(poet_sparse_pack(w, bias, R, C, LEVELS, N_LEVELS, values, columns, &l, &err) == POET_OK);
    uint32_t before = checksum(values, sizeof values) ^ checksum(columns, sizeof columns);
    double worst = 0;
    for (uint32_t k = 0; k < N_LEVELS; k++) {
        CHECK(poet_sparse_set_level(&l, k, &err) == POET_OK && l.level == k);
        poet_sparse_forward(&l, x, B, y);
        poet_sparse_mask(w, R, C, l.keep[k], mask, order);
        for (int b = 0; b < B; b++)
            for (int r = 0; r < R; r++) {
                double s = bias[r];
                for (int c = 0; c < C; c++) s += mask[r * C + c] ? (double)w[r * C + c] * x[b * C + c] : 0;
                worst = fmax(worst, fabs(s - y[b * R + r]));
            }
    }
    CHECK_MSG(worst < 1e-5, "sorted-row product off the masked dense one by %g", worst);
    CHECK((checksum(values, sizeof values) ^ checksum(columns, sizeof columns)) == before);
    CHECK(poet_sparse_set_level(&l, N_LEVELS, &err) == POET_ERR_INVALID && l.level == N_LEVELS - 1);
}

static void test_refusals(void)
{
    float w[6] = {1, 2, 3, 4, 5, 6}, v[6];
    uint16_t c[6];
    poet_sparse_layer l = {0};
    poet_err err = {0};
    const uint16_t down[] = {5000, 2500}, full[] = {0, 10000};
    CHECK(poet_sparse_pack(w, NULL, 2, 3, down, 2, v, c, &l, &err) == POET_ERR_INVALID);
    CHECK(poet_sparse_pack(w, NULL, 2, 3, full, 2, v, c, &l, &err) == POET_ERR_INVALID);
    CHECK(poet_sparse_pack(w, NULL, 2, 3, LEVELS, 0, v, c, &l, &err) == POET_ERR_INVALID);
    CHECK(poet_sparse_pack(w, NULL, 2, 70000, LEVELS, 1, v, c, &l, &err) == POET_ERR_LIMIT);
    w[4] = NAN;
    CHECK(poet_sparse_pack(w, NULL, 2, 3, LEVELS, 1, v, c, &l, &err) == POET_ERR_INVALID);
    CHECK_MSG(strstr(err.msg, "row 1") != NULL, "%s", err.msg);
    w[4] = INFINITY;
    CHECK(poet_sparse_pack(w, NULL, 2, 3, LEVELS, 1, v, c, &l, &err) == POET_ERR_INVALID);
    CHECK(l.rows == 0); /* nothing written on a refusal */
}

/* ---- the trainer ---- */

static uint64_t n_weights(const poet_graph *g)
{
    uint64_t n = 0;
    for (int v = 0; v < g->n_forward; v++) n += g->nodes[v].params;
    return n;
}

static poet_dress_options options(uint32_t n, int epochs)
{
    poet_dress_options o = {.n_levels = n, .epochs = epochs, .seed = 7};
    for (uint32_t k = 0; k < n; k++) o.sparsity_bp[k] = LEVELS[k];
    return o;
}

/* One level at 0% sparsity is ordinary training, bit for bit: the gradient
 * and update halves of a step make the step. */
static void test_single_dense_level(const poet_dataset *d)
{
    poet_graph g;
    poet_err err = {0};
    CHECK(poet_zoo_build("mlp_digits", 32, &g, &err) == POET_OK);
    rig a, b;
    rig_start(&a, &g, "keep-all", 0, NULL, poet_optimizer_default(POET_OPT_ADAM), 3);
    rig_start(&b, &g, "keep-all", 0, NULL, poet_optimizer_default(POET_OPT_ADAM), 3);
    CHECK(a.ok && b.ok);
    poet_dress *t;
    poet_dress_options o = options(1, 2);
    CHECK(poet_dress_new(a.e, &g, &o, &t, &err) == POET_OK);
    CHECK(poet_dress_train(t, d, &err) == POET_OK);
    int *order = malloc(sizeof(int) * (size_t)d->n_train);
    float x[32 * 64];
    int32_t y[32];
    for (int ep = 0; ep < 2; ep++) {
        poet_train_order(o.seed, ep, d->n_train, order);
        for (int s = 0; s + 32 <= d->n_train; s += 32) {
            for (int r = 0; r < 32; r++) memcpy(x + r * 64, d->train_x + (size_t)order[s + r] * 64, 256), y[r] = d->train_y[order[s + r]];
            double loss;
            CHECK_MSG(poet_engine_step(b.e, x, y, &loss, &err) == POET_OK, "%s", err.msg);
        }
    }
    char ha[65], hb[65];
    poet_dev_weights_sha256(poet_engine_device(a.e), ha);
    poet_dev_weights_sha256(poet_engine_device(b.e), hb);
    CHECK_MSG(!strcmp(ha, hb), "one dense level: %s against ordinary training's %s", ha, hb);
    free(order);
    poet_dress_free(t);
    rig_free(&a), rig_free(&b);
    poet_graph_free(&g);
}

/* Joint training under a POET schedule at the smallest budget gives the
 * keep-all weights bit for bit; every level beats chance; a pruned model
 * fine-tuned never revives a pruned weight. */
static void test_joint(const poet_dataset *d)
{
    poet_graph g;
    poet_err err = {0};
    CHECK(poet_zoo_build("mlp_digits", 32, &g, &err) == POET_OK);
    rig a, b;
    rig_start(&a, &g, "keep-all", 0, NULL, poet_optimizer_default(POET_OPT_ADAM), 5);
    rig_start(&b, &g, "fast", 0.01, NULL, poet_optimizer_default(POET_OPT_ADAM), 5);
    CHECK(a.ok && b.ok && b.p.budget_bytes < a.p.budget_bytes);
    poet_dress *ta, *tb;
    poet_dress_options o = options(N_LEVELS, 3);
    CHECK(poet_dress_new(a.e, &g, &o, &ta, &err) == POET_OK && poet_dress_new(b.e, &g, &o, &tb, &err) == POET_OK);
    CHECK(poet_dress_train(ta, d, &err) == POET_OK && poet_dress_train(tb, d, &err) == POET_OK);
    char ha[65], hb[65];
    poet_dev_weights_sha256(poet_engine_device(a.e), ha);
    poet_dev_weights_sha256(poet_engine_device(b.e), hb);
    CHECK_MSG(!strcmp(ha, hb), "joint training: keep-all %s, POET schedule %s", ha, hb);
    CHECK(poet_engine_get_stats(b.e)->arena_peak_bytes <= b.p.budget_bytes);
    for (uint32_t k = 0; k < N_LEVELS; k++) {
        double loss, acc;
        CHECK(poet_dress_evaluate(ta, d, k, &loss, &acc, &err) == POET_OK);
        CHECK_MSG(acc > 0.2, "level %u: accuracy %.3f after 3 epochs, chance 0.1", k, acc);
    }
    poet_dress_free(ta), poet_dress_free(tb);

    /* the per-level baseline: prune to 75%, fine-tune that one level */
    poet_dress_options one = {.n_levels = 1, .sparsity_bp = {7500}, .epochs = 1, .seed = 9};
    poet_dress *tp;
    CHECK(poet_dress_new(a.e, &g, &one, &tp, &err) == POET_OK && poet_dress_prune(tp, 0, &err) == POET_OK);
    uint64_t P = n_weights(&g);
    float *pruned = malloc(4 * P), *tuned = malloc(4 * P);
    rt_get_params(a.e, &g, pruned);
    CHECK(poet_dress_train(tp, d, &err) == POET_OK);
    rt_get_params(a.e, &g, tuned);
    uint64_t revived = 0, zeros = 0, moved = 0;
    for (uint64_t i = 0; i < P; i++) {
        zeros += pruned[i] == 0;
        revived += pruned[i] == 0 && tuned[i] != 0;
        moved += pruned[i] != tuned[i];
    }
    CHECK_MSG(revived == 0 && moved > 0, "fine-tuning revived %llu of %llu pruned weights (moved %llu)",
              (unsigned long long)revived, (unsigned long long)zeros, (unsigned long long)moved);
    /* 75% of the 64x32 and 32x10 weights: 48 of 64 per row, 24 of 32 */
    CHECK_MSG(zeros == 32 * 48 + 10 * 24, "pruned %llu weights", (unsigned long long)zeros);
    free(pruned), free(tuned);
    poet_dress_free(tp);
    rig_free(&a), rig_free(&b);
    poet_graph_free(&g);
}

/* Convolutions are sparse by rows too: an output channel's weights. */
static void test_conv_rows(const poet_dataset *d)
{
    poet_graph g;
    poet_err err = {0};
    CHECK(poet_zoo_build("cnn_digits", 32, &g, &err) == POET_OK);
    rig r;
    rig_start(&r, &g, "keep-all", 0, NULL, poet_optimizer_default(POET_OPT_ADAM), 5);
    poet_dress *t;
    poet_dress_options o = {.n_levels = 2, .sparsity_bp = {0, 7500}, .epochs = 1, .seed = 3};
    CHECK(poet_dress_new(r.e, &g, &o, &t, &err) == POET_OK && poet_dress_train(t, d, &err) == POET_OK);
    int nodes[8], n = poet_dress_layers(t, nodes, 8);
    CHECK_MSG(n == 5, "%d sparse layers in cnn_digits, want 4 convolutions and the classifier", n);
    CHECK(poet_dress_prune(t, 1, &err) == POET_OK);
    bool exact = true;
    for (int k = 0; k < n; k++) {
        uint64_t rows = 0, cols = 0, count;
        CHECK(poet_weight_rows(&g.nodes[nodes[k]], &rows, &cols));
        const float *w = poet_dev_params(poet_engine_device(r.e), nodes[k], false, &count);
        for (uint64_t row = 0; row < rows; row++) {
            uint64_t kept = 0;
            for (uint64_t c = 0; c < cols; c++) kept += w[row * cols + c] != 0;
            exact = exact && kept == poet_sparse_keep((uint32_t)cols, 7500);
        }
    }
    CHECK_MSG(exact, "a row of a pruned layer keeps other than its count");
    poet_dress_free(t);
    rig_free(&r);
    poet_graph_free(&g);
}

static void test_trainer_refusals(void)
{
    poet_graph g;
    poet_err err = {0};
    CHECK(poet_zoo_build("cnn_digits", 32, &g, &err) == POET_OK);
    CHECK(poet_graph_set_trainable(&g, "last:1", &err) == POET_OK);
    rig a;
    rig_start(&a, &g, "keep-all", 0, NULL, poet_optimizer_default(POET_OPT_SGD), 1);
    poet_dress *t = NULL;
    poet_dress_options o = options(2, 1);
    CHECK(poet_dress_new(a.e, &g, &o, &t, &err) == POET_ERR_INVALID && !t);
    CHECK_MSG(strstr(err.msg, "frozen") != NULL, "%s", err.msg);
    o.sparsity_bp[1] = 0;
    CHECK(poet_dress_new(a.e, &g, &o, &t, &err) == POET_ERR_INVALID && !t);
    rig_free(&a);
    poet_graph_free(&g);
}

/* The case the firmware runs (examples/firmware/main.c, --layer) and the
 * outputs the host computes for it, which the device must match bit for
 * bit: tests/device.sh. */
static int write_device_case(const char *in_path, const char *want_path)
{
    enum { R = 40, C = 100, B = 3 };
    static float w[R * C], bias[R], x[B * C], y[B * R], values[R * C];
    static uint16_t columns[R * C];
    uint32_t kind = 1, hdr[4] = {R, C, B, N_LEVELS}, bp[N_LEVELS];
    for (int k = 0; k < N_LEVELS; k++) bp[k] = LEVELS[k];
    random_matrix(w, R, C);
    for (int i = 0; i < R; i++) bias[i] = uniform();
    for (int i = 0; i < B * C; i++) x[i] = uniform();
    FILE *in = fopen(in_path, "wb"), *want = fopen(want_path, "wb");
    if (!in || !want) return perror("test_sparse"), 2;
    fwrite(&kind, sizeof kind, 1, in), fwrite(hdr, sizeof hdr, 1, in), fwrite(bp, sizeof bp, 1, in);
    fwrite(w, sizeof w, 1, in), fwrite(bias, sizeof bias, 1, in), fwrite(x, sizeof x, 1, in);
    poet_sparse_layer l;
    poet_err err = {0};
    if (poet_sparse_pack(w, bias, R, C, LEVELS, N_LEVELS, values, columns, &l, &err)) return fprintf(stderr, "%s\n", err.msg), 2;
    for (uint32_t k = 0; k < N_LEVELS; k++) {
        poet_sparse_set_level(&l, k, &err);
        poet_sparse_forward(&l, x, B, y);
        fwrite(y, sizeof y, 1, want);
    }
    return fclose(in) || fclose(want) ? 2 : 0;
}

int main(int argc, char **argv)
{
    seed_state = 20261204;
    if (argc == 4 && !strcmp(argv[1], "--device-case")) return write_device_case(argv[2], argv[3]);
    printf("test_sparse: seed %llu\n", (unsigned long long)seed_state);
    test_keep();
    test_order();
    test_masks();
    test_forward();
    test_refusals();
    poet_dataset d;
    rt_fake_digits(&d, 640, 200);
    test_single_dense_level(&d);
    test_joint(&d);
    test_conv_rows(&d);
    test_trainer_refusals();
    poet_dataset_free(&d);
    return check_report();
}
