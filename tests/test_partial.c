#define _POSIX_C_SOURCE 200809L
/* Partial training (--train SPEC): the backward pass follows what trains,
 * the gradients of what trains equal the matching slices of the dense
 * ones, frozen tensors never change, schedules keep the weights
 * bit-identical, and the persistent state holds optimizer state only for
 * what trains. */
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "rtutil.h"

enum { BATCH = 8 };

static int changed_schedules; /* of the schedules trained, those that page or recompute */

static bool same_bits(const float *a, const float *b, uint64_t n) { return n == 0 || memcmp(a, b, 4 * n) == 0; }

static bool build(const char *model, const char *spec, poet_graph *g)
{
    poet_err err = {0};
    if (poet_zoo_build(model, BATCH, g, &err)) return fprintf(stderr, "%s: %s\n", model, err.msg), false;
    if (spec && poet_graph_set_trainable(g, spec, &err)) {
        fprintf(stderr, "%s --train %s: %s\n", model, spec, err.msg);
        poet_graph_free(g);
        return false;
    }
    return true;
}

static bool weights_train(const poet_node *n) { return !(n->attrs.flags & POET_ATTR_FREEZE_WEIGHTS); }
static bool bias_trains(const poet_node *n) { return !(n->attrs.flags & POET_ATTR_FREEZE_BIAS); }

/* A mask file that trains the weights of one layer, the bias of another
 * and all of a third (the last three with parameters, in that order). */
static char *write_mask(const poet_graph *g)
{
    static char path[] = "/tmp/poet-mask-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return NULL;
    FILE *f = fdopen(fd, "w");
    const char *choice[] = {"all", "bias", "weights"};
    fprintf(f, "# what trains\n\n");
    for (int v = g->n_forward - 1, k = 0; v >= 0 && k < 3; v--)
        if (g->nodes[v].params) fprintf(f, "  %s   %s  # layer %d\n", g->nodes[v].name, choice[k++], v);
    fclose(f);
    return path;
}

/* ---- the graph ---- */

static void test_graph_follows(void)
{
    poet_graph full, biases, last;
    if (!build("cnn_digits", NULL, &full) || !build("cnn_digits", "biases", &biases) ||
        !build("cnn_digits", "last:1", &last)) {
        CHECK(false);
        return;
    }
    /* with frozen weights, no convolution or linear gradient reads its input */
    int reads_input = 0, grads = 0;
    for (int v = biases.n_forward; v < biases.n_nodes; v++) {
        const poet_node *n = &biases.nodes[v], *f = n->op == POET_OP_GRAD ? &biases.nodes[n->fwd] : NULL;
        if (!f || (f->op != POET_OP_CONV2D && f->op != POET_OP_LINEAR)) continue;
        grads++;
        for (int j = 0; j < n->n_inputs; j++) reads_input += n->inputs[j] == f->inputs[0];
    }
    CHECK_MSG(grads > 0 && reads_input == 0, "%d of the frozen layers' gradients read their input", reads_input);
    /* no backward pass below the lowest layer that trains */
    int lowest = -1;
    for (int v = 0; v < last.n_forward; v++)
        if (last.nodes[v].params && poet_param_trained(last.nodes[v].op, &last.nodes[v].attrs, last.nodes[v].params))
            lowest = lowest < 0 ? v : lowest;
    int below = 0;
    for (int v = last.n_forward; v < last.n_nodes; v++)
        below += last.nodes[v].op == POET_OP_GRAD && last.nodes[v].fwd < lowest;
    CHECK(lowest > 0 && below == 0);
    CHECK(last.n_nodes - last.n_forward < biases.n_nodes - biases.n_forward);
    CHECK(biases.n_nodes - biases.n_forward <= full.n_nodes - full.n_forward);
    /* the keep-all peak follows: what is not read backward is not kept */
    poet_err err = {0};
    poet_profile dev;
    poet_instance a, b;
    poet_instance_stats sa, sb;
    CHECK(!poet_profile_find("m4", &dev, &err) && !poet_instance_from_graph(&full, &dev, &a, &err) &&
          !poet_instance_from_graph(&last, &dev, &b, &err) && !poet_instance_stats_compute(&a, &sa, &err) &&
          !poet_instance_stats_compute(&b, &sb, &err));
    CHECK_MSG(sb.keep_all_peak_bytes < sa.keep_all_peak_bytes / 2, "last:1 peak %llu, all %llu",
              (unsigned long long)sb.keep_all_peak_bytes, (unsigned long long)sa.keep_all_peak_bytes);
    CHECK(b.gradient_bytes < a.gradient_bytes && b.parameter_bytes == a.parameter_bytes);
    /* and back: set_trainable("all") gives the full graph again */
    CHECK(!poet_graph_set_trainable(&last, "all", &err) && last.n_nodes == full.n_nodes);
    poet_instance_free(&a), poet_instance_free(&b);
    poet_graph_free(&full), poet_graph_free(&biases), poet_graph_free(&last);
}

static void refused(poet_graph *g, const char *spec, const char *says)
{
    poet_err err = {0};
    int before = g->n_nodes;
    CHECK_MSG(poet_graph_set_trainable(g, spec, &err) && strstr(err.msg, says) && g->n_nodes == before,
              "--train %s: '%s'", spec, err.msg);
}

static void test_specs_refused(void)
{
    poet_graph g;
    if (!build("mlp_digits", "last:1", &g)) {
        CHECK(false);
        return;
    }
    refused(&g, "bogus", "expected all, biases");
    refused(&g, "last:0", "expected all");
    refused(&g, "last:-1", "expected all");
    refused(&g, "last:2x", "expected all");
    refused(&g, "last:99", "has 2 layers with parameters");
    refused(&g, "ratio:0", "must be a number in (0, 1]");
    refused(&g, "ratio:", "must be a number in (0, 1]");
    refused(&g, "all+ratio:1.5", "must be a number in (0, 1]");
    refused(&g, "ratio:0.5+masks+ratio:0.5", "a ratio twice");
    refused(&g, "mask:", "needs a file");
    refused(&g, "mask:/nonexistent/poet-mask", "nonexistent");
    const char *layer = NULL;
    for (int v = 0; v < g.n_forward && !layer; v++)
        if (g.nodes[v].params) layer = g.nodes[v].name;
    /* @ stands for the first layer's name */
    const char *bad[][2] = {{"fc9 all\n", "no node 'fc9'"},
                            {"@ most\n", "line 1: expected"},
                            {"# x\n@\n", "line 2: expected"},
                            {"@ all\n@ bias\n", "named twice"},
                            {"# nothing\n", "no parameter"},
                            {"@ all ratio:0\n", "line 1: the ratio must be"},
                            {"@ ratio:0.5\n", "line 1: expected"}};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        char path[] = "/tmp/poet-mask-XXXXXX", spec[64];
        int fd = mkstemp(path);
        FILE *f = fd < 0 ? NULL : fdopen(fd, "w");
        if (!f) continue;
        for (const char *c = bad[k][0]; *c; c++)
            if (*c == '@')
                fputs(layer, f);
            else
                fputc(*c, f);
        fclose(f);
        snprintf(spec, sizeof spec, "mask:%s", path);
        refused(&g, spec, bad[k][1]);
        unlink(path);
    }
    /* what was refused left the graph as it was: still last:1 */
    int grads = 0;
    for (int v = g.n_forward; v < g.n_nodes; v++) grads += g.nodes[v].op == POET_OP_GRAD;
    CHECK(grads == 2);
    poet_graph_free(&g);
}

/* ---- training ---- */

/* a on ga under keep-all, b on gb under planner at fraction of its peak */
static bool start_pair(rig *a, const poet_graph *ga, rig *b, const poet_graph *gb, const char *planner,
                       double fraction, poet_optimizer_kind kind, uint64_t seed)
{
    rig_start(a, ga, "keep-all", 0, NULL, poet_optimizer_default(kind), seed);
    rig_start(b, gb, planner, fraction, NULL, poet_optimizer_default(kind), seed);
    CHECK(a->ok && b->ok);
    return a->ok && b->ok;
}

/* One step of the dense graph and of the partial one, from the same
 * weights on the same batch: each trained tensor's gradient is the slice
 * of the dense gradient, bit for bit. */
static void test_gradient_slices(const char *model, const char *spec)
{
    poet_graph full, part; /* batch norms on running statistics in both, or in neither */
    if (!build(model, strstr(spec, "+frozen-bn") ? "all+frozen-bn" : NULL, &full) || !build(model, spec, &part)) {
        CHECK(false);
        return;
    }
    poet_err err = {0};
    rig a, b;
    start_pair(&a, &full, &b, &part, "keep-all", 0, POET_OPT_SGD, 9);
    float *x = malloc(4 * poet_shape_numel(&full.nodes[0].shape));
    int32_t y[BATCH];
    double la = 0, lb = 1;
    rt_batch(&full, 41, x, y);
    CHECK(a.ok && b.ok && !poet_engine_step(a.e, x, y, &la, &err) && !poet_engine_step(b.e, x, y, &lb, &err));
    CHECK(memcmp(&la, &lb, sizeof la) == 0);
    int tensors = 0, differ = 0;
    for (int v = 0; a.ok && b.ok && v < full.n_forward; v++) {
        const poet_node *n = &part.nodes[v];
        if (!n->params) continue;
        uint64_t w, bias, na, nb;
        poet_param_split(n->op, &n->attrs, n->params, &w, &bias);
        const float *ga = poet_dev_params(poet_engine_device(a.e), v, true, &na), *gb = poet_dev_params(poet_engine_device(b.e), v, true, &nb);
        CHECK(nb == (weights_train(n) ? w : 0) + (bias_trains(n) ? bias : 0) && (nb == 0) == (gb == NULL));
        if (weights_train(n) && w) tensors++, differ += !same_bits(ga, gb, w);
        if (bias_trains(n) && bias) tensors++, differ += !same_bits(ga + w, gb + (weights_train(n) ? w : 0), bias);
    }
    CHECK_MSG(tensors > 0 && differ == 0, "%s --train %s: %d of %d trained tensors' gradients differ", model, spec,
              differ, tensors);
    free(x);
    rig_free(&a), rig_free(&b);
    poet_graph_free(&full), poet_graph_free(&part);
}

/* Under keep-all and under a schedule that pages and recomputes at half
 * the peak: the same weights, frozen tensors as they were, and the
 * persistent state as the planner counts it. */
static void test_trains_only_mask(const char *model, const char *spec, poet_optimizer_kind kind)
{
    poet_graph g;
    if (!build(model, spec, &g)) {
        CHECK(false);
        return;
    }
    poet_err err = {0};
    rig a, b;
    if (!start_pair(&a, &g, &b, &g, "fast", 0.5, kind, 5)) {
        rig_free(&a), rig_free(&b), poet_graph_free(&g);
        return;
    }
    uint64_t n;
    const float *w0 = poet_dev_weights(poet_engine_device(a.e), &n);
    float *before = malloc(4 * n), *x = malloc(4 * poet_shape_numel(&g.nodes[0].shape));
    memcpy(before, w0, 4 * n);
    uint64_t ns;
    const float *s0 = poet_dev_state(poet_engine_device(a.e), &ns);
    float *stats = malloc(4 * ns + 4);
    memcpy(stats, s0, 4 * ns);
    int32_t y[BATCH];
    for (int step = 0; step < 3; step++) {
        double la, lb;
        rt_batch(&g, 200 + (uint64_t)step, x, y);
        CHECK(!poet_engine_step(a.e, x, y, &la, &err) && !poet_engine_step(b.e, x, y, &lb, &err));
    }
    char ha[65], hb[65];
    poet_dev_weights_sha256(poet_engine_device(a.e), ha);
    poet_dev_weights_sha256(poet_engine_device(b.e), hb);
    CHECK_MSG(strcmp(ha, hb) == 0, "%s --train %s: keep-all and a schedule at %llu B train different weights", model,
              spec, (unsigned long long)b.p.budget_bytes);
    changed_schedules += b.sim.pagein_j > 0 || b.sim.compute_j > b.p.full_memory_energy_j * (1 + 1e-9);
    const float *w = poet_dev_weights(poet_engine_device(a.e), &n);
    int frozen_changed = 0, trained_unchanged = 0, trained = 0;
    for (int v = 0; v < g.n_forward; v++) {
        const poet_node *nd = &g.nodes[v];
        if (!nd->params) continue;
        uint64_t at = 0, wn, bn;
        for (int u = 0; u < v; u++) at += g.nodes[u].params;
        poet_param_split(nd->op, &nd->attrs, nd->params, &wn, &bn);
        bool tw = weights_train(nd) && wn, tb = bias_trains(nd) && bn;
        if (wn) frozen_changed += !tw && !same_bits(w + at, before + at, wn), trained += tw,
                trained_unchanged += tw && same_bits(w + at, before + at, wn);
        if (bn) frozen_changed += !tb && !same_bits(w + at + wn, before + at + wn, bn), trained += tb,
                trained_unchanged += tb && same_bits(w + at + wn, before + at + wn, bn);
    }
    CHECK_MSG(frozen_changed == 0, "%s --train %s: %d frozen tensors changed", model, spec, frozen_changed);
    /* batch norms on their running statistics leave them; the others update them */
    const float *s1 = poet_dev_state(poet_engine_device(a.e), &ns);
    for (int v = 0, at = 0; v < g.n_forward; at += (int)g.nodes[v++].buffers)
        if (g.nodes[v].op == POET_OP_BATCHNORM2D) {
            bool same = same_bits(s1 + at, stats + at, g.nodes[v].buffers);
            bool running = g.nodes[v].attrs.flags & POET_ATTR_BN_EVAL;
            CHECK_MSG(running == same, "%s --train %s: batch norm %d %s its statistics", model, spec, v,
                      running ? "changed" : "kept");
        }
    CHECK_MSG(trained > 0 && trained_unchanged == 0, "%d of %d trained tensors did not change", trained_unchanged, trained);
    uint64_t planned = poet_instance_persistent_bytes(&a.inst, poet_optimizer_slots(kind));
    CHECK_MSG(poet_engine_get_stats(a.e)->persistent_bytes == planned, "persistent %llu, planned %llu",
              (unsigned long long)poet_engine_get_stats(a.e)->persistent_bytes, (unsigned long long)planned);
    free(before), free(x), free(stats);
    rig_free(&a), rig_free(&b);
    poet_graph_free(&g);
}

/* Per-tensor rates and the gradient attention (poet_dev_set_rates,
 * poet_dev_keep_rows, poet_dev_step_attending): SGD at rate r moves a
 * weight by exactly -r x its gradient, rate 0 not at all; after the
 * attending step only the kept rows (those of largest gradient norm) move. */
static void test_rates_and_attention(void)
{
    poet_graph g;
    poet_err err = {0};
    if (!build("cnn_digits", NULL, &g)) return;
    rig r;
    rig_start(&r, &g, "fast", 0.4, NULL, (poet_optimizer){POET_OPT_SGD, 0, 0, 0, 0, 0, 0}, 3);
    CHECK(r.ok);
    poet_dev *d = poet_engine_device(r.e);
    uint32_t n = poet_dev_forward_nodes(d);
    CHECK(n == (uint32_t)g.n_forward);
    float *rates = calloc(2 * n, sizeof *rates);
    const int conv = 8; /* conv2d8: 16 output channels of 8 x 3 x 3 weights, with a bias */
    rates[2 * conv] = 0.25f, rates[2 * conv + 1] = 0.5f, rates[2 * 15] = 0.125f;
    poet_dev_set_rates(d, rates);
    uint64_t cnt, P;
    float *w = poet_dev_params(poet_engine_device(r.e), conv, false, &cnt), *before = malloc(4 * cnt);
    const float *gw = poet_dev_params(poet_engine_device(r.e), conv, true, &cnt);
    float *x = malloc(4 * 32 * 64), loss;
    int32_t y[32];
    rt_batch(&g, 5, x, y);
    memcpy(before, w, 4 * cnt);
    CHECK(poet_dev_step(d, x, y, &loss, &err) == POET_OK);
    bool exact = true;
    for (uint64_t i = 0; i < cnt; i++) exact = exact && w[i] == before[i] - (i < 16 * 72 ? 0.25f : 0.5f) * gw[i];
    CHECK_MSG(exact, "SGD at the tensor's rate is not w - rate x g");
    uint64_t c1;
    const float *c1w = poet_dev_params(poet_engine_device(r.e), 1, false, &c1);
    float *c1_before = malloc(4 * c1);
    memcpy(c1_before, c1w, 4 * c1);
    /* the attending step: 4 of the 16 rows, chosen from this step's gradient */
    poet_dev_weights(d, &P);
    uint8_t *mask = malloc(P / 8 + 1);
    memset(mask, 0xff, P / 8 + 1);
    uint32_t pairs[2] = {conv, 4};
    memcpy(before, w, 4 * cnt);
    CHECK(poet_dev_step_attending(d, x, y, pairs, 1, mask, &loss, &err) == POET_OK);
    double norm[16];
    for (int row = 0; row < 16; row++) {
        norm[row] = 0;
        for (int i = 0; i < 72; i++) norm[row] += (double)gw[row * 72 + i] * gw[row * 72 + i];
    }
    int moved = 0, wrong = 0;
    for (int row = 0; row < 16; row++) {
        int larger = 0;
        for (int u = 0; u < 16; u++) larger += norm[u] > norm[row];
        bool kept = larger < 4, changed = memcmp(w + row * 72, before + row * 72, 4 * 72) != 0 || w[16 * 72 + row] != before[16 * 72 + row];
        moved += changed;
        wrong += kept != changed;
    }
    CHECK_MSG(moved == 4 && wrong == 0, "attention moved %d rows, %d not the largest gradients'", moved, wrong);
    CHECK(!memcmp(c1w, c1_before, 4 * c1)); /* rate 0: conv2d1 never moves */
    CHECK(poet_dev_keep_rows(d, 2, 4, mask, &err) == POET_ERR_INVALID); /* a batch norm has no rows */
    CHECK(poet_dev_keep_rows(d, (int)n, 4, mask, &err) == POET_ERR_INVALID);
    poet_dev_set_rates(d, NULL), poet_dev_set_train_mask(d, NULL);
    free(rates), free(before), free(x), free(c1_before), free(mask);
    rig_free(&r);
    poet_graph_free(&g);
}

/* +masks: relus keep a bit mask and max pools their argmax indices where
 * that frees what their backward read; the keep-all peak falls, and from
 * the same initial weights training gives the same weights bit for bit,
 * under keep-all and under a schedule that recomputes and pages. */
static void test_relu_masks(const char *spec, bool reaches_pool)
{
    char masked_spec[64];
    snprintf(masked_spec, sizeof masked_spec, "%s+masks", spec);
    poet_graph plain, masked;
    if (!build("cnn_digits", spec, &plain) || !build("cnn_digits", masked_spec, &masked)) {
        CHECK(false);
        return;
    }
    int masks = 0, indices = 0;
    for (int v = 0; v < masked.n_forward; v++) {
        const poet_node *n = &masked.nodes[v], *before = &masked.nodes[v - 1];
        if (n->op == POET_OP_RELU_MASK) {
            masks++;
            CHECK(before->op == POET_OP_RELU && (before->attrs.flags & POET_ATTR_COMPACT_READ));
            CHECK(n->bytes * 32 >= before->bytes && n->bytes * 28 < before->bytes); /* a bit an element */
        }
        if (n->op == POET_OP_POOL_INDEX) {
            indices++;
            CHECK(before->op == POET_OP_MAXPOOL2D && (before->attrs.flags & POET_ATTR_COMPACT_READ));
            CHECK(n->bytes * 4 >= before->bytes && n->bytes * 3 < before->bytes); /* a byte an output */
        }
    }
    CHECK_MSG(masks > 0 && (indices > 0) == reaches_pool, "--train %s: %d relu masks, %d pool indices", masked_spec,
              masks, indices);
    for (int b = masked.n_forward; b < masked.n_nodes; b++) /* nothing reads what a mask or an index replaced */
        for (int j = 0; j < masked.nodes[b].n_inputs; j++) {
            int i = masked.nodes[b].inputs[j];
            CHECK(!(masked.nodes[i].op == POET_OP_RELU && (masked.nodes[i].attrs.flags & POET_ATTR_COMPACT_READ)));
            for (int v = 0; v < masked.n_forward; v++)
                if (masked.nodes[v].op == POET_OP_MAXPOOL2D && (masked.nodes[v].attrs.flags & POET_ATTR_COMPACT_READ))
                    CHECK(masked.nodes[v].inputs[0] != i);
        }
    rig p, k, m;
    rig_start(&p, &plain, "keep-all", 0, NULL, poet_optimizer_default(POET_OPT_ADAM), 4);
    rig_start(&k, &masked, "keep-all", 0, NULL, poet_optimizer_default(POET_OPT_ADAM), 4);
    rig_start(&m, &masked, "hybrid", 0.3, NULL, poet_optimizer_default(POET_OPT_ADAM), 4);
    CHECK(p.ok && k.ok && m.ok);
    CHECK_MSG(k.p.keep_all_peak_bytes < p.p.keep_all_peak_bytes, "--train %s: keep-all peak %llu, without masks %llu",
              masked_spec, (unsigned long long)k.p.keep_all_peak_bytes, (unsigned long long)p.p.keep_all_peak_bytes);
    uint64_t P = poet_graph_param_count(&plain);
    float *w = malloc(4 * P), *x = malloc(4 * BATCH * 64);
    rt_get_params(p.e, &plain, w);
    rt_put_params(k.e, &masked, w), rt_put_params(m.e, &masked, w);
    int32_t y[BATCH];
    poet_err err = {0};
    for (int step = 0; step < 3; step++) {
        double l1, l2, l3;
        rt_batch(&plain, 300 + (uint64_t)step, x, y);
        CHECK(!poet_engine_step(p.e, x, y, &l1, &err) && !poet_engine_step(k.e, x, y, &l2, &err) &&
              !poet_engine_step(m.e, x, y, &l3, &err));
        CHECK(l1 == l2 && l2 == l3);
    }
    char hp[65], hk[65], hm[65];
    poet_dev_weights_sha256(poet_engine_device(p.e), hp), poet_dev_weights_sha256(poet_engine_device(k.e), hk), poet_dev_weights_sha256(poet_engine_device(m.e), hm);
    CHECK_MSG(!strcmp(hp, hk) && !strcmp(hk, hm), "--train %s: weights %s, masked keep-all %s, masked at %llu B %s",
              masked_spec, hp, hk, (unsigned long long)m.p.budget_bytes, hm);
    changed_schedules += m.sim.pagein_j > 0 || m.sim.compute_j > m.p.full_memory_energy_j * (1 + 1e-9);
    /* the spec again without the suffix takes the masks out */
    CHECK(poet_graph_set_trainable(&masked, spec, &err) == POET_OK && masked.n_forward == plain.n_forward &&
          masked.n_nodes == plain.n_nodes);
    free(w), free(x);
    rig_free(&p), rig_free(&k), rig_free(&m);
    poet_graph_free(&plain), poet_graph_free(&masked);
}

/* ---- ratio:R, channel subsets ---- */

/* Layer v's weights as rows x cols and the weights per input channel in a
 * row (a conv's kernel, 1 for a linear layer), or false. */
static bool layer_blocks(const poet_node *n, uint64_t *rows, uint64_t *cols, uint64_t *block)
{
    if (!poet_weight_rows(n, rows, cols)) return false;
    *block = poet_channel_block(n->op, &n->attrs);
    return true;
}

/* The keep channels of w (rows x cols, block weights a channel) with the
 * largest norms, ties to the lower channel: selected[c]. Written apart from
 * the image writer's sort, as a rank count. */
static void expected_channels(const float *w, uint64_t rows, uint64_t cols, uint64_t block, int keep, bool *selected)
{
    uint64_t C = cols / block;
    double *sq = calloc(C, sizeof *sq);
    for (uint64_t f = 0; f < rows; f++)
        for (uint64_t k = 0; k < cols; k++) sq[k / block] += (double)w[f * cols + k] * (double)w[f * cols + k];
    for (uint64_t c = 0; c < C; c++) {
        int above = 0;
        for (uint64_t o = 0; o < C; o++) above += sq[o] > sq[c] || (sq[o] == sq[c] && o < c);
        selected[c] = above < keep;
    }
    free(sq);
}

/* Whether the weights of the channels selected[] trains (all where NULL)
 * are equal in a and b, and whether the others are: *listed, *others. */
static void compare_columns(const float *a, const float *b, uint64_t rows, uint64_t cols, uint64_t block,
                            const bool *selected, bool *listed, bool *others)
{
    *listed = *others = true;
    for (uint64_t f = 0; f < rows; f++)
        for (uint64_t k = 0; k < cols; k++) {
            bool same = memcmp(&a[f * cols + k], &b[f * cols + k], 4) == 0;
            if (!selected || selected[k / block]) *listed &= same;
            else *others &= same;
        }
}

/* Whether the compact gradient g (per row, the selected channels' weights
 * in ascending channel order) equals those entries of the dense one. */
static bool compact_slice(const float *dense, const float *g, uint64_t rows, uint64_t cols, uint64_t block,
                          const bool *selected)
{
    const float *next = g;
    for (uint64_t f = 0; f < rows; f++)
        for (uint64_t k = 0; k < cols; k++)
            if (selected[k / block] && memcmp(&dense[f * cols + k], next++, 4) != 0) return false;
    return true;
}

/* Over the layers of part with a channel_select, whose kept channels are
 * those of largest norm in w0: how many have kept channels whose weights
 * differ between a and b (*kept_differ), and how many others (*others_differ). */
static void kept_columns(const poet_graph *part, const float *w0, const float *a, const float *b, int *kept_differ,
                         int *others_differ)
{
    *kept_differ = *others_differ = 0;
    for (int v = 0, at = 0; v + 1 < part->n_forward; at += (int)part->nodes[v++].params) {
        uint64_t rows, cols, block;
        const poet_node *sel = &part->nodes[v + 1];
        if (sel->op != POET_OP_CHANNEL_SELECT || !layer_blocks(&part->nodes[v], &rows, &cols, &block)) continue;
        bool *chosen = calloc(cols / block, sizeof *chosen), listed, others;
        expected_channels(w0 + at, rows, cols, block, sel->attrs.features, chosen);
        compare_columns(a + at, b + at, rows, cols, block, chosen, &listed, &others);
        *kept_differ += !listed, *others_differ += !others;
        free(chosen);
    }
}

/* --train ratio:R[+suffixes] on model: a channel_select after each conv and
 * linear layer with more than one input channel holds ceil(R x C) of them
 * and is what its weight gradient reads; one step's gradient of the channels
 * of largest weight norm equals the dense gradient's, bit for bit, the
 * others' is 0; under keep-all and under planner's schedule at half the peak, with
 * weight decay, the weights come out the same and no other channel's
 * weights move. */
static void test_channel_subsets(const char *model, const char *spec, double ratio, const char *planner)
{
    poet_graph full, part;
    if (!build(model, strstr(spec, "+frozen-bn") ? "all+frozen-bn" : NULL, &full) || !build(model, spec, &part)) {
        CHECK(false);
        return;
    }
    int selects = 0;
    for (int v = 1; v < part.n_forward; v++) {
        const poet_node *n = &part.nodes[v], *layer = &part.nodes[v - 1];
        if (n->op != POET_OP_CHANNEL_SELECT) continue;
        selects++;
        const poet_node *x = &part.nodes[layer->inputs[0]];
        int64_t C = x->shape.dim[n->attrs.axis], keep = (int64_t)ceil(ratio * (double)C - 1e-9);
        CHECK(n->inputs[0] == layer->inputs[0] && (layer->attrs.flags & POET_ATTR_COMPACT_READ));
        CHECK_MSG(n->attrs.features == keep && n->bytes * (uint64_t)C == x->bytes * (uint64_t)keep,
                  "%s: %d of %lld channels, %llu of %llu B", n->name, (int)n->attrs.features, (long long)C,
                  (unsigned long long)n->bytes, (unsigned long long)x->bytes);
        for (int b = part.n_forward; b < part.n_nodes; b++) /* the layer's gradient reads the select, not its input */
            if (part.nodes[b].op == POET_OP_GRAD && part.nodes[b].fwd == v - 1)
                for (int j = 0; j < part.nodes[b].n_inputs; j++) CHECK(part.nodes[b].inputs[j] != layer->inputs[0]);
    }
    CHECK_MSG(selects > 0, "--train %s: no channel_select", spec);
    poet_optimizer opt = poet_optimizer_default(POET_OPT_SGD);
    opt.weight_decay = 0.01f;
    rig a, b, c;
    rig_start(&a, &full, "keep-all", 0, NULL, opt, 9);
    uint64_t P = poet_graph_param_count(&full);
    float *w0 = malloc(4 * P), *x = malloc(4 * poet_shape_numel(&full.nodes[0].shape));
    if (a.ok) rt_get_params(a.e, &full, w0); /* b and c start from a's weights */
    rig_start_from(&b, &part, "keep-all", 0, NULL, opt, 9, w0);
    rig_start_from(&c, &part, planner, 0.5, NULL, opt, 9, w0);
    CHECK_MSG(a.ok && b.ok && c.ok, "--train %s: no engine", spec);
    if (!a.ok || !b.ok || !c.ok) {
        free(w0), free(x);
        rig_free(&a), rig_free(&b), rig_free(&c);
        poet_graph_free(&full), poet_graph_free(&part);
        return;
    }
    int32_t y[BATCH];
    poet_err err = {0};
    int differ = 0, wrong_size = 0, checked = 0;
    for (int step = 0; step < 3; step++) {
        double la, lb, lc;
        rt_batch(&full, 41 + (uint64_t)step, x, y);
        CHECK(!poet_engine_step(a.e, x, y, &la, &err) && !poet_engine_step(b.e, x, y, &lb, &err) &&
              !poet_engine_step(c.e, x, y, &lc, &err));
        CHECK(lb == lc && (step || la == lb)); /* the dense model trains other weights after step 0 */
        if (step) continue;
        /* after one step the kept channels' weights are the dense step's: each got its own gradient */
        float *wa = malloc(4 * P), *wb = malloc(4 * P);
        rt_get_params(a.e, &full, wa), rt_get_params(b.e, &part, wb);
        int other_step = 0, ignored;
        kept_columns(&part, w0, wa, wb, &other_step, &ignored);
        CHECK_MSG(other_step == 0, "--train %s: %d layers' kept channels took another step than the dense one", spec,
                  other_step);
        free(wa), free(wb);
        for (int v = 0, u = 0; v < part.n_forward; v++) { /* u: v's node in the dense graph */
            const poet_node *n = &part.nodes[v];
            bool aux = n->op == POET_OP_CHANNEL_SELECT || n->op == POET_OP_RELU_MASK || n->op == POET_OP_POOL_INDEX;
            if (aux || !n->params) {
                u += !aux;
                continue;
            }
            uint64_t na, nb, rows, cols, block;
            const float *ga = poet_dev_params(poet_engine_device(a.e), u++, true, &na), *gb = poet_dev_params(poet_engine_device(b.e), v, true, &nb);
            const poet_node *sel = part.nodes[v + 1].op == POET_OP_CHANNEL_SELECT ? &part.nodes[v + 1] : NULL;
            if (!sel || !layer_blocks(n, &rows, &cols, &block)) {
                differ += !same_bits(ga, gb, nb);
                continue;
            }
            bool *chosen = calloc(cols / block, sizeof *chosen);
            uint64_t at = 0, trained = rows * (uint64_t)sel->attrs.features * block;
            for (int k = 0; k < v; k++) at += part.nodes[k].params;
            expected_channels(w0 + at, rows, cols, block, sel->attrs.features, chosen);
            uint64_t bias = bias_trains(n) ? na - rows * cols : 0;
            wrong_size += nb != trained + bias; /* the kept channels' gradients, and the bias */
            differ += nb != trained + bias || !compact_slice(ga, gb, rows, cols, block, chosen);
            differ += !same_bits(ga + rows * cols, gb + trained, bias);
            checked++;
            free(chosen);
        }
    }
    CHECK_MSG(checked == selects && differ == 0 && wrong_size == 0,
              "%s --train %s: %d of %d layers' gradients differ from the dense ones, %d hold more than the kept "
              "channels'", model, spec, differ, checked, wrong_size);
    /* gradients and optimizer state only for the kept channels: less persistent state than training them all */
    uint64_t planned = poet_instance_persistent_bytes(&b.inst, poet_optimizer_slots(opt.kind));
    CHECK_MSG(poet_engine_get_stats(b.e)->persistent_bytes == planned &&
                  planned < poet_instance_persistent_bytes(&a.inst, poet_optimizer_slots(opt.kind)),
              "--train %s: persistent %llu, planned %llu, all %llu", spec,
              (unsigned long long)poet_engine_get_stats(b.e)->persistent_bytes, (unsigned long long)planned,
              (unsigned long long)poet_instance_persistent_bytes(&a.inst, poet_optimizer_slots(opt.kind)));
    char hb[65], hc[65];
    poet_dev_weights_sha256(poet_engine_device(b.e), hb), poet_dev_weights_sha256(poet_engine_device(c.e), hc);
    CHECK_MSG(strcmp(hb, hc) == 0, "--train %s: keep-all and a schedule at %llu B train different weights",
              spec, (unsigned long long)c.p.budget_bytes);
    changed_schedules += c.sim.pagein_j > 0 || c.sim.compute_j > c.p.full_memory_energy_j * (1 + 1e-9);
    float *w = malloc(4 * P);
    int moved = 0, unlisted_moved = 0;
    rt_get_params(b.e, &part, w);
    kept_columns(&part, w0, w0, w, &moved, &unlisted_moved);
    CHECK_MSG(moved == selects && unlisted_moved == 0, "--train %s: %d of %d layers' listed channels moved, %d others",
              spec, moved, selects, unlisted_moved);
    free(w0), free(w), free(x);
    rig_free(&a), rig_free(&b), rig_free(&c);
    poet_graph_free(&full), poet_graph_free(&part);
}

int main(void)
{
    test_channel_subsets("cnn_digits", "ratio:0.5", 0.5, "hybrid");
    test_channel_subsets("cnn_digits", "ratio:0.3+masks+frozen-bn", 0.3, "hybrid");
    test_channel_subsets("mlp_digits", "ratio:0.25", 0.25, "fast");
    test_channel_subsets("cnn_digits", "last:3+ratio:0.5+masks", 0.5, "hybrid");
    char ratio_mask[] = "/tmp/poet-ratio-mask-XXXXXX", ratio_spec[64];
    int fd = mkstemp(ratio_mask);
    FILE *f = fd < 0 ? NULL : fdopen(fd, "w");
    if (f) { /* half the channels of two convolutions, a third whole, the classifier whole, batch norms frozen */
        fputs("conv2d4 all ratio:0.5\nconv2d8 weights   ratio:0.5 # a comment\nconv2d11 all\nlinear15 all\n", f);
        fclose(f);
        snprintf(ratio_spec, sizeof ratio_spec, "mask:%s", ratio_mask);
        test_channel_subsets("cnn_digits", ratio_spec, 0.5, "hybrid");
        unlink(ratio_mask);
    }
    CHECK(f != NULL);
    test_relu_masks("biases", true);
    test_relu_masks("last:3+frozen-bn", false); /* the backward pass stops above the pool */
    test_rates_and_attention();
    test_graph_follows();
    test_specs_refused();
    poet_graph g;
    char mask[64] = "mask:";
    if (build("cnn_digits", NULL, &g)) {
        const char *path = write_mask(&g);
        snprintf(mask + 5, sizeof mask - 5, "%s", path ? path : "");
        poet_graph_free(&g);
    }
    const char *specs[] = {"biases", "last:1", "last:3", mask, "biases+frozen-bn", "last:4+frozen-bn"};
    for (size_t k = 0; k < sizeof specs / sizeof *specs; k++) {
        test_gradient_slices("cnn_digits", specs[k]);
        test_trains_only_mask("cnn_digits", specs[k], POET_OPT_SGD);
        test_trains_only_mask("cnn_digits", specs[k], POET_OPT_ADAM);
    }
    test_gradient_slices("mlp_digits", "biases");
    test_trains_only_mask("mlp_digits", "last:2", POET_OPT_SGD);
    unlink(mask + 5);
    printf("%d of 21 schedules paged or recomputed\n", changed_schedules);
    CHECK(changed_schedules > 0);
    return check_report();
}
